"""The Markdown parser and the AI summary block codec, on real note texts (issue 2)."""

from __future__ import annotations

import time

import pytest

from server.vault import summary
from server.vault.parser import link_key, normalize_tag, parse_note


def tags(text: str) -> list[str]:
    return parse_note(text, "Note").tags


def targets(text: str) -> list[str]:
    return [ln.target for ln in parse_note(text, "Note").links]


# --- code hides tags and links ---------------------------------------------------------------------


def test_fenced_code_hides_tags_and_links() -> None:
    text = "before #outside [[Outside]]\n\n```python\n# comment #incode [[InCode]]\nx = 1\n```\n\nafter #after\n"
    p = parse_note(text, "Note")
    assert p.tags == ["outside", "after"]
    assert [ln.target for ln in p.links] == ["Outside"]


def test_tilde_fence_and_unclosed_fence_hide_everything_after() -> None:
    assert tags("~~~\n#incode [[X]]\n~~~\n#yes") == ["yes"]
    # an unclosed fence runs to the end of the document (CommonMark)
    p = parse_note("#before\n```\n#never [[Never]]\n", "Note")
    assert p.tags == ["before"] and p.links == []


def test_indented_code_hides_tags_and_links() -> None:
    text = "para #para\n\n    #indented [[Indented]]\n    more code\n\nback #back [[Back]]\n"
    assert tags(text) == ["para", "back"]
    assert targets(text) == ["Back"]


def test_inline_code_hides_tags_and_links() -> None:
    text = "run `git tag #v1 [[NotALink]]` then #real and [[Real]]; also ``#double `tick` [[No]]``"
    assert tags(text) == ["real"]
    assert targets(text) == ["Real"]


def test_html_comments_hide_tags_and_links() -> None:
    assert tags("<!-- #draft [[Hidden]] -->\n#shown") == ["shown"]
    assert targets("<!-- [[Hidden]] -->\n[[Shown]]") == ["Shown"]


# --- line endings, BOM, unicode --------------------------------------------------------------------


def test_crlf_note_parses_like_lf() -> None:
    lf = "---\ntags: [a, b]\naliases: [Alias]\n---\n# Title\n\nSetext\n------\n\ntext #inline [[Link|shown]]\n"
    crlf = lf.replace("\n", "\r\n")
    p_lf, p_crlf = parse_note(lf, "T"), parse_note(crlf, "T")
    assert p_crlf.frontmatter == {"tags": ["a", "b"], "aliases": ["Alias"]}
    assert p_crlf.fm_error is None
    assert p_crlf.tags == p_lf.tags == ["a", "b", "inline"]
    assert p_crlf.aliases == ["Alias"]
    assert [(h.level, h.text, h.line) for h in p_crlf.headings] == [(1, "Title", 5), (2, "Setext", 7)]
    assert [(h.level, h.text, h.line) for h in p_lf.headings] == [(1, "Title", 5), (2, "Setext", 7)]
    [link] = p_crlf.links
    assert (link.target, link.alias, link.line) == ("Link", "shown", 10)
    assert link.alias is not None and "\r" not in link.alias


def test_bom_does_not_hide_frontmatter() -> None:
    p = parse_note("\ufeff---\ntags: bom\n---\nbody #x", "T")
    assert p.frontmatter == {"tags": "bom"}
    assert p.tags == ["bom", "x"]
    assert not p.body.startswith("\ufeff")


def test_unicode_and_emoji_titles_and_tags() -> None:
    text = "# Café ☕ notes\n\n#café #日本語 #emoji🎉 #Ünïcödé/Sub [[Crème brûlée|dessert]] 👍"
    p = parse_note(text, "Café ☕ notes")
    assert p.title == "Café ☕ notes"
    assert p.tags == ["café", "日本語", "emoji🎉", "ünïcödé/sub"]
    assert [(h.level, h.text) for h in p.headings] == [(1, "Café ☕ notes")]
    [link] = p.links
    assert (link.target, link.target_key, link.alias) == ("Crème brûlée", "crème brûlée", "dessert")


def test_non_ascii_before_code_keeps_offsets_right() -> None:
    # pyromark reports byte offsets: with multi-byte characters before a code span they must be mapped
    text = "ßßß ☕☕☕ 日本語 `#incode [[InCode]]` #after [[After]]"
    assert tags(text) == ["after"]
    assert targets(text) == ["After"]


# --- tags -------------------------------------------------------------------------------------------


def test_nested_tags_and_case_folding() -> None:
    assert tags("#area/work #Area/Work #project/kms/parser #AREA") == ["area/work", "project/kms/parser", "area"]


def test_number_only_tags_are_not_tags() -> None:
    assert tags("issue #123 on #2024/10 and #1-2 but #1a and #y2k are") == ["1a", "y2k"]
    p = parse_note("---\ntags: [2024, real]\n---\n", "T")
    assert p.tags == ["real"]


def test_tags_in_headings_are_tags() -> None:
    """As Obsidian reads them (issue 29); a link's text in a heading is still no tag."""
    text = "# Title #one\n\nSetext #two\n===\n\n## About [a #no](x) and [b](y) then #three\n\nbody #yes"
    p = parse_note(text, "T")
    assert p.tags == ["one", "two", "three", "yes"]
    assert [h.text for h in p.headings][0] == "Title #one"


def test_tags_in_urls_and_words_are_not_tags() -> None:
    text = (
        "see https://example.com/page#section and http://x.org/#/route, [link](https://a.b/#frag), "
        "<https://auto.link/#anchor>, C#sharp, a#b, foo-#bar, and finally #real."
    )
    assert tags(text) == ["real"]


def test_a_bare_url_hides_its_fragment_wherever_its_scheme_starts() -> None:
    """Bare URLs found from each ``://`` (issue 42): a scheme after a dot or a word character, two URLs in a
    row, a ``://`` with no scheme before it, and a tag right after a URL."""
    text = (
        "x.http://h/p#a then _ftp://h/#b, éhttp://h/#c; a+b-c.d://e/#d http://one/#e http://two/#f\n"
        "://nothing#g and C3://h/#h then #real, at the end x://"
    )
    assert tags(text) == ["real"]
    assert tags("a://b/#x #after http://c/#y#z, #last") == ["after", "last"]


def test_tag_punctuation_ends_a_tag() -> None:
    assert tags("(#paren) #comma, #period. #colon: #semi;") == ["paren", "comma", "period", "colon", "semi"]
    assert tags("#with-dash #with_underscore #with/slash/") == ["with-dash", "with_underscore", "with/slash"]


def test_frontmatter_tags_as_list_string_and_with_hash() -> None:
    assert parse_note("---\ntags:\n  - One\n  - '#two'\n  - area/Work\n---\n", "T").tags == ["one", "two", "area/work"]
    assert parse_note("---\ntags: '#recipe #cooking'\n---\n", "T").tags == ["recipe", "cooking"]
    assert parse_note("---\ntags: alpha, beta gamma\n---\n", "T").tags == ["alpha", "beta", "gamma"]
    assert parse_note("---\ntag: single\n---\n", "T").tags == ["single"]
    assert parse_note("---\ntags:\n---\n#body", "T").tags == ["body"]


def test_frontmatter_and_body_tags_merge_without_duplicates() -> None:
    assert parse_note("---\ntags: [journal, Daily]\n---\n#daily #journal #new", "T").tags == ["journal", "daily", "new"]


def test_normalize_tag() -> None:
    assert normalize_tag("  #Area/Work ") == "area/work"


# --- frontmatter -------------------------------------------------------------------------------------


def test_aliases_list_string_and_alias_key() -> None:
    assert parse_note("---\naliases: [k8s, Kube]\n---\n", "T").aliases == ["k8s", "Kube"]
    assert parse_note("---\naliases: Single alias, with comma\n---\n", "T").aliases == ["Single alias, with comma"]
    assert parse_note("---\nalias: A\naliases:\n  - B\n  -\n---\n", "T").aliases == ["B", "A"]


def test_invalid_yaml_template_placeholders_flagged_body_still_parsed() -> None:
    text = (
        "---\ntitle: {{title}}\ndate: {{date:YYYY-MM-DD}}\ntags: template\n---\n"
        "# {{title}}\n\nbody #stillatag [[StillLinked]]\n"
    )
    p = parse_note(text, "Daily template")
    assert p.frontmatter is None
    assert p.fm_error and p.fm_error.startswith("invalid YAML")
    assert "line" in p.fm_error
    assert p.tags == ["stillatag"]
    assert [ln.target for ln in p.links] == ["StillLinked"]
    assert p.body.startswith("# {{title}}")
    assert "tags: template" not in p.body
    [link] = p.links
    assert link.line == 8


def test_frontmatter_is_yaml_1_2() -> None:
    """As js-yaml and Obsidian's properties read it, not as PyYAML's YAML 1.1 did."""
    p = parse_note("---\nstatus: yes\ntime: 10:30\non: stage\ncode: 012\nok: true\nn: 1e3\n---\n", "T")
    assert p.fm_error is None
    assert p.frontmatter == {"status": "yes", "time": "10:30", "on": "stage", "code": 12, "ok": True, "n": 1000.0}
    assert parse_note("---\ntags: [a]\ntags: [b]\n---\n", "T").tags == ["b"]  # a repeated key: the last wins


def test_alias_bomb_is_flagged_not_expanded() -> None:
    rows = ["a: &a [x, x, x, x, x, x, x, x, x, x]"]
    for prev, name in zip("abcdefgh", "bcdefghi", strict=True):
        rows.append(f"{name}: &{name} [{', '.join(['*' + prev] * 10)}]")
    started = time.monotonic()
    p = parse_note("---\n" + "\n".join(rows) + "\n---\nbody #kept\n", "Bomb")
    assert time.monotonic() - started < 5  # 10^9 strings if expanded
    assert p.frontmatter is None and p.fm_error and p.fm_error.startswith("invalid YAML")
    assert p.tags == ["kept"]


def test_non_mapping_frontmatter_is_flagged() -> None:
    p = parse_note("---\n- just\n- a list\n---\nbody", "T")
    assert p.frontmatter is None and "not a mapping" in (p.fm_error or "")
    assert p.body == "body"


def test_frontmatter_values_become_json_friendly() -> None:
    p = parse_note("---\ncreated: 2024-06-30\nn: 3\nok: true\nnested: {a: [1, 2]}\n---\n", "T")
    assert p.frontmatter == {"created": "2024-06-30", "n": 3, "ok": True, "nested": {"a": [1, 2]}}


def test_empty_frontmatter_and_no_frontmatter() -> None:
    p = parse_note("---\n---\nbody", "T")
    assert p.frontmatter == {} and p.fm_error is None and p.body == "body"
    p = parse_note("no frontmatter\n---\nnot: yaml\n---\n", "T")
    assert p.frontmatter is None and p.fm_error is None
    assert p.body.startswith("no frontmatter")


def test_unclosed_frontmatter_is_body() -> None:
    p = parse_note("---\ntags: x\nno closing line #t", "T")
    assert p.frontmatter is None
    assert "tags: x" in p.body


# --- links ---------------------------------------------------------------------------------------------


def test_every_wikilink_form() -> None:
    text = (
        "[[Plain]] [[Target|Alias text]] [[Target#Heading]] [[Target^block1]] [[Target#^block2]] "
        "[[folder/Sub Note]] [[Target#Heading|both]] [[Note.md]] [[#Local heading]]\n"
        "![[image.png]] ![[Embedded#Section]]\n"
    )
    links = parse_note(text, "Self").links
    got = [(ln.target, ln.target_key, ln.heading, ln.block, ln.alias, ln.embed, ln.line) for ln in links]
    assert got == [
        ("Plain", "plain", None, None, None, False, 1),
        ("Target", "target", None, None, "Alias text", False, 1),
        ("Target", "target", "Heading", None, None, False, 1),
        ("Target", "target", None, "block1", None, False, 1),
        ("Target", "target", None, "block2", None, False, 1),
        ("folder/Sub Note", "folder/sub note", None, None, None, False, 1),
        ("Target", "target", "Heading", None, "both", False, 1),
        ("Note.md", "note", None, None, None, False, 1),
        ("Self", "self", "Local heading", None, None, False, 1),
        ("image.png", "image.png", None, None, None, True, 2),
        ("Embedded", "embedded", "Section", None, None, True, 2),
    ]


def test_escaped_pipe_in_table_link() -> None:
    [link] = parse_note("| a | b |\n|---|---|\n| [[Target\\|shown]] | x |\n", "T").links
    assert (link.target, link.alias, link.line) == ("Target", "shown", 3)


def test_link_key() -> None:
    assert link_key(" /Folder\\Sub/Note.MD ") == "folder/sub/note"
    assert link_key("Café ☕ Notes") == "café ☕ notes"


def test_links_in_frontmatter_properties() -> None:
    text = "---\nup: '[[Home]]'\nrelated:\n  - '[[A]]'\n  - nested: '[[B|bee]]'\ntags: [x]\n---\nbody [[C]]\n"
    links = parse_note(text, "T").links
    assert [(ln.target, ln.alias, ln.in_frontmatter) for ln in links] == [
        ("Home", None, True),
        ("A", None, True),
        ("B", "bee", True),
        ("C", None, False),
    ]
    assert links[-1].line == 8


def test_links_in_headings_quotes_and_lists_count() -> None:
    text = "# About [[Heading Link]]\n\n> quoted [[Quoted]]\n\n- item [[Listed]]\n  - nested [[Nested]]\n"
    assert targets(text) == ["Heading Link", "Quoted", "Listed", "Nested"]


def test_link_line_numbers_after_frontmatter() -> None:
    text = "---\na: 1\nb: 2\n---\nline five\n\nline seven [[Seven]]\n"
    [link] = parse_note(text, "T").links
    assert link.line == 7


# --- headings ------------------------------------------------------------------------------------------


def test_atx_and_setext_headings() -> None:
    text = "Top\n===\n\nSecond\n---\n\n# ATX one #\n\n### Three ###\n\n####### not a heading\n\n```\n# in code\n```\n"
    hs = parse_note(text, "T").headings
    assert [(h.level, h.text, h.line) for h in hs] == [
        (1, "Top", 1),
        (2, "Second", 4),
        (1, "ATX one", 7),
        (3, "Three", 9),
    ]


def test_thematic_break_is_not_a_heading() -> None:
    assert parse_note("para\n\n---\n\nmore", "T").headings == []


# --- the summary block -----------------------------------------------------------------------------------

BODY = "# Hello\n\nSome text [[Linked]] #tagged\n"


def test_summary_encode_decode_roundtrip_fresh() -> None:
    encoded = summary.encode(BODY, "  A short summary.\n")
    assert encoded.startswith("<!-- kms:summary hash=")
    assert encoded.endswith(BODY)
    s, rest = summary.decode(encoded)
    assert s is not None and rest == BODY
    assert (s.state, s.text, s.hash) == ("fresh", "A short summary.", summary.body_hash(BODY))
    assert s.to_dict() == {"state": "fresh", "hash": summary.body_hash(BODY), "text": "A short summary."}


def test_summary_goes_stale_when_body_changes() -> None:
    encoded = summary.encode(BODY, "Summary")
    s, rest = summary.decode(encoded + "A new paragraph.\n")
    assert s is not None and s.state == "stale"
    assert rest == BODY + "A new paragraph.\n"


def test_summary_trailing_whitespace_and_crlf_do_not_make_it_stale() -> None:
    encoded = summary.encode(BODY, "Summary")
    trailing, _ = summary.decode(encoded + "\n\n")
    assert trailing is not None and trailing.state == "fresh"
    s, rest = summary.decode(encoded.replace("\n", "\r\n"))
    assert s is not None and s.state == "fresh" and s.text == "Summary"
    assert rest == BODY.replace("\n", "\r\n")


def test_no_summary_is_none() -> None:
    assert summary.decode(BODY) == (None, BODY)
    # not the first thing in the body: not a summary block
    later = "intro\n" + summary.encode(BODY, "x")
    assert summary.decode(later) == (None, later)


def test_encode_replaces_an_existing_block() -> None:
    once = summary.encode(BODY, "First")
    twice = summary.encode(once, "Second")
    assert twice.count("kms:summary hash=") == 1
    s, rest = summary.decode(twice)
    assert s is not None
    assert s.text == "Second" and rest == BODY


def test_summary_text_cannot_close_the_comment() -> None:
    encoded = summary.encode(BODY, "evil --> <!-- text")
    s, rest = summary.decode(encoded)
    assert s is not None
    assert rest == BODY and s.state == "fresh"
    assert "-->" not in s.text and "<!--" not in s.text


def test_hash_mismatch_and_missing_hash_are_stale() -> None:
    s, rest = summary.decode("<!-- kms:summary hash=000000000000 -->\nOld\n<!-- /kms:summary -->\nbody\n")
    assert s is not None
    assert (s.state, s.text, rest) == ("stale", "Old", "body\n")
    s, _ = summary.decode("<!-- kms:summary -->\nNo hash\n<!-- /kms:summary -->\nbody\n")
    assert s is not None
    assert s.state == "stale" and s.hash == ""


@pytest.mark.parametrize("fm", ["", "---\ntags: [a]\n---\n", "---\r\ntags: [a]\r\n---\r\n"])
def test_parser_strips_summary_block_from_body(fm: str) -> None:
    text = fm + summary.encode(BODY, "The gist.")
    p = parse_note(text, "T")
    assert p.body == BODY
    assert "kms:summary" not in p.body
    assert p.summary is not None and p.summary.state == "fresh" and p.summary.text == "The gist."
    assert "tagged" in p.tags
    # line numbers still count the lines of the frontmatter and of the block
    offset = fm.count("\n") + 3
    assert [h.line for h in p.headings] == [1 + offset]
    assert [ln.line for ln in p.links] == [3 + offset]


def test_summary_block_with_blank_lines_before_it() -> None:
    p = parse_note("---\na: 1\n---\n\n" + summary.encode(BODY, "Gist"), "T")
    assert p.summary is not None and p.summary.state == "fresh"
    assert p.body == BODY


def test_line_numbers_of_headings_wikilinks_and_markdown_links_in_any_order() -> None:
    """Lines are counted incrementally (``markdown.LineCounter``): the Markdown links are read after the
    wiki-links and headings, so the offsets asked for go back, and each must still get its own line."""
    text = (
        "---\ntitle: T\n---\n[early](Early.md)\n\n# One\ntext [[Wiki]] and [[Other]]\n\n"
        "## Two\n[late](sub/Late.md) [[Last]]\n"
    )
    p = parse_note(text, "T", path="n.md")
    assert [(h.text, h.line) for h in p.headings] == [("One", 6), ("Two", 9)]
    assert sorted((ln.target, ln.line) for ln in p.links) == [
        ("Early.md", 4),
        ("Last", 10),
        ("Other", 7),
        ("Wiki", 7),
        ("sub/Late.md", 10),
    ]
