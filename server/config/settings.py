"""kms settings: one typed schema, one TOML file, environment overrides.

The schema (``SETTINGS``) is the single source for ``kms config``, the MCP-config
composer, the TUI settings screen and ``docs/settings.md``, so a key is described
once. It lives in the core (not ``kmscli/``) because the TUI must not import the CLI;
for the same reason this module never imports typer, textual or rich.

Precedence, lowest to highest: schema default < config file < environment variable
(< a per-session override such as ``kms claude --write``, see ``Settings.with_override``).
The file is read with ``tomllib`` and written atomically (temp file + rename, mode 0600,
since custom servers may carry tokens) with ``tomli_w``; comments are not preserved by
``set_value`` (tomli_w cannot write them).

Reading never raises on a bad file: the MCP server must start even when a person has
mistyped a value, so problems are collected in ``Settings.problems`` and the default is
used. Writing refuses to touch a file it cannot parse, so nothing is clobbered.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import re
import tempfile
import tomllib
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import tomli_w

Source = Literal["default", "file", "env", "override"]
ValueType = Literal["bool", "int", "path", "globs"]


class _Auto:
    """Default marker: on once a vault is registered (resolved at load time)."""

    def __repr__(self) -> str:
        return "auto"


AUTO: Any = _Auto()


# ----------------------------------------------------------------------------- errors


class SettingsError(ValueError):
    """Base class for every settings problem a front end should show to the person."""


class UnknownSettingError(SettingsError):
    """The key is not in the schema; ``suggestions`` are the closest known keys."""

    def __init__(self, key: str, suggestions: list[str]):
        self.key = key
        self.suggestions = suggestions
        hint = f" Did you mean: {', '.join(suggestions)}?" if suggestions else ""
        super().__init__(f"Unknown setting '{key}'.{hint} (`kms config list` shows all keys.)")


class SettingValueError(SettingsError):
    """A value does not fit the key; ``valid`` says what would."""

    def __init__(self, key: str, value: Any, message: str, valid: str):
        self.key = key
        self.value = value
        self.valid = valid
        super().__init__(f"Invalid value for {key}: {message}. Valid values: {valid}")


class SettingsFileError(SettingsError):
    """The config file exists but cannot be parsed; we refuse to overwrite it."""


# ----------------------------------------------------------------------------- schema


@dataclass(frozen=True)
class Setting:
    """One key of the schema.

    ``validator`` checks a parsed value and returns an error message or None.
    ``parent`` names a switch that must also be on for this one to have an effect
    (turning the child on while the parent is off is allowed, but warned about).
    """

    key: str
    type: ValueType
    default: Any
    description: str
    env: str
    validator: Callable[[Any], str | None] | None = None
    parent: str | None = None
    valid: str = ""

    @property
    def auto(self) -> bool:
        return self.default is AUTO

    def valid_values(self) -> str:
        if self.valid:
            return self.valid
        return {
            "bool": "true/false (also on/off, yes/no, 1/0)" + (", auto" if self.auto else ""),
            "int": "a whole number",
            "path": "a directory path ('' = platform default)",
            "globs": "folder globs such as 'inbox' 'drafts/*' ('/' = vault root; none = every folder)",
        }[self.type]


def _int_range(lo: int, hi: int) -> Callable[[Any], str | None]:
    def check(value: Any) -> str | None:
        return None if lo <= value <= hi else f"{value} is outside {lo}..{hi}"

    return check


def _check_globs(value: Any) -> str | None:
    for pattern in value:
        problem = folder_glob_problem(pattern)
        if problem:
            return problem
    return None


# The built-in MCP servers besides kms itself (their builders live in kmscli/compose.py).
BUILTIN_SERVERS: dict[str, str] = {
    "playwright": "the Playwright MCP server for browser automation (`npx -y @playwright/mcp@latest`)",
    "filesystem": "the reference filesystem server, scoped to the vault roots or the cwd "
    "(`npx -y @modelcontextprotocol/server-filesystem`)",
}

_SCHEMA: list[Setting] = [
    Setting(
        "kms.enabled",
        "bool",
        AUTO,
        "Master switch: give agent sessions the kms MCP server. Default: on once a vault is registered.",
        "KMS_ENABLED",
    ),
    Setting(
        "agent.read",
        "bool",
        AUTO,
        "Agents may search and read notes (the read tools). Default: on once a vault is registered.",
        "KMS_AGENT_TOOLS_ENABLED",
        parent="kms.enabled",
    ),
    Setting(
        "agent.write",
        "bool",
        False,
        "Agents may create and edit notes (the write tools), only inside write.allowlist. Off until you "
        "turn it on; `kms claude --write/--no-write` overrides it for one session.",
        "KMS_AGENT_WRITE_TOOLS_ENABLED",
        parent="agent.read",
    ),
    Setting(
        "write.allowlist",
        "globs",
        [],
        "Folders agents may add notes and text to. Each pattern is a "
        "vault-relative folder; `*`, `?` and `[...]` match within ONE folder name, so `drafts/*` allows "
        "`drafts/x` but neither `drafts` (list it too) nor `drafts/x/y`. `/` or `.` is the vault root. "
        "Empty: every folder. Quote globs in the shell: `kms config set write.allowlist 'drafts/*' inbox`.",
        "KMS_WRITE_ALLOWLIST",
        validator=_check_globs,
    ),
    Setting(
        "write.per_minute",
        "int",
        10,
        "Most write-tool calls one agent session may make in any 60 seconds.",
        "KMS_WRITE_PER_MINUTE",
        validator=_int_range(1, 10_000),
        valid="a whole number from 1 to 10000",
    ),
    Setting(
        "write.per_session",
        "int",
        200,
        "Most write-tool calls one agent session may make in total.",
        "KMS_WRITE_PER_SESSION",
        validator=_int_range(1, 1_000_000),
        valid="a whole number from 1 to 1000000",
    ),
    Setting(
        "embed.enabled",
        "bool",
        True,
        "Use the local embedding model for semantic search (falls back to full-text search when off or "
        "when the model is missing).",
        "KMS_EMBED_ENABLED",
    ),
    Setting(
        "embed.model_dir",
        "path",
        None,
        "Directory holding the embedding model files. Unset: the copy `kms model install` made (next to "
        "the database), then fastembed's cache (downloaded there on first use when online).",
        "KMS_EMBED_MODEL_DIR",
    ),
    *[
        Setting(
            f"servers.{name}.enabled",
            "bool",
            False,
            f"Add {desc} to `kms claude` sessions.",
            f"KMS_SERVERS_{name.upper()}_ENABLED",
        )
        for name, desc in BUILTIN_SERVERS.items()
    ],
]

SETTINGS: dict[str, Setting] = {s.key: s for s in _SCHEMA}
CUSTOM_PREFIX = "servers.custom"
_SERVER_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")


def setting(key: str) -> Setting:
    """The schema entry for ``key``; unknown keys raise with the closest suggestions."""
    try:
        return SETTINGS[key]
    except KeyError:
        raise UnknownSettingError(key, suggest_keys(key)) from None


def suggest_keys(key: str, limit: int = 3) -> list[str]:
    """Closest known keys (rapidfuzz), for 'did you mean'."""
    from rapidfuzz import fuzz, process, utils

    choices = list(SETTINGS)
    found = process.extract(key, choices, scorer=fuzz.WRatio, processor=utils.default_process, limit=limit)
    return [name for name, score, _ in found if score >= 60]


# ----------------------------------------------------------------------------- folder globs


def folder_glob_problem(pattern: str) -> str | None:
    """Why ``pattern`` is not a valid folder glob, or None."""
    if not isinstance(pattern, str) or not pattern.strip():
        return "empty folder pattern"
    if pattern.strip() in ("/", "."):
        return None
    if "\\" in pattern:
        return f"{pattern!r}: use '/' between folders"
    if pattern.startswith("/") or re.match(r"^[A-Za-z]:", pattern) or pattern.startswith("~"):
        return f"{pattern!r}: use a vault-relative folder, not an absolute path"
    for part in pattern.strip("/").split("/"):
        if part in ("", ".", ".."):
            return f"{pattern!r}: empty, '.' or '..' folder names are not allowed"
        if "**" in part:
            return f"{pattern!r}: '**' is not supported; '*' matches one folder name, list each depth"
    return None


def normalize_folder_glob(pattern: str) -> str:
    """Trim whitespace and trailing slashes (``drafts/`` -> ``drafts``)."""
    pattern = pattern.strip()
    return pattern if pattern in ("/", ".") else pattern.rstrip("/")


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


# ----------------------------------------------------------------------------- value parsing

_TRUE = {"1", "true", "yes", "on", "y", "t"}
_FALSE = {"0", "false", "no", "off", "n", "f"}


def parse_value(key: str, values: Sequence[str] | str) -> Any:
    """Turn CLI/env text into a typed, validated value (``AUTO`` for 'auto' on auto keys)."""
    s = setting(key)
    items = [values] if isinstance(values, str) else list(values)
    if s.type == "globs":  # several values and/or comma/newline separated, as server/config/allowlist.py reads env
        flat = [p for item in items for line in item.splitlines() for p in line.split(",") if p.strip()]
        value: Any = list(dict.fromkeys(normalize_folder_glob(p) for p in flat))
    else:
        if len(items) != 1:
            raise SettingValueError(key, items, f"expected one value, got {len(items)}", s.valid_values())
        text = items[0].strip()
        if s.type == "bool":
            low = text.lower()
            if s.auto and low == "auto":
                return AUTO
            if low in _TRUE:
                value = True
            elif low in _FALSE:
                value = False
            else:
                raise SettingValueError(key, text, f"{text!r} is not a switch value", s.valid_values())
        elif s.type == "int":
            try:
                value = int(text.replace("_", ""))
            except ValueError:
                raise SettingValueError(key, text, f"{text!r} is not a whole number", s.valid_values()) from None
        else:  # path
            value = text or None
    return validate_value(key, value)


def validate_value(key: str, value: Any) -> Any:
    """Check a typed value (as read from TOML) against the schema; return it normalized."""
    s = setting(key)
    if value is AUTO and s.auto:
        return value
    ok = {
        "bool": lambda v: isinstance(v, bool),
        "int": lambda v: isinstance(v, int) and not isinstance(v, bool),
        "path": lambda v: v is None or isinstance(v, str),
        "globs": lambda v: isinstance(v, list) and all(isinstance(x, str) for x in v),
    }[s.type](value)
    if not ok:
        raise SettingValueError(key, value, f"{value!r} has the wrong type", s.valid_values())
    if s.type == "globs":
        value = [normalize_folder_glob(p) for p in value]
    if s.type == "path" and not value:
        value = None
    if s.validator:
        problem = s.validator(value)
        if problem:
            raise SettingValueError(key, value, problem, s.valid_values())
    return value


def format_value(value: Any) -> str:
    """Human text for a value, the same in the CLI and the TUI."""
    if value is AUTO:
        return "auto"
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "(not set)"
    if isinstance(value, list):
        return " ".join(value) if value else "(empty)"
    return str(value)


def env_text(value: Any) -> str:
    """A value as an environment variable carries it (flags as 1/0, lists comma-joined)."""
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, list):
        return ",".join(value)
    return "" if value is None else str(value)


# ----------------------------------------------------------------------------- custom servers


@dataclass(frozen=True)
class CustomServer:
    """A person-added MCP server: stdio (``command``) or HTTP (``url``)."""

    name: str
    command: str | None = None
    args: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    url: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    enabled: bool = True

    @property
    def kind(self) -> str:
        return "http" if self.url else "stdio"

    def to_toml(self) -> dict[str, Any]:
        out: dict[str, Any] = {"enabled": self.enabled}
        if self.command is not None:
            out["command"] = self.command
            out["args"] = list(self.args)
        if self.env:
            out["env"] = dict(self.env)
        if self.url is not None:
            out["url"] = self.url
        if self.headers:
            out["headers"] = dict(self.headers)
        return out


def check_server_name(name: str) -> None:
    """Custom server names: letters, digits, '-' and '_', not a built-in's name."""
    if not _SERVER_NAME_RE.match(name):
        raise SettingValueError(
            f"{CUSTOM_PREFIX}.{name}", name, "bad server name", "letters, digits, '-' and '_' (max 64)"
        )
    if name in BUILTIN_SERVERS or name in ("kms", "custom"):
        raise SettingValueError(f"{CUSTOM_PREFIX}.{name}", name, f"'{name}' is a built-in server name", "another name")


def custom_server_from_toml(name: str, table: Any) -> CustomServer:
    """Validate one ``[servers.custom.NAME]`` table."""
    key = f"{CUSTOM_PREFIX}.{name}"
    check_server_name(name)
    if not isinstance(table, dict):
        raise SettingValueError(key, table, "expected a table", "command/args/env or url/headers")

    def str_map(field_name: str) -> dict[str, str]:
        raw = table.get(field_name, {})
        if not isinstance(raw, dict) or not all(isinstance(v, str) for v in raw.values()):
            raise SettingValueError(key, raw, f"{field_name} must map names to strings", "a table of strings")
        return {str(k): v for k, v in raw.items()}

    command, url = table.get("command"), table.get("url")
    if bool(command) == bool(url):
        raise SettingValueError(key, table, "give exactly one of command or url", "command=... or url=...")
    enabled = table.get("enabled", True)
    if not isinstance(enabled, bool):
        raise SettingValueError(key, enabled, "enabled must be true or false", "true/false")
    if (url and table.get("env")) or (command and table.get("headers")):
        raise SettingValueError(key, table, "env is for stdio servers, headers for http ones", "one kind")
    if url:
        if not isinstance(url, str) or not re.match(r"^https?://[^\s/]+", url):
            raise SettingValueError(key, url, f"{url!r} is not an http(s) URL", "http://... or https://...")
        return CustomServer(name, url=url, headers=str_map("headers"), enabled=enabled)
    args = table.get("args", [])
    if not isinstance(command, str) or not isinstance(args, list) or not all(isinstance(a, str) for a in args):
        raise SettingValueError(key, table, "command must be a string and args a list of strings", "strings")
    return CustomServer(name, command=command, args=list(args), env=str_map("env"), enabled=enabled)


# ----------------------------------------------------------------------------- effective settings


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
        }


@dataclass(frozen=True)
class Settings:
    """Effective settings: typed values, their sources, custom servers, and load problems."""

    path: Path
    entries: dict[str, Effective]
    custom_servers: dict[str, CustomServer]
    problems: list[str]
    has_vault: bool

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
    from platformdirs import user_config_dir

    return Path(user_config_dir("kms", appauthor=False)) / "config.toml"


def count_vaults(db_path: str | Path | None = None) -> int:
    """Registered vaults in the DB (0 when there is no DB yet); never creates the DB."""
    from server.store import db

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
        if key == CUSTOM_PREFIX:
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
        value, source = s.default, "default"
        file_value = file_values.get(key)
        if key in file_values and file_values[key] is not AUTO:
            value, source = file_values[key], "file"
        env_raw = env.get(s.env)
        if env_raw is not None and (env_raw.strip() or s.type in ("globs", "path")):
            try:
                value, source = parse_value(key, env_raw), "env"
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
    return Settings(cfg_path, entries, custom, problems, has_vault)


# ----------------------------------------------------------------------------- writing


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """Serialize read-modify-write of the config file between the CLI and the TUI."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    try:
        import fcntl
    except ImportError:  # Windows: best effort
        yield
        return
    with open(path.with_name(path.name + ".lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def write_file(path: Path, doc: Mapping[str, Any]) -> None:
    """Write the TOML document atomically (temp file in the same dir, fsync, rename), mode 0600."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    data = tomli_w.dumps(_prune(dict(doc))).encode()
    fd, tmp = tempfile.mkstemp(prefix=".config-", suffix=".toml.tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o600)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def _prune(doc: dict[str, Any]) -> dict[str, Any]:
    """Drop tables left empty by an unset (keeps the file tidy)."""
    out: dict[str, Any] = {}
    for k, v in doc.items():
        if isinstance(v, dict):
            v = _prune(v)
            if not v:
                continue
        out[k] = v
    return out


def _set_in(doc: dict[str, Any], dotted: str, value: Any) -> None:
    *parents, last = dotted.split(".")
    node = doc
    for p in parents:
        nxt = node.get(p)
        if not isinstance(nxt, dict):
            nxt = node[p] = {}
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


def _modify(path: Path, change: Callable[[dict[str, Any]], None]) -> None:
    with _locked(path):
        doc = read_file(path)
        change(doc)
        write_file(path, doc)


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
        _modify(cfg, lambda doc: _set_in(doc, key, value))

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


class UnknownServerError(SettingsError):
    """No built-in or custom server has this name."""

    def __init__(self, name: str, known: list[str]):
        from rapidfuzz import process

        close = [m for m, score, _ in process.extract(name, known, limit=3) if score >= 60]
        self.name, self.known = name, known
        hint = f" Did you mean: {', '.join(close)}?" if close else ""
        super().__init__(f"No server named '{name}'.{hint} Known: {', '.join(known)}")


# ----------------------------------------------------------------------------- docs


def settings_markdown() -> str:
    """``docs/settings.md``, generated from the schema (a test keeps the file current)."""
    lines = [
        "# kms settings",
        "",
        "<!-- Generated from server/config/settings.py by scripts/gen_settings_doc.py; do not edit. -->",
        "",
        "Settings live in one TOML file: `kms config path` prints where (`$KMS_CONFIG` overrides it).",
        "Precedence, lowest first: default, config file, environment variable, per-session flag",
        "(`kms claude --write/--no-write`). `kms config list` shows each value and where it came from.",
        "",
        "Set keys with `kms config set KEY VALUE...`, e.g. `kms config set write.allowlist inbox 'drafts/*'`",
        "(quote globs so the shell does not expand them). In environment variables switches are",
        "`1`/`0` (also true/false, on/off) and lists are comma-separated.",
        "",
        "| Key | Type | Default | Environment | Description |",
        "| --- | --- | --- | --- | --- |",
    ]
    for s in SETTINGS.values():
        default = "auto (on once a vault is registered)" if s.auto else format_value(s.default)
        desc = s.description.replace("|", "\\|")
        lines.append(f"| `{s.key}` | {s.type} | {default} | `{s.env}` | {desc} Valid: {s.valid_values()}. |")
    lines += [
        "",
        "## Custom MCP servers",
        "",
        "`kms servers add` stores extra servers for `kms claude` sessions as tables:",
        "",
        "```toml",
        "[servers.custom.github]    # stdio: kms servers add github --env GITHUB_TOKEN=... -- npx -y pkg",
        'command = "npx"',
        'args = ["-y", "@modelcontextprotocol/server-github"]',
        'env = { GITHUB_TOKEN = "..." }',
        "enabled = true",
        "",
        "[servers.custom.docs]      # http: kms servers add docs --url https://... --header 'K: V'",
        'url = "https://example.com/mcp"',
        'headers = { Authorization = "Bearer ..." }',
        "enabled = true",
        "```",
        "",
        "The file is written with mode 0600 because it may hold tokens; `--print-config` redacts them.",
        "",
    ]
    return "\n".join(lines)
