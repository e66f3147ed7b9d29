"""Canary vaults for the privacy rules: one hidden note per rule kind, with canary words ("zqx...")
in its title, body, tags, headings, link targets and folder name, beside visible notes that share its
ordinary words (so a broken filter would surface it)."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import apsw

from support.vaults import write

CANARY = "zqx"
VISIBLE = {
    "Home.md": "# Home\n\nThe garden plan for spring. See [[Plans]].\n\n#garden\n",
    "Plans.md": "# Plans\n\nGarden plans: beans, peas and a lighthouse model.\n\n## Spring\n\nSow.\n\n#garden #plans\n",
    "public/Log.md": "# Log\n\nWatered the garden. [[Home]]\n\n#log\n",
}
# kind -> (folder of the hidden note, extra frontmatter lines, settings, .kmsignore text)
KINDS: dict[str, tuple[str, str, dict[str, list[str]], str]] = {
    "frontmatter": ("zqxfolder-fm", "private: true\n", {}, ""),
    "visibility": ("zqxfolder-vis", "visibility: private\n", {}, ""),
    "custom-key": ("zqxfolder-key", "secret: yes\n", {"privacy.frontmatter_key": ["secret"]}, ""),
    "folder": ("zqxjournal/deep", "", {"privacy.hide_folders": ["zqxjournal/**"]}, ""),
    "tag": ("zqxfolder-tag", "", {"privacy.hide_tags": ["zqxtag-*"]}, ""),
    "kmsignore": ("zqxignored", "", {}, "# private notes\nzqxignored/\n"),
    "stamp": ("zqxfolder-stamp", "", {}, ""),
    "symlink": ("zqxjournal", "", {"privacy.hide_folders": ["zqxjournal"]}, ""),
}


def hidden_text(kind: str, fm: str) -> str:
    return (
        f"---\ntags: [zqxtag-{kind}, garden]\n{fm}---\n# zqxheading {kind}\n\n"
        f"zqxbody {kind}: the garden plan, beans and peas. See [[Plans]] and [[zqxlinktarget {kind}]].\n\n"
        f"## zqxsection {kind}\n\nMore garden words.\n"
    )


def build(root: Path, kind: str, config: Path) -> dict[str, Any]:
    """Write the vault and the settings of one rule kind; return what the test needs to know."""
    from server.config.settings import set_value

    folder, fm, settings, kmsignore = KINDS[kind]
    for rel, text in VISIBLE.items():
        write(root / rel, text)
    title = f"Zqx title {kind}"
    rel = f"{folder}/{title}.md"
    write(root / rel, hidden_text(kind, fm))
    if kmsignore:
        (root / ".kmsignore").write_text(kmsignore)
    for key, values in settings.items():
        set_value(key, values, path=config, env={}, has_vault=True)
    link = None
    if kind == "symlink":
        link = "public/zqxlink.md"
        os.symlink(root / rel, root / link)
    return {"kind": kind, "title": title, "path": rel, "folder": folder, "link": link}


def canary_hits(answer: str, request: dict[str, Any]) -> list[str]:
    """Canary words in an answer, once the agent's own words (its request, echoed back) are removed."""
    text = answer
    strings = [v for v in _strings(request) if v]
    for s in sorted(strings, key=len, reverse=True):
        text = re.sub(re.escape(s), "", text, flags=re.IGNORECASE)
    return re.findall(rf"\w*{CANARY}\w*", text, flags=re.IGNORECASE)


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value, value.replace("/", "\\/")]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)] + [s for k in value for s in _strings(k)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


def answer_text(result: Any) -> str:
    parts = [json.dumps(result.structured_content, ensure_ascii=False)] if result.structured_content else []
    parts += [getattr(c, "text", "") for c in result.content]
    return "\n".join(parts)


def hidden_rows(conn: apsw.Connection) -> list[tuple]:
    return conn.execute(
        "SELECT path, hidden_rule, hidden_stamp IS NOT NULL FROM notes WHERE hidden_at IS NOT NULL ORDER BY path"
    ).fetchall()
