"""A body that ``needs_parse`` lets skip pyromark is one in which the parser finds nothing but the top-level
ATX headings ``atx_headings`` finds as it does: no code, no Markdown link (issue 42). Checked over tricky notes
written by hand, every note of the test vaults and of the generated vault, and random documents of the
characters Markdown gives meaning to; and a note's record is the same whichever path its body took.
"""

from __future__ import annotations

import random
from pathlib import Path

from support.gen_vault import generate
from support.vaults import REPO, SAMPLE_VAULT

from server.index.records import record_of_bytes
from server.vault.body_ranges import atx_headings, body_structure, needs_parse
from server.vault.frontmatter_read import split_frontmatter

TRICKY = [
    "plain words and a [[wiki link]] and a #tag",
    "# heading",
    "   # heading with three spaces",
    "    indented code #nottag",
    "# h1\n## h2 ##\n   ### three spaces\n####### seven\n#notaheading\n#\n# [[link]] #tag",
    "para\n# interrupts\ntext\n\n######\n",
    "\tindented by a tab",
    "text\n===",
    "text\n---",
    "text\r# heading after a lone CR",
    "text\r\n# heading after CRLF",
    "> # heading in a quote",
    "- # heading in a list item",
    "1. # heading in an ordered list",
    "1) item",
    "* item\n+ item",
    "inline `code` here",
    "~~~\nfenced\n~~~",
    "<div>html</div>",
    "an autolink <https://x.org> here",
    "[a link](note.md) and ![img](p.png)",
    "[ref][r]\n\n[r]: note.md",
    "[shortcut]\n\n[shortcut]: note.md",
    "[a]\n: not a definition",
    "[[a]] [b] (c) ]( split",
    "url https://example.com/a#frag and #tag",
    "tag at start\n#tag line",
    "#tag-only",
    "x = y - z * w + 1. no list",
    "2024. a year",
    "- item\n# heading after a list\n- item",
    "- item\n  # heading in the item",
    "- # heading as the item",
    "* > quote in an item",
    "-\n  # heading under an empty item",
    "1. item\n   # heading in an ordered item",
    "10. item\n    # four spaces",
    "-     code in an item",
    "- [ ] a task #tag [[link]]",
    "*emphasis* at the start",
    "text\n= not an underline\n===",
    "a line\n    four spaces after a paragraph",
    " one space",
    "émigré 日本語 #タグ [[ノート]]",
    "escaped \\# and \\[ and \\`",
    "&amp; &#35;tag &lt;",
    "| a | b |\n|---|---|\n| c | d |",
    "a | b\n--|--\nc | d",
    "footnote[^1]\n\n[^1]: note",
    "$math #nottag$",
    "",
    "\n\n\n",
]


def _bodies() -> list[str]:
    bodies = list(TRICKY)
    roots = [SAMPLE_VAULT, REPO / "tests" / "data" / "vaults"]
    for root in roots:
        for path in sorted(root.rglob("*.md")):
            bodies.append(split_frontmatter(path.read_text(encoding="utf-8", errors="replace"))[1])
    return bodies


TOKENS = [
    "word", "other", " ", "  ", "    ", "\t", "\n", "\n\n", "\r", "\r\n", "#", "# ", "##", "#tag", "=", "==",
    "-", "---", "- ", "*", "+ ", ">", "> ", "1.", "1) ", "`", "```", "~~~", "<", "<div>", "<http://a.b>", "[",
    "]", "(", ")", ":", "[[", "]]", "!", "é", "日本", "http://x.y/p#frag", "\\", "|", "_", "$", "&amp;",
    "[a]: b", "[a](b)", "[a][b]", "![i](p.png)", "[[n|#alias]]", "((x))",
    "\n- ", "\n* ", "\n+ ", "\n1. ", "\n2) ", "\n  ", "\n   ", "\n# ", "\n## ", "\n-", "\n=", "\n>",
    "- # ", "- [ ] ", "-     ", "*text*", "\n***", "\n- - -", "\n___",
]  # fmt: skip


def _structure(body: str) -> tuple[list, list, list, list]:
    mdlinks: list = []
    code, notags, heads = body_structure(body, mdlinks)
    return code, notags, heads, mdlinks


def test_a_body_that_skips_the_parse_holds_nothing_the_parser_finds(tmp_path: Path) -> None:
    gen = generate(tmp_path / "gen", notes=450)
    bodies = _bodies() + [split_frontmatter(p.read_text(errors="replace"))[1] for p in sorted(gen.rglob("*.md"))]
    rnd = random.Random(7)
    bodies += ["".join(rnd.choice(TOKENS) for _ in range(rnd.randint(1, 16))) for _ in range(60_000)]
    skipped = [b for b in bodies if not needs_parse(b)]
    wrong = [b for b in skipped if _structure(b) != ([], [], atx_headings(b), [])]
    assert not wrong, wrong[:5]
    assert len(skipped) > 3_000  # the test is not vacuous: many bodies skip the parse
    assert sum(1 for b in TRICKY if any(_structure(b))) > 15  # the tricky ones do hold what a parse finds


def test_the_generated_vault_mostly_skips_the_parse_and_its_records_are_the_parsers(tmp_path: Path) -> None:
    """The records of the generated vault's notes whose bodies skip the parse are those a body with a parse
    gives: the same body with a code span appended far below (which the parser must read) gives the same
    record but for that span."""
    gen = generate(tmp_path / "gen", notes=450)
    paths = sorted(gen.rglob("*.md"))
    skipping = [p for p in paths if not needs_parse(split_frontmatter(p.read_text(errors="replace"))[1])]
    assert len(skipping) > len(paths) / 4
    for path in skipping:
        data = path.read_bytes()
        rel = path.relative_to(gen).as_posix()
        plain = record_of_bytes(rel, 1, data)
        forced = record_of_bytes(rel, 1, data + b"\n\n`x`\n")
        assert plain.values is not None and forced.values is not None
        assert (plain.tags, plain.links, plain.headings, plain.keys, plain.props) == (
            forced.tags,
            forced.links,
            forced.headings,
            forced.keys,
            forced.props,
        ), rel
