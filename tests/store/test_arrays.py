"""PostgreSQL arrays bound as one literal (``dialect.pg_array``, cast by the statement):
every value comes back from the real server as it went in, whatever its characters."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from remindkit.models import WaitFor
from remindkit.store import open_store
from remindkit.store.dialect import pg_array

TEXTS = [
    "plain",
    "a,b",
    "{braces}",
    " spaced ",
    '"quoted"',
    "back\\slash",
    "end\\",
    '\\"',
    "NULL",
    "null",
    "",
    "ünïcødé ✓",
    "tab\tnew\nline",
    None,
    str(WaitFor.IDLE),
    WaitFor.SESSION,
]
_NO_NULL = [v for v in TEXTS if v is not None]


@pytest.fixture
def db(pg_schema_url: str, settings: Any) -> Iterator[Any]:
    """A store's database on the real PostgreSQL server (the literals are its syntax)."""
    store = open_store(pg_schema_url, settings=settings)
    try:
        yield store.claims.db
    finally:
        store.close()


@pytest.mark.parametrize(
    ("of", "values", "back"),
    [
        ("text", TEXTS, [None if v is None else str(v) for v in TEXTS]),
        # without NULLs the values are joined at once, then escaped if any needs it
        ("text", _NO_NULL, [str(v) for v in _NO_NULL]),
        ("text", ["a", "b", WaitFor.IDLE], ["a", "b", "idle"]),
        ("text", ["a", 'b"', "c"], ["a", 'b"', "c"]),
        ("text", ["a\\", "b"], ["a\\", "b"]),
        ("text", [None, None], [None, None]),
        ("bigint", [None], [None]),
        ("bigint", [1, None, -5, 2**40, 0], [1, None, -5, 2**40, 0]),
        ("integer", [3, 1, 2], [3, 1, 2]),
        ("boolean", [True, False, None], [True, False, None]),
        ("text", [], []),
        ("integer", [], []),
    ],
)
def test_an_array_literal_comes_back_as_it_went_in(db, of, values, back):
    with db.read() as conn:
        (row,) = db.dialect.fetch(conn, f"SELECT %s::{of}[]", [pg_array(values, of)])
    assert row[0] == back


def test_unnest_keeps_rows_aligned_and_nulls_null(db):
    """The claim and outcome statements unnest several arrays side by side."""
    ids = [5, 6, 7, 8]
    texts = ["x", None, "y,z", '"w"']
    sql = "SELECT * FROM unnest(%s::integer[], %s::text[]) ORDER BY 1"
    with db.read() as conn:
        rows = db.dialect.fetch(conn, sql, [pg_array(ids, "integer"), pg_array(texts, "text")])
    assert [tuple(r) for r in rows] == list(zip(ids, texts, strict=True))


def test_the_literal_is_what_postgresql_documents():
    assert pg_array([1, None, 3], "integer") == "{1,NULL,3}"
    assert pg_array(['a"b', "c\\d", None], "text") == '{"a\\"b","c\\\\d",NULL}'
    assert pg_array([True, False], "boolean") == "{t,f}"
