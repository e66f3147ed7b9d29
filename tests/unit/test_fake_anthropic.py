"""The fake Anthropic Messages API (tests/support/fake_anthropic.py) speaks what Claude Code expects."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from support.fake_anthropic import DEFAULT_TOOL, SIDE_TEXT, TOOL_SEARCH, FakeAnthropic

SEARCH_TOOL = {
    "name": DEFAULT_TOOL,
    "description": "Search the notes vault.",
    "input_schema": {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]},
}
HEADERS = {"x-api-key": "dummy", "anthropic-version": "2023-06-01"}


@pytest.fixture
def api() -> Iterator[FakeAnthropic]:
    with FakeAnthropic(query="rust lifetimes") as fake:
        yield fake


def stream(api: FakeAnthropic, body: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """POST a streaming request and return the parsed (event, data) pairs."""
    events: list[tuple[str, dict[str, Any]]] = []
    event = ""
    with httpx.stream(
        "POST", f"{api.base_url}/v1/messages?beta=true", json={**body, "stream": True}, headers=HEADERS
    ) as r:
        assert r.status_code == 200
        assert r.headers["content-type"].startswith("text/event-stream")
        for line in r.iter_lines():
            if line.startswith("event: "):
                event = line.removeprefix("event: ")
            elif line.startswith("data: "):
                data = json.loads(line.removeprefix("data: "))
                assert data["type"] == event
                events.append((event, data))
    return events


def assemble(events: list[tuple[str, dict[str, Any]]]) -> tuple[list[dict[str, Any]], str]:
    """Rebuild the content blocks and stop reason from a stream, as an SDK client does."""
    blocks: list[dict[str, Any]] = []
    partial: dict[int, str] = {}
    stop_reason = ""
    for event, data in events:
        if event == "content_block_start":
            assert data["index"] == len(blocks)
            blocks.append(dict(data["content_block"]))
        elif event == "content_block_delta":
            delta = data["delta"]
            if delta["type"] == "text_delta":
                blocks[data["index"]]["text"] += delta["text"]
            else:
                assert delta["type"] == "input_json_delta"
                partial[data["index"]] = partial.get(data["index"], "") + delta["partial_json"]
        elif event == "content_block_stop" and data["index"] in partial:
            blocks[data["index"]]["input"] = json.loads(partial[data["index"]])
        elif event == "message_delta":
            stop_reason = data["delta"]["stop_reason"]
    return blocks, stop_reason


def event_names(events: list[tuple[str, dict[str, Any]]]) -> list[str]:
    return [e for e, _ in events if e != "content_block_delta"]


def test_tool_use_then_text_over_sse(api: FakeAnthropic) -> None:
    first: dict[str, Any] = {"model": "claude-x", "max_tokens": 100, "tools": [SEARCH_TOOL]}
    first["messages"] = [{"role": "user", "content": "find notes"}]
    events = stream(api, first)
    assert event_names(events) == [
        "message_start",
        "ping",
        "content_block_start",
        "content_block_stop",
        "message_delta",
        "message_stop",
    ]
    assert events[0][1]["message"]["model"] == "claude-x"
    blocks, stop = assemble(events)
    assert stop == "tool_use"
    assert [(b["type"], b["name"], b["input"]) for b in blocks] == [
        ("tool_use", DEFAULT_TOOL, {"query": "rust lifetimes"})
    ]
    assert not api.tool_results

    result = {
        "type": "tool_result",
        "tool_use_id": blocks[0]["id"],
        "content": [{"type": "text", "text": "a.md"}],
    }
    second = {**first, "messages": [*first["messages"], {"role": "assistant", "content": blocks}]}
    second["messages"].append({"role": "user", "content": [result]})
    blocks, stop = assemble(stream(api, second))
    assert stop == "end_turn"
    assert blocks == [{"type": "text", "text": "Tool said: a.md"}]
    assert [(r.text, r.is_error) for r in api.tool_results] == [("a.md", False)]
    assert len(api.main_requests) == 2
    assert api.message_requests[0].headers["x-api-key"] == "dummy"


def test_tool_search_first_when_tool_is_deferred(api: FakeAnthropic) -> None:
    search = {"name": TOOL_SEARCH, "input_schema": {"type": "object"}}
    body: dict[str, Any] = {
        "model": "m",
        "max_tokens": 10,
        "tools": [search],
        "system": f"Deferred tools:\n{DEFAULT_TOOL}",
    }
    body["messages"] = [{"role": "user", "content": "find"}]
    blocks, stop = assemble(stream(api, body))
    assert stop == "tool_use"
    assert (blocks[0]["name"], blocks[0]["input"]) == (TOOL_SEARCH, {"query": f"select:{DEFAULT_TOOL}"})
    # Claude Code answers with a tool_reference and now offers the tool: the fake calls it.
    reference = {
        "type": "tool_result",
        "tool_use_id": blocks[0]["id"],
        "content": [{"type": "tool_reference"}],
    }
    body["tools"] = [search, SEARCH_TOOL]
    body["messages"] += [{"role": "assistant", "content": blocks}, {"role": "user", "content": [reference]}]
    blocks, stop = assemble(stream(api, body))
    assert (stop, blocks[0]["name"]) == ("tool_use", DEFAULT_TOOL)
    assert not api.tool_results  # the ToolSearch result is not the tool's


def test_side_requests_non_streaming_and_other_routes(api: FakeAnthropic) -> None:
    with httpx.Client(base_url=api.base_url, headers=HEADERS) as client:
        quota = {"model": "claude-haiku", "max_tokens": 1, "messages": [{"role": "user", "content": "quota"}]}
        r = client.post("/v1/messages", json=quota)
        assert r.status_code == 200
        message = r.json()
        assert (message["type"], message["role"], message["stop_reason"]) == (
            "message",
            "assistant",
            "end_turn",
        )
        assert message["content"] == [{"type": "text", "text": SIDE_TEXT}]

        assert client.post("/v1/messages/count_tokens?beta=true", json=quota).json()["input_tokens"] > 0
        assert client.get("/v1/models").json()["data"]
        assert client.get("/v1/models/claude-x").json()["id"] == "claude-x"
        missing = client.get("/api/oauth/profile")
        assert missing.status_code == 404
        assert missing.json()["type"] == "error"
    assert [r.route for r in api.requests] == [
        "/v1/messages",
        "/v1/messages/count_tokens",
        "/v1/models",
        "/v1/models/claude-x",
        "/api/oauth/profile",
    ]
    assert api.requests[0].body == quota
    assert not api.main_requests
