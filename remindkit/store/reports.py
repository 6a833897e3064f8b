"""Read-only summaries of the store: the status line's counts and ``remindkit stats``.

Both are computed here, from the reminders and the occurrences history, so that the
CLI, the tray and the notebook panel show the same numbers.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

from sqlalchemy import select

from . import schema as t
from .lite import (
    FAILED_WINDOW_US,
    PAUSED_ALL_SQL,
    SUMMARY_CALLBACKS_SQL,
    SUMMARY_COUNTS_SQL,
    SUMMARY_OUTCOMES_SQL,
    summarize,
)
from .role import Role

STATS_STATES = ("delivered", "alerted", "failed", "waiting", "skipped", "cancelled")


class Reports(Role):
    """Read-only summaries: the status line's counts and fire statistics."""

    def status_summary(self, *, now_us: int, max_sessions: int = 1_000) -> dict[str, Any]:
        """Per session and overall: active and paused counts, the next fire (µs), and
        whether the latest finished fire failed; a session with ``set_callback`` timers
        also has ``callbacks`` (their active and paused counts, next fire). The
        statements and the fold are the command line's own when no engine runs
        (:mod:`remindkit.store.lite`)."""
        d = self.dialect
        with self.read() as conn:
            counts = d.fetch(conn, SUMMARY_COUNTS_SQL, ())
            outcomes = d.fetch(
                conn,
                SUMMARY_OUTCOMES_SQL.replace("?", d.placeholder),
                (now_us - FAILED_WINDOW_US,),
            )
            flag = d.fetch(conn, PAUSED_ALL_SQL, ())
            callbacks = d.fetch(conn, SUMMARY_CALLBACKS_SQL.replace("?", d.placeholder), (now_us,))
        return summarize(counts, outcomes, flag[0][0] if flag else None, max_sessions, callbacks)

    def fire_stats(self, *, since_us: int, session: str | None = None) -> dict[str, Any]:
        """Fires since ``since_us``, per session (``-`` for none) and in all: counts by
        outcome and lateness in ms (p50, p99, max)."""
        o = t.occurrences.c
        stmt = select(o.session_id, o.state, o.due_at, o.fired_at).where(o.fired_at >= since_us)
        if session is not None:
            stmt = stmt.where(o.session_id == session)
        per: dict[str, dict[str, Any]] = {}
        late: dict[str, list[int]] = {}
        with self.read() as conn:
            for sid, state, due, fired in _rows(
                conn.execute(stmt.execution_options(yield_per=5_000))
            ):
                key = sid if sid is not None else "-"
                entry = per.setdefault(key, {"fires": 0, **{s: 0 for s in STATS_STATES}})
                entry["fires"] += 1
                if state in entry:
                    entry[state] += 1
                late.setdefault(key, []).append(max(0, fired - due) // 1000)
        total: dict[str, Any] = {"fires": 0, **{s: 0 for s in STATS_STATES}}
        for key, entry in per.items():
            for name in total:
                total[name] += entry[name]
            entry.update(_lateness(sorted(late.get(key, []))))
        total.update(_lateness(sorted(v for values in late.values() for v in values)))
        return {"all": total, "sessions": dict(sorted(per.items()))}


def _rows(result: Any) -> Iterator[Any]:
    yield from result


def _lateness(values: list[int]) -> dict[str, int | None]:
    """p50, p99 and max of sorted values (nearest rank), None when there are none."""
    if not values:
        return {"late_p50_ms": None, "late_p99_ms": None, "late_max_ms": None}

    def rank(p: float) -> int:
        return values[min(len(values), max(1, math.ceil(p * len(values)))) - 1]

    return {"late_p50_ms": rank(0.50), "late_p99_ms": rank(0.99), "late_max_ms": values[-1]}


def stats_text(entry: dict[str, Any], *, since: str = "24h") -> str:
    """One line of :meth:`Reports.fire_stats` counts, as the tray menu and the notebook
    panel show them."""
    text = (
        f"last {since}: {entry['fires']} fires · {entry['delivered']} delivered · {entry['failed']} failed"
        f" · {entry['waiting']} waiting · {entry['skipped']} skipped"
    )
    if entry.get("late_max_ms") is not None:
        text += f" · late p50 {entry['late_p50_ms']} ms, p99 {entry['late_p99_ms']} ms, max {entry['late_max_ms']} ms"
    return text
