"""The engine: ``tick(now)`` claims due occurrences once, fires them on time and
hands them to delivery; ``run()`` is the thread that only waits in between."""

from .core import Engine, default_adapters
from .plan import plan_fire

__all__ = ["Engine", "default_adapters", "plan_fire"]
