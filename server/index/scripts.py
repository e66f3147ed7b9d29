"""Words in scripts written without spaces (Chinese, Japanese, Thai, Lao, Khmer, Myanmar) and Korean
inside its words, found by substring.

FTS5's ``unicode61`` tokenizer reads a run of such characters as one token (``数据库迁移到新的集群`` is one
word), so no part of it can be found. Each run is also written, in the FTS ``cjk`` column (m027, from
``notes.search_cjk``), as the overlapping pairs of its characters and then its last character alone;
each token is the characters' code points in hex behind ``zz``, so the tokenizer keeps it whole (Thai
vowel signs are separators to ``unicode61``). A query's run is then the phrase of its pairs (``迁移``:
one pair; ``数据库``: two pairs, adjacent), a single character a prefix (``"zz8fc1"*``): any substring is
found, and BM25 ranks by how often it occurs. Latin text never reaches the column.
"""

from __future__ import annotations

import re

RANGES = (  # the characters of those scripts, a regex class body
    "\u0e00-\u0eff"  # Thai, Lao
    "\u1000-\u109f"  # Myanmar
    "\u1780-\u17ff"  # Khmer
    "\u1100-\u11ff\u3130-\u318f\uac00-\ud7af"  # Hangul
    "\u3040-\u30ff\u31f0-\u31ff\uff66-\uff9f"  # Hiragana, Katakana
    "\u3005\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0003134f"  # Han
)
RUN = re.compile(f"[{RANGES}]+")
COLUMN = "cjk"


def _code(ch: str) -> str:
    return f"{ord(ch):06x}"


_BEFORE = re.compile(r"[^\W_]+$")
_AFTER = re.compile(r"[^\W_]+")


def index_tokens(text: str) -> str | None:
    """The ``cjk`` column of a note's text: its runs' pairs and last characters (None: no such run), and
    the other letters written against a run (``Kubernetes集群``: ``unicode61`` reads one token there, so
    ``Kubernetes`` alone would not be found)."""
    out: list[str] = []
    for m in RUN.finditer(text):
        run = m.group()
        if m.start() and (b := _BEFORE.search(text, max(0, m.start() - 64), m.start())):
            out += RUN.split(b.group())[-1:]
        if a := _AFTER.match(text, m.end()):
            out += RUN.split(a.group())[:1]
        codes = [_code(c) for c in run]
        out += [f"zz{a}{b}" for a, b in zip(codes, codes[1:], strict=False)]
        out.append(f"zz{codes[-1]}")
    return " ".join(out) or None


def has_run(text: str) -> bool:
    # ``isascii`` is a C scan that stops at once: the regex tries its class at every position
    return not text.isascii() and RUN.search(text) is not None


def query_parts(term: str) -> tuple[list[str], list[str]]:
    """A query word split: (its other pieces, searched as words; FTS5 expressions for its runs)."""
    rest = [p for p in RUN.split(term) if re.search(r"\w", p)]
    exprs = []
    for m in RUN.finditer(term):
        codes = [_code(c) for c in m.group()]
        if len(codes) == 1:
            exprs.append(f'{COLUMN} : "zz{codes[0]}"*')
        else:
            exprs.append(f'{COLUMN} : "{" ".join(f"zz{a}{b}" for a, b in zip(codes, codes[1:], strict=False))}"')
    return rest, exprs


def searches_runs(match: str) -> bool:
    """Whether a ``build_match`` expression searches the ``cjk`` column (``query_parts`` wrote a run into it)."""
    return f"{COLUMN} : " in match


_PHRASE = re.compile(rf'{COLUMN} : "((?:zz[0-9a-f]{{6}}(?:[0-9a-f]{{6}})? ?)+)"\*?')


def runs_of(match: str) -> tuple[str, list[str]]:
    """A ``query_parts`` expression split back: (the expression without its ``cjk`` phrases, the runs those
    phrases search for, as a note writes them), so an excerpt can find and mark them in the text."""
    runs = []
    for m in _PHRASE.finditer(match):
        tokens = m.group(1).split()
        chars = [chr(int(t[2:8], 16)) for t in tokens]
        if len(tokens[-1]) == 14:  # a pair: its second character ends the run
            chars.append(chr(int(tokens[-1][8:], 16)))
        runs.append("".join(chars))
    return _PHRASE.sub(" ", match), runs


# A word or a "phrase" of an FTS5 expression, with the real column filter in front of it, if any.
_EXPRESSION_TERM = re.compile(r'(?P<column>\b(?:title|body)\s*:\s*)?(?P<term>"(?:[^"]|"")*"|[^\s()"]+)', re.I)


def runs_in_expression(expression: str) -> str:
    """An FTS5 expression (quotes, ``*``, AND/OR/NOT, ``title:``/``body:``) with each word or phrase that
    holds a run searched as a plain word is (``query_parts``): ``"寿司"``, ``寿司 OR 天ぷら``, ``body:寿司``
    and ``寿司*`` find what ``寿司`` finds. A run is a substring already, so a ``*`` after it adds nothing;
    a phrase's runs and words are each required, not in order; the ``cjk`` column holds the title's and
    the body's runs together, so ``title:`` and ``body:`` both search it."""

    def searched(m: re.Match[str]) -> str:
        term = m.group("term")
        if not has_run(term):
            return m.group(0)
        text = term[1:-1].replace('""', '"') if term.startswith('"') else term.rstrip("*")
        column = (m.group("column") or "").replace(" ", "")
        parts: list[str] = []
        for word in text.split():
            rest, runs = query_parts(word)
            parts += [column + '"' + r.replace('"', '""') + '"' for r in rest] + runs
        return "(" + " AND ".join(parts) + ")" if len(parts) > 1 else parts[0] if parts else m.group(0)

    return _EXPRESSION_TERM.sub(searched, expression) if has_run(expression) else expression
