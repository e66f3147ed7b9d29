"""What every MCP tool is made of: a spec in one registry and a call context over the session's config.

A handler is a plain function ``handler(ctx, args) -> dict`` over the store; it raises
``KmsError`` for anything it refuses. The MCP adapter, the docs and the completeness test
all derive from the registry, so a tool cannot exist half-way.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

import apsw
from mcp_types import ToolAnnotations
from pydantic import BaseModel, ConfigDict

from server.activity.agent_session import AgentSession
from server.activity.visits import SessionIdentity
from server.config.session import SessionConfig, Tier
from server.errors import KmsError
from server.mcp.process import LazySemanticService, ProcessServices
from server.store.db import thread_connection

PAYLOAD_CAP_BYTES = 100_000


class StrictInput(BaseModel):
    """Tool inputs: unknown keys and wrong types are refused, never coerced."""

    model_config = ConfigDict(extra="forbid", strict=True)

    @classmethod
    def model_json_schema(cls, *args: Any, **kwargs: Any) -> dict[str, Any]:
        """The schema with nested models written inline: no ``$ref`` a client must resolve."""
        schema = super().model_json_schema(*args, **kwargs)
        defs = schema.pop("$defs", {})

        def inline(node: Any) -> Any:
            if isinstance(node, dict):
                ref = node.get("$ref")
                if isinstance(ref, str) and ref.startswith("#/$defs/"):
                    rest = {k: v for k, v in node.items() if k != "$ref"}
                    return {**inline(defs[ref.rsplit("/", 1)[1]]), **inline(rest)}
                return {k: inline(v) for k, v in node.items()}
            if isinstance(node, list):
                return [inline(v) for v in node]
            return node

        return inline(schema)


class ToolOutput(BaseModel):
    model_config = ConfigDict(extra="allow")


class Truncated(BaseModel):
    truncated: Literal[True]
    cursor: str
    message: str


@dataclass(frozen=True)
class ToolSpec:
    name: str
    tier: Tier
    description: str
    input_model: type[StrictInput]
    output_model: type[BaseModel]
    handler: Callable[[Any, Any], Any]  # read: (ToolContext, args) -> dict; write: (WriteTarget, args) -> WriteOutcome
    annotations: ToolAnnotations
    records_reads: bool = False  # returns note content: record (note, session) access
    cursor_field: str | None = None  # input field that pages the result, echoed on truncation
    # a read that answers from an index in well under a millisecond runs on the server's event loop, as the
    # writes do: the two thread hand-offs it skips are most of its round trip (``kms_list_folder``)
    inline: bool = False


@dataclass
class ToolContext:
    """What a read handler may reach: its session (config, identity), the process's services (model,
    watcher) and a connection owned by the calling thread."""

    session: AgentSession
    services: ProcessServices
    _scope_id: int | None = field(default=None, init=False, repr=False)

    @property
    def config(self) -> SessionConfig:
        return self.session.config

    @property
    def conn(self) -> apsw.Connection:
        return thread_connection(self.config.db_path)

    @property
    def session_id(self) -> str:
        return self.session.id

    @property
    def identity(self) -> SessionIdentity:
        return self.session.identity

    @property
    def semantic(self) -> LazySemanticService | None:
        return self.services.semantic

    @property
    def watching(self) -> bool:
        """Whether this process keeps the index live (its watcher runs)."""
        return self.services.watcher is not None and self.services.watcher.running

    def require_index(self) -> None:
        from server.index.notes import index_is_empty

        problem = index_is_empty(self.conn)
        if problem:
            raise KmsError("no-index", problem)

    def vault_filter(self, name: str | None = None) -> int | None:
        """The vault id a read may see, from the call's ``vault`` argument and the session's scope.

        The one place the scope is enforced for reads: None (every vault) only for an unscoped
        session called without ``vault``; a scoped session answers for its vault only, and a
        ``vault`` argument naming another one is refused (without saying whether it exists).
        """
        from server.vault.registry import get_vault

        scope = self.config.vault
        if scope is None:
            return None if name is None else get_vault(self.conn, name).id
        if self._scope_id is None:
            try:
                self._scope_id = get_vault(self.conn, scope).id
            except KmsError:
                raise KmsError("not-found", f"this session is scoped to vault {scope!r}, which is not "
                                            "registered (any more): start a new session") from None
        if name is not None and name != scope and name != str(self._scope_id):
            raise KmsError("invalid-input", f"this session is scoped to vault {scope!r}; it cannot see vault "
                                            f"{name!r} (omit vault, or start a session for that vault)",
                           vault=name, scope=scope)
        return self._scope_id
