"""The store: SQLAlchemy on SQLite (default, WAL) or PostgreSQL.

``open_store(url)`` opens (creating and migrating) a store; the returned
:class:`SqlStore` maps rows to the domain values of ``remindkit.models``, so
nothing outside this package touches SQLAlchemy.
"""

from ..models import Outcome, Plan, PlannedFire
from .sql import SqlStore, open_store

__all__ = ["Outcome", "Plan", "PlannedFire", "SqlStore", "open_store"]
