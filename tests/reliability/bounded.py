"""A hard time bound for one call: SIGALRM interrupts a call that runs too long
(a pure-Python loop that never ends becomes a ``TimeoutError`` in the test).

pytest-timeout's own alarm, if armed, is put back afterwards with what was left of it.
"""

from __future__ import annotations

import contextlib
import signal
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

T = TypeVar("T")


class CallTimedOut(AssertionError):
    pass


@contextlib.contextmanager
def time_limit(seconds: float, what: str = "the call") -> Iterator[None]:
    if threading.current_thread() is not threading.main_thread():  # pragma: no cover
        yield
        return

    def on_alarm(_signum: int, _frame: Any) -> None:
        raise CallTimedOut(f"{what} did not return within {seconds} s")

    started = time.monotonic()
    old_handler = signal.signal(signal.SIGALRM, on_alarm)
    old_delay, old_interval = signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old_handler)
        if old_delay:
            left = max(old_delay - (time.monotonic() - started), 0.001)
            signal.setitimer(signal.ITIMER_REAL, left, old_interval)
    took = time.monotonic() - started
    if took > seconds:
        raise CallTimedOut(f"{what} took {took:.2f} s (bound {seconds} s)")


def bounded_call(seconds: float, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    with time_limit(seconds, f"{getattr(fn, '__name__', fn)}{args!r}"[:300]):
        return fn(*args, **kwargs)
