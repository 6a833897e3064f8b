"""The only module that reads the time.

Everything else takes ``now`` as a parameter (pure functions) or holds a
:class:`Clock` (the engine, the reminders service). Tests use :class:`FakeClock`
and move it with :meth:`FakeClock.advance`.

Times are timezone-aware ``datetime`` objects in UTC. Inside the store they are
integer microseconds since the epoch (:func:`to_us` / :func:`from_us`).
"""

from __future__ import annotations

import threading
import time
from datetime import datetime, timedelta, timezone
from typing import Protocol

UTC = timezone.utc
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


class Clock(Protocol):
    def now(self) -> datetime:
        """The current instant, aware, in UTC."""
        ...


class SystemClock:
    """Wall-clock time, optionally corrected by a fixed offset.

    The offset lets engines on several hosts agree with the database server's
    clock (PostgreSQL ``now()``) for leases, as pg-boss does.
    """

    def __init__(self, offset: timedelta = timedelta(0)) -> None:
        self.offset_us = int(offset.total_seconds() * 1_000_000)

    def now(self) -> datetime:
        return from_us(self.now_us())

    def now_us(self) -> int:
        return time.time_ns() // 1000 + self.offset_us


class FakeClock:
    """A clock that moves only when told to. Thread-safe."""

    def __init__(self, start: datetime | str = "2026-01-05T09:00:00Z") -> None:
        if isinstance(start, str):
            start = parse_utc(start)
        if start.tzinfo is None:
            raise ValueError("FakeClock needs an aware datetime")
        self._now = start.astimezone(UTC)
        self._lock = threading.Lock()

    def now(self) -> datetime:
        with self._lock:
            return self._now

    def now_us(self) -> int:
        return to_us(self.now())

    def advance(self, delta: timedelta | float = 0.0) -> datetime:
        if not isinstance(delta, timedelta):
            delta = timedelta(seconds=delta)
        with self._lock:
            self._now = self._now + delta
            return self._now

    def set(self, when: datetime | str) -> datetime:
        if isinstance(when, str):
            when = parse_utc(when)
        with self._lock:
            self._now = when.astimezone(UTC)
            return self._now


def now_us(clock: Clock) -> int:
    fast = getattr(clock, "now_us", None)
    return fast() if fast is not None else to_us(clock.now())


def to_us(dt: datetime) -> int:
    """Aware datetime -> integer microseconds since the epoch."""
    if dt.tzinfo is None:
        raise ValueError("naive datetime")
    delta = dt - EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def from_us(us: int) -> datetime:
    return EPOCH + timedelta(microseconds=us)


def parse_utc(text: str) -> datetime:
    """Parse an RFC 3339 instant that carries an offset (``Z`` allowed)."""
    try:
        dt = datetime.fromisoformat(text)  # Python 3.11 reads a trailing Z itself
    except ValueError:
        dt = datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
    if dt.tzinfo is None:
        raise ValueError(f"{text!r} has no UTC offset")
    return dt if dt.tzinfo is UTC else dt.astimezone(UTC)


def format_utc(dt: datetime | None) -> str | None:
    """RFC 3339 in UTC with a ``Z``, to the millisecond (shown only when not zero)."""
    if dt is None:
        return None
    if dt.tzinfo is not UTC:
        dt = dt.astimezone(UTC)
    # isoformat is done in C and faster than strftime (audit events and fired
    # messages format every occurrence's times); it always writes four-digit years.
    text = dt.isoformat(timespec="milliseconds")[:23]  # "YYYY-MM-DDTHH:MM:SS.mmm"
    return text[:19] + "Z" if text.endswith(".000") else text + "Z"
