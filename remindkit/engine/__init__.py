"""The engine: ``tick(now)`` claims due occurrences once, fires them on time and
hands them to delivery; ``run()`` is the thread that only waits in between."""

from ..sessions.registry import default_adapters
from .core import Engine
from .plan import plan_fire

__all__ = ["Engine", "default_adapters", "plan_fire"]
