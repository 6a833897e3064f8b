"""Checking the lines of an export before ``remindkit import`` writes any of them.

A reminder line is held to what ``remind`` would accept: its schedule's kind,
zone, cron rule, period (the minimum repeat period), repeat count and horizon,
every integer within its range, the text, label and announcement within their
limits, and the timestamps it needs (``created_at``). The store then checks the
limits per session and in total inside the import's transaction. A session line
needs its id and ``created_at``; without ``trust`` its fields that run code, send
data somewhere or name a secret (a webhook's ``url`` and ``secret_env`` too) are left out and it comes in disabled
(:func:`~remindkit.sessions.trust.untrusted_session_config`).

Any refusal raises ``InvalidInput`` (the caller adds the line number and the code
``invalid_import``); nothing is written.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from typing import Any, TypeVar

from ._compat import StrEnum
from .checks import check_announce, check_id, check_label, check_session_id, check_text
from .clock import parse_utc
from .errors import InvalidInput, InvalidSchedule
from .models import (
    ACTIVE,
    LIVE_STATES,
    BusyPolicy,
    MisfirePolicy,
    Reminder,
    ReminderState,
    Session,
    Source,
    Urgency,
    by_value,
)
from .protocol.tools import CALLBACK_SLOTS
from .schedules import Schedule, compile_cron, get_zone
from .schedules.spec import cron_min_gap
from .settings import Settings

E = TypeVar("E", bound=StrEnum)

MAX_COUNT = 1_000_000_000  # fired_count, repeat: far beyond any real series, well inside 64 bits
MAX_CONFIG = 64 * 1024  # characters of a session's config as JSON
SESSION_STATES = ("active", "closed", "deleted")


def _int(d: dict[str, Any], key: str, default: int | None, lo: int, hi: int) -> int | None:
    value = d.get(key, default)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise InvalidInput(
            f"{key} must be a whole number from {lo} to {hi} (got {str(value)[:40]!r})",
            code="invalid_import",
        )
    return value


def _str(d: dict[str, Any], key: str, *, required: bool = False) -> str | None:
    value = d.get(key)
    if value is None and not required:
        return None
    if not isinstance(value, str):
        raise InvalidInput(f"{key} must be a string", code="invalid_import")
    return value


def _time(d: dict[str, Any], key: str, *, required: bool = False) -> datetime | None:
    value = _str(d, key, required=required)
    if not value:
        if required:
            raise InvalidInput(f"{key} is missing", code="invalid_import")
        return None
    return parse_utc(value)


def check_schedule(
    data: object, settings: Settings, *, live: bool, now: datetime, next_fire: datetime | None
) -> Schedule:
    """The schedule of an imported reminder, validated like ``remind`` builds one."""
    if not isinstance(data, dict):
        raise InvalidInput("schedule must be an object", code="invalid_import")
    limits = settings.limits
    for key in ("every_s", "delay_s"):
        _int(data, key, None, 1, limits.horizon_s)
    repeat = _int(data, "repeat", 1, 1, MAX_COUNT) if data.get("repeat", 1) is not None else None
    if data.get("kind") in ("after", "at") and repeat != 1:
        raise InvalidInput("a one-shot schedule has repeat 1", code="invalid_import")
    for key in ("tz", "cron", "first_at", "until"):
        if data.get(key) is not None and not isinstance(data[key], str):
            raise InvalidInput(f"schedule.{key} must be a string", code="invalid_import")
    sched = Schedule.from_dict(data)
    get_zone(sched.tz)  # unknown_time_zone
    if sched.kind == "cron":
        assert sched.cron is not None
        compile_cron(sched.cron)  # invalid_cron
    if not live:
        return sched
    if sched.kind == "every":
        assert sched.every_s is not None
        if sched.every_s < limits.min_period_s:
            raise InvalidSchedule(
                f"the interval is {sched.every_s}s; the shortest allowed is {limits.min_period_s}s",
                code="interval_too_short",
            )
    if sched.kind == "cron":
        assert sched.cron is not None
        gap = cron_min_gap(sched.cron, sched.tz, now)
        if gap is not None and gap < limits.min_period_s:
            raise InvalidSchedule(
                f"the cron rule fires {gap}s apart; the shortest allowed is {limits.min_period_s}s",
                code="interval_too_short",
            )
    if next_fire is not None and next_fire - now > timedelta(seconds=limits.horizon_s):
        raise InvalidSchedule("next_fire_at is past the horizon", code="horizon_exceeded")
    return sched


def check_reminder(d: dict[str, Any], settings: Settings, now: datetime) -> Reminder:
    limits = settings.limits
    state = _one_of(d, "state", ReminderState, ACTIVE, "invalid_state")
    urgency = _one_of(d, "urgency", Urgency, "normal", "invalid_urgency")
    misfire = _one_of(d, "misfire", MisfirePolicy, "latest", "invalid_misfire")
    on_busy = _one_of(d, "on_busy", BusyPolicy, "wait", "invalid_on_busy")
    live = state in LIVE_STATES
    nxt = _time(d, "next_fire_at")
    if state == ACTIVE and nxt is None:
        raise InvalidInput("an active reminder needs next_fire_at", code="invalid_import")
    created = _time(d, "created_at", required=True)
    assert created is not None
    sched = check_schedule(d.get("schedule"), settings, live=live, now=now, next_fire=nxt)
    last_error = _str(d, "last_error")
    source = _str(d, "source") or Source.IMPORT
    for key, value, most in (("last_error", last_error, 2_000), ("source", source, 40)):
        if value is not None and len(value) > most:
            raise InvalidInput(f"{key} is longer than {most} characters", code="invalid_import")
    for key in ("alarm", "snoozed"):
        if not isinstance(d.get(key, False), bool):
            raise InvalidInput(f"{key} must be true or false", code="invalid_import")
    fired = _int(d, "fired_count", 0, 0, MAX_COUNT)
    cap = _int(d, "catchup_cap", settings.catchup_cap, 1, settings.catchup_max)
    slot = _int(d, "slot", None, 0, CALLBACK_SLOTS - 1)
    assert fired is not None and cap is not None
    return Reminder(
        id=check_id(d.get("id")),
        session=check_session_id(d.get("session")),
        label=check_label(d.get("label"), limits.label_max),
        text=check_text(d.get("text"), limits.text_max),
        schedule=sched,
        state=state,
        next_fire_at=nxt,
        fired_count=fired,
        alarm=bool(d.get("alarm", False)),
        announce=check_announce(d.get("announce"), limits.announce_max),
        urgency=urgency,
        misfire=misfire,
        catchup_cap=cap,
        on_busy=on_busy,
        last_error=last_error,
        source=by_value(Source).get(source, source),
        slot=slot,
        snoozed=bool(d.get("snoozed", False)),
        created_at=created,
        updated_at=_time(d, "updated_at") or created,
    )


def _one_of(d: dict[str, Any], name: str, enum: type[E], default: str, code: str) -> E:
    """The member of ``enum`` that the line's ``name`` (or ``default``) is."""
    value = d.get(name, default)
    members = by_value(enum)
    if not isinstance(value, str) or value not in members:
        raise InvalidInput(f"{name} must be one of {', '.join(members)}", code=code)
    return members[value]


def check_session(d: dict[str, Any], *, trust: bool) -> tuple[Session, list[str]]:
    """The session of a line, and the names of the fields left out (untrusted import)."""
    from .checks import check_env_names, check_printable, check_session_id, untrusted_session_config

    sid = check_session_id(d.get("id"))
    if sid is None:
        raise InvalidInput("a session needs an id", code="invalid_import")
    adapter = _str(d, "adapter")
    if adapter is not None:
        check_printable(adapter, "adapter", 100)
    config = d.get("config") or {}
    if not isinstance(config, dict):
        raise InvalidInput("config must be an object", code="invalid_import")
    if len(json.dumps(config)) > MAX_CONFIG:
        raise InvalidInput(f"config is longer than {MAX_CONFIG} characters", code="invalid_import")
    state = d.get("state", "active")
    if state not in SESSION_STATES:
        raise InvalidInput(
            f"state must be one of {', '.join(SESSION_STATES)}", code="invalid_import"
        )
    created = _time(d, "created_at", required=True)
    dropped: list[str] = []
    if trust:
        for key in ("argv", "fresh_argv"):
            argv = config.get(key)
            if argv is not None and (
                not isinstance(argv, list) or not argv or not all(isinstance(a, str) for a in argv)
            ):
                raise InvalidInput(f"config.{key} must be a list of strings", code="invalid_import")
        if isinstance(config.get("env"), dict):
            check_env_names(config["env"])
        if config.get("api_key_env") is not None:
            from .checks import check_key_env

            check_key_env(config["api_key_env"])
        if config.get("url") is not None:
            from .checks import check_webhook_url

            check_webhook_url(config["url"])
        if config.get("secret_env") is not None:
            from .checks import check_secret_env

            check_secret_env(config["secret_env"])
    else:
        config, dropped = untrusted_session_config(config)
    parent = d.get("parent_id")
    title = d.get("title")
    return Session(
        id=sid,
        adapter=adapter,
        config=dict(config),
        state=state,
        created_at=created,
        last_active_at=_time(d, "last_active_at") or created,
        parent_id=check_session_id(parent) if parent is not None else None,
        title=check_printable(title, "title", 200) if title is not None else None,
    ), dropped


__all__ = ["check_reminder", "check_schedule", "check_session"]
