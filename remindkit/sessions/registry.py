"""The session adapters a process knows: the built-in ones (command, python,
openai) and plugins named in ``REMINDKIT_ADAPTERS``."""

from __future__ import annotations

import importlib
import os
from typing import TYPE_CHECKING, Any

from .base import Adapters

if TYPE_CHECKING:
    from ..clock import Clock
    from ..settings import Settings
    from ..store import SqlStore


def default_adapters(store: SqlStore | None = None, *, clock: Clock | None = None,
                     settings: Settings | None = None) -> Adapters:
    """command and python; with a store also openai, and the agent side (tags of
    replies carried out, occurrence keys taken once per session)."""
    from .command import CommandSession
    from .python import PythonSessions

    if store is None:
        return Adapters(CommandSession(), PythonSessions())
    from ..agent.external import ExternalTurns
    from .openai import OpenAISessions

    turns = ExternalTurns(store, clock=clock, settings=settings)
    adapters = Adapters(CommandSession(turns=turns), PythonSessions(turns=turns),
                        OpenAISessions(store, clock=clock, settings=settings))
    for adapter in plugin_adapters(store, clock=clock, settings=settings):
        adapters.add(adapter)
    return adapters


def plugin_adapters(store: SqlStore, *, clock: Clock | None, settings: Settings | None) -> list[Any]:
    """Extra adapters named in ``REMINDKIT_ADAPTERS`` (``module:factory`` items,
    comma-separated): each factory is called with the store, clock and settings
    and returns an adapter (``name``, ``shared``, ``can_deliver``, ``run_turn``)."""
    out = []
    for item in filter(None, (p.strip() for p in os.environ.get("REMINDKIT_ADAPTERS", "").split(","))):
        module, _, attr = item.partition(":")
        factory = getattr(importlib.import_module(module), attr or "adapter")
        out.append(factory(store, clock=clock, settings=settings))
    return out
