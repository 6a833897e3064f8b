"""What every command gets: its arguments, its streams and, opened on first use, the
reminders API over the store (so commands that do not need the store never import
SQLAlchemy)."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, TextIO

from ..errors import RemindkitError

if TYPE_CHECKING:
    from ..reminders import Reminders
    from ..settings import Settings


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


class CliError(RemindkitError):
    code = "invalid_argument"


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
        self._api: Reminders | None = api
        self._lent = api is not None  # an API lent by the process (an engine): not ours to close
        self._settings: Settings | None = None

    @property
    def settings(self) -> Settings:
        if self._settings is None and self._api is not None:
            self._settings = self._api.settings
        if self._settings is None:
            from ..settings import Settings

            self._settings = Settings.from_env()
        return self._settings

    @property
    def url(self) -> str:
        return self.args.db or self.settings.url

    @property
    def api(self) -> Reminders:
        if self._api is None:
            from ..audit import Surface
            from ..clock import SystemClock
            from ..reminders import Reminders
            from ..store import open_store

            store = open_store(self.args.db, settings=self.settings)
            self._api = Reminders(
                store, clock=SystemClock(), settings=self.settings, surface=Surface.CLI
            )
        return self._api

    def close(self) -> None:
        if self._api is not None and not self._lent:
            self._api.store.close()
            self._api = None

    def json(self, data: Any) -> None:
        emit_json(self.out, data)


def emit_json(out: TextIO, data: Any) -> None:
    import json

    out.write(json.dumps(data, ensure_ascii=False, indent=None) + "\n")
