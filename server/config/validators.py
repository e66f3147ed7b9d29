"""What a setting's value may be, one check per kind of value: each answers None, or why the value is
refused (the settings schema, ``server.config.schema``, names one for each key that needs it)."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from server.config.allowlist import folder_glob_problem


def int_range(lo: int, hi: int) -> Callable[[Any], str | None]:
    def check(value: Any) -> str | None:
        return None if lo <= value <= hi else f"{value} is outside {lo}..{hi}"

    return check


def one_of(*choices: str) -> Callable[[Any], str | None]:
    def check(value: Any) -> str | None:
        return None if value in choices else f"{value!r} is not one of {', '.join(choices)}"

    return check


def check_globs(value: Any) -> str | None:
    for pattern in value:
        problem = folder_glob_problem(pattern)
        if problem:
            return problem
    return None


def check_hide_folders(value: Any) -> str | None:
    for pattern in value:
        if pattern.startswith(("/", "~")) or re.match(r"^[A-Za-z]:", pattern) or "\\" in pattern:
            return f"{pattern!r}: use a vault-relative folder glob with '/' (such as 'journal/**')"
        if any(part in (".", "..") for part in pattern.split("/")) or pattern in ("/", "."):
            return f"{pattern!r}: '.' and '..' are not folder names (to hide a whole vault, remove it)"
    return None


def check_hide_tags(value: Any) -> str | None:
    for pattern in value:
        if not pattern.lstrip("#") or any(c.isspace() for c in pattern):
            return f"{pattern!r}: a tag or tag glob without spaces (such as 'private' or 'personal/*')"
    return None


def check_memory_folder(value: Any) -> str | None:
    if value is None:
        return None  # empty: agents keep no memory
    if any(c in value for c in "*?[]") or "," in value:
        return f"{value!r}: one plain folder, not a glob"
    problem = folder_glob_problem(value)
    if problem or value.strip() in ("/", "."):
        return problem or f"{value!r}: a folder inside the vault, not its root"
    return None


def check_capture_folder(value: Any) -> str | None:
    """Session notes always need a folder: '' does not turn capture off (capture.enabled does), so it is
    refused with the setting that does, not read as "no folder"."""
    if value is None:
        return "session notes need a folder; `kms config set capture.enabled off` turns session capture off"
    return check_memory_folder(value)


def check_key(value: Any) -> str | None:
    if value is not None and (not value.strip() or any(c.isspace() or c in ":#" for c in value)):
        return f"{value!r}: one frontmatter key, without spaces, ':' or '#'"
    return None


def check_public_url(value: Any) -> str | None:
    """remote.url: the https origin a TLS terminator (Funnel, Caddy, a tunnel) serves kms at; plain http only
    for a loopback name (tests, a local trial): an OAuth issuer must be https elsewhere (RFC 8414)."""
    from urllib.parse import urlsplit

    if value is None:
        return None
    parts = urlsplit(value)
    loopback = parts.hostname in ("127.0.0.1", "localhost", "::1")
    if parts.scheme != "https" and not (parts.scheme == "http" and loopback):
        return f"{value!r}: an https:// address (http:// only on loopback)"
    if not parts.hostname or parts.path not in ("", "/") or parts.query or parts.fragment or parts.username:
        return f"{value!r}: only scheme, host and port (such as https://box.tail1234.ts.net)"
    return None


def check_scopes(value: Any) -> str | None:
    """remote.max_scopes: a scope string in kms's grammar (``server.config.scopes``), never ``admin``."""
    from server.config.scopes import ScopeError, Scopes

    if value is None:
        return "a ceiling is needed, such as 'tier:write' or 'tier:read vault:notes'"
    try:
        scopes = Scopes.parse(value)
    except ScopeError as e:
        return str(e)
    return "admin is never given to a remote client" if scopes.admin else None


def check_redirect_uris(value: Any) -> str | None:
    """remote.redirect_uris: extra redirect URIs, space-separated, each https (or loopback http), exact."""
    from urllib.parse import urlsplit

    for uri in (value or "").split():
        parts = urlsplit(uri)
        if parts.scheme != "https" and not (parts.scheme == "http" and parts.hostname in ("127.0.0.1", "::1")):
            return f"{uri!r}: an https:// redirect URI (or http:// on 127.0.0.1)"
        if not parts.hostname or parts.fragment:
            return f"{uri!r}: a whole URI with a host and no #fragment"
    return None
