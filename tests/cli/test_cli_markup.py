"""Note titles, paths, property values and the person's arguments are printed as they are, never read as
Rich markup: ``[/bold]`` in a title raised a traceback, ``[[People]]`` was shown as ``[]`` and
``Note [red]x.md`` as ``Note x.md`` (kmscli/output.py: ``Table``, ``report_error``)."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.cli import kms, ok, refused, said


@pytest.fixture
def vault(tmp_path: Path) -> Path:
    root = tmp_path / "mk"
    root.mkdir()
    (root / "plan.md").write_text('---\ntitle: "Plan [/bold] v2"\ncategories: ["[[People]]"]\n---\nSee [[Hub]].\n')
    (root / "Hub.md").write_text("Hub note.\n")
    (root / "Note [red]x.md").write_text("Mentions [[Hub]] in colour.\n")
    ok(kms("vault", "add", str(root), "--name", "mk"))
    return root


def shown(*args: str) -> str:
    result = ok(kms(*args))
    assert "Traceback" not in result.stdout + result.stderr
    return said(result.stdout)


def test_note_text_with_markup_is_shown_literally(vault: Path) -> None:
    out = shown("search", "hub")
    assert "Plan [/bold] v2 mk:plan.md" in out and "Note [red]x mk:Note [red]x.md" in out
    out = shown("recent")
    assert "Plan [/bold] v2" in out and "mk:Note [red]x.md" in out and "Note [red]x " in out
    out = shown("backlinks", "Hub")
    assert "Plan [/bold] v2 plan.md" in out and "Note [red]x Note [red]x.md" in out
    out = shown("properties")
    assert "[[people]] (1)" in out and "plan [/bold] v2 (1)" in out
    assert shown("show", "plan").startswith("Plan [/bold] v2 mk:plan.md")
    assert shown("show", "mk:Note [red]x.md").startswith("Note [red]x mk:Note [red]x.md")
    assert "Hidden: Note [red]x (Note [red]x.md)" in shown("hide", "mk:Note [red]x.md")


@pytest.mark.parametrize(
    ("args", "code"),
    [
        (("show", "[/bold]"), 3),
        (("hide", "[/bold]"), 3),
        (("history", "[/bold]"), 3),
        (("diff", "[/bold]"), 3),
        (("vault", "remove", "[/bold]"), 3),
        (("trash", "restore", "[/bold]"), 3),
        (("restore", "[/bold]", "--version", "1"), 3),
        (("search", "x", "-w", "[/bold]"), 2),
        (("vault", "add", "[/bold]"), None),
        (("config", "get", "[/bold]"), None),
    ],
)
def test_an_argument_with_markup_is_echoed_in_a_one_line_error(vault: Path, args: tuple[str, ...], code: int) -> None:
    result = refused(kms(*args), code)
    assert "[/bold]" in said(result.stderr), result.stderr
    assert "Traceback" not in result.stdout + result.stderr


def test_brackets_in_an_argument_are_not_eaten_from_the_error(vault: Path) -> None:
    assert "'notes [draft]'" in said(refused(kms("show", "notes [draft]"), 3).stderr)
