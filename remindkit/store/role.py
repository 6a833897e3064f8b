"""The base of the store's roles (reminders, claims, turns, ...)."""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

from sqlalchemy import Connection

if TYPE_CHECKING:
    from .db import Db
    from .dialect import Dialect


class Role:
    """A role of the store (reminders, claims, turns, ...): its operations over the
    shared :class:`Db`, each in a transaction of its own."""

    def __init__(self, db: Db) -> None:
        self.db = db

    @property
    def dialect(self) -> Dialect:
        return self.db.dialect

    def write(
        self, *, notify: bool = True, durable: bool = True
    ) -> contextlib.AbstractContextManager[Connection]:
        return self.db.write(notify=notify, durable=durable)

    def read(self) -> contextlib.AbstractContextManager[Connection]:
        return self.db.read()


__all__ = ["Role"]
