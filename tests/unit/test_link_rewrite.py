"""Rename and move rewrite Markdown links in the style each was written (issue 13, a leftover of 15):
relative to the linking note, from the vault root or by name; percent-encoded or in angle brackets;
with or without ``.md``; anchors kept; a moved note's own relative links follow it."""

from __future__ import annotations

from typing import Any

import pytest

from server.vault.links import retarget, rewrite_links
from server.vault.parser import parse_note


def rename(text: str, folder: str, old: str, new: str, **kw: Any) -> str:
    return rewrite_links(text, retarget(old, new), folder=folder, **kw)[0]


@pytest.mark.parametrize(
    ("before", "after"),
    [
        ("[t](Other%20note.md)", "[t](New%20name.md)"),
        ("[t](<Other note.md>)", "[t](<New name.md>)"),
        ("[t](Other%20note.md#Some%20heading)", "[t](New%20name.md#Some%20heading)"),
        ("[t](<Other note.md#Part>)", "[t](<New name.md#Part>)"),
        ("[t](./Other%20note.md)", "[t](./New%20name.md)"),
        ("[t](Other%20note)", "[t](New%20name)"),  # without .md where the dialect allows
        ('![i](Other%20note.md "a title")', '![i](New%20name.md "a title")'),
        ("[t](Other note.md)", "[t](Other note.md)"),  # not a CommonMark link: left alone
    ],
)
def test_rename_keeps_the_style_of_a_link_in_the_same_folder(before: str, after: str) -> None:
    assert rename(before + "\n", "f", "f/Other note.md", "f/New name.md") == after + "\n"


def test_rename_from_other_folders_and_the_vault_root() -> None:
    text = (
        "[rel](../f/Other%20note.md#H) [root](/f/Other%20note.md) [vault](f/Other%20note.md) "
        "[name](Other%20note.md) [else](../f/Unrelated.md) [web](https://x.org/f/Other%20note.md)\n"
    )
    assert rename(text, "g", "f/Other note.md", "f/New name.md") == (
        "[rel](../f/New%20name.md#H) [root](/f/New%20name.md) [vault](f/New%20name.md) "
        "[name](New%20name.md) [else](../f/Unrelated.md) [web](https://x.org/f/Other%20note.md)\n"
    )


def test_move_rewrites_relative_paths_from_each_linking_note() -> None:
    text = "[a](../notes/Target.md) [b](<../notes/Target.md#Part>) [c](Target.md)\n"
    assert rename(text, "docs", "notes/Target.md", "archive/2024/Target.md") == (
        "[a](../archive/2024/Target.md) [b](<../archive/2024/Target.md#Part>) [c](Target.md)\n"
    )


def test_a_link_by_name_to_another_file_next_to_the_linking_note_is_left() -> None:
    text = "[here](Target.md) [there](Target)\n"
    beside = {"b/Target.md"}.__contains__  # b has a Target of its own: these links name it, not a/Target
    assert rewrite_links(text, retarget("a/Target.md", "a/Goal.md", exists=beside), folder="b")[0] == text
    nothing = set[str]().__contains__
    assert rewrite_links(text, retarget("a/Target.md", "a/Goal.md", exists=nothing), folder="b")[0] == (
        "[here](Goal.md) [there](Goal)\n"
    )


def test_a_space_in_a_new_name_is_encoded_when_the_link_was_plain() -> None:
    assert rename("[t](Old.md)\n", "", "Old.md", "Brand new.md") == "[t](Brand%20new.md)\n"


def test_reference_definitions_wiki_links_and_code_in_one_note() -> None:
    text = (
        "See [[Target]], [ref][t] and [inline](notes/Target.md).\n\n`[code](notes/Target.md)`\n\n"
        '[t]: notes/Target.md "Target"\n'
    )
    assert rename(text, "", "notes/Target.md", "notes/Goal.md") == (
        "See [[Goal]], [ref][t] and [inline](notes/Goal.md).\n\n`[code](notes/Target.md)`\n\n"
        '[t]: notes/Goal.md "Target"\n'
    )


def test_a_moved_note_keeps_its_own_relative_links_pointing_at_the_same_files() -> None:
    text = "[up](../Home.md) [side](./Beta.md) [self](Alpha.md#Top) [vault](Projects/Gamma.md) [web](https://x.y)\n"
    exists = {"Home.md", "Projects/Beta.md", "Projects/Alpha.md"}.__contains__
    got = rewrite_links(
        text,
        retarget("Projects/Alpha.md", "Archive/2024/Alpha.md", exists=exists),
        folder="Projects",
        new_folder="Archive/2024",
    )[0]
    assert got == (
        "[up](../../Home.md) [side](../../Projects/Beta.md) [self](Alpha.md#Top) "
        "[vault](Projects/Gamma.md) [web](https://x.y)\n"
    )  # Projects/Gamma.md: written from the root


def test_dendron_alias_first_links_rewrite_their_target() -> None:
    text = "[[the topic|dendron.topic]] [[dendron.topic#Usage]] [[dendron.topic|Shown]]\n"
    got = rewrite_links(text, retarget("dendron.topic.md", "dendron.subject.md"), alias_first=True)[0]
    # the last one's target is Shown (alias first): not a link to the renamed note
    assert got == "[[the topic|dendron.subject]] [[dendron.subject#Usage]] [[dendron.topic|Shown]]\n"


def test_every_rewritten_link_still_parses_to_the_new_note() -> None:
    text = "[a](Old%20one.md) [b](<Old one.md#H>) ![c](./Old%20one.md) [[Old one]]\n"
    new = rename(text, "n", "n/Old one.md", "n/New one.md")
    assert {ln.target_key for ln in parse_note(new, "X", path="n/X.md").links} == {"n/new one", "new one"}
