"""kms settings: the TOML file, the effective values and the per-key operations on them.

The schema (every key, its type, grammar and environment variable) is ``server/config/schema.py``;
custom servers' tables are validated by ``server/config/servers.py``.

Precedence, lowest to highest: schema default < config file < environment variable
(< a per-session override such as ``kms claude --write``, see ``Settings.with_override``).
The file is read with ``tomllib`` and written atomically (temp file + rename, mode 0600,
since custom servers may carry tokens); a change is made on the ``tomlkit`` document, so the
person's comments and layout survive ``kms config set``. Read-modify-write holds ``server.store.locks.lock_file``
so the CLI and the TUI never lose each other's change.

Reading never raises on a bad file: the MCP server must start even when a person has
mistyped a value, so problems are collected in ``Settings.problems`` and the default is
used. Writing refuses to touch a file it cannot parse, so nothing is clobbered.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import tomllib
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from platformdirs import user_config_dir

from server.config.environment import env_value
from server.config.schema import (
    BUILTIN_SERVERS,
    SETTINGS,
    SettingsError,
    SettingsFileError,
    SettingValueError,
    setting,
    suggest_keys,
)
from server.config.servers import CUSTOM_PREFIX, CustomServer, UnknownServerError, custom_server_from_toml
from server.config.setting_row import AUTO, Setting, Source
from server.config.settings_file import VERSION_KEY, prune_in_place, read_document, upgrade, write_text
from server.config.values import parse_value, validate_value
from server.store import db
from server.store.locks import lock_file


def shell_expansion_warning(key: str, values: Sequence[str], cwd: Path | None = None) -> str | None:
    """Warn when the shell probably expanded an unquoted glob before kms saw it.

    ``kms config set write.allowlist drafts/*`` in a folder that has ``drafts/`` arrives
    as ``drafts/a.md drafts/b.md``. Signs: a value is an existing file, or several values
    look like paths (exist or end in ``.md``).
    """
    if key not in SETTINGS or SETTINGS[key].type != "globs" or not values:
        return None
    base = cwd or Path.cwd()

    def exists(v: str) -> bool:
        try:
            return (base / v).exists()
        except OSError:
            return False

    is_file = any((base / v).is_file() for v in values if v != "/")
    # a note's name by hand: server.vault.paths.is_note_path is a layer above config
    pathlike = [v for v in values if v != "/" and (v.lower().endswith(".md") or exists(v))]
    if not is_file and len(pathlike) < 2:
        return None
    parents = {str(Path(v).parent) for v in pathlike} or {"."}
    if len(parents) == 1 and (parent := parents.pop()) != ".":
        quoted = f"'{parent}/*'"
    else:
        quoted = "'folder/*'"
    return (
        f"These values look like file paths ({', '.join(values[:4])}{', ...' if len(values) > 4 else ''}): "
        f"the shell may have expanded an unquoted glob. Quote it: kms config set {key} {quoted}"
    )


@dataclass(frozen=True)
class Effective:
    """One key's effective value and where it came from (for `kms config list` and the TUI)."""

    setting: Setting
    value: Any
    source: Source
    file_value: Any = None  # what the file says, if anything (also when env wins)
    auto: bool = False  # the value was resolved from the 'auto' default

    @property
    def key(self) -> str:
        return self.setting.key

    def to_json(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "value": self.value,
            "source": self.source,
            "auto": self.auto,
            "env": self.setting.env,
            "type": self.setting.type,
            "default": "auto" if self.setting.auto else self.setting.default,
            "description": self.setting.description,
            **({"means": self.setting.means(self.value)} if self.setting.means else {}),
        }


@dataclass(frozen=True)
class Settings:
    """Effective settings: typed values, their sources, custom servers, and load problems."""

    path: Path
    entries: dict[str, Effective]
    custom_servers: dict[str, CustomServer]
    problems: list[str]
    has_vault: bool
    upgraded: tuple[str, ...] = ()  # what reading an older file's grammar changed (settings_file.upgrade)

    def get(self, key: str) -> Any:
        """The effective value of ``key`` (auto defaults already resolved)."""
        if key not in self.entries:
            setting(key)  # raises UnknownSettingError with suggestions
        return self.entries[key].value

    def __getitem__(self, key: str) -> Any:
        return self.get(key)

    def source(self, key: str) -> Source:
        return self.entries[key].source

    def active(self, key: str) -> bool:
        """A switch that is on and whose parents are all on (what a session really gets)."""
        s = setting(key)
        if not self.get(key):
            return False
        return self.active(s.parent) if s.parent else True

    def with_override(self, key: str, value: Any) -> Settings:
        """A copy with one key overridden for a single session (e.g. ``--write``)."""
        value = validate_value(key, value)
        old = self.entries[key]
        entries = dict(self.entries)
        entries[key] = dataclasses.replace(old, value=value, source="override", auto=False)
        return dataclasses.replace(self, entries=entries)

    def all_entries(self) -> list[Effective]:
        """Every schema key in schema order."""
        return [self.entries[k] for k in SETTINGS]


def default_config_path(env: Mapping[str, str] | None = None) -> Path:
    """``$KMS_CONFIG`` or ``<platform config dir>/kms/config.toml``."""
    env = os.environ if env is None else env
    if env.get("KMS_CONFIG"):
        return Path(env["KMS_CONFIG"]).expanduser()

    return Path(user_config_dir("kms", appauthor=False)) / "config.toml"


def count_vaults(db_path: str | Path | None = None) -> int:
    """Registered vaults in the DB (0 when there is no DB yet); never creates the DB."""

    path = Path(db_path) if db_path is not None else db.default_db_path()
    if not path.exists():
        return 0
    try:
        conn = db.connect(path, readonly=True, migrate_schema=False)
        try:
            return int(db.scalar(conn, "SELECT count(*) FROM vaults") or 0)
        finally:
            conn.close()
    except Exception:  # no table yet, unreadable file: treat as "no vault"
        return 0


def read_file(path: Path) -> dict[str, Any]:
    """The raw TOML document ({} when the file is missing); raises SettingsFileError if unparsable."""
    try:
        with open(path, "rb") as f:
            return tomllib.load(f)
    except FileNotFoundError:
        return {}
    except (tomllib.TOMLDecodeError, OSError, UnicodeDecodeError) as e:
        raise SettingsFileError(f"Cannot read {path}: {e}") from e


def _flatten(doc: Mapping[str, Any], prefix: str = "") -> Iterator[tuple[str, Any]]:
    for k, v in doc.items():
        key = f"{prefix}{k}"
        if key in (CUSTOM_PREFIX, VERSION_KEY):
            continue
        if isinstance(v, dict) and key not in SETTINGS:
            yield from _flatten(v, key + ".")
        else:
            yield key, v


def load_settings(
    path: str | Path | None = None,
    env: Mapping[str, str] | None = None,
    *,
    has_vault: bool | None = None,
) -> Settings:
    """Effective settings from defaults, the config file and the environment.

    ``has_vault`` resolves the 'auto' defaults; None means count the ``vaults`` rows of
    the DB named by ``env['KMS_DB_PATH']`` (or the default DB) without creating it.
    """
    env = os.environ if env is None else env
    cfg_path = Path(path) if path is not None else default_config_path(env)
    if has_vault is None:
        has_vault = count_vaults(env.get("KMS_DB_PATH") or None) > 0
    problems: list[str] = []
    try:
        doc = read_file(cfg_path)
    except SettingsFileError as e:
        problems.append(f"{e} (using defaults)")
        doc = {}
    upgraded = upgrade(doc) if doc else []
    if upgraded:  # the file says so too from now on (best effort: a read-only file is read this way each time)
        with contextlib.suppress(OSError, SettingsError):
            _modify(cfg_path, lambda _doc: None)

    file_values: dict[str, Any] = {}
    for key, raw in _flatten(doc):
        if key not in SETTINGS:
            hint = suggest_keys(key)
            problems.append(
                f"{cfg_path}: unknown key '{key}'" + (f" (did you mean {', '.join(hint)}?)" if hint else "")
            )
            continue
        try:
            file_values[key] = validate_value(key, AUTO if raw == "auto" else raw)
        except SettingsError as e:
            problems.append(f"{cfg_path}: {e} (using the default)")

    entries: dict[str, Effective] = {}
    for key, s in SETTINGS.items():
        value: Any = s.default
        source: Source = "default"
        file_value = file_values.get(key)
        if key in file_values and file_values[key] is not AUTO:
            value, source = file_values[key], "file"
        try:
            present, env_parsed = env_value(key, env)
            if present:
                value, source = env_parsed, "env"
        except SettingsError as e:
            problems.append(f"${s.env}: {e} (ignored)")
        auto = value is AUTO
        if auto:
            value = has_vault
        entries[key] = Effective(s, value, source, file_value, auto)

    custom: dict[str, CustomServer] = {}
    tables = doc.get("servers", {}).get("custom", {}) if isinstance(doc.get("servers"), dict) else {}
    if not isinstance(tables, dict):
        problems.append(f"{cfg_path}: [{CUSTOM_PREFIX}] must be a table of servers")
        tables = {}
    for name, table in tables.items():
        try:
            custom[name] = custom_server_from_toml(name, table)
        except SettingsError as e:
            problems.append(f"{cfg_path}: {e} (server skipped)")
    return Settings(cfg_path, entries, custom, problems, has_vault, tuple(upgraded))


# ----------------------------------------------------------------------------- writing


def to_toml(value: Any) -> Any:
    """A parsed value as the file stores it: TOML has no null, and ``''`` is the file's form of "none"
    for a text or path setting (it reads back as None), so ``kms config set KEY ''`` writes that."""
    return "" if value is None else value


def _set_in(doc: dict[str, Any], dotted: str, value: Any) -> None:
    *parents, last = dotted.split(".")
    node = doc
    for p in parents:
        nxt = node.get(p)
        if not isinstance(nxt, dict):
            node[p] = {}
            nxt = node[p]  # a tomlkit document stores its own table for the dict it is given
        node = nxt
    node[last] = value


def _del_in(doc: dict[str, Any], dotted: str) -> bool:
    *parents, last = dotted.split(".")
    node: Any = doc
    for p in parents:
        node = node.get(p) if isinstance(node, dict) else None
        if node is None:
            return False
    if isinstance(node, dict) and last in node:
        del node[last]
        return True
    return False


@contextlib.contextmanager
def settings_lock(path: Path) -> Iterator[None]:
    """Hold the settings file's lock (``<file>.lock`` beside it), shared by every kms process."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    with lock_file(path.with_name(path.name + ".lock")):
        yield


def _modify(path: Path, change: Callable[[dict[str, Any]], object]) -> None:
    """Read-modify-write the file under the settings lock, so the CLI and the TUI never lose a change."""
    # deferred: tomlkit (round-trip TOML) only when the file is written, never to read it
    import tomlkit

    with settings_lock(path):
        doc = read_document(path)
        upgrade(doc)
        change(doc)
        prune_in_place(doc)
        write_text(path, tomlkit.dumps(doc).encode())


def _config_path(path: str | Path | None, env: Mapping[str, str] | None) -> Path:
    return Path(path) if path is not None else default_config_path(env)


def set_value(
    key: str,
    values: Sequence[str] | str,
    *,
    path: str | Path | None = None,
    env: Mapping[str, str] | None = None,
    has_vault: bool | None = None,
    cwd: Path | None = None,
) -> list[str]:
    """Parse, validate and save one key; return warnings for the person.

    Warnings: shell-expanded globs, a switch turned on under a parent that is off,
    an environment variable that still overrides the file, writes on with an empty allowlist.
    """
    env = os.environ if env is None else env
    s = setting(key)
    items = [values] if isinstance(values, str) else list(values)
    value = parse_value(key, items)
    cfg = _config_path(path, env)
    if value is AUTO:
        _modify(cfg, lambda doc: _del_in(doc, key))
    else:
        _modify(cfg, lambda doc: _set_in(doc, key, to_toml(value)))

    warnings: list[str] = []
    if w := shell_expansion_warning(key, items, cwd):
        warnings.append(w)
    now = load_settings(cfg, env, has_vault=has_vault)
    if now.source(key) == "env":
        warnings.append(f"${s.env} is set in the environment and overrides the file value for {key}.")
    if s.type == "bool" and now.get(key) and (off := off_parents(now, key)):
        names = " and ".join(off)
        fix = "; ".join(f"kms config set {p} true" for p in reversed(off))
        auto = [p for p in off if now.entries[p].auto]
        why = " (they default to on once a vault is registered: kms vault add PATH)" if auto else ""
        warnings.append(
            f"{key} is on, but {names} {'is' if len(off) == 1 else 'are'} off{why}, so it has no "
            f"effect. Turn {'it' if len(off) == 1 else 'them'} on with: {fix}"
        )
    if s.type == "path" and value not in (AUTO, None) and not Path(str(value)).expanduser().is_dir():
        warnings.append(
            f"{key}: {value} is not a folder (yet); saved anyway, but nothing will be found there "
            "until it exists"
            + (" and holds the model (kms model status checks it)" if key == "embed.model_dir" else "")
        )
    if key in ("agent.write", "write.allowlist") and now.active("agent.write") and not now.get("write.allowlist"):
        warnings.append(
            "agent.write is on and write.allowlist is empty, so agents may write in every folder. "
            "Restrict them with e.g.: kms config set write.allowlist inbox 'drafts/*'"
        )
    return warnings


def off_parents(settings: Settings, key: str) -> list[str]:
    """The switches above ``key`` that are off, nearest first (why a child has no effect)."""
    out, parent = [], setting(key).parent
    while parent:
        if not settings.get(parent):
            out.append(parent)
        parent = setting(parent).parent
    return out


def unset_value(key: str, *, path: str | Path | None = None, env: Mapping[str, str] | None = None) -> bool:
    """Remove ``key`` from the file (back to the default); True if it was there."""
    setting(key)
    removed: list[bool] = []
    _modify(_config_path(path, env), lambda doc: removed.append(_del_in(doc, key)))
    return bool(removed and removed[0])


def get_value(
    key: str,
    *,
    path: str | Path | None = None,
    env: Mapping[str, str] | None = None,
    has_vault: bool | None = None,
) -> Effective:
    """One key's effective value and source."""
    setting(key)
    return load_settings(path, env, has_vault=has_vault).entries[key]


def list_settings(
    *, path: str | Path | None = None, env: Mapping[str, str] | None = None, has_vault: bool | None = None
) -> list[Effective]:
    """Every schema key with its effective value and source, in schema order."""
    return load_settings(path, env, has_vault=has_vault).all_entries()


def add_custom_server(
    server: CustomServer,
    *,
    path: str | Path | None = None,
    env: Mapping[str, str] | None = None,
    replace: bool = False,
) -> None:
    """Save a custom server as ``[servers.custom.NAME]`` (validated first)."""
    custom_server_from_toml(server.name, server.to_toml())

    def change(doc: dict[str, Any]) -> None:
        servers = doc.setdefault("servers", {})
        table = servers.setdefault("custom", {})
        if server.name in table and not replace:
            raise SettingValueError(
                f"{CUSTOM_PREFIX}.{server.name}", server.name, "a server with this name exists", "a new name"
            )
        table[server.name] = server.to_toml()

    _modify(_config_path(path, env), change)


def remove_custom_server(name: str, *, path: str | Path | None = None, env: Mapping[str, str] | None = None) -> bool:
    """Delete ``[servers.custom.NAME]``; True if it existed."""
    removed: list[bool] = []
    _modify(_config_path(path, env), lambda doc: removed.append(_del_in(doc, f"{CUSTOM_PREFIX}.{name}")))
    return bool(removed and removed[0])


def set_server_enabled(
    name: str,
    enabled: bool,
    *,
    path: str | Path | None = None,
    env: Mapping[str, str] | None = None,
    has_vault: bool | None = None,
) -> list[str]:
    """Turn a built-in ('kms', 'playwright', ...) or custom server on or off; return warnings."""
    if name == "kms":
        return set_value("kms.enabled", str(enabled), path=path, env=env, has_vault=has_vault)
    if name in BUILTIN_SERVERS:
        return set_value(f"servers.{name}.enabled", str(enabled), path=path, env=env, has_vault=has_vault)
    cfg = _config_path(path, env)
    found: list[bool] = []

    def change(doc: dict[str, Any]) -> None:
        table = doc.get("servers", {}).get("custom", {}).get(name)
        if isinstance(table, dict):
            table["enabled"] = enabled
            found.append(True)

    _modify(cfg, change)
    if not found:
        known = ["kms", *BUILTIN_SERVERS, *load_settings(cfg, env, has_vault=False).custom_servers]
        raise UnknownServerError(name, known)
    return []
