"""What differs between SQLite and PostgreSQL, in one place.

SQLite serialises writers (a write transaction holds the database's write lock from
``BEGIN IMMEDIATE``, see ``db.py``), so row locks and advisory locks are no-ops
there; PostgreSQL locks rows ``FOR UPDATE`` (``SKIP LOCKED`` where engines compete
for work) and takes transaction advisory locks for checks that span rows.

:func:`chunks` cuts long ``IN (...)`` lists: SQLite allows few bound parameters
per statement.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping, Sequence
from enum import Enum
from operator import itemgetter
from typing import Any, TypeVar

from sqlalchemy import Connection, Engine, Select, Table, func, select, text
from sqlalchemy.exc import IntegrityError

from ..errors import StoreError

IN_CHUNK = 500
_WALK_IN_ORDER = (
    "SELECT set_config('enable_sort', 'off', true), set_config('enable_bitmapscan', 'off', true)"
)
T = TypeVar("T")


_ARRAY_ESCAPE = str.maketrans({"\\": "\\\\", '"': '\\"'})


def pg_array(values: Sequence[Any], of: str) -> str:
    """``values`` as a PostgreSQL array literal (``{1,NULL,2}``, ``{"a","b \\"c\\""}``),
    bound as one string and cast by the statement (``%s::bigint[]``): the server parses
    it in C, where psycopg's list dumper formats element by element in Python (a third
    of the engines' time in a burst of 100,000 fires on PostgreSQL). ``of``: the
    element type, ``text`` (each quoted, ``\\`` and ``"`` escaped, so that commas,
    braces, spaces and the word NULL stay text), ``boolean``, or an integer type.
    None is NULL; a str enum is its value. A column without NULLs, or of NULLs only,
    is joined in C."""
    nulls = values.count(None) if None in values else 0
    if nulls == len(values):
        return "{" + ",".join(["NULL"] * nulls) + "}"
    if of == "text":
        if not nulls:
            try:
                body = '","'.join(values)  # a str enum joins as its value
            except TypeError:
                pass
            else:
                # (the separators hold 2 quotes each: any more are the values')
                if body.count('"') != 2 * (len(values) - 1) or "\\" in body:
                    body = '","'.join([v.translate(_ARRAY_ESCAPE) for v in values])
                return '{"' + body + '"}'
        return (
            "{"
            + ",".join(
                "NULL" if v is None else '"' + str(v).translate(_ARRAY_ESCAPE) + '"' for v in values
            )
            + "}"
        )
    if of == "boolean":
        return "{" + ",".join("NULL" if v is None else ("t" if v else "f") for v in values) + "}"
    if nulls:
        return "{" + ",".join("NULL" if v is None else str(int(v)) for v in values) + "}"
    return "{" + ",".join(map(str, map(int, values))) + "}"


def pg_columns(rows: Sequence[Mapping[str, Any]], columns: Sequence[tuple[str, str]]) -> list[str]:
    """One :func:`pg_array` per (column, element type) of ``columns``, over ``rows``: the
    parameters of a statement that unnests them side by side."""
    return [pg_array(list(map(itemgetter(c), rows)), of) for c, of in columns]


def chunks(items: Sequence[T], size: int = IN_CHUNK) -> Iterator[Sequence[T]]:
    """``items`` in slices of at most ``size``."""
    for i in range(0, len(items), size):
        yield items[i : i + size]


@contextlib.contextmanager
def _driver_cursor(conn: Connection, sql: str, params: Any) -> Iterator[Any]:
    """A driver cursor in the caller's transaction, closed after; a broken
    constraint raises SQLAlchemy's ``IntegrityError`` (as ``conn.execute`` does),
    any other driver error ``store_unavailable``."""
    cur = conn.connection.dbapi_connection.cursor()  # type: ignore[union-attr]
    dbapi = conn.dialect.loaded_dbapi
    try:
        yield cur
    except dbapi.IntegrityError as exc:
        raise IntegrityError(sql, params, exc) from exc
    except dbapi.Error as exc:
        raise StoreError(f"the store is unavailable: {exc}", code="store_unavailable") from exc
    finally:
        cur.close()


class Dialect:
    """The statements and locks of one database backend (``Dialect.of(conn)``)."""

    def __init__(self, name: str, paramstyle: str) -> None:
        self.name = name
        self.locks_rows = name == "postgresql"
        # For plain executemany through the driver (exec_driver_sql).
        self.placeholder = "?" if paramstyle == "qmark" else "%s"

    @classmethod
    def of(cls, bind: Engine | Connection) -> Dialect:
        d = bind.dialect
        key = (d.name, d.paramstyle)
        found = _KNOWN.get(key)
        if found is None:
            found = _KNOWN[key] = cls(d.name, d.paramstyle)
        return found

    def __repr__(self) -> str:
        return f"Dialect({self.name!r})"

    def fetch(self, conn: Connection, sql: str, params: Sequence[Any]) -> list[Any]:
        """The rows of ``sql`` (written with :attr:`placeholder`) as the driver returns
        them, in the caller's transaction. For listings: SQLAlchemy's work per row
        (a Row object, its fields, one fetch call each) costs more than the query."""
        cur = conn.connection.dbapi_connection.cursor()  # type: ignore[union-attr]
        try:
            cur.execute(sql, tuple(params))
            return list(cur.fetchall())
        except conn.dialect.loaded_dbapi.Error as exc:
            raise StoreError(f"the store is unavailable: {exc}", code="store_unavailable") from exc
        finally:
            cur.close()

    def run(self, conn: Connection, sql: str, params: Sequence[Any]) -> list[Any]:
        """:meth:`fetch` for any statement (an ``INSERT``: no rows), in the caller's
        transaction; a constraint the statement breaks raises SQLAlchemy's
        ``IntegrityError``, as ``conn.execute`` does. For the statements every create
        runs, where SQLAlchemy's compiled execution costs more than SQLite's own work."""
        with _driver_cursor(conn, sql, params) as cur:
            cur.execute(sql, tuple(params))
            return list(cur.fetchall()) if cur.description is not None else []

    def execute_many(self, conn: Connection, sql: str, rows: Sequence[Any]) -> None:
        """``sql`` (written with :attr:`placeholder`, or the driver's named style
        with ``rows`` of mappings) once per row through the driver's
        ``executemany``, in the caller's transaction; errors as :meth:`run` raises
        them. For inserts of rows that are plain values already (events, imports):
        ``exec_driver_sql`` costs ~20 us more a call, and a create makes one."""
        if not rows:
            return
        with _driver_cursor(conn, sql, rows[:1]) as cur:
            cur.executemany(sql, rows)

    def run_many(self, conn: Connection, stmt: Any, rows: Sequence[Mapping[str, Any]]) -> None:
        """``conn.execute(stmt, rows)`` through the driver's ``executemany``, for a
        statement built once (its compiled form is kept with it). For the writes of a
        burst of outcomes, where SQLAlchemy's per-row parameter work costs more than
        the database's own. The statement's literals (``state == 'claimed'``) go in
        as compiled; its binds take plain values (ints, strings, booleans, None) that
        need no conversion by SQLAlchemy's types."""
        if not rows:
            return
        key = (id(stmt), conn.dialect.name)
        found = _COMPILED.get(key)
        if found is None or found[3] is not stmt:
            compiled = stmt.compile(dialect=conn.dialect)
            consts = {
                n: b.value.value if isinstance(b.value, Enum) else b.value
                for n, b in compiled.binds.items()
                if not b.required
            }
            order = tuple(compiled.positiontup or ()) if compiled.positional else None
            found = _COMPILED[key] = (compiled.string, order, consts, stmt)
        sql, order, consts, _stmt = found
        params: list[Any]
        if order is None:
            params = [{**consts, **r} for r in rows]
        else:
            params = [tuple(r[n] if n in r else consts[n] for n in order) for r in rows]
        self.execute_many(conn, sql, params)

    def for_update(self, stmt: Any) -> Any:
        """``SELECT ... FOR UPDATE`` where rows are locked (SQLite holds the write lock)."""
        return stmt.with_for_update() if self.locks_rows else stmt

    def walk_in_order(self, conn: Connection) -> None:
        """For the rest of ``conn``'s transaction (PostgreSQL), plan reads of due
        reminders as walks of their index in due order, never a bitmap scan and a sort
        of every match. The claims and the next due time want the first few rows by
        due time; PostgreSQL chose by its statistics, and reminders imported moments
        before they fall due (a burst) are missing from those until autovacuum's
        next ANALYZE: it planned for seventy rows, sorted a hundred thousand for each
        claim of a thousand (1.5 s a batch, four engines). Sorting is only priced
        out, not forbidden; SQLite has its own planner and is left as it is."""
        if self.locks_rows:
            conn.exec_driver_sql(_WALK_IN_ORDER)

    def skip_locked(self, stmt: Any, *, of: Table | None = None) -> Any:
        """``FOR UPDATE SKIP LOCKED`` (of ``of``'s rows): rows another engine holds are
        left to it."""
        return stmt.with_for_update(of=of, skip_locked=True) if self.locks_rows else stmt

    def first_unlocked(
        self, table: Table, *, where: Sequence[Any], order_by: Any, limit: Any
    ) -> Select[Any]:
        """The first ``limit`` rows of ``table`` by ``order_by``. Where rows are locked:
        the first ``limit`` that no other transaction holds, locked as they are found
        (``FOR UPDATE SKIP LOCKED`` in the subquery: engines claiming at once each take
        the next rows, not all the same first ``limit``, of which one engine would win
        and the others get none), returned in id order, the order every writer of
        them updates them in. Engines never deadlock: a skipping lock never waits.

        The outer query finds those rows by key (``= ANY(ARRAY(subquery))``: the
        subquery runs once, an init plan, and each row is an index lookup). With
        ``IN (subquery)`` PostgreSQL planned a hash semi-join over a scan of the whole
        table, every batch: a burst of 100,000 due at once cost a scan of 100,000 rows
        per 1,000 claimed."""
        first = select(table).where(*where).order_by(order_by).limit(limit)
        if not self.locks_rows:
            return first
        key = table.c.id
        earliest = (
            select(key)
            .where(*where)
            .order_by(order_by)
            .limit(limit)
            .with_for_update(skip_locked=True)
        )
        return (
            select(table)
            .where(key == func.any(func.array(earliest.scalar_subquery())), *where)
            .order_by(key)
            .with_for_update(skip_locked=True)
        )

    def advisory_xact_lock(self, conn: Connection, key: int) -> None:
        """Hold the advisory lock ``key`` until the transaction ends."""
        if self.locks_rows:
            conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": key})

    def insert(self, table: Table) -> Any:
        """The dialect's own ``INSERT`` (``on_conflict_do_nothing`` and friends). Each
        dialect loads on first use (the CLI on SQLite never needs PostgreSQL's)."""
        if self.locks_rows:
            from sqlalchemy.dialects import postgresql as pg_dialect

            return pg_dialect.insert(table)
        from sqlalchemy.dialects import sqlite as sqlite_dialect

        return sqlite_dialect.insert(table)

    def checkpoint(self, engine: Engine) -> None:
        """Copy a write-ahead log left by an earlier process into the database now
        (SQLite; the first commit would do it otherwise), then start the log afresh
        with a commit that changes nothing (the schema cookie written back as it is):
        the first commit to a new log writes and syncs its header, about 1.5 ms that
        the first claim no longer pays."""
        if self.locks_rows:
            return
        raw = engine.raw_connection()
        try:
            cur = raw.cursor()
            cur.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
            version = int(cur.execute("PRAGMA user_version").fetchone()[0])
            cur.execute("BEGIN IMMEDIATE")
            try:
                cur.execute(f"PRAGMA user_version = {version}")
            except BaseException:
                raw.rollback()
                raise
            raw.commit()
        finally:
            raw.close()


_KNOWN: dict[tuple[str, str], Dialect] = {}
# (id of a statement, dialect) -> (SQL, bind names in order or None, literals, the statement)
_COMPILED: dict[tuple[int, str], tuple[str, tuple[str, ...] | None, dict[str, Any], Any]] = {}

__all__ = ["IN_CHUNK", "Dialect", "chunks"]
