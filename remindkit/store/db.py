"""Opening a database: SQLite set-up (WAL, BEGIN IMMEDIATE for writes, private
files) or PostgreSQL, then Alembic migrations to the latest revision.

SQLite claims must be serialised: pysqlite's own BEGIN is deferred, so a
SELECT-then-UPDATE can race. As in SQLAlchemy's "Serializable isolation /
Savepoints / Transactional DDL" recipe for pysqlite, we switch pysqlite's
transaction handling off and emit BEGIN ourselves: ``BEGIN IMMEDIATE`` for a
write transaction (it takes the write lock at once), plain ``BEGIN`` for reads.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import logging
import os
import re
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Engine, create_engine, event, inspect, text
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import DBAPIError, IntegrityError
from sqlalchemy.pool import NullPool, QueuePool

from ..errors import StoreError
from ..runtime import make_private_file
from ..settings import Settings
from .create import Tx, transaction
from .dialect import Dialect
from .lite import sqlite_sync as sqlite_sync  # re-exported
from .wake import Wake, make_wake

log = logging.getLogger(__name__)
MIGRATIONS = Path(__file__).with_name("migrations")
WRITE = "rk_write"
_ADDED_DUE = "rk_added_due"  # conn.info: the first fire of what a write only added (only_added)
DEFERRED_EVENTS = "remindkit_events"  # conn.info: audit rows queued for write_events (events.py)


SQLITE_DRIVERS = ("sqlite", "sqlite+pysqlite")
POSTGRES_DRIVERS = ("postgresql", "postgresql+psycopg")


def check_url(url: str) -> URL:
    """The parsed store URL, or ``invalid_store_url``: SQLite (a file: no host, user,
    password or port, the standard driver) or PostgreSQL (psycopg)."""
    from ..errors import InvalidInput

    def refuse(why: str) -> InvalidInput:
        return InvalidInput(
            f"{why}; use sqlite:///PATH or postgresql://USER@HOST/DB", code="invalid_store_url"
        )

    try:
        parsed = make_url(url)
    except Exception:
        raise refuse(f"{_safe(url)!r} is not a database URL") from None
    if parsed.drivername in SQLITE_DRIVERS:
        if parsed.host or parsed.username or parsed.password or parsed.port:
            raise refuse("a SQLite URL names a file, not a host or a user (sqlite:///PATH)")
        return parsed
    if parsed.drivername in POSTGRES_DRIVERS:
        return parsed
    raise refuse(f"remindkit does not know the database driver {parsed.drivername!r}")


def _safe(url: str) -> str:
    """``url`` without what looks like a password (for an error message)."""
    return re.sub(r"(//[^/:@]*:)[^@/]*@", r"\1***@", url)[:200]


def make_engine(url: str, *, synchronous: str = "FULL", busy_timeout_ms: int = 30_000) -> Engine:
    parsed = check_url(url)
    if parsed.get_backend_name() == "sqlite":
        return _sqlite_engine(url, synchronous=synchronous, busy_timeout_ms=busy_timeout_ms)
    if parsed.get_backend_name() == "postgresql":
        if parsed.drivername == "postgresql":
            url = str(
                parsed.set(drivername="postgresql+psycopg").render_as_string(hide_password=False)
            )
        return create_engine(
            url, poolclass=QueuePool, pool_size=4, max_overflow=8, pool_pre_ping=True
        )
    return create_engine(url)


def sqlite_path(url: str) -> Path | None:
    parsed = make_url(url)
    if (
        parsed.get_backend_name() != "sqlite"
        or not parsed.database
        or parsed.database == ":memory:"
    ):
        return None
    return Path(parsed.database).expanduser().resolve()


def _sqlite_engine(url: str, *, synchronous: str, busy_timeout_ms: int) -> Engine:
    path = sqlite_path(url)
    if path is None:
        raise StoreError(
            "remindkit needs a SQLite file, not an in-memory database", code="store_unavailable"
        )
    make_private_file(path)
    engine = create_engine(
        f"sqlite:///{path}",
        poolclass=QueuePool,
        pool_size=4,
        max_overflow=8,
        connect_args={"check_same_thread": False, "timeout": busy_timeout_ms / 1000},
    )
    sync = sqlite_sync(synchronous)

    @event.listens_for(engine, "connect")
    def _connect(dbapi_conn, _record):
        dbapi_conn.isolation_level = None  # we emit BEGIN ourselves
        cur = dbapi_conn.cursor()
        cur.execute("PRAGMA journal_mode=WAL")
        cur.execute(f"PRAGMA synchronous={sync}")
        cur.execute(f"PRAGMA busy_timeout={int(busy_timeout_ms)}")
        cur.execute("PRAGMA foreign_keys=ON")
        cur.close()

    @event.listens_for(engine, "begin")
    def _begin(conn):
        # Through the driver: every transaction begins here, and SQLAlchemy's
        # statement execution costs more than the BEGIN (~20 us a create).
        sql = "BEGIN IMMEDIATE" if conn.get_execution_options().get(WRITE) else "BEGIN"
        try:
            _driver_execute(conn, sql)
        except sqlite3.Error as exc:  # "database is locked": as exec_driver_sql raised it
            raise DBAPIError.instance(sql, (), exc, sqlite3.Error) from exc

    return engine


def _driver_execute(conn: Connection, sql: str) -> None:
    raw = conn.connection.driver_connection
    assert raw is not None  # a checked-out connection
    raw.execute(sql)


# -- migrations ---------------------------------------------------------------------------


def head_revision() -> str:
    versions = sorted(p.stem for p in (MIGRATIONS / "versions").glob("[0-9]*.py"))
    return versions[-1].split("_", 1)[0] if versions else ""


def current_revision(engine: Engine) -> str | None:
    with engine.connect() as conn:
        if not inspect(conn).has_table("alembic_version"):
            return None
        row = conn.execute(text("SELECT version_num FROM alembic_version")).first()
        return row[0] if row else None


def migrate(engine: Engine, target: str = "head") -> None:
    """Bring the schema to ``target``; a no-op (and no Alembic import) when current."""
    if target == "head" and current_revision(engine) == head_revision():
        return
    with _migration_lock(engine):
        if target == "head" and current_revision(engine) == head_revision():
            return
        _run_alembic(engine, target)


def _run_alembic(engine: Engine, target: str) -> None:
    from alembic import command
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    with engine.connect().execution_options(**{WRITE: True}) as conn:
        cfg.attributes["connection"] = conn
        known = {p.stem.split("_", 1)[0] for p in (MIGRATIONS / "versions").glob("[0-9]*.py")}
        have = current_revision(engine)
        if have is not None and have not in known:
            raise StoreError(
                f"the store was written by a newer remindkit (schema {have}); upgrade remindkit",
                code="schema_too_new",
            )
        command.upgrade(cfg, target)
        conn.commit()


@contextlib.contextmanager
def _migration_lock(engine: Engine) -> Iterator[None]:
    """Only one process migrates at a time (file lock for SQLite, advisory lock on PostgreSQL)."""
    if engine.dialect.name == "sqlite":
        path = Path(str(engine.url.database))
        lock = path.with_name(path.name + ".migrate.lock")
        fd = os.open(lock, os.O_CREAT | os.O_RDWR, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)
    elif engine.dialect.name == "postgresql":
        key = int(hashlib.sha1(b"remindkit-migrate").hexdigest()[:15], 16)
        with engine.connect() as conn:
            conn.execute(text("SELECT pg_advisory_lock(:k)"), {"k": key})
            conn.commit()
            try:
                yield
            finally:
                conn.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": key})
                conn.commit()
    else:
        yield


def dispose_quietly(engine: Engine) -> None:
    with contextlib.suppress(Exception):
        engine.dispose()


# -- the shared plumbing of the store's roles ---------------------------------------------


class Db:
    """One open database: its engine, write and read transactions, wake-up hints to
    engines after a commit, the origin those hints carry, its dialect and settings.
    Every role of the store (``SqlStore.claims``, ``.reminders``, ...) shares one."""

    def __init__(
        self, engine: Engine, *, settings: Settings | None = None, wake: Wake | None = None
    ) -> None:
        self.engine = engine
        self.settings = settings or Settings.from_env()
        self.dialect = Dialect.of(engine)
        self.sync = sqlite_sync(self.settings.sqlite_synchronous)  # as its connections run
        self.wake: Wake = wake if wake is not None else make_wake(engine)
        self._origin = threading.local()

    @property
    def url(self) -> str:
        return self.engine.url.render_as_string(hide_password=True)

    @contextlib.contextmanager
    def origin(self, name: str) -> Iterator[None]:
        """Tag wake-up hints sent by this thread's writes (an engine ignores its own)."""
        before = getattr(self._origin, "name", "")
        self._origin.name = name
        try:
            yield
        finally:
            self._origin.name = before

    @contextlib.contextmanager
    def write(self, *, notify: bool = True, durable: bool = True) -> Iterator[Connection]:
        """One write transaction; commits on success, hints engines afterwards.
        ``durable=False``: this commit is not synced to disk; on SQLite
        ``synchronous=NORMAL`` for it (other processes see it at once, and the next
        synced commit syncs it too), on PostgreSQL ``synchronous_commit`` off for it (the
        server writes it out within a moment). A power cut, or on PostgreSQL a crash of
        the server, may lose it, never corrupt the store. For what a power cut makes
        moot: an engine's heartbeat and lease renewals, which an idle engine writes
        every few seconds (their fsync was most of an idle engine's CPU), a claim
        (``Claims.claim_due``), and a fire's time or wait that a repeat would leave
        right (``Outcomes.finish``)."""
        relaxed = not durable and not self.dialect.locks_rows and self.sync != "NORMAL"
        unsynced_pg = not durable and self.dialect.locks_rows
        added_due_us: int | None = None
        try:
            with self.engine.connect().execution_options(**{WRITE: True}) as conn:
                if relaxed:
                    _driver_execute(conn, "PRAGMA synchronous=NORMAL")
                try:
                    with conn.begin():
                        conn.info.pop(DEFERRED_EVENTS, None)  # a rolled-back transaction's
                        if unsynced_pg:  # this transaction only
                            conn.exec_driver_sql("SET LOCAL synchronous_commit TO OFF")
                        yield conn
                finally:
                    added_due_us = conn.info.pop(_ADDED_DUE, None)
                    if relaxed:
                        try:
                            _driver_execute(conn, f"PRAGMA synchronous={self.sync}")
                        except Exception:  # never hand the pool a connection left unsynced
                            conn.invalidate()
                            raise
        except IntegrityError:
            raise
        except DBAPIError as exc:
            raise StoreError(
                f"the store is unavailable: {exc.orig}", code="store_unavailable"
            ) from exc
        if notify:
            self.wake.notify(getattr(self._origin, "name", ""), added_due_us=added_due_us)

    def _raw_connection(self) -> Any:
        """A pooled connection of the driver's own (``close`` gives it back)."""
        try:
            return self.engine.raw_connection()
        except DBAPIError as exc:
            raise StoreError(
                f"the store is unavailable: {exc.orig}", code="store_unavailable"
            ) from exc

    @contextlib.contextmanager
    def driver_write(self) -> Iterator[Tx]:
        """One write transaction on a pooled connection through the driver alone
        (:class:`~remindkit.store.create.Tx`), outside SQLAlchemy's connection and
        transaction objects: ``BEGIN IMMEDIATE`` on SQLite (PostgreSQL's driver begins
        one with the first statement), a commit on success, a rollback otherwise, and
        engines hinted after the commit. For a create, where SQLAlchemy's checkout,
        begin and commit cost more than SQLite's own work bar the sync."""
        raw = self._raw_connection()
        try:
            with transaction(
                raw.driver_connection,
                dbapi=self.engine.dialect.loaded_dbapi,
                mark=self.dialect.placeholder,
                locks_rows=self.dialect.locks_rows,
            ) as tx:
                yield tx
        finally:
            raw.close()  # back to the pool
        self.wake.notify(getattr(self._origin, "name", ""), added_due_us=tx.added_due_us)

    @staticmethod
    def only_added(conn: Connection, due_us: int) -> None:
        """Say, within a :meth:`write`, that it only adds a reminder first due at
        ``due_us`` (nothing else changes): its hint says so, and an engine that knows
        when its next fire is due takes the earlier of the two without reading the
        store (``remindkit/store/wake.py``). Said twice, the earlier due is kept."""
        known = conn.info.get(_ADDED_DUE)
        conn.info[_ADDED_DUE] = due_us if known is None else min(known, due_us)

    @contextlib.contextmanager
    def read(self) -> Iterator[Connection]:
        try:
            with self.engine.connect() as conn, conn.begin():
                yield conn
        except DBAPIError as exc:
            raise StoreError(
                f"the store is unavailable: {exc.orig}", code="store_unavailable"
            ) from exc

    def query(self, sql: str, params: tuple[Any, ...]) -> list[Any]:
        """The rows of one statement (written with the dialect's placeholder) run on
        its own through the driver, outside SQLAlchemy's transaction and result
        objects: one statement sees one snapshot of the database on SQLite and on
        PostgreSQL alike. For the read every API request makes before anything else
        (:meth:`Projects.access`), where SQLAlchemy's BEGIN, execute and rows cost
        more than the lookups themselves."""
        raw = self._raw_connection()
        try:
            cur = raw.cursor()
            try:
                cur.execute(sql, params)
                return list(cur.fetchall())
            finally:
                cur.close()
        except self.engine.dialect.loaded_dbapi.Error as exc:
            raise StoreError(f"the store is unavailable: {exc}", code="store_unavailable") from exc
        finally:
            raw.close()  # back to the pool, which rolls back what the driver began

    def close(self) -> None:
        self.wake.close()
        dispose_quietly(self.engine)


__all__ = ["Db", "NullPool", "make_engine", "migrate", "sqlite_path"]
