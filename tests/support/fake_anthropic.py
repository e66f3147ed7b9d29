"""A local stand-in for the Anthropic Messages API, good enough to drive the real Claude Code CLI.

Usage::

    with FakeAnthropic(query="rust lifetimes") as api:
        env = {"ANTHROPIC_BASE_URL": api.base_url, ...}
        subprocess.run([claude, "-p", "..."], env=env, ...)
        assert "expected text" in api.tool_results[0].text

Behaviour of ``POST /v1/messages`` (streaming SSE or plain JSON, whichever the request asks for), decided
from the conversation in each request alone:

* the latest user message carries a ``tool_result`` for a ``tool_name`` call -> the result is recorded in
  ``tool_results`` and the answer is a text block ``"<final_prefix><tool result text>"`` (``end_turn``);
* else the request offers ``tool_name`` -> a ``tool_use`` block calling it with ``tool_input`` (default
  ``{"query": query}``);
* else it offers ``ToolSearch`` and names ``tool_name`` somewhere (Claude Code defers MCP tools and lists
  them in the system prompt) -> ``tool_use ToolSearch {"query": "select:<tool_name>"}``, once;
* else a short plain text (side requests such as quota checks or titles, or a dead end after other
  tool results).

``POST /v1/messages/count_tokens`` and ``GET /v1/models[/id]`` get plausible answers; anything else a 404 in
the API's error format. Every request is recorded in ``requests``.
"""

from __future__ import annotations

import gzip
import itertools
import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

DEFAULT_TOOL = "mcp__kms__kms_search"
SIDE_TEXT = "OK"
TOOL_SEARCH = "ToolSearch"


@dataclass
class RecordedRequest:
    method: str
    path: str  # including the query string, e.g. "/v1/messages?beta=true"
    headers: dict[str, str]
    body: Any  # parsed JSON, raw text if not JSON, None if empty

    @property
    def route(self) -> str:
        return urlsplit(self.path).path

    @property
    def tool_names(self) -> list[str]:
        if not isinstance(self.body, dict):
            return []
        return [t.get("name", "") for t in self.body.get("tools") or [] if isinstance(t, dict)]


@dataclass
class ToolResult:
    tool_use_id: str
    text: str
    is_error: bool


@dataclass
class Reply:
    """What the fake model answers: content blocks (as in a non-streaming response) and a stop reason."""

    content: list[dict[str, Any]]
    stop_reason: str


def _block_text(content: Any) -> str:
    """Text of a tool_result's ``content``: a string, or a list of blocks of which the text ones count."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(b.get("text", "") for b in content if isinstance(b, dict) and b.get("type") == "text")
    return ""


def latest_tool_results(body: Any) -> list[ToolResult]:
    """The tool_result blocks of the last message of a Messages request, if it is a user message."""
    if not isinstance(body, dict) or not body.get("messages"):
        return []
    last = body["messages"][-1]
    if last.get("role") != "user" or not isinstance(last.get("content"), list):
        return []
    return [
        ToolResult(str(b.get("tool_use_id", "")), _block_text(b.get("content")), bool(b.get("is_error", False)))
        for b in last["content"]
        if isinstance(b, dict) and b.get("type") == "tool_result"
    ]


def _tool_use_names(body: dict[str, Any]) -> dict[str, str]:
    """tool_use id -> tool name, over the assistant messages of a Messages request."""
    names: dict[str, str] = {}
    for message in body.get("messages") or []:
        if message.get("role") == "assistant" and isinstance(message.get("content"), list):
            for b in message["content"]:
                if isinstance(b, dict) and b.get("type") == "tool_use":
                    names[str(b.get("id"))] = str(b.get("name"))
    return names


def _text(text: str) -> Reply:
    return Reply([{"type": "text", "text": text}], "end_turn")


def _chunks(text: str, n: int = 2) -> list[str]:
    """Split text into up to n pieces, as the real API streams text and JSON in several deltas."""
    if len(text) < n:
        return [text]
    size = -(-len(text) // n)
    return [text[i : i + size] for i in range(0, len(text), size)]


def sse_events(reply: Reply, model: str, message_id: str, input_tokens: int = 10) -> list[tuple[str, dict[str, Any]]]:
    """The (event, data) sequence the real API streams for ``reply``."""
    events: list[tuple[str, dict[str, Any]]] = [
        (
            "message_start",
            {
                "type": "message_start",
                "message": {
                    "id": message_id,
                    "type": "message",
                    "role": "assistant",
                    "model": model,
                    "content": [],
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": {
                        "input_tokens": input_tokens,
                        "cache_creation_input_tokens": 0,
                        "cache_read_input_tokens": 0,
                        "output_tokens": 1,
                    },
                },
            },
        ),
        ("ping", {"type": "ping"}),
    ]
    for index, block in enumerate(reply.content):
        if block["type"] == "text":
            start: dict[str, Any] = {"type": "text", "text": ""}
            deltas = [{"type": "text_delta", "text": part} for part in _chunks(block["text"])]
        elif block["type"] == "tool_use":
            start = {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
            raw = json.dumps(block["input"])
            deltas = [{"type": "input_json_delta", "partial_json": part} for part in ["", *_chunks(raw)]]
        else:  # pragma: no cover - only text and tool_use are produced
            raise ValueError(f"unsupported block type {block['type']!r}")
        events.append(("content_block_start", {"type": "content_block_start", "index": index, "content_block": start}))
        events.extend(
            ("content_block_delta", {"type": "content_block_delta", "index": index, "delta": d}) for d in deltas
        )
        events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
    events.append(
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": reply.stop_reason, "stop_sequence": None},
                "usage": {"output_tokens": 20},
            },
        )
    )
    events.append(("message_stop", {"type": "message_stop"}))
    return events


@dataclass
class FakeAnthropic:
    query: str = "test query"
    tool_name: str = DEFAULT_TOOL
    tool_input: dict[str, Any] | None = None  # the call's input; None: {"query": query}
    final_prefix: str = "Tool said: "
    host: str = "127.0.0.1"
    requests: list[RecordedRequest] = field(default_factory=list)
    tool_results: list[ToolResult] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle ---------------------------------------------------------------------------------------
    def start(self) -> FakeAnthropic:
        handler = type("Handler", (_Handler,), {"api": self})
        self._server = ThreadingHTTPServer((self.host, 0), handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, args=(0.05,), name="fake-anthropic", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> FakeAnthropic:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def base_url(self) -> str:
        assert self._server is not None, "FakeAnthropic is not started"
        return f"http://{self.host}:{self._server.server_address[1]}"

    # -- views -------------------------------------------------------------------------------------------
    @property
    def message_requests(self) -> list[RecordedRequest]:
        """The ``POST /v1/messages`` requests, in order."""
        with self._lock:
            return [r for r in self.requests if r.method == "POST" and r.route == "/v1/messages"]

    @property
    def main_requests(self) -> list[RecordedRequest]:
        """The message requests that offered ``tool_name`` itself (not only behind ToolSearch)."""
        return [r for r in self.message_requests if self.tool_name in r.tool_names]

    def describe(self) -> str:
        """One line per request, for assertion messages."""
        with self._lock:
            reqs = list(self.requests)
        lines = []
        for r in reqs:
            extra = ""
            if isinstance(r.body, dict) and "messages" in r.body:
                extra = f" model={r.body.get('model')} tools={len(r.tool_names)} msgs={len(r.body['messages'])}"
            lines.append(f"{r.method} {r.path}{extra}")
        return "\n".join(lines) or "(no requests)"

    # -- behaviour ---------------------------------------------------------------------------------------
    def _next_id(self, prefix: str) -> str:
        return f"{prefix}_fake{next(self._ids):06d}"

    def reply_for(self, body: dict[str, Any]) -> Reply:
        """Decide the fake model's answer from the conversation in ``body`` (no per-conversation state)."""
        names = _tool_use_names(body)
        results = latest_tool_results(body)
        ours = [r for r in results if names.get(r.tool_use_id) == self.tool_name]
        if ours:
            with self._lock:
                self.tool_results.extend(ours)
            return _text(self.final_prefix + "\n".join(r.text for r in ours))
        offered = [t.get("name") for t in body.get("tools") or [] if isinstance(t, dict)]
        if self.tool_name in offered:
            return self._tool_use(
                self.tool_name, self.tool_input if self.tool_input is not None else {"query": self.query}
            )
        searched = TOOL_SEARCH in names.values()
        if TOOL_SEARCH in offered and not searched and self.tool_name in json.dumps(body):
            # Claude Code defers MCP tools behind ToolSearch: load the schema first, as a real model would.
            return self._tool_use(TOOL_SEARCH, {"query": f"select:{self.tool_name}"})
        if results:  # e.g. ToolSearch found nothing, or a tool call was denied: stop, don't loop
            return _text("Unexpected tool results: " + "\n".join(r.text for r in results))
        return _text(SIDE_TEXT)

    def _tool_use(self, name: str, tool_input: dict[str, Any]) -> Reply:
        block = {"type": "tool_use", "id": self._next_id("toolu"), "name": name, "input": tool_input}
        return Reply([block], "tool_use")

    def _record(self, request: RecordedRequest) -> None:
        with self._lock:
            self.requests.append(request)


@dataclass
class ScriptedAnthropic(FakeAnthropic):
    """A model that calls the tools of ``script`` in order, one per request of the main conversation (the
    requests that offer tools), then answers ``final``; requests offering no tool (titles, quota checks) get
    a short text. Every tool result is recorded in ``tool_results``."""

    script: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    final: str = "Done."

    def reply_for(self, body: dict[str, Any]) -> Reply:
        if not body.get("tools"):
            return _text(SIDE_TEXT)
        results = latest_tool_results(body)
        with self._lock:
            self.tool_results.extend(results)
        used = len(_tool_use_names(body))
        if used < len(self.script):
            name, tool_input = self.script[used]
            return self._tool_use(name, tool_input)
        return _text(self.final)


class _Handler(BaseHTTPRequestHandler):
    api: FakeAnthropic
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass  # quiet; requests are recorded on the api object

    def _read_body(self) -> Any:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            raw = b""
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    self.rfile.readline()
                    break
                raw += self.rfile.read(size)
                self.rfile.readline()
        else:
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self.headers.get("Content-Encoding", "").lower() == "gzip":
            raw = gzip.decompress(raw)
        if not raw:
            return None
        text = raw.decode("utf-8", "replace")
        try:
            return json.loads(text)
        except json.JSONDecodeError:
            return text

    def _send(self, status: int, payload: bytes, content_type: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(payload)))
        self.send_header("request-id", self.api._next_id("req"))
        self.end_headers()
        self.wfile.write(payload)
        self.wfile.flush()

    def _json(self, status: int, obj: Any) -> None:
        self._send(status, json.dumps(obj).encode(), "application/json")

    def _not_found(self) -> None:
        self._json(404, {"type": "error", "error": {"type": "not_found_error", "message": f"no route {self.path}"}})

    def _handle(self) -> None:
        body = self._read_body() if self.command in ("POST", "PUT", "PATCH") else None
        self.api._record(
            RecordedRequest(self.command, self.path, {k.lower(): v for k, v in self.headers.items()}, body)
        )
        route = urlsplit(self.path).path.rstrip("/")
        if self.command == "POST" and route == "/v1/messages" and isinstance(body, dict):
            self._messages(body)
        elif self.command == "POST" and route == "/v1/messages/count_tokens":
            self._json(200, {"input_tokens": max(1, len(json.dumps(body)) // 4)})
        elif self.command == "GET" and route.startswith("/v1/models"):
            self._models(route)
        elif self.command == "HEAD" and route in ("", "/v1"):
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()
        else:
            self._not_found()

    do_GET = do_POST = do_HEAD = do_PUT = do_PATCH = do_DELETE = _handle

    def _models(self, route: str) -> None:
        def model(model_id: str) -> dict[str, Any]:
            return {
                "type": "model",
                "id": model_id,
                "display_name": model_id,
                "created_at": "2025-01-01T00:00:00Z",
            }

        if route == "/v1/models":
            data = [model("claude-sonnet-4-5"), model("claude-haiku-4-5")]
            self._json(200, {"data": data, "has_more": False, "first_id": data[0]["id"], "last_id": data[-1]["id"]})
        else:
            self._json(200, model(route.rsplit("/", 1)[-1]))

    def _messages(self, body: dict[str, Any]) -> None:
        reply = self.api.reply_for(body)
        model = str(body.get("model", "claude-fake"))
        message_id = self.api._next_id("msg")
        if not body.get("stream"):
            self._json(
                200,
                {
                    "id": message_id,
                    "type": "message",
                    "role": "assistant",
                    "model": model,
                    "content": reply.content,
                    "stop_reason": reply.stop_reason,
                    "stop_sequence": None,
                    "usage": {
                        "input_tokens": 10,
                        "cache_creation_input_tokens": 0,
                        "cache_read_input_tokens": 0,
                        "output_tokens": 20,
                    },
                },
            )
            return
        stream = "".join(
            f"event: {event}\ndata: {json.dumps(data)}\n\n" for event, data in sse_events(reply, model, message_id)
        )
        self._send(200, stream.encode(), "text/event-stream; charset=utf-8")
