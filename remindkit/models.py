"""Domain values: reminders, occurrences (fires), sessions.

Frozen dataclasses; the store maps its rows to these, so nothing outside
``remindkit.store`` imports SQLAlchemy. ``to_dict`` gives the stable ``--json``
shapes (times RFC 3339 UTC with ``Z``).

States and policies are ``StrEnum`` members (they compare equal to, and print as,
the strings stored in the database). The store's row mappers turn what they read
into members with :func:`member`; a value this remindkit does not know (written by
a newer one, or by hand) stays the string it is. Two vocabularies are open and
typed as the enum or a string: a session's adapter (plugins name their own) and a
reminder's source (an import keeps the one it carries).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, TypeVar

from ._compat import StrEnum, quick_init
from .clock import format_utc
from .schedules import Schedule
from .schedules.spec import Kind
from .schedules.zones import get_zone

E = TypeVar("E", bound=StrEnum)


class ReminderState(StrEnum):
    ACTIVE = "active"
    PAUSED = "paused"
    DONE = "done"  # a one-shot delivered, or a repeat exhausted
    CANCELLED = "cancelled"
    FAILED = (
        "failed"  # its last fire could not be delivered (``last_error`` says why), or quarantined
    )


class OccurrenceState(StrEnum):
    CLAIMED = "claimed"  # an engine holds it (lease) to alert and hand it to delivery
    WAITING = "waiting"  # fired; waits for its session (``wait_for`` says for what)
    DELIVERED = "delivered"
    ALERTED = "alerted"  # the person was alerted and there was no agent to hand it to: it ends so
    SKIPPED = "skipped"  # by policy: busy-skip, catch-up skip, re-based, superseded by a later fire
    FAILED = "failed"
    CANCELLED = "cancelled"  # its reminder was cancelled before it was delivered


class WaitFor(StrEnum):
    """What a ``waiting`` occurrence waits for (a column, not a prefix in its error)."""

    IDLE = "idle"  # its session is busy (policy wait)
    REBASE = "rebase"  # its session was busy at the due time (policy rebase): re-based when idle
    SESSION = "session"  # no session to deliver to yet, or none this process can reach
    RETRY = "retry"  # the agent or the store could not be reached: tried again with back-off


class MisfirePolicy(StrEnum):
    LATEST = "latest"
    SKIP = "skip"
    ALL = "all"


class BusyPolicy(StrEnum):
    WAIT = "wait"
    REBASE = "rebase"
    SKIP = "skip"


class FallbackPolicy(StrEnum):
    """What a session does when its turn fails at once: re-send once into a fresh
    session, or not."""

    FRESH = "fresh"
    NONE = "none"


class Urgency(StrEnum):
    LOW = "low"
    NORMAL = "normal"
    CRITICAL = "critical"


class SessionState(StrEnum):
    ACTIVE = "active"
    CLOSED = "closed"
    DELETED = "deleted"


class Quarantine(StrEnum):
    """Why a reminder was set aside (``failed``, with the reason in ``last_error``) by
    an engine that would not carry it out (``remindkit/store/quarantine.py``)."""

    UNREADABLE_ROW = "unreadable_row"  # a hand edit, a newer remindkit, damage
    REFUSED_PLAN = "refused_plan"  # past the engine's own bounds (errors.PlanRefused)


class AlertState(StrEnum):
    """The alert of a fired occurrence (alarm, speech), which plays once: ``None`` when
    its reminder asks for none."""

    PENDING = "pending"  # to play: an engine that may alert takes it pending -> playing
    PLAYING = "playing"
    DONE = "done"
    FAILED = "failed"  # no sound device, a speaker that failed (the delivery goes on)
    MUTED = "muted"  # the person muted alerts, or quiet hours


class Source(StrEnum):
    """What made a reminder (an import keeps the source it carries, known here or not)."""

    API = "api"  # the reminders API in Python (a notebook, the tray)
    CLI = "cli"
    TOOL = "tool"  # schedule_create
    TAG = "tag"  # a <schedule> tag in an agent's reply
    CALLBACK = "callback"  # set_callback
    HTTP = "http"
    NOTEBOOK = "notebook"  # the notebook panel's form
    IMPORT = "import"


class AdapterName(StrEnum):
    """The built-in session adapters (a plugin named in ``REMINDKIT_ADAPTERS`` brings
    its own name)."""

    COMMAND = "command"
    PYTHON = "python"
    OPENAI = "openai"
    MCP = "mcp"
    TELEGRAM = "telegram"
    WEBHOOK = "webhook"


class Role(StrEnum):
    """The role of a transcript's message (OpenAI chat roles)."""

    SYSTEM = "system"
    USER = "user"
    ASSISTANT = "assistant"
    TOOL = "tool"


class MessageKind(StrEnum):
    """Where a message of a transcript came from."""

    CHAT = "chat"  # typed by the person, or the agent's reply
    FIRED_TURN = "fired"  # a fired reminder's <schedule-fired> turn (hidden)
    FEEDBACK = "feedback"  # the report of tags that were not carried out (hidden)
    TOOL_RESULT = "tool"


_BY_VALUE: dict[type, dict[Any, Any]] = {}


def by_value(enum: type[E]) -> dict[str, E]:
    """``enum``'s members by value (made once). The store's row mappers look values up
    here, ``by_value(Urgency).get(v, v)``: a dict lookup, a tenth of ``Urgency(v)``,
    on every row a claim or a listing reads; a value the enum does not have (a newer
    remindkit, or a hand edit, wrote it) stays the string the row had."""
    by = _BY_VALUE.get(enum)
    if by is None:
        by = _BY_VALUE[enum] = {m.value: m for m in enum}
    return by


def member(enum: type[E], value: Any) -> E:
    """The member of ``enum`` whose value ``value`` is (see :func:`by_value`); a value
    it does not have comes back as it is. For input already checked against it."""
    return by_value(enum).get(value, value)


# Short names used across the package.
ACTIVE, PAUSED, DONE, CANCELLED, FAILED = (
    ReminderState.ACTIVE,
    ReminderState.PAUSED,
    ReminderState.DONE,
    ReminderState.CANCELLED,
    ReminderState.FAILED,
)
REMINDER_STATES = tuple(ReminderState)
LIVE_STATES = (ACTIVE, PAUSED)  # labels are unique among these
CLAIMED, WAITING, DELIVERED, SKIPPED = (
    OccurrenceState.CLAIMED,
    OccurrenceState.WAITING,
    OccurrenceState.DELIVERED,
    OccurrenceState.SKIPPED,
)
OCC_FAILED, OCC_CANCELLED = OccurrenceState.FAILED, OccurrenceState.CANCELLED
ALERTED = OccurrenceState.ALERTED
MISFIRE_POLICIES = tuple(MisfirePolicy)
BUSY_POLICIES = tuple(BusyPolicy)
URGENCIES = tuple(Urgency)


@quick_init
@dataclass(frozen=True)
class ReminderSpec:
    """A request for one reminder, as :meth:`remindkit.reminders.Reminders.add` takes
    it. Each surface parses its own spelling into it, in one function, and leaves the
    checks to the reminders API:

    * the command line, ``TEXT --label --in --tz``: ``cli.reminders.reminder_spec``;
    * the HTTP API, ``prompt name in timezone``: ``api.schema.reminder_spec``;
    * the tools, ``prompt label after time_zone``: ``agent.tools.reminder_spec``;
    * the tags, ``label delay tz``: ``agent.actions.reminder_spec``;
    * ``set_callback``, ``message delay_seconds repeat_count``:
      ``agent.callbacks.reminder_spec``;
    * the notebook's form: ``notebook.form.Form.spec``.

    Python callers may give the fields as keywords instead:
    ``api.add("Check the deploy", session="s1", in_="5m")``.

    ``in_`` / ``at`` / ``every`` / ``cron`` say when (``tz`` for local times, else the
    configured zone); ``repeat`` (a count, or -1 / ``forever``) and ``until`` bound a
    repeating one. ``project``: the session is that project's. ``replace_label``: a
    live reminder with the label is replaced (else the label must be free).
    ``min_period_s``: a shortest period other than the settings' (set_callback's 1 s).
    ``words``: how the surface names ``in``, ``at``, ``every``, ``cron``, ``repeat``
    and ``until`` in refusals (the command line's flags when not given)."""

    text: str
    session: str | None = None
    label: str | None = None
    in_: str | int | None = None
    at: str | datetime | None = None
    every: str | int | None = None
    cron: str | None = None
    tz: str | None = None
    repeat: object = None
    until: str | datetime | None = None
    alarm: bool = False
    announce: str | None = None
    urgency: str = Urgency.NORMAL
    misfire: str = MisfirePolicy.LATEST
    catchup_cap: int | None = None
    on_busy: str = BusyPolicy.WAIT
    source: Source | str = Source.API
    slot: int | None = None
    replace_label: bool = True
    min_period_s: int | None = None
    project: str | None = None
    words: Mapping[str, str] | None = None


@quick_init
@dataclass(frozen=True)
class Reminder:
    id: str
    session: str | None
    text: str
    schedule: Schedule
    state: ReminderState = ACTIVE
    label: str | None = None
    next_fire_at: datetime | None = None
    fired_count: int = 0
    alarm: bool = False
    announce: str | None = None
    urgency: Urgency = Urgency.NORMAL
    misfire: MisfirePolicy = MisfirePolicy.LATEST
    catchup_cap: int = 10
    on_busy: BusyPolicy = BusyPolicy.WAIT
    last_error: str | None = None
    created_at: datetime | None = None
    updated_at: datetime | None = None
    source: Source | str = Source.API
    slot: int | None = None
    snoozed: bool = False
    version: int = 1
    delivery: Delivery | None = None  # a fire of it that waits for its session (read with lists)
    quarantine: Quarantine | None = None  # set aside by an engine (state failed): why

    @property
    def kind(self) -> Kind:
        return self.schedule.kind

    @property
    def remaining(self) -> int | None:
        """Fires left, None when forever."""
        if self.schedule.repeat is None:
            return None
        return max(0, self.schedule.repeat - self.fired_count)

    def local_next(self) -> str | None:
        if self.next_fire_at is None:
            return None
        return self.next_fire_at.astimezone(get_zone(self.schedule.tz)).isoformat()

    def to_dict(self) -> dict[str, Any]:
        """The ``--json`` / API shape (a new dict each call; made once per reminder)."""
        known = self.__dict__.get("_as_dict")
        if known is None:
            known = self.__dict__["_as_dict"] = self._to_dict()  # frozen: once is enough
        out = dict(known)
        if out["delivery"] is not None:
            out["delivery"] = dict(out["delivery"])
        return out

    def _to_dict(self) -> dict[str, Any]:
        s = self.schedule
        return {
            "id": self.id,
            "session": self.session,
            "label": self.label,
            "text": self.text,
            "kind": s.kind,
            "state": self.state,
            "next_fire_at": format_utc(self.next_fire_at),
            "next_fire_local": self.local_next(),
            "tz": s.tz,
            "schedule": s.describe(),
            "every_s": s.every_s,
            "cron": s.cron,
            "until": format_utc(s.until),
            "repeat": s.repeat,
            "fired_count": self.fired_count,
            "remaining": self.remaining,
            "alarm": self.alarm,
            "announce": self.announce,
            "urgency": self.urgency,
            "misfire": self.misfire,
            "on_busy": self.on_busy,
            "last_error": self.last_error,
            "source": self.source,
            "slot": self.slot,
            "created_at": format_utc(self.created_at),
            "updated_at": format_utc(self.updated_at),
            "delivery": None if self.delivery is None else self.delivery.to_dict(),
        }


@quick_init
@dataclass(frozen=True)
class Delivery:
    """Fires of a reminder that have fired but wait for their session: still the
    user's (listed, cancellable) until their turn starts."""

    state: OccurrenceState  # waiting
    wait_for: WaitFor | None
    reason: str | None
    due_at: datetime
    count: int = 1

    def to_dict(self) -> dict[str, Any]:
        return {
            "state": self.state,
            "wait_for": self.wait_for,
            "reason": self.reason,
            "due_at": format_utc(self.due_at),
            "count": self.count,
        }


@quick_init
@dataclass(frozen=True)
class Occurrence:
    """One fire of a reminder: keyed by (reminder_id, due_at), the idempotency key."""

    id: int
    reminder_id: str
    due_at: datetime
    state: OccurrenceState
    session: str | None = None
    fired_at: datetime | None = None
    delivered_at: datetime | None = None
    missed: int = 0
    position: int | None = None  # 1-based fire number of its reminder
    attempts: int = 0
    error: str | None = None
    delivered_to: str | None = None
    alert: AlertState | None = None
    owner: str | None = None
    wait_for: WaitFor | None = None  # while waiting
    handed_at: datetime | None = None  # the turn that carries it started

    @property
    def key(self) -> str:
        return occurrence_key(self.reminder_id, self.due_at)

    @property
    def late_ms(self) -> int | None:
        """Due -> fired (the alert and the fired event)."""
        return _ms(self.due_at, self.fired_at)

    @property
    def wait_ms(self) -> int | None:
        """Fired -> handed to the session (waiting for it to be idle or reachable)."""
        return _ms(self.fired_at, self.handed_at)

    @property
    def turn_ms(self) -> int | None:
        """Handed -> answered (the agent's turn)."""
        return _ms(self.handed_at, self.delivered_at)

    @property
    def outcome(self) -> OccurrenceState:
        return self.state

    def to_dict(self) -> dict[str, Any]:
        return {
            "reminder_id": self.reminder_id,
            "key": self.key,
            "session": self.session,
            "due_at": format_utc(self.due_at),
            "fired_at": format_utc(self.fired_at),
            "late_ms": self.late_ms,
            "handed_at": format_utc(self.handed_at),
            "wait_ms": self.wait_ms,
            "turn_ms": self.turn_ms,
            "delivered_at": format_utc(self.delivered_at),
            "delivered_to": self.delivered_to,
            "outcome": self.state,
            "missed": self.missed,
            "position": self.position,
            "attempts": self.attempts,
            "error": self.error,
            "wait_for": self.wait_for,
            "alert": self.alert,
        }


def _ms(start: datetime | None, end: datetime | None) -> int | None:
    if start is None or end is None:
        return None
    return int((end - start).total_seconds() * 1000)


def occurrence_key(reminder_id: str, due_at: datetime) -> str:
    return f"{reminder_id}@{format_utc(due_at)}"


@quick_init
@dataclass(frozen=True)
class Fire:
    """What an engine fires: an occurrence together with its reminder's content."""

    occurrence_id: int
    reminder_id: str
    session: str | None
    due_at: datetime
    text: str
    label: str | None = None
    kind: Kind = "after"
    position: int = 1
    repeat: int | None = 1
    missed: int = 0
    alarm: bool = False
    announce: str | None = None
    urgency: Urgency = Urgency.NORMAL
    on_busy: BusyPolicy = BusyPolicy.WAIT
    token: str = ""
    fired_at: datetime | None = None
    alert: AlertState | None = None
    every_s: int | None = None
    wait_for: WaitFor | None = None  # of a waiting occurrence taken up again

    @property
    def key(self) -> str:
        return occurrence_key(self.reminder_id, self.due_at)

    def fired(self, at: datetime) -> Fire:
        """This fire with ``fired_at`` set: ``dataclasses.replace`` without running
        ``__init__`` again (a burst stamps 10,000 of them on the fire thread)."""
        new = object.__new__(Fire)
        new.__dict__.update(self.__dict__)
        new.__dict__["fired_at"] = at
        return new


SESSION_ACTIVE, SESSION_CLOSED, SESSION_DELETED = (
    SessionState.ACTIVE,
    SessionState.CLOSED,
    SessionState.DELETED,
)


@quick_init
@dataclass(frozen=True)
class Session:
    id: str
    adapter: AdapterName | str | None = None  # None: no delivery yet
    config: dict[str, Any] = field(default_factory=dict)
    state: SessionState = SESSION_ACTIVE
    created_at: datetime | None = None
    last_active_at: datetime | None = None
    busy: bool = False  # marked busy by an external agent (`remindkit session busy`)
    busy_since: datetime | None = None
    in_turn: bool = False  # a turn runs through remindkit (lease held)
    parent_id: str | None = None  # fresh-session fallback: the session it replaced
    title: str | None = None
    fallback: FallbackPolicy = FallbackPolicy.FRESH  # what a turn that fails at once does
    failures: int = 0  # failed turns in a row (reset by a delivered one)
    last_error: str | None = None  # why the last turn failed

    @property
    def idle(self) -> bool:
        return not self.busy and not self.in_turn

    def to_dict(self) -> dict[str, Any]:
        config = {k: ("***" if "key" in k.lower() else v) for k, v in self.config.items()}
        return {
            "id": self.id,
            "adapter": self.adapter,
            "config": config,
            "state": self.state,
            "created_at": format_utc(self.created_at),
            "last_active_at": format_utc(self.last_active_at),
            "busy": self.busy or self.in_turn,
            "parent_id": self.parent_id,
            "title": self.title,
            "fallback": self.fallback,
            "failures": self.failures,
            "last_error": self.last_error,
        }


@quick_init
@dataclass(frozen=True)
class PlannedFire:
    due_us: int
    missed: int
    position: int


@quick_init
@dataclass(frozen=True)
class Plan:
    """What claiming one due reminder does (computed by ``engine.plan.plan_fire``, a pure function)."""

    fires: tuple[PlannedFire, ...]
    skipped: tuple[PlannedFire, ...]
    next_fire_us: int | None
    state: ReminderState
    fired_count: int
    snoozed: bool = False


@quick_init
@dataclass(frozen=True)
class Outcome:
    """The end (or the pause) of one claimed occurrence, written with its token."""

    occurrence_id: int
    token: str
    state: OccurrenceState  # delivered | waiting | failed | skipped | cancelled
    fired_at_us: int | None = None
    delivered_at_us: int | None = None
    delivered_to: str | None = None
    error: str | None = None
    alert: AlertState | None = None
    wait_for: WaitFor | None = None  # with state waiting
    handed_at_us: int | None = None  # the turn that carried it started
    pause: bool = (
        False  # with state failed: pause its reminder (a one-shot ends failed), last_error = error
    )
    reply: str | None = (
        None  # with state delivered: the agent's reply (its start goes in the event)
    )


# Message kinds in a transcript
CHAT, FIRED_TURN, FEEDBACK, TOOL_RESULT = (
    MessageKind.CHAT,
    MessageKind.FIRED_TURN,
    MessageKind.FEEDBACK,
    MessageKind.TOOL_RESULT,
)


@quick_init
@dataclass(frozen=True)
class Message:
    """One message of a transcript that remindkit keeps (OpenAI chat roles).

    ``kind`` says where a user-role message came from: typed (``chat``), a fired
    reminder (``fired``, hidden), or the report of tags that were not carried
    out (``feedback``, hidden)."""

    session: str
    role: Role
    content: str | None = None
    kind: MessageKind = CHAT
    hidden: bool = False
    tool_calls: tuple[dict[str, Any], ...] = ()
    tool_call_id: str | None = None
    name: str | None = None
    seq: int = 0
    id: int = 0
    created_at: datetime | None = None

    def to_openai(self) -> dict[str, Any]:
        # "" and never null: llama-cpp-python's server refuses a null content (HTTP 500) and
        # Ollama a null or missing one (400); OpenAI, llama.cpp and vLLM take "" too
        out: dict[str, Any] = {"role": self.role, "content": self.content or ""}
        if self.tool_calls:
            out["tool_calls"] = [dict(c) for c in self.tool_calls]
        if self.tool_call_id is not None:
            out["tool_call_id"] = self.tool_call_id
        if self.name is not None and self.role == "tool":
            out["name"] = self.name
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "session": self.session,
            "seq": self.seq,
            "role": self.role,
            "kind": self.kind,
            "content": self.content,
            "hidden": self.hidden,
            "tool_calls": list(self.tool_calls),
            "tool_call_id": self.tool_call_id,
            "name": self.name,
            "created_at": format_utc(self.created_at),
        }
