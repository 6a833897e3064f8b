"""Reads of a SQLite store through the ``sqlite3`` driver alone, for the command line when
no engine serves the store: ``remindkit ls`` and ``remindkit status --line`` then cost
what Python's start-up costs and a query, not the import of SQLAlchemy (several times
Python's own start-up on a small machine).

:func:`open_lite` gives a :class:`LiteStore` only for a SQLite file that exists and is
at the schema this remindkit writes (the Alembic revision in ``alembic_version``);
anything else (PostgreSQL, a new or older store, a URL with options) is for
:func:`~remindkit.store.open_store`, which creates and migrates. A ``LiteStore``
reads a list of reminders (with the fires that wait for their session, as
``SqlStore.reminders.find_reminders`` gives them), the pause flag and the status line's
summary; opened with ``write=True`` (``remindkit remind``) it also adds a reminder,
through the store's own create (:func:`remindkit.store.create.add_reminder`: the
same checks, rows, event and errors), and hints the engines listening on the store
after the commit, as the store does. The statements are plain SQL that both databases run; :class:`Reports` runs
the summary's through its driver as well, and both fold the rows with
:func:`summarize`, so that the line reads the same from either.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import StoreError
from ..runtime import tighten_private_file

if TYPE_CHECKING:
    from ..audit import Surface
    from ..models import Reminder
    from ..settings import Limits, Settings
    from .create import Added, Tx
    from .records import Waiting
    from .wake import Wake

MIGRATIONS = Path(__file__).with_name("migrations")
FAILED_WINDOW_US = 7 * 86_400 * 1_000_000  # `!` looks at the last week of fires
CHUNK = 500  # ids in one IN (...)

# The status line's summary, written with "?" (Reports gives them the dialect's mark).
SUMMARY_COUNTS_SQL = (
    "SELECT session_id,"
    " SUM(CASE WHEN state = 'active' THEN 1 ELSE 0 END),"
    " SUM(CASE WHEN state = 'paused' THEN 1 ELSE 0 END),"
    " MIN(CASE WHEN state = 'active' THEN next_fire_at END)"
    " FROM reminders WHERE state IN ('active', 'paused') GROUP BY session_id"
)
SUMMARY_OUTCOMES_SQL = (
    "SELECT session_id,"
    " MAX(CASE WHEN state = 'failed' THEN fired_at END),"
    " MAX(CASE WHEN state = 'delivered' THEN fired_at END)"
    " FROM occurrences WHERE fired_at >= ? GROUP BY session_id"
)
PAUSED_ALL_SQL = "SELECT value FROM flags WHERE name = 'paused_all'"
# A reminder's fires that its claim has counted (fired_count, next_fire_at moved past
# them) but that have not happened at the time given (?): claimed ahead of their due
# time (the engine's look-ahead), or waiting to be re-based (a re-based fire does not
# count). What a view of the fires so far and the next one takes back (the
# set_callback list, its popup and its [CB:n m:ss] indicator).
UNCOUNTED_WHERE = (
    "((o.state = 'claimed' AND o.due_at > ?) OR (o.state = 'waiting' AND o.wait_for = 'rebase'))"
)
UNCOUNTED_SQL = (
    "SELECT o.reminder_id, COUNT(*), MIN(o.due_at) FROM occurrences o"
    f" WHERE o.reminder_id IN ({{ids}}) AND {UNCOUNTED_WHERE} GROUP BY o.reminder_id"
)
# set_callback's timers, for the [CB:n m:ss] indicator: the next fire is the first that
# has not happened (UNCOUNTED_WHERE, at the time given)
SUMMARY_CALLBACKS_SQL = (
    "SELECT r.session_id,"
    " SUM(CASE WHEN r.state = 'active' THEN 1 ELSE 0 END),"
    " SUM(CASE WHEN r.state = 'paused' THEN 1 ELSE 0 END),"
    " MIN(CASE WHEN r.state = 'active' THEN COALESCE((SELECT MIN(o.due_at) FROM occurrences o"
    f" WHERE o.reminder_id = r.id AND {UNCOUNTED_WHERE}), r.next_fire_at) END)"
    " FROM reminders r WHERE r.state IN ('active', 'paused') AND r.source = 'callback'"
    " GROUP BY r.session_id"
)


def head_revision() -> str:
    """The schema revision this remindkit writes (the last migration's number)."""
    versions = sorted(p.stem for p in (MIGRATIONS / "versions").glob("[0-9]*.py"))
    return versions[-1].split("_", 1)[0] if versions else ""


def sqlite_file(url: str) -> Path | None:
    """The file of a plain SQLite URL (``sqlite:///PATH``, no options), else None."""
    for prefix in ("sqlite:///", "sqlite+pysqlite:///"):
        if url.startswith(prefix):
            rest = url[len(prefix) :]
            if not rest or rest == ":memory:" or any(c in rest for c in "?%#"):
                return None
            return Path(rest).expanduser().resolve()
    return None


def sqlite_sync(level: str) -> str:
    """The SQLite ``synchronous`` level a store runs at: the one asked for if SQLite
    knows it, else FULL."""
    return level if level in ("FULL", "NORMAL", "EXTRA") else "FULL"


def open_lite(url: str, *, settings: Settings, write: bool = False) -> LiteStore | None:
    """A reader of the SQLite store at ``url`` through the driver, or None when the
    full store must open it (not a plain SQLite file, missing, or not at this
    remindkit's schema: it creates, migrates or refuses it). ``write``: one that may
    also add reminders, on a connection set up as the store's are (WAL, the
    store's ``synchronous``, foreign keys)."""
    path = sqlite_file(url)
    if path is None or not path.is_file():
        return None
    tighten_private_file(path)
    try:
        conn = sqlite3.connect(path, timeout=settings.busy_timeout_ms / 1000, isolation_level=None)
    except sqlite3.Error:
        return None
    try:
        if write:  # as remindkit.store.db's connections are set up
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute(f"PRAGMA synchronous={sqlite_sync(settings.sqlite_synchronous)}")
            conn.execute("PRAGMA foreign_keys=ON")
        else:
            conn.execute("PRAGMA query_only = ON")
        row = conn.execute("SELECT version_num FROM alembic_version").fetchone()
    except sqlite3.Error:
        conn.close()
        return None
    if row is None or row[0] != head_revision():
        conn.close()
        return None
    return LiteStore(conn, url=url, settings=settings, path=path)


class LiteStore:
    """The reads of ``ls`` and ``status --line`` on one SQLite connection."""

    def __init__(
        self, conn: sqlite3.Connection, *, url: str, settings: Settings, path: Path | None = None
    ) -> None:
        self.conn = conn
        self.url = url
        self.settings = settings
        self.path = path if path is not None else sqlite_file(url)
        self.reminders = self  # the roles the reminders API reads (and creates) through
        self.coordination = self
        self.reports = self
        self._wake: Wake | None = None

    def _rows(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        try:
            return self.conn.execute(sql, tuple(params)).fetchall()
        except sqlite3.Error as exc:
            raise StoreError(f"the store is unavailable: {exc}", code="store_unavailable") from exc

    def _snapshot(self) -> _Snapshot:
        return _Snapshot(self)

    # -- reminders ---------------------------------------------------------------------------

    def find_reminders(
        self,
        *,
        session: Any = Any,
        states: Iterable[str] | None = None,
        order: str = "created",
    ) -> list[Reminder]:
        """As ``SqlStore.reminders.find_reminders`` with these arguments: the reminders
        of ``session`` (``Any``: all; None: those of no session) in ``states``, in
        creation order (or ``order="next"``: by next fire, none last), each live one
        with the fires that wait for its session."""
        # (the reminders' modules load here: the status line's summary needs none of them)
        from ..models import LIVE_STATES
        from .records import REMINDER_COLUMNS, attach_waiting, reminders_of_tuples

        where: list[str] = []
        params: list[Any] = []
        if session is None:
            where.append("session_id IS NULL")
        elif session is not Any:
            where.append("session_id = ?")
            params.append(session)
        if states is not None:
            wanted = list(states)
            where.append(f"state IN ({', '.join('?' * len(wanted))})" if wanted else "0")
            params += wanted
        sql = f"SELECT {REMINDER_COLUMNS} FROM reminders"
        if where:
            sql += " WHERE " + " AND ".join(where)
        if order == "next":
            sql += " ORDER BY next_fire_at IS NULL, next_fire_at, id"
        else:
            sql += " ORDER BY created_at, id"
        with self._snapshot():
            found = reminders_of_tuples(self._rows(sql, params))
            live = [r.id for r in found if r.state in LIVE_STATES]
            if not live:
                return found
            return attach_waiting(found, self._waiting(session, live))

    def _waiting(self, session: Any, live: list[str]) -> Waiting:
        from ..models import WAITING
        from .records import fold_waiting

        head = "SELECT reminder_id, wait_for, error, due_at FROM occurrences WHERE "
        tail = " AND state = ? ORDER BY reminder_id, due_at"
        if isinstance(session, str):  # one indexed read (ix_occurrences_session)
            return fold_waiting(self._rows(head + "session_id = ?" + tail, (session, WAITING)), {})
        out: Waiting = {}
        for i in range(0, len(live), CHUNK):
            chunk = live[i : i + CHUNK]
            marks = ", ".join("?" * len(chunk))
            fold_waiting(
                self._rows(f"{head}reminder_id IN ({marks}){tail}", (*chunk, WAITING)), out
            )
        return out

    def add_reminder(
        self,
        rem: Reminder,
        *,
        limits: Limits,
        now_us: int,
        replace_label: bool = True,
        surface: Surface | str = "api",
        alive_since_us: int | None = None,
        project: str | None = None,
    ) -> Added:
        """As ``SqlStore.reminders.add_reminder``: the same create
        (:func:`remindkit.store.create.add_reminder`), in a transaction of this
        connection (opened with ``write=True``)."""
        from .create import add_reminder

        return add_reminder(
            self._write,
            rem,
            limits=limits,
            now_us=now_us,
            replace_label=replace_label,
            surface=surface,
            alive_since_us=alive_since_us,
            project=project,
        )

    @contextlib.contextmanager
    def _write(self) -> Iterator[Tx]:
        """One write transaction (``BEGIN IMMEDIATE``, as the store's), committed when
        the block ends, rolled back if it raises; then the engines listening on the
        store are hinted, as ``remindkit.store.db.Db.driver_write`` hints them."""
        from .create import transaction

        with transaction(self.conn, dbapi=sqlite3, mark="?", locks_rows=False) as tx:
            yield tx
        self.wake.notify("", added_due_us=tx.added_due_us)

    @property
    def wake(self) -> Wake:
        if self._wake is None:
            from .wake import NoWake, sqlite_wake

            self._wake = NoWake() if self.path is None else sqlite_wake(self.path)
        return self._wake

    # -- coordination, reports ---------------------------------------------------------------

    def paused_all(self) -> bool:
        row = self._rows(PAUSED_ALL_SQL)
        return bool(row) and row[0][0] == "1"

    def status_summary(self, *, now_us: int, max_sessions: int = 1_000) -> dict[str, Any]:
        """As ``SqlStore.reports.status_summary``."""
        with self._snapshot():
            counts = self._rows(SUMMARY_COUNTS_SQL)
            outcomes = self._rows(SUMMARY_OUTCOMES_SQL, (now_us - FAILED_WINDOW_US,))
            flag = self._rows(PAUSED_ALL_SQL)
            callbacks = self._rows(SUMMARY_CALLBACKS_SQL, (now_us,))
        return summarize(counts, outcomes, flag[0][0] if flag else None, max_sessions, callbacks)

    def close(self) -> None:
        if self._wake is not None:
            self._wake.close()
        self.conn.close()


class _Snapshot:
    """One read transaction: the statements inside see one state of the store."""

    def __init__(self, store: LiteStore) -> None:
        self.store = store

    def __enter__(self) -> None:
        self.store._rows("BEGIN")

    def __exit__(self, *exc: object) -> None:
        self.store._rows("COMMIT")


def summarize(
    counts: Iterable[Sequence[Any]],
    outcomes: Iterable[Sequence[Any]],
    paused_flag: str | None,
    max_sessions: int,
    callbacks: Iterable[Sequence[Any]] = (),
) -> dict[str, Any]:
    """The status line's summary from the rows of :data:`SUMMARY_COUNTS_SQL` and
    :data:`SUMMARY_OUTCOMES_SQL` and the ``paused_all`` flag: per session and overall,
    active and paused counts, the next fire (µs), and whether the latest finished fire
    failed (the soonest ``max_sessions`` sessions, failed ones first); a session with
    ``set_callback`` timers (the rows of :data:`SUMMARY_CALLBACKS_SQL`) also has
    ``callbacks`` (their active and paused counts, next fire)."""
    outcomes = list(outcomes)
    failed = {sid: f is not None and (d is None or f >= d) for sid, f, d in outcomes}
    sessions: dict[str, dict[str, Any]] = {}
    total: dict[str, Any] = {"active": 0, "paused": 0, "next_us": None, "failed": False}
    for sid, active, paused, nxt in counts:
        entry: dict[str, Any] = {
            "active": int(active or 0),
            "paused": int(paused or 0),
            "next_us": None if nxt is None else int(nxt),
            "failed": failed.get(sid, False),
        }
        if sid is not None:
            sessions[sid] = entry
        total["active"] += entry["active"]
        total["paused"] += entry["paused"]
        if entry["next_us"] is not None and (
            total["next_us"] is None or entry["next_us"] < total["next_us"]
        ):
            total["next_us"] = entry["next_us"]
    for sid, active, paused, nxt in callbacks:
        if sid in sessions:
            sessions[sid]["callbacks"] = {
                "active": int(active or 0),
                "paused": int(paused or 0),
                "next_us": None if nxt is None else int(nxt),
            }
    for sid, bad in failed.items():
        if sid is not None and sid not in sessions and bad:
            sessions[sid] = {"active": 0, "paused": 0, "next_us": None, "failed": True}
    last_failed = [f for _sid, f, _d in outcomes if f is not None]
    last_delivered = [d for _sid, _f, d in outcomes if d is not None]
    total["failed"] = bool(last_failed) and (
        not last_delivered or max(last_failed) >= max(last_delivered)
    )
    truncated = len(sessions) > max_sessions
    if truncated:
        sessions = dict(sorted(sessions.items(), key=_soonest)[:max_sessions])
    return {
        "paused_all": paused_flag == "1",
        "all": total,
        "sessions": sessions,
        "truncated": truncated,
    }


def _soonest(item: tuple[str, dict[str, Any]]) -> tuple[int, int]:
    nxt = item[1]["next_us"]
    return (0 if item[1]["failed"] else 1, nxt if nxt is not None else 1 << 62)
