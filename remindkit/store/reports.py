"""Read-only summaries of the store: the status line's counts and ``remindkit stats``.

Both are computed here, from the reminders and the occurrences history, so that the
CLI, the tray and the notebook panel show the same numbers.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

from sqlalchemy import case, func, select

from . import schema as t
from .role import Role

FAILED_WINDOW_US = 7 * 86_400 * 1_000_000  # `!` looks at the last week of fires
STATS_STATES = ("delivered", "failed", "waiting", "skipped", "cancelled")


class Reports(Role):
    """Read-only summaries: the status line's counts and fire statistics."""

    def status_summary(self, *, now_us: int, max_sessions: int = 1_000) -> dict[str, Any]:
        """Per session and overall: active and paused counts, the next fire (µs), and
        whether the latest finished fire failed; a session with ``set_callback`` timers
        also has ``callbacks`` (their active and paused counts, next fire)."""
        c, o = t.reminders.c, t.occurrences.c
        with self.read() as conn:
            rows = conn.execute(
                select(
                    c.session_id,
                    func.sum(case((c.state == "active", 1), else_=0)),
                    func.sum(case((c.state == "paused", 1), else_=0)),
                    func.min(case((c.state == "active", c.next_fire_at), else_=None)),
                )
                .where(c.state.in_(("active", "paused")))
                .group_by(c.session_id)
            ).all()
            outcomes = conn.execute(
                select(
                    o.session_id,
                    func.max(case((o.state == "failed", o.fired_at), else_=None)),
                    func.max(case((o.state == "delivered", o.fired_at), else_=None)),
                )
                .where(o.fired_at >= now_us - FAILED_WINDOW_US)
                .group_by(o.session_id)
            ).all()
            flag = conn.execute(
                select(t.flags.c.value).where(t.flags.c.name == "paused_all")
            ).scalar()
            callbacks = conn.execute(  # set_callback's timers, for the [CB:n m:ss] indicator
                select(
                    c.session_id,
                    func.sum(case((c.state == "active", 1), else_=0)),
                    func.sum(case((c.state == "paused", 1), else_=0)),
                    func.min(case((c.state == "active", c.next_fire_at), else_=None)),
                )
                .where(c.state.in_(("active", "paused")), c.source == "callback")
                .group_by(c.session_id)
            ).all()
        failed = {sid: f is not None and (d is None or f >= d) for sid, f, d in outcomes}
        sessions: dict[str, dict[str, Any]] = {}
        total: dict[str, Any] = {"active": 0, "paused": 0, "next_us": None, "failed": False}
        for sid, active, paused, nxt in rows:
            entry: dict[str, Any] = {
                "active": int(active or 0),
                "paused": int(paused or 0),
                "next_us": None if nxt is None else int(nxt),
                "failed": failed.get(sid, False),
            }
            if sid is not None:
                sessions[sid] = entry
            total["active"] += entry["active"]
            total["paused"] += entry["paused"]
            if entry["next_us"] is not None and (
                total["next_us"] is None or entry["next_us"] < total["next_us"]
            ):
                total["next_us"] = entry["next_us"]
        for sid, active, paused, nxt in callbacks:
            if sid in sessions:
                sessions[sid]["callbacks"] = {
                    "active": int(active or 0),
                    "paused": int(paused or 0),
                    "next_us": None if nxt is None else int(nxt),
                }
        for sid, bad in failed.items():
            if sid is not None and sid not in sessions and bad:
                sessions[sid] = {"active": 0, "paused": 0, "next_us": None, "failed": True}
        last_failed = [f for _sid, f, _d in outcomes if f is not None]
        last_delivered = [d for _sid, _f, d in outcomes if d is not None]
        total["failed"] = bool(last_failed) and (
            not last_delivered or max(last_failed) >= max(last_delivered)
        )
        truncated = len(sessions) > max_sessions
        if truncated:
            sessions = dict(sorted(sessions.items(), key=_soonest)[:max_sessions])
        return {
            "paused_all": flag == "1",
            "all": total,
            "sessions": sessions,
            "truncated": truncated,
        }

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


def _soonest(item: tuple[str, dict[str, Any]]) -> tuple[int, int]:
    nxt = item[1]["next_us"]
    return (0 if item[1]["failed"] else 1, nxt if nxt is not None else 1 << 62)


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
