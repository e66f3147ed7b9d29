"""The session contract: the one thing the launcher, the composer, ``kms mcp-config`` and ``kms mcp`` exchange.

A ``SessionConfig`` is frozen when a server starts: flipping a setting mid-session changes nothing.
It crosses the process boundary as ``KMS_*`` environment variables, written by ``to_env`` and
read by ``from_env`` only, in the settings schema's own grammar (``environment.env_value``); a
variable that is absent falls back to the settings file, then the default, exactly as
``load_settings`` resolves them. Switches are *effective* (a child is off when its parent is
off; ``auto`` is on once a vault is registered), so the server never re-derives the hierarchy.

An unknown or invalid ``KMS_*`` variable raises ``SessionConfigError`` naming it, its value and
what would be valid: ``kms mcp`` prints that one line and exits 2.
"""

from __future__ import annotations

import dataclasses
import os
import secrets
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from server.config.env_names import OTHER_ENV, positive_seconds, read_timeout_value
from server.config.environment import LOG_LEVELS, env_text, env_value, env_vars, suggest_env
from server.config.schema import SETTINGS, SettingValueError
from server.config.settings import Settings, load_settings
from server.config.tiers import SWITCH_FIELDS, Tier, tier_enabled
from server.store.db import default_db_path

# SessionConfig field -> the setting it carries (its variable and grammar are the schema's)
SETTING_FIELDS: dict[str, str] = {
    **{name: key for key, name in SWITCH_FIELDS.items()},  # the tier switches (server/config/tiers.py)
    "allowlist": "write.allowlist",
    "per_minute": "write.per_minute",
    "per_session": "write.per_session",
    "max_files_per_call": "write.max_files_per_call",
    "approval": "write.approval",
    "approval_lines": "write.approval_lines",
    "approval_timeout": "write.approval_timeout",
    "approval_channel": "write.approval_channel",
    "review_mode": "review.mode",
    "review_max_lines": "review.max_lines",
    "review_max_files": "review.max_files",
    "embed_model_dir": "embed.model_dir",
    "embed_enabled": "embed.enabled",
    "embed_download": "embed.download",
    "memory_folder": "memory.folder",
    "capture_enabled": "capture.enabled",
    "capture_folder": "capture.folder",
    "capture_ask": "capture.ask_agent",
    "capture_prompts": "capture.prompts",
}
# SessionConfig field -> its variable, for the fields that are not settings
OTHER_FIELDS: dict[str, str] = {
    "db_path": "KMS_DB_PATH",
    "config_path": "KMS_CONFIG",
    "session_id": "KMS_SESSION_ID",
    "vault": "KMS_VAULT",
    "project": "KMS_PROJECT",
}


def new_session_id() -> str:
    """A fresh session id: 's' and 12 hex digits (the launcher makes one, or the server when none is given)."""
    return "s" + secrets.token_hex(6)


class SessionConfigError(ValueError):
    """A ``KMS_*`` variable kms does not know, or a value that does not fit it."""

    def __init__(self, var: str, value: str, problem: str, valid: str) -> None:
        self.var, self.value, self.problem, self.valid = var, value, problem, valid
        super().__init__(f"{var}={value!r}: {problem}. Valid: {valid}")


@dataclass(frozen=True)
class SessionConfig:
    """What one agent session's kms server may do, and over which database, settings and vault."""

    db_path: Path
    config_path: Path
    enabled: bool
    read_enabled: bool
    write_enabled: bool
    session_id: str
    edit_enabled: bool = False
    organize_enabled: bool = False
    per_minute: int = 10
    per_session: int = 200
    max_files_per_call: int = 50
    approval: str = "off"  # write.approval: off, bulk, always
    approval_lines: int = 20
    approval_timeout: int = 120
    approval_channel: str = "both"  # write.approval_channel: host, dashboard, both
    review_mode: str | None = None  # review.mode: before, after, off; None: write.approval decides (config.review)
    review_max_lines: int = 0  # review.max_lines: 0 = no threshold
    review_max_files: int = 0  # review.max_files: 0 = no threshold
    allowlist: tuple[str, ...] = ()
    embed_model_dir: str | None = None
    embed_enabled: bool = True
    embed_download: bool = False
    vault: str | None = None  # the scope: one vault's name, None = every vault (or ``token_vaults``)
    project: str | None = None  # the session's identity (kms claude: its working directory), see KMS_PROJECT
    memory_folder: str | None = "kms-memory"  # memory.folder: where kms_remember keeps memory notes
    capture_enabled: bool = True  # capture.*: the start brief and the session note (server.activity.session_note)
    capture_folder: str | None = "kms-sessions"
    capture_ask: int = 0
    capture_prompts: bool = False
    watch: bool = True  # in-process only (tests turn the watcher off); not part of the environment
    # a service token's ceiling (``server.config.scopes``): in-process only, never in the environment
    token_folders: tuple[str, ...] = ()  # folders a write must also match (narrowing write.allowlist)
    token_vaults: tuple[str, ...] = ()  # the scope when a token reaches several vaults (one is ``vault``)
    token_id: str | None = None  # the token this session is reached through
    token_tier: str | None = None  # the token's tier ceiling (``tier:``)
    token_cut: tuple[str, ...] = ()  # tier switches on in the settings that the token's ceiling turned off
    # a staged write is answered at once (``{"status": "staged", "pendingId": N}``) and applied later by the
    # person's decision from any process (``server.writes.review``): remote grants, whose person is not at a
    # terminal the call could wait on. In-process only, never in the environment
    review_detached: bool = False
    # the review pages' address for this session (``http://127.0.0.1:PORT/review``, or remote mode's public origin
    # for a remote grant): set by the service that opens it, which knows where it serves them; None (a stdio
    # session): the running service's, asked of its state file when a call is staged. In-process only
    review_url: str | None = None

    @property
    def vault_names(self) -> tuple[str, ...]:
        """The vaults this session sees, by name; empty: every vault (``server.vault.scope`` makes them ids)."""
        return (self.vault,) if self.vault else self.token_vaults

    def with_vaults(self, vaults: tuple[str, ...]) -> SessionConfig:
        """This session scoped to ``vaults`` (empty: every vault): one is ``vault``, as ``--vault`` sets it."""
        one = len(vaults) == 1
        return dataclasses.replace(self, vault=vaults[0] if one else None, token_vaults=() if one else vaults)

    def tier_enabled(self, tier: Tier) -> bool:
        """A tier is on when it and every tier below it (and kms itself) are on (``server.config.tiers``)."""
        return tier_enabled(self, tier)

    def snapshot(self) -> dict[str, Any]:
        """Every field as JSON-ready values: what a detached staged call keeps of its session, so that another
        process (the CLI, the dashboard, the service's review page) can rebuild it to apply the call."""
        out: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            out[f.name] = str(value) if isinstance(value, Path) else list(value) if isinstance(value, tuple) else value
        return out

    @classmethod
    def from_snapshot(cls, data: Mapping[str, Any], **overrides: Any) -> SessionConfig:
        """The session ``snapshot`` kept (a field it lacks takes its default; one this version does not know is
        left out), with ``overrides``."""
        known = {f.name: f for f in dataclasses.fields(cls)}
        values: dict[str, Any] = {}
        for name, value in data.items():
            if name not in known:
                continue
            if name in ("db_path", "config_path"):
                value = Path(value)
            elif isinstance(value, list):
                value = tuple(value)
            values[name] = value
        return cls(**{**values, **overrides})

    @classmethod
    def from_settings(
        cls, settings: Settings, *, db_path: Path, session_id: str, vault: str | None = None, **overrides: Any
    ) -> SessionConfig:
        """The session that effective ``settings`` give (``kms claude`` and ``kms mcp`` both come here)."""
        model_dir = settings.get("embed.model_dir")
        cfg = cls(
            db_path=db_path,
            config_path=settings.path,
            enabled=settings.active("kms.enabled"),
            read_enabled=settings.active("agent.read"),
            write_enabled=settings.active("agent.write"),
            edit_enabled=settings.active("agent.edit"),
            organize_enabled=settings.active("agent.organize"),
            session_id=session_id,
            per_minute=settings.get("write.per_minute"),
            per_session=settings.get("write.per_session"),
            max_files_per_call=settings.get("write.max_files_per_call"),
            approval=settings.get("write.approval") or "off",
            approval_lines=settings.get("write.approval_lines"),
            approval_timeout=settings.get("write.approval_timeout"),
            approval_channel=settings.get("write.approval_channel") or "both",
            review_mode=settings.get("review.mode") or None,
            review_max_lines=settings.get("review.max_lines"),
            review_max_files=settings.get("review.max_files"),
            allowlist=tuple(settings.get("write.allowlist")),
            embed_model_dir=str(Path(model_dir).expanduser()) if model_dir else None,
            embed_enabled=settings.get("embed.enabled"),
            embed_download=settings.get("embed.download"),
            memory_folder=settings.get("memory.folder"),
            capture_enabled=settings.active("capture.enabled"),
            capture_folder=settings.get("capture.folder"),
            capture_ask=settings.get("capture.ask_agent"),
            capture_prompts=settings.get("capture.prompts"),
            vault=vault,
        )
        return dataclasses.replace(cfg, **overrides) if overrides else cfg

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, **overrides: Any) -> SessionConfig:
        """The session the environment describes (the settings file and defaults fill the gaps).

        Raises ``SessionConfigError`` for an unknown ``KMS_*`` name or an invalid value.
        """
        env = os.environ if env is None else env
        check_env(env)
        cfg = cls.from_settings(
            load_settings(env=env),
            db_path=default_db_path(env),
            session_id=env.get("KMS_SESSION_ID") or new_session_id(),
            vault=env.get("KMS_VAULT") or None,
            project=env.get("KMS_PROJECT", "").strip() or None,
        )
        return dataclasses.replace(cfg, **overrides) if overrides else cfg

    def to_env(self, fields: Iterable[str] | None = None) -> dict[str, str]:
        """The variables that make ``from_env`` give this config back (or only those of ``fields``)."""
        wanted = set(SETTING_FIELDS) | set(OTHER_FIELDS) if fields is None else set(fields)
        unknown = wanted - set(SETTING_FIELDS) - set(OTHER_FIELDS)
        if unknown:
            raise ValueError(f"not carried in the environment: {', '.join(sorted(unknown))}")
        out: dict[str, str] = {}
        for name, var in OTHER_FIELDS.items():
            value = getattr(self, name)
            if name in wanted and value is not None:  # no KMS_VAULT = every vault
                out[var] = str(value)
        for name, key in SETTING_FIELDS.items():
            if name in wanted:
                value = getattr(self, name)
                out[SETTINGS[key].env] = env_text(list(value) if isinstance(value, tuple) else value)
        return out


def check_env(env: Mapping[str, str]) -> None:
    """Refuse unknown ``KMS_*`` names and invalid values, naming the variable and what is valid."""
    known = env_vars()
    for var, raw in env.items():
        if not var.startswith("KMS_"):
            continue
        if var not in known:
            close = suggest_env(var)
            problem = "not a kms variable" + (f" (did you mean {' or '.join(close)}?)" if close else "")
            raise SessionConfigError(var, raw, problem, "the variables in docs/settings.md")
        key = known[var]
        if key:
            try:
                env_value(key, env)
            except SettingValueError as e:
                raise SessionConfigError(var, raw, f"{e.problem} ({key})", e.valid) from None
            continue
        valid = OTHER_ENV[var][1]
        if var == "KMS_LOG_LEVEL" and raw.strip().upper() not in ("", *LOG_LEVELS):
            raise SessionConfigError(var, raw, "not a log level", valid or "")
        if var == "KMS_SERVICE_READ_TIMEOUT" and raw.strip() and read_timeout_value(raw) is None:
            raise SessionConfigError(var, raw, "not a number of seconds in range", valid or "")
        if var == "KMS_TOKEN_LEASE_S" and raw.strip() and positive_seconds(raw) is None:
            raise SessionConfigError(var, raw, "not a positive number of seconds", valid or "")
