"""Which frontmatter properties an agent may write: names, value shapes, tags.

Checked before a note is read, so a bad request changes nothing and says exactly what is
wrong; ``server.vault.frontmatter`` then edits the YAML.
"""

from __future__ import annotations

import math
import re
from typing import Any

from server.errors import KmsError

MAX_KEYS = 100
MAX_VALUE_CHARS = 10_000
MAX_LIST_ITEMS = 1_000
RESERVED_KEYS = frozenset({"kms_provenance"})  # kms's own, never an agent's to set
TAG_RE = re.compile(r"^[a-zA-Z0-9][a-zA-Z0-9_-]*$")
KEY_RE = re.compile(r"^[^\W][\w .\-/]*(?<! )$")


def normalize_tags(tags: Any, *, limit: int) -> list[str]:
    """Validate tags (``#`` optional), drop case-insensitive duplicates, keep order."""
    if isinstance(tags, str):
        tags = [tags]
    if not isinstance(tags, list | tuple):
        raise KmsError("invalid-input", "tags must be a list of strings")
    out: list[str] = []
    seen: set[str] = set()
    for t in tags:
        if not isinstance(t, str):
            raise KmsError("invalid-input", f"tag {t!r} is not a string")
        name = t.strip().removeprefix("#")
        if not TAG_RE.match(name):
            raise KmsError(
                "invalid-input",
                f"tag {t!r} is not allowed: letters, digits, '_' and '-', starting with a letter or digit",
            )
        if name.lower() not in seen:
            seen.add(name.lower())
            out.append(name)
    if len(out) > limit:
        raise KmsError("invalid-input", f"at most {limit} tags ({len(out)} given)")
    return out


def _check_scalar(key: str, v: Any) -> Any:
    if isinstance(v, bool | int):
        return v
    if isinstance(v, float):
        if not math.isfinite(v):
            raise KmsError("invalid-input", f"property {key!r}: numbers must be finite")
        return v
    if isinstance(v, str):
        if len(v) > MAX_VALUE_CHARS:
            raise KmsError("invalid-input", f"property {key!r}: value longer than {MAX_VALUE_CHARS} characters")
        if any(ord(c) < 32 and c not in "\t\n" or c in "\x7f\ufeff" for c in v):
            raise KmsError("invalid-input", f"property {key!r}: value contains control characters")
        try:
            v.encode("utf-8")
        except UnicodeEncodeError as e:
            raise KmsError("invalid-input", f"property {key!r}: value is not valid Unicode") from e
        return v
    raise KmsError(
        "invalid-input",
        f"property {key!r}: values are strings, numbers, booleans or lists of those (got {type(v).__name__});"
        " use remove to delete a property",
    )


def check_key(key: Any) -> str:
    """A property name: visible, reasonably plain, not reserved by kms."""
    if not isinstance(key, str) or not KEY_RE.match(key) or len(key) > 100:
        raise KmsError(
            "invalid-input",
            f"property name {key!r} is not allowed (letters, digits, spaces, '_', '-', '.', '/'; max 100)",
        )
    if key in RESERVED_KEYS:
        raise KmsError("invalid-input", f"property {key!r} is reserved for kms")
    return key


def check_properties(
    set_: dict[str, Any] | None, remove: list[str] | None, *, max_tags: int
) -> tuple[dict[str, Any], list[str]]:
    """Validate an update_properties request; return (set, remove) normalised."""
    set_ = dict(set_ or {})
    remove = list(remove or [])
    if not isinstance(remove, list):
        raise KmsError("invalid-input", "remove must be a list of property names")
    if not set_ and not remove:
        raise KmsError("invalid-input", "nothing to do: give properties to set and/or remove")
    if len(set_) + len(remove) > MAX_KEYS:
        raise KmsError("invalid-input", f"at most {MAX_KEYS} properties per call")
    out: dict[str, Any] = {}
    for key, value in set_.items():
        check_key(key)
        if isinstance(value, list | tuple):
            if len(value) > MAX_LIST_ITEMS:
                raise KmsError("invalid-input", f"property {key!r}: at most {MAX_LIST_ITEMS} list items")
            value = [_check_scalar(key, v) for v in value]
        elif value is None:
            raise KmsError("invalid-input", f"property {key!r}: null is not a value; use remove to delete it")
        else:
            value = _check_scalar(key, value)
        if key == "tags":
            value = normalize_tags(value, limit=max_tags)
        out[key] = value
    for key in remove:
        check_key(key)
        if key in out:
            raise KmsError("invalid-input", f"property {key!r} is both set and removed")
    return out, list(dict.fromkeys(remove))
