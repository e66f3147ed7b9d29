"""Shared CLI plumbing: the DB connection, JSON output and turning core errors into exits."""

from __future__ import annotations

import contextlib
import json
import os
import sys
from collections.abc import Iterator
from typing import Annotated, Any

import apsw
import typer
from rich.console import Console, ConsoleOptions, RenderableType, RenderResult
from rich.markup import escape
from rich.table import Table as RichTable
from rich.text import Text
from typer.core import TyperGroup

from server.config.session_contract import SessionConfigError
from server.errors import KmsError
from server.store.db import connect, default_db_path
from server.store.health import BUSY, UNUSABLE, database_error
from server.store.registrations import read_registrations
from server.vault.registry import get_vault

console = Console()
err_console = Console(stderr=True)

EXIT_FOR_KIND = {"invalid-input": 2, "not-found": 3, "database": 4, "disk-full": 4}
EXIT_INTERRUPTED = 130  # a Ctrl-C kms stopped at: what a shell shows for one

JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")]
VaultOpt = Annotated[str | None, typer.Option("--vault", help="Only this vault (name).")]
LimitOpt = Annotated[int, typer.Option("--limit", "-n", min=1, max=500, help="How many to show.")]


def open_db(*, create: bool = False) -> apsw.Connection:
    """The database. Only a command that registers something (``kms vault add``) creates it: any other
    finding none says where it looked, so a mistyped ``KMS_DB_PATH`` never reads as an index without
    vaults, nor makes a database and its folders where none was meant to be."""
    path = default_db_path()
    missing = not path.exists() and not path.parent.is_file()  # under a file: connect says it cannot be
    if missing and not create and read_registrations(path):
        missing = False  # a lost database whose vaults are known: created anew with them (docs/recovery.md)
    if missing and not create:
        where = "KMS_DB_PATH" if os.environ.get("KMS_DB_PATH") else "the default place; KMS_DB_PATH sets another"
        raise KmsError("not-found", f"no kms database at {path} ({where}); `kms vault add FOLDER` creates it")
    return connect(path)


def vault_id(conn: apsw.Connection, name: str | None) -> int | None:
    """The id of the vault a ``--vault`` option names (``not-found`` naming the vaults there are)."""
    if name is None:
        return None
    return get_vault(conn, name).id


def print_verbatim(text: str, *, end: str = "") -> None:
    """Text a person copies or pipes as it is (a diff, a preview): never wrapped at the console's width,
    never read as markup. A diff cut at 80 columns left a half line without its ``+``/``-`` prefix, so
    ``kms diff NOTE > d.patch`` did not apply. Written past Rich, which would also expand the tab that
    ends a diff header's file name."""
    console.file.write(text + end)


def print_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2, ensure_ascii=False, default=str) + "\n")


@contextlib.contextmanager
def cli_errors() -> Iterator[None]:
    """Core errors become a clear message and a non-zero exit, never a traceback."""
    try:
        yield
    except KmsError as exc:
        raise report_error(exc) from None


class Table(RichTable):
    """A Rich table whose text cells (and title) are shown as they are, never read as markup: they are
    note titles, paths, property values and names, where ``[/bold]`` or ``[[People]]`` is the user's text
    (markup there raised a traceback or was silently eaten). Style a cell with a ``Text`` instead.

    A table too wide for the terminal (or for 80 columns in a pipe) is shown as one block a row, each value
    whole on a line of its own: Rich shrank its columns and cut the values a person has to type next
    (``kepano-obsidi…`` for a vault name every ``--vault`` needs), or broke them across lines."""

    def __init__(self, *headers: Any, title: str | None = None, **kwargs: Any) -> None:
        super().__init__(*headers, title=Text(title) if title is not None else None, **kwargs)
        self.given_rows: list[tuple[RenderableType | None, ...]] = []

    def add_row(self, *renderables: RenderableType | None, **kwargs: Any) -> None:
        cells = tuple(Text(r) if isinstance(r, str) else r for r in renderables)
        self.given_rows.append(cells)
        super().add_row(*cells, **kwargs)

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        natural = super().__rich_measure__(console, options.update_width(UNBOUNDED)).maximum
        if natural <= options.max_width or not self.given_rows:
            yield from super().__rich_console__(console, options)
            return
        if self.title is not None:
            yield self.title
        names = [" ".join(str(column.header).split()) for column in self.columns]
        for number, (first, *rest) in enumerate(self.given_rows):
            if number:
                yield Text()
            yield plain(first, "bold") if isinstance(first, Text | None) else first
            for name, cell in zip(names[1:], rest, strict=False):
                if not isinstance(cell, Text | None):
                    yield cell
                    continue
                label, value = Text(f"  {name}: ", "dim"), plain(cell)
                if label.cell_len + value.cell_len <= options.max_width:
                    yield Text.assemble(label, value)
                else:  # on a line of its own, unindented: folded only where no line could hold it
                    yield label
                    yield value


UNBOUNDED = 1 << 20  # a width no table reaches: its natural width, each value on one line


def plain(cell: Text | None, style: str = "") -> Text:
    """A cell's text, folded (never cut, never broken at a hyphen or space) if no line can hold it."""
    text = cell.copy() if cell is not None else Text("")
    text.no_wrap, text.overflow, text.end = False, "fold", "\n"
    if style:
        text.stylize(style)
    return text


def report_error(exc: KmsError) -> typer.Exit:
    """The one line a core error prints; its message (often the user's own argument) is shown as is."""
    say_error(exc.kind, exc.message)
    return typer.Exit(EXIT_FOR_KIND.get(exc.kind, 1))


def say_error(kind: str, message: str) -> None:
    """Every error kms prints, in one voice: ``error (KIND): message`` on stderr (docs/cli.md)."""
    err_console.print(f"[bold red]error[/] ({kind}): {escape(message)}", highlight=False, soft_wrap=True)


class KmsGroup(TyperGroup):
    """The root command: a core error that no command turned into output (a damaged or unreachable
    database found by any command, a ``KMS_*`` variable that does not fit) ends as one line and an exit
    code, never a traceback."""

    def invoke(self, ctx: Any) -> Any:  # (Typer's own vendored click Context)
        try:
            return super().invoke(ctx)
        except KmsError as exc:
            raise report_error(exc) from None
        except SessionConfigError as exc:  # a KMS_* variable that does not fit (kms serve, kms claude, ...)
            raise report_error(KmsError("invalid-input", str(exc))) from None
        except (*UNUSABLE, *BUSY) as exc:
            raise report_error(database_error(exc, default_db_path())) from None
