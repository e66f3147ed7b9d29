"""The parser and the dialect rules, form by form (issue 13): Markdown links, attachments, Dendron,
Foam and Logseq, frontmatter titles and dates."""

from __future__ import annotations

from pathlib import Path

import pytest

from server.errors import KmsError
from server.vault import dialects
from server.vault.dialects import DENDRON, FOAM, LOGSEQ, OBSIDIAN, detect, stem_title
from server.vault.parser import Link, parse_note


def links(text: str, path: str = "Note.md", dialect: dialects.Dialect = OBSIDIAN) -> list[Link]:
    return parse_note(text, "Note", dialect, path).links


def keys(text: str, path: str = "Note.md", dialect: dialects.Dialect = OBSIDIAN) -> list[tuple]:
    return [(ln.target_key, ln.alt_key) for ln in links(text, path, dialect)]


# --- Markdown links ------------------------------------------------------------------------------------


def test_markdown_link_forms_resolve_relative_to_the_note() -> None:
    text = (
        "[a](Other%20note.md) [b](../f/Other.md#Heading) [c](<Other note.md>) [d](Plain) "
        "[e](./Here.md#^blk) [f](/Root/Abs.md)\n"
    )
    got = links(text, "notes/sub/Linking.md")
    assert [(ln.target, ln.target_key, ln.heading, ln.block, ln.alias) for ln in got] == [
        ("Other note.md", "notes/sub/other note", None, None, "a"),
        ("../f/Other.md", "notes/f/other", "Heading", None, "b"),
        ("Other note.md", "notes/sub/other note", None, None, "c"),
        ("Plain", "notes/sub/plain", None, None, "d"),
        ("./Here.md", "notes/sub/here", None, "blk", "e"),
        ("/Root/Abs.md", "root/abs", None, None, "f"),
    ]
    # written without ./ or ../, Obsidian also reads it from the vault root, then by name
    assert [ln.alt_key for ln in got] == ["other note", None, "other note", "plain", None, None]


def test_external_urls_anchors_and_code_are_not_links() -> None:
    text = (
        "[web](https://x.org/a.md) [mail](mailto:a@b.c) [app](obsidian://open?file=X) <https://auto.link> "
        "[here](#Heading) [proto](//cdn.x/y.md) `[code](Code.md)`\n\n```\n[fenced](Fenced.md)\n```\n"
        "<!-- [commented](Hidden.md) -->\n"
    )
    assert links(text) == []


def test_images_are_embeds_and_reference_links_count() -> None:
    text = '![pic](img/pic.png) and [ref][r]\n\n[r]: docs/Ref.md "Ref"\n'
    got = links(text, "a/N.md")
    assert [(ln.target_key, ln.embed) for ln in got] == [("a/img/pic.png", True), ("a/docs/ref", False)]


def test_a_link_leaving_the_vault_names_nothing_in_it() -> None:
    [ln] = links("[out](../../x.md)", "a/N.md")
    assert ln.target_key == "../x"


def test_wiki_link_to_an_attachment_keeps_its_extension() -> None:
    assert [(ln.target_key, ln.embed) for ln in links("![[pic.png]] [[file.pdf]] [[Note.md]]")] == [
        ("pic.png", True),
        ("file.pdf", False),
        ("note", False),
    ]


def test_the_alias_part_of_a_link_is_never_a_tag() -> None:
    p = parse_note("[[Target|#nottag]] [text #nottag2](Other.md) #real", "N")
    assert p.tags == ["real"]


# --- titles and dates, every dialect -----------------------------------------------------------------


@pytest.mark.parametrize("dialect", [OBSIDIAN, DENDRON, FOAM, LOGSEQ])
def test_frontmatter_title_is_shown_and_the_stem_stays_a_name(dialect: dialects.Dialect) -> None:
    p = parse_note("---\ntitle: Lookup\n---\nbody", "dendron.topic.lookup", dialect, "dendron.topic.lookup.md")
    assert p.title == "Lookup" and p.names == ["dendron.topic.lookup"]
    assert parse_note("body", "plain", dialect, "plain.md").names == []


def test_obsidian_dates_come_from_updated_and_created() -> None:
    p = parse_note("---\ncreated: 2024-01-02\nupdated: 2024-03-01T10:00:00Z\n---\n", "N")
    assert (p.created, p.updated) == (1704153600.0, 1709287200.0)
    assert parse_note("---\nupdated: someday\n---\n", "N").updated is None


def test_obsidian_ignores_cssclasses_and_reads_alias_and_tag() -> None:
    p = parse_note("---\ncssclasses: [wide]\nalias: Nick\ntag: one\n---\n", "N")
    assert (p.aliases, p.tags) == (["Nick"], ["one"])


# --- Dendron ---------------------------------------------------------------------------------------------


def test_dendron_alias_first_anchor_and_cross_vault() -> None:
    got = links(
        "[[the parent|dendron.topic]] [[dendron.topic.schema#Usage]] [[dendron://team/shared.glossary]] "
        "[[Shown|dendron://team/a.b#H]]",
        "dendron.topic.lookup.md",
        DENDRON,
    )
    assert [(ln.target, ln.alias, ln.heading, ln.vault) for ln in got] == [
        ("dendron.topic", "the parent", None, None),
        ("dendron.topic.schema", None, "Usage", None),
        ("shared.glossary", None, None, "team"),
        ("a.b", "Shown", "H", "team"),
    ]
    # the same text in Obsidian: target first
    assert links("[[the parent|dendron.topic]]")[0].target == "the parent"


def test_dendron_tags_are_kept_whole_and_obsidian_cuts_at_the_dot() -> None:
    text = "#role.bugcatcher and #a.b.c. end"
    assert parse_note(text, "N", DENDRON).tags == ["role.bugcatcher", "a.b.c"]
    assert parse_note(text, "N", OBSIDIAN).tags == ["role", "a"]


def test_dendron_id_desc_and_epoch_millisecond_dates() -> None:
    fm = (
        "---\nid: 9a2lookup\ntitle: Lookup\ndesc: Find notes fast\nupdated: 1710000000000\n"
        "created: 1690000000000\n---\n"
    )
    p = parse_note(fm, "dendron.topic.lookup", DENDRON, "dendron.topic.lookup.md")
    assert (p.note_id, p.desc) == ("9a2lookup", "Find notes fast")
    assert (p.created, p.updated) == (1690000000.0, 1710000000.0)
    assert parse_note(fm, "x", OBSIDIAN).note_id is None  # an id names a note only in Dendron


def test_dendron_hierarchy_parent() -> None:
    assert dialects.parent(DENDRON, "a.b.c") == "a.b"
    assert dialects.parent(DENDRON, "root") is None
    assert dialects.parent(OBSIDIAN, "a.b.c") is None


# --- Foam ------------------------------------------------------------------------------------------------


def test_foam_reference_definitions_give_a_wiki_link_its_file() -> None:
    text = 'read the [[guide]] and [[inbox]]\n\n[guide]: docs/getting-started.md "Getting Started"\n'
    assert keys(text, "readme.md", FOAM) == [("docs/getting-started", "guide"), ("inbox", None)]
    assert keys(text, "readme.md", OBSIDIAN) == [("guide", None), ("inbox", None)]  # a plain definition elsewhere


# --- Logseq ----------------------------------------------------------------------------------------------


def test_logseq_properties_tags_and_bracket_tags() -> None:
    text = (
        "title:: Project Phoenix\ntags:: project, [[big idea]]\nalias:: Phoenix, PX\nstatus:: active\n\n"
        "- kickoff #[[multi word tag]] #meeting\n- later:: not a page property\n"
    )
    p = parse_note(text, "Project Phoenix", LOGSEQ, "pages/Project Phoenix.md")
    assert p.title == "Project Phoenix"
    assert p.tags == ["project", "big-idea", "multi-word-tag", "meeting"]
    assert p.aliases == ["Phoenix", "PX"]
    assert p.frontmatter is not None and p.frontmatter["status"] == "active" and "later" not in p.frontmatter
    assert [ln.target for ln in p.links] == ["big idea", "multi word tag"]
    assert parse_note(text, "N", OBSIDIAN).frontmatter is None  # elsewhere these are just lines


def test_logseq_block_ids_and_references() -> None:
    uid = "65a1b2c3-d4e5-4f60-8a9b-0c1d2e3f4a5b"
    text = (
        f"- a block\n  id:: {uid.upper()}\n- see (({uid}))\n- {{{{embed (({uid}))}}}}\n"
        f"- code `(({uid}))` and a fence\n```\n(({uid}))\n```\n- not an id:: 123\n"
    )
    p = parse_note(text, "Page", LOGSEQ)
    assert p.block_ids == [uid]
    assert [(ln.target, ln.block, ln.embed, ln.line) for ln in p.links] == [
        (f"(({uid}))", uid, False, 3),
        (f"(({uid}))", uid, True, 4),
    ]
    other = parse_note(text, "Page", OBSIDIAN)  # only Logseq reads them so
    assert other.block_ids == [] and other.links == []


def test_logseq_namespaces_and_journals_by_file_name() -> None:
    assert stem_title(LOGSEQ, "pages/Work___Roadmap.md") == ("Work/Roadmap", ["Work___Roadmap"])
    assert stem_title(LOGSEQ, "pages/Work%2FTeam.md") == ("Work/Team", ["Work%2FTeam"])
    assert stem_title(LOGSEQ, "journals/2024_01_15.md") == ("Jan 15th, 2024", ["2024-01-15", "2024_01_15"])
    assert stem_title(LOGSEQ, "journals/2024_02_31.md")[0] == "2024_02_31"  # no such day
    assert stem_title(OBSIDIAN, "pages/Work___Roadmap.md") == ("Work___Roadmap", [])


# --- detection --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("marker", "expected"),
    [
        ("dendron.yml", "dendron"),
        ("logseq/config.edn", "logseq"),
        (".foam/x", "foam"),
        (".vscode/foam.json", "foam"),
        ("notes.md", "obsidian"),
    ],
)
def test_detect_by_marker_file(tmp_path: Path, marker: str, expected: str) -> None:
    (tmp_path / marker).parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / marker).write_text("x")
    assert detect(tmp_path).name == expected


def test_unknown_dialect_is_a_clear_error() -> None:
    with pytest.raises(KmsError) as e:
        dialects.get("roam")
    assert e.value.kind == "invalid-input" and "obsidian, dendron, foam, logseq" in e.value.message
    assert dialects.get(None) is OBSIDIAN and dialects.get(" Dendron ") is DENDRON
