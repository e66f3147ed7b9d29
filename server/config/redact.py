"""The one rule set for secrets in what kms prints: settings, MCP server entries, session configs.

Every command that shows servers or settings (``kms claude --print-config``, ``kms servers list``,
``kms doctor``, ``kms config list``) passes its document through ``redact``; ``--show-secrets``
skips it on purpose. What counts as a secret:

- a value under a name that looks secret (env vars, headers, JSON keys: ``*_TOKEN``, ``Authorization``,
  ``SENTRY_DSN``, ``password``, ...);
- a value that looks like a credential whatever its name (``Bearer ...``, ``ghp_...``, ``sk-...``,
  ``AKIA...``, a JWT);
- in a URL: the password of its userinfo, secret-looking query parameters (``sig``, ``token``, ...),
  the path of a webhook URL;
- in an argument list: the value after (or attached to) a secret-looking flag (``--password VALUE``,
  ``--token=VALUE``, ``-pVALUE``), ``NAME=VALUE`` with a secret name, and JSON text holding any of these.
"""

from __future__ import annotations

import json
import re
from typing import Any
from urllib.parse import urlsplit, urlunsplit

REDACTED = "***"

_SECRET_NAME = re.compile(
    r"KEY|TOKEN|SECRET|PASS(WORD|WD|PHRASE)?|PWD|AUTH|CREDENTIAL|COOKIE|BEARER|PRIVATE|DSN|SIG(NATURE)?|"
    r"WEBHOOK",
    re.I,
)
# field names of kms's own documents that only look secret ({"key": "agent.read", ...})
_NOT_SECRET_NAME = re.compile(r"^(keys?|keywords?|passthrough|author|auth_type|env)$", re.I)
_SECRET_VALUE = re.compile(
    r"^(bearer|basic|token|digest)\s+\S|^(sk|pk|rk)-[A-Za-z0-9_-]{8,}|^(ghp|gho|ghs|ghu|github_pat|glpat|xox[abprs])[_-]"
    r"|^AKIA[0-9A-Z]{12,}|^eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.",
    re.I,
)
_SECRET_PARAM = re.compile(r"key|token|secret|pass|pwd|auth|sig|signature|credential|code|session|jwt", re.I)
_SECRET_FLAG = re.compile(r"^--?[\w-]*(key|token|secret|pass(word|wd|phrase)?|pwd|auth|credential|bearer)[\w-]*$", re.I)
_WEBHOOK = re.compile(r"hooks?\.|webhook", re.I)
_URL = re.compile(r"^[a-z][a-z0-9+.-]*://", re.I)


def secret_name(name: str) -> bool:
    return bool(_SECRET_NAME.search(name)) and not _NOT_SECRET_NAME.match(name)


def redact_url(url: str) -> str:
    """The password of the userinfo, secret-looking query values and a webhook's path masked."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return REDACTED
    netloc = parts.netloc
    if "@" in netloc:
        userinfo, host = netloc.rsplit("@", 1)
        user = userinfo.split(":", 1)[0]
        netloc = f"{user}:{REDACTED}@{host}" if ":" in userinfo else f"{REDACTED}@{host}"
    query = "&".join(
        f"{k}={REDACTED}" if v and _SECRET_PARAM.search(k) else (f"{k}={v}" if sep else k)
        for k, sep, v in (item.partition("=") for item in parts.query.split("&") if item)
    )
    path = parts.path
    if _WEBHOOK.search(parts.netloc + parts.path) and path.count("/") > 1:
        path = "/" + path.strip("/").split("/")[0] + "/" + REDACTED
    return urlunsplit((parts.scheme, netloc, path, query, parts.fragment))


def redact_text(value: str) -> str:
    """A single string: a credential-shaped value, a URL, or JSON text holding secrets."""
    stripped = value.strip()
    if not stripped:
        return value
    if _SECRET_VALUE.search(stripped):
        return REDACTED
    if _URL.match(stripped):
        return redact_url(stripped)
    if stripped[0] in "{[":
        try:
            parsed = json.loads(stripped)
        except ValueError:
            return value
        cleaned = redact(parsed)
        return value if cleaned == parsed else json.dumps(cleaned)
    name, eq, rest = value.partition("=")
    if eq and rest and re.fullmatch(r"[A-Za-z_][\w.-]*", name) and secret_name(name):
        return f"{name}={REDACTED}"
    return value


def redact_args(args: list[Any]) -> list[Any]:
    """``--password VALUE``, ``--token=VALUE``, ``-pVALUE`` and secret-looking values masked."""
    out: list[Any] = []
    hide_next = False
    for arg in args:
        if not isinstance(arg, str):
            out.append(redact(arg))
            continue
        if hide_next:
            out.append(REDACTED)
            hide_next = False
            continue
        flag, eq, value = arg.partition("=")
        if arg.startswith("-") and eq and _SECRET_FLAG.match(flag):
            out.append(f"{flag}={REDACTED}")
        elif _SECRET_FLAG.match(arg) or arg in ("-p",):
            out.append(arg)
            hide_next = True
        elif re.fullmatch(r"-p\S+", arg):  # mysql-style -pPASSWORD
            out.append(f"-p{REDACTED}")
        else:
            out.append(redact_text(arg))
    return out


def redact_settings(values: dict[str, Any]) -> dict[str, Any]:
    """kms's own settings by key: no setting holds a secret, so a key's name says nothing (the
    ``privacy.frontmatter_key`` setting holds a property name); only a value shaped like a credential or
    a URL with one is masked."""
    return {key: redact(value) for key, value in values.items()}


def redact(doc: Any) -> Any:
    """A copy of ``doc`` (JSON-like) with every secret masked; the input is never changed."""
    if isinstance(doc, dict):
        out: dict[Any, Any] = {}
        for key, value in doc.items():
            if key == "args" and isinstance(value, list):
                out[key] = redact_args(value)
            elif (
                isinstance(key, str)
                and secret_name(key)
                and isinstance(value, str | int | float)
                and not isinstance(value, bool)
                and value != ""
            ):
                out[key] = REDACTED
            else:
                out[key] = redact(value)
        return out
    if isinstance(doc, list):
        return [redact(v) for v in doc]
    if isinstance(doc, tuple):
        return tuple(redact(v) for v in doc)
    if isinstance(doc, str):
        return redact_text(doc)
    return doc
