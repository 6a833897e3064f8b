"""Carrying out tool calls: :func:`handle_tool_call` for ``schedule_create``,
``schedule_list``, ``schedule_delete``, ``set_callback``,
``schedule_pause``, ``schedule_resume`` and ``schedule_snooze``.

A call sees and changes only its own session's reminders. A refusal is a
result with a stable code, never an exception: the ``schedule_*`` tools answer
JSON (``{"ok": true, ...}`` or ``{"ok": false, "error": {"code", "message"}}``),
``set_callback`` answers in plain text (``Callback scheduled: …``, ``Error: …``).

>>> ctx = ToolContext(rk.build().api, "s1")                          # doctest: +SKIP
>>> handle_tool_call(ctx, "schedule_create", {"prompt": "Stretch", "after": "25m"}).ok  # doctest: +SKIP
True
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ..clock import format_utc
from ..error_codes import ErrorCode
from ..errors import RemindkitError, error_body
from ..models import BusyPolicy, Reminder, ReminderSpec, Source
from ..protocol.tools import SCHEDULE_CREATE, TOOL_NAMES
from .callbacks import set_callback
from .context import ToolContext, ToolResult, not_given_dropped

NOT_FOUND = ErrorCode.SCHEDULE_NOT_FOUND
PERSISTENCE_UNCERTAIN = ErrorCode.PERSISTENCE_UNCERTAIN
_SELECTORS = ("after", "at", "every", "cron")


def handle_tool_call(
    session: ToolContext, name: str, arguments: str | Mapping[str, Any] | None
) -> ToolResult:
    """Carry out one tool call for ``session``; never raises for bad input."""
    if name not in TOOL_NAMES:
        return _error(
            "unknown_tool",
            f"there is no tool {name!r}; the reminder tools are {', '.join(TOOL_NAMES)}",
        )
    args = _arguments(arguments)
    if isinstance(args, ToolResult):
        if name == "set_callback":
            return ToolResult(
                f"Error: {args.data['error']['message'] if args.data else 'invalid arguments'}",
                ok=False,
                code=args.code,
            )
        return args
    return _answered_in_time(
        lambda: _dispatch(session, name, args), set_callback=name == "set_callback"
    )


STORE_WAIT_S = 2.0  # a tool call whose store has not answered by then: persistence_uncertain
_UNCERTAIN = (
    "the reminder store did not confirm the change in time, so it may or may not have "
    "been saved; call schedule_list to check before retrying"
)


def _answered_in_time(call: Any, *, set_callback: bool) -> ToolResult:
    """``call()``, or ``persistence_uncertain`` when the store has not answered within
    :data:`STORE_WAIT_S` (a write lock held elsewhere: the store would wait up to its
    busy timeout, 30 s, before saying so): the model can list and decide at once. The
    call goes on in its thread and may still be saved."""
    import contextvars
    import threading

    box: list[ToolResult] = []
    failed: list[BaseException] = []
    context = contextvars.copy_context()

    def work() -> None:
        try:
            box.append(context.run(call))
        except BaseException as exc:  # handed to the caller
            failed.append(exc)

    worker = threading.Thread(target=work, daemon=True, name="remindkit-tool-call")
    worker.start()
    worker.join(STORE_WAIT_S)
    if failed:
        raise failed[0]
    if box:
        return box[0]
    if set_callback:
        return ToolResult(
            f"Error: {PERSISTENCE_UNCERTAIN}: {_UNCERTAIN}", ok=False, code=PERSISTENCE_UNCERTAIN
        )
    return _error(PERSISTENCE_UNCERTAIN, _UNCERTAIN)


def _local(text: str) -> bool:
    """An ISO date-time without an offset (``2026-09-01T15:00``)."""
    from datetime import datetime

    try:
        return datetime.fromisoformat(text.strip()).tzinfo is None
    except ValueError:
        return False  # not a date-time: the reminders API says why (invalid_time)


def _dispatch(session: ToolContext, name: str, args: dict[str, Any]) -> ToolResult:
    if name == "set_callback":
        return set_callback(session, args)
    try:
        if name == "schedule_create":
            return _create(session, args)
        if name == "schedule_list":
            return _list(session, args)
        if name == "schedule_delete":
            return _delete(session, args)
        return _change(session, name, args)
    except RemindkitError as exc:
        code = exc.code
        if code == "store_unavailable":
            return _error(
                PERSISTENCE_UNCERTAIN,
                "the reminder store could not be reached, so the change may or "
                "may not have been saved; call schedule_list to check before retrying",
            )
        if code == "not_found" or (name == "schedule_delete" and code == "not_active"):
            code = NOT_FOUND
        return _error(code, exc.message)


# -- schedule_create / list / delete ----------------------------------------------------------


# how the tools name the schedule's fields in the reminders API's refusals
TOOL_WORDS = {"in": "after", **{k: k for k in ("at", "every", "cron", "repeat", "until")}}


def reminder_spec(ctx: ToolContext, args: dict[str, Any]) -> ReminderSpec | ToolResult:
    """``schedule_create``'s arguments (``prompt``, ``label``, ``after``, ``at``,
    ``every``, ``cron``, ``time_zone``, …) as the request the reminders API takes, or
    the refusal of what only a tool call can get wrong: arguments it does not take or
    of the wrong JSON type, more than one of after / at / every / cron (seed 002: one
    selector), a local ``at`` without ``time_zone``. The reminders API checks the rest."""
    bad = _unknown(args, set(SCHEDULE_CREATE.parameters["properties"]))
    if bad:
        return bad
    args = not_given_dropped(args, keep={"prompt"})
    chosen = [s for s in _SELECTORS if args.get(s) is not None]
    if len(chosen) > 1:
        return _error(
            "conflicting_schedule",
            f"give exactly one of after, at, every or cron (got {', '.join(chosen)})",
        )
    for key in ("prompt", "label", "at", "cron", "time_zone", "until", "announce", "on_busy"):
        if args.get(key) is not None and not isinstance(args[key], str):
            return _error("invalid_argument", f"{key} must be a string")
    if args.get("prompt") is None:
        return _error("empty_text", "the reminder needs a prompt: say what to remind about")
    alarm = args.get("alarm", False)
    if not isinstance(alarm, bool):
        return _error("invalid_argument", "alarm must be true or false")
    if args.get("at") is not None and args.get("time_zone") is None and _local(args["at"]):
        # the model names the zone: nothing is taken from the machine it runs on
        return _error(
            "missing_time_zone",
            f"at {args['at']!r} is a local date-time: give time_zone (an IANA zone such as "
            "Europe/Berlin) or an offset (2026-09-01T15:00:00+08:00)",
        )
    return ReminderSpec(
        args["prompt"],
        session=ctx.session,
        label=args.get("label"),
        in_=args.get("after"),
        at=args.get("at"),
        every=args.get("every"),
        cron=args.get("cron"),
        tz=args.get("time_zone"),
        repeat=args.get("repeat"),
        until=args.get("until"),
        alarm=alarm,
        announce=args.get("announce"),
        on_busy=args.get("on_busy") or BusyPolicy.WAIT,
        source=Source.TOOL,
        words=TOOL_WORDS,
    )


def _create(ctx: ToolContext, args: dict[str, Any]) -> ToolResult:
    spec = reminder_spec(ctx, args)
    if isinstance(spec, ToolResult):
        return spec
    created = ctx.api.add(spec, surface=ctx.surface)
    data = {"ok": True, "reminder": reminder_view(created.reminder), "armed": created.armed}
    if created.replaced:
        data["replaced"] = list(created.replaced)
    return _ok(data)


def _list(ctx: ToolContext, args: dict[str, Any]) -> ToolResult:
    bad = _unknown(args, set())
    if bad:
        return bad
    rems = ctx.api.list(session=ctx.session)
    return _ok({"ok": True, "reminders": [reminder_view(r) for r in rems]})


def _delete(ctx: ToolContext, args: dict[str, Any]) -> ToolResult:
    bad = _unknown(args, {"id"})
    if bad:
        return bad
    rid = args.get("id")
    if not isinstance(rid, str) or not rid.strip():
        return _error("invalid_argument", "id must be a reminder id such as rem_3f9a1c2e7b04")
    (done,) = ctx.api.cancel([rid.strip()], session=ctx.session, surface=ctx.surface)
    return _ok({"ok": True, "deleted": done.id, "reminder": reminder_view(done)})


def _change(ctx: ToolContext, name: str, args: dict[str, Any]) -> ToolResult:
    """schedule_pause / schedule_resume / schedule_snooze of one of the session's reminders."""
    snooze = name == "schedule_snooze"
    bad = _unknown(args, {"id", "duration"} if snooze else {"id"})
    if bad:
        return bad
    rid = args.get("id")
    if not isinstance(rid, str) or not rid.strip():
        return _error("invalid_argument", "id must be a reminder id such as rem_3f9a1c2e7b04")
    rid = rid.strip()
    if snooze:
        duration = args.get("duration")
        if duration is None or isinstance(duration, bool) or not isinstance(duration, (str, int)):
            return _error(
                "invalid_duration",
                "duration must be 30s, 5m, 2h, 1h30m or a whole number of seconds",
            )
        changed = ctx.api.snooze(rid, duration, session=ctx.session)
    elif name == "schedule_pause":
        (changed,) = ctx.api.pause([rid], session=ctx.session)
    else:
        (changed,) = ctx.api.resume([rid], session=ctx.session)
    return _ok({"ok": True, "reminder": reminder_view(changed)})


def reminder_view(r: Reminder) -> dict[str, Any]:
    """What a tool tells the model about a reminder: id, target time in UTC and in
    its zone, state and how it will be delivered."""
    return {
        "id": r.id,
        "label": r.label,
        "prompt": r.text,
        "kind": r.kind,
        "schedule": r.schedule.describe(),
        "state": r.state,
        "target_at_utc": format_utc(r.next_fire_at),
        "target_at_local": r.local_next(),
        "time_zone": r.schedule.tz,
        "repeat": "forever" if r.schedule.repeat is None else r.schedule.repeat,
        "remaining": r.remaining if r.schedule.repeating else None,
        "alarm": r.alarm,
        "announce": r.announce,
        "delivery": {
            "mode": "turn",
            "session": r.session,
            "on_busy": r.on_busy,
            "note": "comes back to this conversation as a new turn when it is idle",
        },
    }


# -- helpers ---------------------------------------------------------------------------------


def _arguments(arguments: str | Mapping[str, Any] | None) -> dict[str, Any] | ToolResult:
    if arguments is None or arguments == "":
        return {}
    if isinstance(arguments, str):
        try:
            parsed = json.loads(arguments)
        except ValueError as exc:
            return _error("invalid_argument", f"the arguments are not JSON: {exc}")
        arguments = parsed
    if not isinstance(arguments, Mapping):
        return _error("invalid_argument", "the arguments must be a JSON object")
    return dict(arguments)


def _unknown(args: dict[str, Any], allowed: set[str]) -> ToolResult | None:
    extra = sorted(set(args) - allowed)
    if not extra:
        return None
    takes = ", ".join(sorted(allowed)) if allowed else "no arguments"
    return _error(
        "invalid_argument", f"unknown argument(s) {', '.join(extra)}; this tool takes {takes}"
    )


def _ok(data: dict[str, Any]) -> ToolResult:
    return ToolResult(json.dumps(data, ensure_ascii=False), ok=True, data=data)


def _error(code: str, message: str) -> ToolResult:
    data = {"ok": False, **error_body(code, message)}
    return ToolResult(json.dumps(data, ensure_ascii=False), ok=False, code=code, data=data)


tool_error = _error  # a refusal in the tools' shape, for calls refused before they reach a tool


__all__ = [
    "NOT_FOUND",
    "ToolContext",
    "ToolResult",
    "handle_tool_call",
    "not_given_dropped",
    "reminder_view",
    "tool_error",
]
