"""What every command gets: its arguments, its streams and, built on first use, the
process's graph (:mod:`remindkit.wiring`): the store, the reminders API over it, and
what an engine is made of (so commands that do not need the store never import
SQLAlchemy)."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, TextIO, cast

from ..errors import CliError

if TYPE_CHECKING:
    from ..reminders import Reminders
    from ..settings import Settings
    from ..wiring import Graph


# the reminder commands (remindkit.cli.reminders registers them): main builds their group,
# and the hand-off (remindkit.cli.handoff) may run them in an engine
REMINDER_COMMANDS = frozenset(
    {
        "remind",
        "add",
        "ls",
        "list",
        "show",
        "pause",
        "resume",
        "rm",
        "stop",
        "delete",
        "cancel",
        "snooze",
        "history",
        "reminders",
    }
)


def command_of(argv: Sequence[str]) -> str | None:
    """The command word of ``argv`` (after any --db URL / --json given before it)."""
    skip = False
    for arg in argv:
        if skip:
            skip = False
        elif arg == "--db":
            skip = True
        elif not arg.startswith("-"):
            return arg
    return None


class Parser(argparse.ArgumentParser):
    """Usage errors are ``invalid_argument`` refusals, not argparse's exit 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise CliError(f"{message} (see {self.prog} --help)", code="invalid_argument")


class Context:
    def __init__(
        self,
        args: argparse.Namespace,
        out: TextIO,
        err: TextIO,
        inp: TextIO,
        *,
        api: Reminders | None = None,
    ) -> None:
        self.args = args
        self.out = out
        self.err = err
        self.inp = inp
        # an API lent by the process (an engine running handed-over commands): not ours to close
        self._lent: Reminders | None = api
        self._graph: Graph | None = None
        self._settings: Settings | None = None
        self._reader: Reminders | None = None
        self._lite: Any = None  # a LiteStore, False when the full store must read
        self._writer: Reminders | None = None  # the API over a LiteStore opened for writing

    @property
    def settings(self) -> Settings:
        if self._settings is None and self._lent is not None:
            self._settings = self._lent.settings
        if self._settings is None:  # (not through wiring: status --line must stay light)
            from ..settings import Settings

            self._settings = Settings.from_env()
        return self._settings

    @property
    def url(self) -> str:
        return self.args.db or self.settings.url

    @property
    def graph(self) -> Graph:
        """The store at ``--db`` (opened on first use) and what runs on it."""
        if self._graph is None:
            from ..audit import Surface
            from ..wiring import build

            if self._lent is not None:
                self._graph = build(api=self._lent)
            else:
                self._graph = build(self.settings, db=self.args.db, surface=Surface.CLI)
        return self._graph

    @property
    def api(self) -> Reminders:
        return self._lent if self._lent is not None else self.graph.api

    @property
    def read_store(self) -> Any:
        """The store for a command that only reads (``ls``, ``status --line``): the
        SQLite file through the driver alone (:class:`~remindkit.store.lite.LiteStore`,
        no SQLAlchemy to import) when the process has no store open yet and the file is
        at this remindkit's schema; else the store of :attr:`api`. Only the reads
        ``LiteStore`` has."""
        if self._lent is not None or self._graph is not None:
            return self.api.store
        if self._lite is None:
            from ..store.lite import open_lite

            self._lite = open_lite(self.url, settings=self.settings) or False
        return self._lite or self.api.store

    @property
    def read_api(self) -> Reminders:
        """The reminders API over :attr:`read_store`, for the reads ``LiteStore`` has."""
        store = self.read_store
        if self._lent is not None or self._graph is not None or not self._lite:
            return self.api
        if self._reader is None:
            # The API alone over the driver-only reader, not a graph: ls with no engine is
            # timed against `python -c pass` (bench/cli_speed.py), and a graph's event bus
            # and wiring cost it milliseconds for nothing a read uses.
            from ..audit import Surface
            from ..reminders import Reminders

            self._reader = Reminders(cast(Any, store), settings=self.settings, surface=Surface.CLI)
        return self._reader

    @property
    def create_api(self) -> Reminders:
        """The reminders API for ``remind``: with no store open in the process yet,
        over the SQLite file through the driver alone
        (:class:`~remindkit.store.lite.LiteStore` opened for writing: the store's own
        create, with no SQLAlchemy to import) when the file is at this remindkit's
        schema; else (PostgreSQL, which the driver-only store does not open; a new
        store, or one at another schema, which the full store creates, migrates or
        refuses) :attr:`api`."""
        if self._lent is not None or self._graph is not None:
            return self.api
        if self._writer is None:
            from ..store.lite import open_lite

            lite = open_lite(self.url, settings=self.settings, write=True)
            if lite is None:
                return self.api
            from ..audit import Surface
            from ..reminders import Reminders

            self._writer = Reminders(cast(Any, lite), settings=self.settings, surface=Surface.CLI)
        return self._writer

    def close(self) -> None:
        if self._graph is not None and self._lent is None:
            self._graph.close()
        self._graph = None
        if self._lite:
            self._lite.close()
        if self._writer is not None:
            self._writer.store.close()
        self._lite = self._reader = self._writer = None

    def json(self, data: Any) -> None:
        emit_json(self.out, data)


def emit_json(out: TextIO, data: Any) -> None:
    import json

    out.write(json.dumps(data, ensure_ascii=False, indent=None) + "\n")
