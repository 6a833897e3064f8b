"""The HTTP API's bodies as the OpenAPI document states them.

The request bodies are validated with these models (strict types: ``"alarm": "yes"``
and ``"repeat": true`` are refused), with the bounds of the store's settings; the
reminders API then checks the rest (schedules, zones, limits) with its own codes.
The response models only describe: the routes send the reminders API's own JSON
(``Reminder.to_dict()`` and the like), which the schemathesis run checks against them.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from ..models import (
    BUSY_POLICIES,
    MISFIRE_POLICIES,
    REMINDER_STATES,
    URGENCIES,
    ReminderSpec,
    Source,
)
from ..schedules import KINDS
from ..settings import Limits

SHORT = 200  # a duration, instant, zone or cron rule is never longer
MAX_REPEAT = 2_147_483_647
REPEAT_TEXT = r"^([1-9][0-9]{0,8}|forever|inf|infinite|-1)$"


def _enum(values: Any) -> dict[str, Any]:
    return {"enum": [str(v) for v in values]}


def input_models(limits: Limits) -> tuple[type[BaseModel], type[BaseModel]]:
    """The request bodies (a new reminder, a change) with these limits."""
    Seconds = Annotated[int, Field(ge=1, le=limits.horizon_s)]
    Short = Annotated[str, StringConstraints(max_length=SHORT)]
    Duration = Short | Seconds | None
    Repeat = (
        Annotated[int, Field(ge=-1, le=MAX_REPEAT)]
        | Annotated[str, StringConstraints(pattern=REPEAT_TEXT)]
        | None
    )

    class ReminderIn(BaseModel):
        """A new reminder: ``prompt``, and one of ``in``, ``at``, ``every`` (with ``in``
        or ``at`` for its first fire) or ``cron`` (with ``timezone``)."""

        model_config = ConfigDict(extra="forbid", populate_by_name=True, strict=True)
        prompt: str = Field(
            min_length=1,
            max_length=limits.text_max,
            description="what to remind about; handed back to the session when it fires",
        )
        name: str | None = Field(
            None,
            max_length=limits.label_max,
            description="label; a new reminder with a live name replaces the old one",
        )
        in_: Duration = Field(None, alias="in", description="30s, 5m, 2h, 1h30m or seconds")
        at: Short | None = Field(
            None, description="RFC 3339 with offset, or a local date-time with timezone"
        )
        every: Duration = Field(None, description="the period: a duration or seconds")
        cron: Short | None = Field(None, description="5 fields, or 6 with seconds first")
        timezone: Short | None = Field(None, description="IANA zone")
        repeat: Repeat = Field(None, description="number of fires, or forever / -1")
        until: Short | None = Field(None, description="no fire after this")
        alarm: bool = False
        announce: str | None = Field(
            None, max_length=limits.announce_max, description="spoken when it fires"
        )
        on_busy: str = Field("wait", json_schema_extra=_enum(BUSY_POLICIES))
        urgency: str = Field("normal", json_schema_extra=_enum(URGENCIES))
        misfire: str = Field("latest", json_schema_extra=_enum(MISFIRE_POLICIES))

    class ReminderPatch(BaseModel):
        """``enabled`` false pauses, true resumes; ``snooze`` a duration; ``prompt``
        and ``name`` change the text and label; ``version`` refuses a stale change.
        All of it is applied in one transaction, or nothing is."""

        model_config = ConfigDict(extra="forbid", strict=True)
        enabled: bool | None = None
        snooze: Duration = None
        prompt: str | None = Field(None, min_length=1, max_length=limits.text_max)
        name: str | None = Field(None, max_length=limits.label_max)
        version: int | None = Field(None, ge=1, le=2**62)

    return ReminderIn, ReminderPatch


# how a body names the schedule's fields in the reminders API's refusals
BODY_WORDS = {k: f'"{k}"' for k in ("in", "at", "every", "cron", "repeat", "until")}


def reminder_spec(body: Any, *, session: str, project: str) -> ReminderSpec:
    """A ``ReminderIn`` body (``prompt``, ``name``, ``in``, ``timezone``, …) as the
    request the reminders API takes, for ``session`` of ``project``."""
    return ReminderSpec(
        body.prompt,
        session=session,
        label=body.name,
        in_=body.in_,
        at=body.at,
        every=body.every,
        cron=body.cron,
        tz=body.timezone,
        repeat=body.repeat,
        until=body.until,
        alarm=body.alarm,
        announce=body.announce,
        urgency=body.urgency,
        misfire=body.misfire,
        on_busy=body.on_busy,
        source=Source.HTTP,
        project=project,
        words=BODY_WORDS,
    )


def message_model(limits: Limits, max_chars: int) -> type[BaseModel]:
    """The body of a message the person sends to a session."""

    class MessageIn(BaseModel):
        """A message to the session's agent, as if typed in its chat."""

        model_config = ConfigDict(extra="forbid", strict=True)
        text: str = Field(
            min_length=1, max_length=max_chars, description="what the person says to the agent"
        )

    return MessageIn


# -- what the routes answer ------------------------------------------------------------


class ErrorDetail(BaseModel):
    code: str = Field(
        description="stable error code (the error reference: docs/reference/errors.md)"
    )
    message: str = Field(description="what was wrong and what is allowed")


class ErrorBody(BaseModel):
    """Every refusal."""

    error: ErrorDetail


class Delivery(BaseModel):
    state: str
    wait_for: str | None
    reason: str | None
    due_at: str | None
    count: int


class Reminder(BaseModel):
    """A reminder, as ``remindkit ls --json`` shows it, with its ``version``."""

    id: str
    session: str | None
    label: str | None
    text: str
    kind: str = Field(json_schema_extra=_enum(KINDS))
    state: str = Field(json_schema_extra=_enum(REMINDER_STATES))
    next_fire_at: str | None = Field(description="RFC 3339, UTC")
    next_fire_local: str | None
    tz: str | None
    schedule: str
    every_s: int | None
    cron: str | None
    until: str | None
    repeat: int | None = Field(description="fires in all; null: forever")
    fired_count: int
    remaining: int | None
    alarm: bool
    announce: str | None
    urgency: str = Field(json_schema_extra=_enum(URGENCIES))
    misfire: str = Field(json_schema_extra=_enum(MISFIRE_POLICIES))
    on_busy: str = Field(json_schema_extra=_enum(BUSY_POLICIES))
    last_error: str | None
    source: str | None
    slot: int | None
    created_at: str | None
    updated_at: str | None
    delivery: Delivery | None
    version: int


class ReminderCreated(Reminder):
    replaced: list[str] = Field(description="ids of the reminders its name replaced")


class SessionOut(BaseModel):
    id: str
    adapter: str
    config: dict[str, Any]
    state: str
    created_at: str | None
    last_active_at: str | None
    busy: bool
    parent_id: str | None
    title: str | None
    fallback: str
    failures: int
    last_error: str | None
    project: str


class Fire(BaseModel):
    """One fire of a reminder and what became of it."""

    reminder_id: str
    key: str
    session: str | None
    due_at: str | None
    fired_at: str | None
    late_ms: int | None
    handed_at: str | None
    wait_ms: int | None
    turn_ms: int | None
    delivered_at: str | None
    delivered_to: str | None
    outcome: str
    missed: int
    position: int | None
    attempts: int
    error: str | None
    wait_for: str | None
    alert: str | None  # the alarm and announcement: pending, playing, done, muted, failed


class Pill(BaseModel):
    id: str
    session: str | None
    label: str
    text: str
    kind: str
    schedule: str
    state: str
    due_ms: int | None
    remaining: int | None
    alarm: bool
    announce: str | None
    waiting: str | None  # why a fire of it that came due waits (for its session), or null


class Line(BaseModel):
    seq: int
    who: str
    text: str


class View(BaseModel):
    """What the web page shows of a session."""

    pills: list[Pill]
    lines: list[Line]


class TagDone(BaseModel):
    """A ``<schedule>`` or ``<cancel-schedule>`` tag of the reply, carried out or not."""

    ok: bool
    code: str | None = Field(description="why it was not carried out")
    label: str | None
    reminder: str | None = Field(description="the reminder it set")
    cancelled: list[str] = Field(description="ids of the reminders it cancelled")


class MessageReply(BaseModel):
    """The end of a typed turn: the reply for display (tags stripped), or why it failed."""

    ok: bool
    text: str
    tags: list[TagDone]
    error: ErrorDetail | None


class EngineOut(BaseModel):
    id: str
    role: str | None
    pid: int | None
    host: str | None


class Scope(BaseModel):
    scope: Literal["admin", "project", "session"]
    project: str | None
    session: str | None
    read_only: bool


class Status(BaseModel):
    paused_all: bool
    armed: bool
    engines: list[EngineOut]
    alerter: str | None
    engine: str | None
    streams: int
    scope: Scope


class Health(BaseModel):
    ok: bool
