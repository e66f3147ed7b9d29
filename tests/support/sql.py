"""Typed reads of a real index for assertions: apsw types a row as a tuple of any SQLite value, which
says nothing about a query's shape; these say what the test expects of it."""

from __future__ import annotations

from typing import Any, cast

import apsw


def pairs(conn: apsw.Connection, sql: str, params: tuple[Any, ...] = ()) -> dict[Any, Any]:
    """A two-column query as a dict, first column to second."""
    return dict(cast(list[tuple[Any, Any]], conn.execute(sql, params).fetchall()))


def value(conn: apsw.Connection, sql: str, params: tuple[Any, ...] = ()) -> Any:
    """The first column of the query's first row (``IndexError`` when it returns none)."""
    return conn.execute(sql, params).fetchall()[0][0]


def tuples(conn: apsw.Connection, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """The query's rows, their values as the test expects them to be."""
    return conn.execute(sql, params).fetchall()
