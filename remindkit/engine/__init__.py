"""The engine: ``tick(now)`` claims due occurrences once, fires them on time and
hands them to delivery; ``run()`` is the thread that only waits in between."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .plan import plan_fire

if TYPE_CHECKING:
    from ..sessions.registry import default_adapters
    from .core import Engine


def __getattr__(name: str) -> Any:
    # the engine proper (delivery, alerts, adapters) loads on first use: the reminders API
    # needs only the pure planning functions beside it
    if name == "Engine":
        from .core import Engine

        return Engine
    if name == "default_adapters":
        from ..sessions.registry import default_adapters

        return default_adapters
    raise AttributeError(f"module 'remindkit.engine' has no attribute {name!r}")


__all__ = ["Engine", "default_adapters", "plan_fire"]
