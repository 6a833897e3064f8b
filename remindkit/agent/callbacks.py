"""``set_callback``: timers an agent sets for itself, in 8 slots per
session, every 1-3600 s, ``repeat_count`` fires (default 20, -1 forever, 0 or 1
once).

A callback is an ordinary reminder (``source="callback"``, ``slot`` N, label
``callback-N``, so the store's live-label index keeps a slot single) that
repeats every ``delay_seconds`` and re-bases when its session is busy: a
deadline that passes during a turn fires one full delay after the turn ends.
Results are plain text, like these::

    Callback scheduled: fires every 30s, repeats 40 times.
    Active callbacks (2/8):
      [0] "Check the deploy job; report success or failure, then re-arm if still..." - fires in 0m12s (39 left)
    Cancelled callback slot 0: "Check the deploy job; report success or failure, then r..."
    Error: callback_id 9 out of range (max 7)
    Error: all callback slots full (max 8)
"""

from __future__ import annotations

from typing import Any

from ..errors import Conflict, RemindkitError
from ..models import ACTIVE, BusyPolicy, Reminder, ReminderSpec, Source
from ..protocol.tools import CALLBACK_DELAY_MAX, CALLBACK_DELAY_MIN, CALLBACK_SLOTS
from .context import ToolContext, ToolResult, not_given_dropped

DEFAULT_REPEAT = 20
LIST_PREVIEW = 70
CANCEL_PREVIEW = 55


def set_callback(ctx: ToolContext, args: dict[str, Any]) -> ToolResult:
    extra = sorted(
        set(args) - {"action", "message", "delay_seconds", "repeat_count", "callback_id"}
    )
    if extra:
        return _err("invalid_argument", f"unknown argument(s) {', '.join(extra)}")
    # null (and "" for the message) is "not given": a strict model sends every argument
    args = not_given_dropped(args, keep={"action"})
    action = args.get("action")
    try:
        if action == "set":
            return _set(ctx, args)
        if action == "list":
            return _list(ctx)
        if action == "cancel":
            return _cancel(ctx, args.get("callback_id"))
    except RemindkitError as exc:
        return _err(exc.code, str(exc))  # "<code>: <message>"
    return _err("invalid_action", "action must be set, list or cancel")


def reminder_spec(
    ctx: ToolContext, message: str, delay: int, repeat: int | None, slot: int
) -> ReminderSpec:
    """A callback (``message``, every ``delay`` seconds, ``repeat`` fires or None for
    forever, in slot ``slot``) as the request the reminders API takes: a re-basing
    reminder labelled ``callback-N``, with seed 003's own shortest period."""
    return ReminderSpec(
        message,
        session=ctx.session,
        label=f"callback-{slot}",
        every=delay,
        repeat=repeat,
        on_busy=BusyPolicy.REBASE,
        source=Source.CALLBACK,
        slot=slot,
        replace_label=False,
        min_period_s=CALLBACK_DELAY_MIN,
    )


def callbacks(ctx: ToolContext) -> list[Reminder]:
    """The session's live callbacks, by slot, as of now (the fires that have happened,
    and the next that has not: :meth:`~remindkit.reminders.Reminders.callbacks`)."""
    return ctx.api.callbacks(session=ctx.session)


def _set(ctx: ToolContext, args: dict[str, Any]) -> ToolResult:
    message = args.get("message")
    if not isinstance(message, str) or not message.strip():
        return _err("empty_text", "message is required for action set")
    delay = args.get("delay_seconds")
    if (
        isinstance(delay, bool)
        or not isinstance(delay, int)
        or not CALLBACK_DELAY_MIN <= delay <= CALLBACK_DELAY_MAX
    ):
        return _err(
            "invalid_delay",
            f"delay_seconds must be between {CALLBACK_DELAY_MIN} and {CALLBACK_DELAY_MAX}",
        )
    count = args.get("repeat_count", DEFAULT_REPEAT)
    if count is None:
        count = DEFAULT_REPEAT
    if isinstance(count, bool) or not isinstance(count, int) or count < -1:
        return _err(
            "invalid_repeat",
            "repeat_count must be a number of fires, -1 for forever, or 0 or 1 for once",
        )
    repeat: int | None = None if count == -1 else max(1, count)
    used = {r.slot for r in callbacks(ctx)}
    for slot in (s for s in range(CALLBACK_SLOTS) if s not in used):
        try:
            created = ctx.api.add(
                reminder_spec(ctx, message, delay, repeat, slot), surface=ctx.surface
            )
        except Conflict as exc:
            if exc.code == "conflict":
                continue  # another call took this slot at the same moment
            raise
        if repeat is None:
            text = f"Callback scheduled: fires every {delay}s, repeats infinitely."
        elif repeat == 1:
            text = f"Callback scheduled: fires once in {delay}s."
        else:
            text = f"Callback scheduled: fires every {delay}s, repeats {repeat} times."
        return ToolResult(text, ok=True, data={"slot": slot, "armed": created.armed})
    return _err("callback_slots_full", f"all callback slots full (max {CALLBACK_SLOTS})")


def _list(ctx: ToolContext) -> ToolResult:
    live = callbacks(ctx)
    if not live:
        return ToolResult("No active callbacks", ok=True)
    now = ctx.api.clock.now()
    lines = [f"Active callbacks ({len(live)}/{CALLBACK_SLOTS}):"]
    for r in live:
        if r.state == ACTIVE and r.next_fire_at is not None:
            left = max(0, int((r.next_fire_at - now).total_seconds()))
            when = f"fires in {left // 60}m{left % 60:02d}s"
        else:
            when = r.state
        remaining = "infinite" if r.remaining is None else f"{r.remaining} left"
        lines.append(f'  [{r.slot}] "{_preview(r.text, LIST_PREVIEW)}" - {when} ({remaining})')
    return ToolResult("\n".join(lines), ok=True)


def _cancel(ctx: ToolContext, callback_id: object) -> ToolResult:
    live = callbacks(ctx)
    if callback_id is None:
        if live:
            ctx.api.cancel([r.id for r in live], session=ctx.session, surface=ctx.surface)
        n = len(live)
        return ToolResult(f"Cancelled {n} callback{'' if n == 1 else 's'}.", ok=True)
    if isinstance(callback_id, bool) or not isinstance(callback_id, int):
        return _err("invalid_argument", "callback_id must be a slot number")
    if not 0 <= callback_id < CALLBACK_SLOTS:
        return _err(
            "callback_out_of_range",
            f"callback_id {callback_id} out of range (max {CALLBACK_SLOTS - 1})",
        )
    match = [r for r in live if r.slot == callback_id]
    if not match:
        return _err("callback_not_active", f"callback slot {callback_id} is not active")
    ctx.api.cancel([match[0].id], session=ctx.session, surface=ctx.surface)
    return ToolResult(
        f'Cancelled callback slot {callback_id}: "{_preview(match[0].text, CANCEL_PREVIEW)}"',
        ok=True,
    )


POPUP_PREVIEW = 30


def popup_lines(live: list[Reminder], now: Any) -> list[str]:
    """The ``/callbacks`` popup: a title, then one line per live callback (slot, message
    preview, time to the next fire, fires left or ``inf``); ``PAUSED`` in the title
    when every one of them is paused::

         Callbacks (2 active)
         [0] "Check the deploy job; report s..."  0m12s (38)
         [3] "Check disk usage on /tmp"           1m00s (inf)
    """
    if not live:
        return ["No active callbacks"]
    paused = all(r.state != ACTIVE for r in live)
    lines = [f" Callbacks ({len(live)} active)" + (" PAUSED" if paused else "")]
    for r in live:
        if r.state == ACTIVE and r.next_fire_at is not None:
            left = max(0, int((r.next_fire_at - now).total_seconds() + 0.999))
            when = f"{left // 60}m{left % 60:02d}s"
        else:
            when = "paused"
        remaining = "inf" if r.remaining is None else str(r.remaining)
        quoted = f'"{_preview(r.text, POPUP_PREVIEW)}"'
        lines.append(f" [{r.slot}] {quoted.ljust(POPUP_PREVIEW + 5)}  {when} ({remaining})")
    return lines


def _preview(text: str, limit: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[:limit].rstrip() + "..."


def _err(code: str, message: str) -> ToolResult:
    return ToolResult(f"Error: {message}", ok=False, code=code)


__all__ = ["callbacks", "popup_lines", "set_callback"]
