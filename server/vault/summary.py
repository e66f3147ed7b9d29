"""The AI summary marker block: one HTML-comment-delimited block near the top of a body.

Format (invisible in Obsidian's reading view, survives any Markdown tool)::

    <!-- kms:summary hash=<12 hex of the body it summarises> -->
    One or more lines of summary text.
    <!-- /kms:summary -->

It must be the first non-blank thing in the body (after frontmatter). The hash is
``body_hash(body without the block)``: when the body changes afterwards the summary is
``stale``; when it matches, ``fresh``; no block is ``none``. The core strips the block
from every body it returns.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

_BLOCK = re.compile(
    r"\A(?P<lead>\s*)<!--\s*kms:summary(?P<attrs>[^>]*?)-->[ \t]*\r?\n"
    r"(?P<text>.*?)\r?\n?<!--\s*/kms:summary\s*-->[ \t]*(?:\r?\n)?",
    re.DOTALL,
)
_ATTR = re.compile(r"(\w+)=([^\s]+)")


@dataclass(frozen=True)
class Summary:
    state: str  # 'fresh' or 'stale'
    hash: str
    text: str

    def to_dict(self) -> dict[str, str]:
        return {"state": self.state, "hash": self.hash, "text": self.text}


def body_hash(body: str) -> str:
    """Insensitive to whitespace at the ends and to CRLF vs LF, so neither makes a summary stale."""
    return hashlib.sha256(body.replace("\r\n", "\n").strip().encode("utf-8")).hexdigest()[:12]


def decode(body: str) -> tuple[Summary | None, str]:
    """Split a body into its summary (if any) and the body without the block."""
    if body.find("kms:summary", 0, 4096) < 0:  # no slice copied: this runs for every note indexed
        return None, body
    m = _BLOCK.match(body)
    if not m:
        return None, body
    rest = body[m.end() :]
    attrs = dict(_ATTR.findall(m.group("attrs")))
    recorded = attrs.get("hash", "")
    state = "fresh" if recorded and recorded == body_hash(rest) else "stale"
    return Summary(state=state, hash=recorded, text=m.group("text").strip()), rest


def encode(body: str, text: str) -> str:
    """Return ``body`` with a fresh summary block (replacing an existing one)."""
    _, rest = decode(body)
    text = text.strip().replace("<!--", "&lt;!--").replace("-->", "--&gt;")
    return f"<!-- kms:summary hash={body_hash(rest)} -->\n{text}\n<!-- /kms:summary -->\n{rest}"
