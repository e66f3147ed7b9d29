"""kmscli.output.Table: a table that fits is drawn as a table; one too wide is shown a row a block, every value
whole (the CLI's console width is fixed when it is made, so this is checked on consoles of known widths)."""

from __future__ import annotations

import io

from rich.console import Console

from kmscli.output import Table

NAME = "kepano-obsidian-help-vault-with-a-long-name"
ROOT = "/home/someone/Documents/notes/a-folder-name-long-enough-to-need-a-line-of-its-own/and-deeper-still"


def shown(width: int) -> str:
    table = Table("name", "root", "notes")
    table.add_row(NAME, ROOT, "12")
    out = io.StringIO()
    Console(file=out, width=width, color_system=None).print(table)
    return out.getvalue()


def test_a_table_with_room_is_a_table() -> None:
    wide = shown(400)
    assert "┃ name" in wide and NAME in wide and ROOT in wide


def test_a_table_without_room_is_a_block_a_row_with_every_value_whole() -> None:
    narrow = shown(80).splitlines()
    assert narrow[0] == NAME and "  notes: 12" in narrow and "…" not in "".join(narrow)
    at = narrow.index("  root: ") + 1
    assert "".join(narrow[at : at + 2]) == ROOT and max(map(len, narrow)) <= 80
