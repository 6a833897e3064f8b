"""What the tray shows, as a pure function of the store's state and ``now``.

The tooltip is a compact status bar (``[CB:2 2:14]``: two active, the next in
2:14) spelled out:
``2 active · next: deploy in 4:59``; with everything paused,
``2 active · paused``; extras follow (`` · muted``, `` · 1 failed``). The
menu lists live reminders soonest first with their countdown, and the last
few fires with their outcome. :func:`build_view` reads no clock and does no
I/O; the app calls it every second and redraws what changed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from remindkit.models import ACTIVE, PAUSED, AlertState, Occurrence, Reminder, WaitFor
from remindkit.schedules import format_countdown
from remindkit.schedules.zones import get_zone

from .icon import Badge

NAME_MAX = 28


@dataclass(frozen=True)
class Entry:
    """One live reminder in the menu."""

    id: str
    name: str
    text: str  # "deploy — in 4:59"
    paused: bool


@dataclass(frozen=True)
class View:
    tooltip: str
    badge: Badge
    entries: tuple[Entry, ...]
    fires: tuple[str, ...]
    paused_all: bool
    muted: bool
    sounding: bool
    failed: int
    note: str | None = None  # e.g. "menu unavailable"
    stats: str | None = (
        None  # "last 24h: 12 fires · 11 delivered · …" (the same counts as `remindkit stats`)
    )

    @property
    def header(self) -> str:
        return self.tooltip


def reminder_name(rem: Reminder) -> str:
    """The label, or the first line of the text, shortened for a menu."""
    name = rem.label or (rem.text.strip().splitlines() or [rem.id])[0]
    return name if len(name) <= NAME_MAX else name[: NAME_MAX - 1] + "…"


def countdown(rem: Reminder, now: datetime, *, paused_all: bool = False) -> str:
    if rem.state == PAUSED:
        return "paused"
    if rem.next_fire_at is None:
        return rem.state
    left = (rem.next_fire_at - now).total_seconds()
    if left <= 0:
        return "due now" if not paused_all else "due (paused)"
    return f"in {format_countdown(left)}"


def tooltip(
    active: Sequence[Reminder], now: datetime, *, paused_all: bool, muted: bool, failed: int
) -> str:
    if not active:
        text = "no active reminders"
    elif paused_all:
        text = f"{len(active)} active · paused"
    else:
        nxt = min(
            (r for r in active if r.next_fire_at is not None),
            key=lambda r: r.next_fire_at,  # type: ignore[arg-type, return-value]
            default=None,
        )
        text = f"{len(active)} active"
        if nxt is not None:
            text += f" · next: {reminder_name(nxt)} {countdown(nxt, now)}"
    if muted:
        text += " · muted"
    if failed:
        text += f" · {failed} failed"
    return text


# why a fire waits, as a menu line says it (the occurrence's wait_for)
WAITING_WHY = {
    WaitFor.IDLE: "its session is busy",
    WaitFor.REBASE: "its session is busy (re-based when idle)",
    WaitFor.SESSION: "no way into its session yet",
    WaitFor.RETRY: "retrying",
}


def _short(text: str, limit: int = 40) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def fire_line(occ: Occurrence, name: str, tz: str | None = None) -> str:
    """``09:00:05 deploy — delivered`` (local time of the fire)."""
    when = occ.fired_at or occ.due_at
    local = when.astimezone(get_zone(tz)) if tz else when.astimezone()
    outcome: str = occ.state
    if occ.state == "failed" and occ.error:
        outcome = f"failed: {_short(occ.error)}"
    elif occ.state == "waiting":
        why = WAITING_WHY.get(occ.wait_for) if occ.wait_for else None
        if occ.wait_for == WaitFor.RETRY and occ.error:
            why = f"retrying: {_short(occ.error)}"
        outcome = f"waiting: {why}" if why else "waiting for the session"
    if occ.alert == AlertState.FAILED:
        outcome += " (no sound)"
    return f"{local:%H:%M:%S} {name} — {outcome}"


def build_view(
    reminders: Sequence[Reminder],
    fires: Sequence[Occurrence],
    *,
    now: datetime,
    paused_all: bool,
    muted: bool,
    sounding: bool = False,
    names: Mapping[str, str] | None = None,
    tz: str | None = None,
    note: str | None = None,
    stats: str | None = None,
    armed: bool = True,
) -> View:
    """``armed``: an engine is alive on the store; when not, the tooltip (and the
    menu's first line) says that nothing will fire."""
    live = sorted(
        (r for r in reminders if r.state in (ACTIVE, PAUSED)),
        key=lambda r: (r.state != ACTIVE, r.next_fire_at is None, r.next_fire_at or now, r.id),
    )
    active = [r for r in live if r.state == ACTIVE]
    failed = sum(1 for o in fires if o.state == "failed")
    entries = tuple(
        Entry(
            r.id,
            reminder_name(r),
            f"{reminder_name(r)} — {countdown(r, now, paused_all=paused_all)}",
            r.state == PAUSED,
        )
        for r in live
    )
    known = {r.id: reminder_name(r) for r in reminders}
    known.update(names or {})
    lines = tuple(fire_line(o, known.get(o.reminder_id, o.reminder_id), tz) for o in fires)
    tip = tooltip(active, now, paused_all=paused_all, muted=muted, failed=failed)
    if not armed:
        tip += " · no engine running"
    if note:
        tip += f" · {note}"
    return View(
        tooltip=tip,
        badge=Badge(len(active), paused=paused_all, failed=failed > 0, muted=muted),
        entries=entries,
        fires=lines,
        paused_all=paused_all,
        muted=muted,
        sounding=sounding,
        failed=failed,
        note=note,
        stats=stats,
    )
