"""The store: SQLAlchemy on SQLite (default, WAL) or PostgreSQL.

``open_store(url)`` opens (creating and migrating) a store; the returned
:class:`SqlStore` maps rows to the domain values of ``remindkit.models``, so
nothing outside this package touches SQLAlchemy.

``SqlStore``, ``open_store`` and the models re-exported here load on first use, so that the modules of this package
that need no SQLAlchemy (``lite``, ``records``: the command line's reads of a store
that no engine serves) can be imported without it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..models import Outcome, Plan, PlannedFire
    from .sql import SqlStore, open_store

_LAZY = {
    "SqlStore": ".sql",
    "open_store": ".sql",
    "Outcome": "..models",
    "Plan": "..models",
    "PlannedFire": "..models",
}


def __getattr__(name: str) -> Any:
    where = _LAZY.get(name)
    if where is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(where, __name__), name)
    globals()[name] = value
    return value


__all__ = ["Outcome", "Plan", "PlannedFire", "SqlStore", "open_store"]
