"""The session adapters a process knows: the built-in ones (command, python,
openai) and plugins named in ``REMINDKIT_ADAPTERS``."""

from __future__ import annotations

import importlib
import os
from typing import TYPE_CHECKING, Any

from .base import SessionAdapter
from .trust import EnginePolicy, GuardedAdapter

if TYPE_CHECKING:
    from ..clock import Clock
    from ..reminders import Reminders
    from ..settings import Settings
    from ..store import SqlStore


class Adapters:
    """The adapters this process knows, by name, each guarded by the engine's policy
    (:class:`~remindkit.sessions.trust.EnginePolicy`, read from this process's
    environment unless given): a disabled session, or one the policy does not
    allow, is not run here."""

    def __init__(self, *adapters: SessionAdapter, policy: EnginePolicy | None = None) -> None:
        self.policy = policy if policy is not None else EnginePolicy.from_env()
        self._by_name: dict[str, SessionAdapter] = {}
        for adapter in adapters:
            self.add(adapter)

    def add(self, adapter: SessionAdapter) -> None:
        if isinstance(adapter, GuardedAdapter):
            adapter = adapter.inner
        self._by_name[adapter.name] = GuardedAdapter(adapter, self.policy)

    def get(self, name: str | None) -> SessionAdapter | None:
        return None if name is None else self._by_name.get(name)

    def unguarded(self, name: str) -> SessionAdapter | None:
        """The adapter itself, without the policy's guard (to configure it)."""
        got = self._by_name.get(name)
        return got.inner if isinstance(got, GuardedAdapter) else got

    def names(self) -> list[str]:
        return sorted(self._by_name)


def default_adapters(
    store: SqlStore | None = None,
    *,
    clock: Clock | None = None,
    settings: Settings | None = None,
    api: Reminders | None = None,
) -> Adapters:
    """command and python; with a store (or ``api``) also openai, telegram (an agent
    bound to a chat thread, replies through the outbox) and webhook, and the agent
    side (tags of replies carried out, occurrence keys taken once per session).
    ``api``: the reminders API the agents act through (the graph's, from
    :meth:`remindkit.wiring.Graph.engine`); without it, one over ``store``."""
    from .command import CommandSession
    from .mcp import McpSessions
    from .python import PythonSessions

    if api is None:
        if store is None:
            return Adapters(CommandSession(), PythonSessions(), McpSessions())
        # An Engine made without the composition root (tests, the bench's engines over
        # a bare store): this layer cannot reach wiring.build, so the agents' API is
        # made here. Every surface's engine comes from Graph.engine, with the graph's.
        from ..reminders import Reminders

        api = Reminders(store, clock=clock, settings=settings)
    from ..agent.external import ExternalTurns
    from .openai import OpenAISessions

    store, clock, settings = api.store, api.clock, api.settings
    turns = ExternalTurns(api)
    adapters = Adapters(
        CommandSession(turns=turns, clock=clock),
        PythonSessions(turns=turns),
        OpenAISessions(api),
        McpSessions(store, clock=clock, turns=turns),
    )
    from .routed import TelegramSessions
    from .webhook import WebhookSessions

    adapters.add(
        TelegramSessions(store, adapters, clock=clock)
    )  # agents: the command and openai above
    adapters.add(WebhookSessions(store, turns=turns, clock=clock))
    for adapter in plugin_adapters(store, clock=clock, settings=settings):
        adapters.add(adapter)
    return adapters


def plugin_adapters(
    store: SqlStore, *, clock: Clock | None, settings: Settings | None
) -> list[Any]:
    """Extra adapters named in ``REMINDKIT_ADAPTERS`` (``module:factory`` items,
    comma-separated): each factory is called with the store, clock and settings
    and returns an adapter (``name``, ``shared``, ``can_deliver``, ``run_turn``)."""
    out = []
    for item in filter(
        None, (p.strip() for p in os.environ.get("REMINDKIT_ADAPTERS", "").split(","))
    ):
        module, _, attr = item.partition(":")
        factory = getattr(importlib.import_module(module), attr or "adapter")
        out.append(factory(store, clock=clock, settings=settings))
    return out
