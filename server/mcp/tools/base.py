"""What every MCP tool is made of: a spec in one registry, a frozen server config, a call context.

A handler is a plain function ``handler(ctx, args) -> dict`` over the store; it raises
``KmsError`` for anything it refuses. The MCP adapter, the docs and the completeness test
all derive from the registry, so a tool cannot exist half-way.
"""

from __future__ import annotations

import os
import re
import secrets
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import apsw
from mcp_types import ToolAnnotations
from pydantic import BaseModel, ConfigDict

from server.config.unexpanded import find_unexpanded  # noqa: F401 - re-exported
from server.errors import KmsError
from server.store.db import default_db_path, thread_connection

Tier = Literal["read", "write"]
PAYLOAD_CAP_BYTES = 100_000


class StrictInput(BaseModel):
    """Tool inputs: unknown keys and wrong types are refused, never coerced."""

    model_config = ConfigDict(extra="forbid", strict=True)


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


def _flag(value: str | None, default: bool) -> bool:
    if value is None or value.strip() == "":
        return default
    v = value.strip().lower()
    if v in ("1", "true", "yes", "on"):
        return True
    if v in ("0", "false", "no", "off"):
        return False
    raise KmsError("invalid-input", f"flag value {value!r} is not one of 1/0/true/false")


@dataclass(frozen=True)
class ServerConfig:
    """Read once at server start and frozen: flipping a setting mid-session changes nothing."""

    db_path: Path
    enabled: bool
    read_enabled: bool
    write_enabled: bool
    session_id: str
    per_minute: int = 10
    per_session: int = 200
    allowlist: tuple[str, ...] = ()
    embed_model_dir: str | None = None
    embed_enabled: bool = True
    watch: bool = True
    vault: str | None = None  # the session's vault scope (engineer A's SessionConfig carries it)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, **overrides: Any) -> ServerConfig:
        env = os.environ if env is None else env
        defaults = _settings_defaults(env)
        allow = env.get("KMS_WRITE_ALLOWLIST")
        allowlist = (
            tuple(p for p in re.split(r"[,\n]", allow) if p.strip())
            if allow is not None
            else tuple(defaults.get("write.allowlist", ()))
        )
        cfg = cls(
            db_path=Path(env["KMS_DB_PATH"]).expanduser() if env.get("KMS_DB_PATH") else default_db_path(),
            enabled=_flag(env.get("KMS_ENABLED"), defaults.get("kms.enabled", True)),
            read_enabled=_flag(env.get("KMS_AGENT_TOOLS_ENABLED"), defaults.get("agent.read", True)),
            write_enabled=_flag(env.get("KMS_AGENT_WRITE_TOOLS_ENABLED"), defaults.get("agent.write", False)),
            session_id=env.get("KMS_SESSION_ID") or "s" + secrets.token_hex(6),
            per_minute=int(env.get("KMS_WRITE_PER_MINUTE") or defaults.get("write.per_minute", 10)),
            per_session=int(env.get("KMS_WRITE_PER_SESSION") or defaults.get("write.per_session", 200)),
            allowlist=tuple(a.strip() for a in allowlist),
            embed_model_dir=env.get("KMS_EMBED_MODEL_DIR") or defaults.get("embed.model_dir") or None,
            embed_enabled=_flag(env.get("KMS_EMBED_ENABLED"), defaults.get("embed.enabled", True)),
        )
        return cls(**{**cfg.__dict__, **overrides})

    def tier_enabled(self, tier: Tier) -> bool:
        if tier == "read":
            return self.enabled and self.read_enabled
        return self.enabled and self.read_enabled and self.write_enabled


SERVER_SETTING_KEYS = ("kms.enabled", "agent.read", "agent.write", "write.allowlist", "write.per_minute",
                       "write.per_session", "embed.model_dir", "embed.enabled")


def _settings_defaults(env: Mapping[str, str]) -> dict[str, Any]:
    """Values from the settings file, for keys the environment does not set (best effort)."""
    from server.config.settings import load_settings  # lazy: only the server start reads settings

    try:
        settings = load_settings(env=env)
        return {k: settings.get(k) for k in SERVER_SETTING_KEYS}
    except Exception:  # a broken settings file must not stop the server: env and defaults still apply
        return {}


@dataclass
class ToolContext:
    """Per-call view of the server: config plus a connection owned by the calling thread."""

    config: ServerConfig
    services: dict[str, Any] = field(default_factory=dict)

    @property
    def conn(self) -> apsw.Connection:
        return thread_connection(self.config.db_path)

    @property
    def session_id(self) -> str:
        return self.config.session_id

    def require_index(self) -> None:
        from server.index.notes import index_is_empty

        problem = index_is_empty(self.conn)
        if problem:
            raise KmsError("no-index", problem)

    def vault_id(self, name: str | None) -> int | None:
        if name is None:
            return None
        from server.vault.registry import get_vault

        return get_vault(self.conn, name).id
