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
from rich.console import Console, RenderableType
from rich.markup import escape
from rich.table import Table as RichTable
from rich.text import Text
from typer.core import TyperGroup

from server.errors import KmsError
from server.store.registrations import read_registrations
from server.store.db import connect, default_db_path

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
    from server.vault.registry import get_vault

    return get_vault(conn, name).id


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
    (markup there raised a traceback or was silently eaten). Style a cell with a ``Text`` instead."""

    def __init__(self, *headers: Any, title: str | None = None, **kwargs: Any) -> None:
        super().__init__(*headers, title=Text(title) if title is not None else None, **kwargs)

    def add_row(self, *renderables: RenderableType | None, **kwargs: Any) -> None:
        super().add_row(*(Text(r) if isinstance(r, str) else r for r in renderables), **kwargs)


def report_error(exc: KmsError) -> typer.Exit:
    """The one line a core error prints; its message (often the user's own argument) is shown as is."""
    err_console.print(f"[bold red]error[/] ({exc.kind}): {escape(exc.message)}", highlight=False, soft_wrap=True)
    return typer.Exit(EXIT_FOR_KIND.get(exc.kind, 1))


class KmsGroup(TyperGroup):
    """The root command: a core error that no command turned into output (a damaged or unreachable
    database found by any command, a ``KMS_*`` variable that does not fit) ends as one line and an exit
    code, never a traceback."""

    def invoke(self, ctx: Any) -> Any:  # (Typer's own vendored click Context)
        from server.config.session import SessionConfigError
        from server.store.health import BUSY, UNUSABLE, database_error

        try:
            return super().invoke(ctx)
        except KmsError as exc:
            raise report_error(exc) from None
        except SessionConfigError as exc:  # a KMS_* variable that does not fit (kms serve, kms claude, ...)
            raise report_error(KmsError("invalid-input", str(exc))) from None
        except (*UNUSABLE, *BUSY) as exc:
            raise report_error(database_error(exc, default_db_path())) from None
