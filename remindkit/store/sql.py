"""SqlStore: the store on SQLite or PostgreSQL, as roles over one database.

Each role holds the shared :class:`~remindkit.store.db.Db` (engine, transactions,
wake-up hints, dialect, settings) and the operations of one part of the store:
``store.reminders``, ``.sessions``, ``.claims`` (claiming, take-overs),
``.outcomes`` (acknowledging fires), ``.waiting`` (fires waiting for their
session, re-basing), ``.turns``, ``.transcripts``,
``.coordination`` (engines, leases, flags), ``.events``, ``.reports`` and
``.projects``. ``remindkit.store.roles`` names what callers use of each.

Every mutation is one transaction that either commits whole or changes nothing.
On SQLite a write transaction starts with ``BEGIN IMMEDIATE`` (see ``db.py``); on
PostgreSQL rows are locked ``FOR UPDATE`` and limit checks take a transaction
advisory lock, so two processes cannot both pass a limit or a label check.
After a commit the store sends a wake-up hint to engines (``wake.py``).
"""

from __future__ import annotations

import contextlib
import logging

from sqlalchemy import Connection, Engine
from sqlalchemy.exc import DBAPIError

from ..errors import StoreError
from ..settings import Settings
from .claims import Claims
from .coordination import Coordination
from .db import Db, dispose_quietly, make_engine, migrate
from .dialect import Dialect
from .events import Events
from .outcomes import Outcomes
from .projects import Projects
from .reminders import Added, Reminders
from .reports import Reports
from .roles import (
    ClaimStore,
    CoordinationStore,
    EventStore,
    OutcomeStore,
    ProjectStore,
    ReminderStore,
    ReportStore,
    SessionStore,
    TranscriptStore,
    TurnStore,
    WaitingStore,
)
from .sessions import Sessions
from .transcripts import Transcripts
from .turns import Turns
from .waiting import Waiting
from .wake import Wake

log = logging.getLogger(__name__)


class SqlStore:
    """The store: its roles over one shared database."""

    def __init__(
        self, engine: Engine, *, settings: Settings | None = None, wake: Wake | None = None
    ) -> None:
        self.db = Db(engine, settings=settings, wake=wake)
        self.reminders: ReminderStore = Reminders(self.db)
        self.sessions: SessionStore = Sessions(self.db)
        self.claims: ClaimStore = Claims(self.db)
        self.outcomes: OutcomeStore = Outcomes(self.db)
        self.waiting: WaitingStore = Waiting(self.db)
        self.turns: TurnStore = Turns(self.db)
        self.transcripts: TranscriptStore = Transcripts(self.db)
        self.coordination: CoordinationStore = Coordination(self.db)
        self.events: EventStore = Events(self.db)
        self.reports: ReportStore = Reports(self.db)
        self.projects: ProjectStore = Projects(self.db)

    # -- plumbing (the shared Db's) ------------------------------------------------------

    @property
    def engine(self) -> Engine:
        return self.db.engine

    @property
    def settings(self) -> Settings:
        return self.db.settings

    @property
    def dialect(self) -> Dialect:
        return self.db.dialect

    @property
    def wake(self) -> Wake:
        return self.db.wake

    @wake.setter
    def wake(self, wake: Wake) -> None:
        self.db.wake = wake

    @property
    def url(self) -> str:
        return self.db.url

    def origin(self, name: str) -> contextlib.AbstractContextManager[None]:
        """Tag wake-up hints sent by this thread's writes (an engine ignores its own)."""
        return self.db.origin(name)

    def write(self, *, notify: bool = True) -> contextlib.AbstractContextManager[Connection]:
        """One write transaction; commits on success, hints engines afterwards."""
        return self.db.write(notify=notify)

    def read(self) -> contextlib.AbstractContextManager[Connection]:
        return self.db.read()

    def close(self) -> None:
        self.db.close()

    def __enter__(self) -> SqlStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def warm(self) -> None:
        """Run an engine's first statements once (see :meth:`Claims.warm`)."""
        self.claims.warm(
            lambda: self.coordination.lease_holder("alerter", now_us=0),
            lambda: self.sessions.get_sessions(["-"], now_us=0),
        )


def open_store(
    url: str | None = None, *, settings: Settings | None = None, run_migrations: bool = True
) -> SqlStore:
    """Open (and create or migrate) the store at ``url`` or the configured default."""
    settings = settings or Settings.from_env()
    engine = make_engine(
        url or settings.url,
        synchronous=settings.sqlite_synchronous,
        busy_timeout_ms=settings.busy_timeout_ms,
    )
    try:
        if run_migrations:
            migrate(engine)
    except StoreError:
        dispose_quietly(engine)
        raise
    except DBAPIError as exc:  # not reachable, locked, or a file that is not a database
        dispose_quietly(engine)
        raise StoreError(
            f"cannot open the store at {engine.url!r}: {exc.orig}", code="store_unavailable"
        ) from exc
    return SqlStore(engine, settings=settings)


__all__ = ["Added", "SqlStore", "open_store"]
