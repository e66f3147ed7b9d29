"""``kms_semantic_search`` (read tier): hybrid keyword + embedding search, backed by ``SemanticService``."""

from __future__ import annotations

import threading
from typing import Any, Literal

from pydantic import Field

from server.config.session import SessionConfig
from server.mcp.tools.base import READ_ONLY, ReadSpec, StrictInput, ToolContext, ToolOutput
from server.mcp.tools.notes_tools import SearchHit


class SemanticSearchInput(StrictInput):
    query: str = Field(max_length=1000, description="A question or topic in your own words.")
    limit: int = Field(default=10, ge=1, le=50)
    vault: str | None = Field(default=None, min_length=1, max_length=64, description="Only this vault.")
    mode: Literal["hybrid", "semantic"] = Field(default="hybrid",
                                                description="hybrid (default) fuses keyword and meaning.")


class SemanticHit(SearchHit):
    matchType: Literal["keyword", "semantic", "both"]
    heading: str | None = None


class SemanticSearchOutput(ToolOutput):
    query: str
    mode: Literal["hybrid", "semantic", "keyword-only"]
    reason: str | None = None
    hits: list[SemanticHit]


def kms_semantic_search(ctx: ToolContext, args: SemanticSearchInput) -> dict[str, Any]:
    if not args.query.strip():
        return {"query": args.query, "mode": args.mode, "hits": []}
    ctx.require_index()
    service = ctx.services["semantic"]
    return service.search(ctx.conn, args.query, args.limit, ctx.vault_filter(args.vault), mode=args.mode)


KMS_SEMANTIC_SEARCH = ReadSpec(
    name="kms_semantic_search",
    about=(
        "Search the person's notes by meaning: use it when the notes may say it in other words than your "
        "question (\"how do we handle auth failures\" finds \"error categories in the login service\"). "
        "Fuses keyword (BM25) and embedding similarity; each hit says matchType keyword/semantic/both and "
        "shows the best-matching section. If the model is not ready it answers keyword-only results and "
        "says why (mode, reason)."
    ),
    errors=("not-found", "no-index"),
    input_model=SemanticSearchInput,
    output_model=SemanticSearchOutput,
    handler=kms_semantic_search,
    annotations=READ_ONLY.model_copy(update={"title": "Semantic search"}),
    records_reads=True,
)


class LazySemanticService:
    """Builds the ``SemanticService`` on first use or in ``start()``'s thread, not at server start:
    importing it (numpy, the embedding pipeline) costs ~0.15 s that ``tools/list`` must not wait for."""

    starts_in_background = True  # the adapter calls ``start()`` once the tools are listed (``serve.Deferred``)

    def __init__(self, config: SessionConfig) -> None:
        self.config = config
        self._service: Any = None
        self._lock = threading.Lock()
        self._closed = False

    def get(self) -> Any:
        with self._lock:
            if self._service is None:
                from server.index.semantic import SemanticService

                c = self.config
                self._service = SemanticService(c.db_path, model_dir=c.embed_model_dir, enabled=c.embed_enabled,
                                                download=c.embed_download)
            return self._service

    def start(self) -> None:
        def build_and_start() -> None:
            service = self.get()
            if not self._closed:
                service.start()

        threading.Thread(target=build_and_start, name="kms-semantic-start", daemon=True).start()

    def search(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        return self.get().search(*args, **kwargs)

    def wait_first_call(self) -> None:
        self.get().wait_first_call()

    def ready_embedder(self) -> Any:
        """The loaded model, or None while there is none (never builds the service or waits for it)."""
        service = self._service
        return service.embedder if service is not None and service.embedder.ready else None

    def peek_state(self) -> str:
        """The model's state without building the service: "starting" until the server's start thread has."""
        service = self._service
        return service.embedder.state if service is not None else "starting"

    def notify_changed(self) -> None:
        if self._service is not None:  # nothing to re-embed for before the service exists
            self._service.notify_changed()

    def close(self) -> None:
        self._closed = True
        if self._service is not None:
            self._service.close()

    def __getattr__(self, name: str) -> Any:  # status(), embedder, index: the real service's
        return getattr(self.get(), name)


def make_semantic_service(config: SessionConfig) -> LazySemanticService:
    return LazySemanticService(config)
