"""Waiting for an outcome in tests: poll a check until it holds, with a deadline
counted from the call (never a fixed sleep)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any


def wait_for(
    check: Callable[[], Any], timeout: float = 20.0, what: str = "", *, poll: float = 0.01
) -> Any:
    """The first truthy value of ``check()``; AssertionError after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = check()
        if got:
            return got
        time.sleep(poll)
    raise AssertionError(f"timed out after {timeout}s" + (f" waiting for {what}" if what else ""))
