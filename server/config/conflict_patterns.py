"""The grammar of ``sync.conflict_patterns``: the person's own conflict-copy names.

An entry is a glob over a file name in which ``{note}`` stands for the name of the note the copy is of
(without ``.md``): ``{note}.conflict-*.md`` makes ``Plan.conflict-laptop.md`` a copy of ``Plan.md``.
``*`` is any run of characters, ``?`` one; the rest is literal. The entry must name the note exactly once,
or kms could not tell which note the copy conflicts with. Read by ``server.vault.conflict_names``."""

from __future__ import annotations

import re
from typing import Any

NOTE = "{note}"


def pattern_regex(glob: str) -> re.Pattern[str]:
    """An entry as a regular expression over a file name (group ``stem``: the note's name); ``ValueError``
    for an entry that does not name the note exactly once."""
    problem = pattern_problem(glob)
    if problem:
        raise ValueError(problem)
    out = [
        {NOTE: "(?P<stem>.+?)", "*": ".*", "?": "."}.get(part, re.escape(part))
        for part in re.split(r"(\{note\}|\*|\?)", glob)
    ]
    return re.compile("".join(out))


def pattern_problem(glob: str) -> str | None:
    if glob.count(NOTE) != 1:
        return f"{glob!r}: name the note once, as {NOTE} (such as '{NOTE}.conflict-*.md')"
    if "/" in glob:
        return f"{glob!r}: a pattern is over a file name, without '/'"
    return None


def check_patterns(value: Any) -> str | None:
    """The settings schema's validator: None, or why an entry is refused."""
    return next((p for p in (pattern_problem(g) for g in value) if p), None)
