"""The reminders API: create, list, cancel, pause, resume, snooze, history,
export and import. The CLI, the agent tools, the widgets and the tray all go
through it. Input is validated before anything is written; a refusal raises a
:class:`~remindkit.errors.RemindkitError` with a stable code and writes nothing.

>>> rk = remindkit.build().api                                            # doctest: +SKIP
>>> rk.create("Check the deploy", session="s1", label="deploy", in_="5m")  # doctest: +SKIP
>>> rk.add(ReminderSpec("Stretch", session="s1", every="1h"))              # doctest: +SKIP

Every surface parses its own spelling into a :class:`~remindkit.models.ReminderSpec`
(its one request value) and hands it to :meth:`Reminders.add`.
"""

from __future__ import annotations

import builtins
import json
import socket
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from ._compat import collector_paused
from .audit import Event, EventKind, Surface, parse_surface
from .checks import (
    DEFAULT_PROJECT,
    check_announce,
    check_id,
    check_label,
    check_project,
    check_session_id,
    check_text,
    new_id,
    session_key,
    session_project,
)
from .clock import Clock, SystemClock, format_utc, from_us, to_us
from .errors import Conflict, InvalidInput, NotFound, RemindkitError
from .models import (
    ACTIVE,
    BUSY_POLICIES,
    CANCELLED,
    DONE,
    LIVE_STATES,
    MISFIRE_POLICIES,
    PAUSED,
    SESSION_DELETED,
    URGENCIES,
    BusyPolicy,
    MisfirePolicy,
    Occurrence,
    Reminder,
    ReminderSpec,
    Session,
    Urgency,
    member,
)
from .runtime import process_alive
from .schedules import (
    build_schedule,
    first_fire,
    local_zone_name,
    parse_duration,
    resume_schedule,
)
from .settings import Limits, Settings

if TYPE_CHECKING:
    from .store import SqlStore

EXPORT_VERSION = 1
MAX_HISTORY = 100_000


@dataclass(frozen=True)
class Imported:
    reminders: int
    sessions: int
    disabled: tuple[tuple[str, tuple[str, ...]], ...] = ()  # (session id, fields left out)


@dataclass(frozen=True)
class Created:
    """A new reminder, the ids it replaced, and whether it is armed: an engine is
    alive on the store to fire it (when not, it waits until one starts)."""

    reminder: Reminder
    replaced: tuple[str, ...] = ()
    armed: bool = True


def _paused(r: Reminder) -> Reminder | None:
    if r.state == PAUSED:
        return None
    if r.state != ACTIVE:
        raise Conflict(
            f"reminder {r.id} is {r.state}; only active reminders can be paused",
            code="not_active",
            reminder_id=r.id,
        )
    return replace(r, state=PAUSED)


def _at_version(version: int) -> Any:
    def fn(r: Reminder) -> Reminder:
        if r.version != version:
            raise Conflict(
                f"reminder {r.id} is at version {r.version}, not {version}; read it again",
                code="conflict",
                reminder_id=r.id,
            )
        return r

    return fn


class Reminders:
    """``surface`` names who makes the changes (recorded in each event); a call may
    name another with its own ``surface=``."""

    def __init__(
        self,
        store: SqlStore,
        *,
        clock: Clock | None = None,
        settings: Settings | None = None,
        surface: Surface | str = Surface.API,
    ) -> None:
        self.store = store
        self.clock: Clock = clock or SystemClock()
        self.settings = settings or store.settings
        self.surface = parse_surface(surface)
        # when an engine was last seen alive (time.monotonic()): creations within
        # ARMED_FRESH_S of that answer armed without asking the store again
        self._armed_seen = -ARMED_FRESH_S

    def _surface(self, surface: Surface | str | None) -> Surface:
        return self.surface if surface is None else parse_surface(surface)

    @property
    def default_tz(self) -> str:
        return self.settings.tz or local_zone_name()

    # -- create --------------------------------------------------------------------------

    def create(self, spec: ReminderSpec | str, /, **fields: Any) -> Reminder:
        return self.add(spec, **fields).reminder

    def add(
        self,
        spec: ReminderSpec | str,
        /,
        *,
        surface: Surface | str | None = None,
        **fields: Any,
    ) -> Created:
        """Make the reminder ``spec`` asks for (a :class:`~remindkit.models.ReminderSpec`,
        or its text with the other fields as keywords: ``add("Stretch", in_="5m")``).
        ``surface``: what asked (the audit trail's); by default this API's."""
        if isinstance(spec, str):
            spec = ReminderSpec(spec, **fields)
        elif fields:
            raise TypeError(f"add() takes a ReminderSpec or keywords, not both ({sorted(fields)})")
        limits = self.settings.limits
        by = self._surface(surface)
        now = self.clock.now()
        text = check_text(spec.text, limits.text_max)
        session = check_session_id(spec.session)
        project = spec.project
        if session is not None and project is not None:  # the session of that project
            session = session_key(check_project(project), session)
        label = check_label(spec.label, limits.label_max)
        announce = check_announce(spec.announce, limits.announce_max)
        _choice("urgency", spec.urgency, URGENCIES, "invalid_urgency")
        _choice("misfire", spec.misfire, MISFIRE_POLICIES, "invalid_misfire")
        _choice("on_busy", spec.on_busy, BUSY_POLICIES, "invalid_on_busy")
        min_period_s = spec.min_period_s
        sched = build_schedule(
            now=now,
            default_tz=self.default_tz,
            tz=spec.tz,
            in_=spec.in_,
            at=spec.at,
            every=spec.every,
            cron=spec.cron,
            repeat=spec.repeat,
            until=spec.until,
            min_period_s=limits.min_period_s if min_period_s is None else min_period_s,
            horizon_s=limits.horizon_s,
            words=spec.words,
        )
        first = first_fire(sched, now)
        rem = Reminder(
            id=new_id(),
            session=session,
            label=label,
            text=text,
            schedule=sched,
            state=ACTIVE,
            next_fire_at=first,
            alarm=bool(spec.alarm),
            announce=announce,
            urgency=member(Urgency, spec.urgency),  # checked above
            misfire=member(MisfirePolicy, spec.misfire),
            catchup_cap=self.settings.catchup_cap if spec.catchup_cap is None else spec.catchup_cap,
            on_busy=member(BusyPolicy, spec.on_busy),
            created_at=now,
            updated_at=now,
            source=spec.source,
            slot=spec.slot,
        )
        fresh = time.monotonic() - self._armed_seen < ARMED_FRESH_S
        added = self.store.reminders.add_reminder(
            rem,
            limits=limits,
            now_us=to_us(now),
            replace_label=spec.replace_label,
            surface=by,
            alive_since_us=None if fresh else self._alive_since(now),
            project=project,
        )
        armed = fresh or _any_alive(added.engines)
        if armed and not fresh:
            self._armed_seen = time.monotonic()
        return Created(added.reminder, tuple(added.replaced), armed=armed)

    def armed(self) -> bool:
        """Is an engine alive on this store (its heartbeat is recent, and, on this
        host, its process exists)? Reminders fire only while one runs."""
        return bool(self.engines())

    def engines(self) -> builtins.list[dict[str, Any]]:
        """The engines alive on this store: a recent heartbeat, and, for one on this
        host, a process that exists (one killed with SIGKILL left its heartbeat behind,
        recent for two leases). An engine on another host (PostgreSQL) counts by its
        heartbeat alone. What ``status``, ``/v1/status`` and :meth:`armed` say."""
        engines = self.store.coordination.live_engines(since_us=self._alive_since(self.clock.now()))
        return [e for e in engines if _any_alive([(e["host"], e["pid"])])]

    def _alive_since(self, now: datetime) -> int:
        return to_us(now) - int(
            self.settings.lease_s * 2e6
        )  # engines heartbeat every quarter lease

    # -- read ----------------------------------------------------------------------------

    def get(self, reminder_id: str) -> Reminder:
        rem = self.store.reminders.get_reminder(check_id(reminder_id))
        if rem is None:
            raise NotFound.reminder(reminder_id)
        return rem

    def list(
        self,
        *,
        session: Any = Any,
        all: bool = False,
        states: Iterable[str] | None = None,
        order: str = "created",
    ) -> builtins.list[Reminder]:
        if states is None and not all:
            states = LIVE_STATES
        if session is not Any and session is not None:
            session = check_session_id(session)
        return self.store.reminders.find_reminders(session=session, states=states, order=order)

    def callbacks(self, *, session: Any = Any) -> builtins.list[Reminder]:
        """The live ``set_callback`` timers of ``session`` (``Any``: of every session), by
        session and slot, as of now: ``fired_count`` counts the fires that have happened
        and ``next_fire_at`` is the first that has not. (The engine claims a fire a moment
        before it is due, and counts a fire that waits to be re-based, which will not
        count: a reminder's own fields run ahead of what the person sees fire.)"""
        if session is not Any and session is not None:
            session = check_session_id(session)
        live = [
            r
            for r in self.store.reminders.find_reminders(session=session, states=LIVE_STATES)
            if r.source == "callback" and r.slot is not None
        ]
        now_us = to_us(self.clock.now())
        ahead = self.store.waiting.uncounted([r.id for r in live], now_us=now_us)
        out = []
        for r in live:
            found = ahead.get(r.id)
            if found is not None:
                n, due = found[0], from_us(found[1])  # before next_fire_at: the claim passed it
                nxt = due if r.next_fire_at is None else min(due, r.next_fire_at)
                r = replace(r, fired_count=max(0, r.fired_count - n), next_fire_at=nxt)
            out.append(r)
        return sorted(out, key=lambda r: (r.session or "", r.slot or 0))

    def history(
        self, reminder_id: str | None = None, *, session: str | None = None, limit: int = 100
    ) -> builtins.list[Occurrence]:
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_HISTORY:
            raise InvalidInput(
                f"limit must be 1-{MAX_HISTORY} (got {limit!r})", code="invalid_argument"
            )
        session = check_session_id(session)
        if reminder_id is not None:
            self.get(reminder_id)
        return self.store.reminders.history(reminder_id=reminder_id, session=session, limit=limit)

    def events(
        self,
        reminder_id: str | None = None,
        *,
        session: str | None = None,
        limit: int = 50,
        after: int | None = None,
    ) -> builtins.list[Event]:
        """The audit trail, oldest first: the newest ``limit`` events, or with ``after``
        the first ``limit`` events whose id is above it (tailing)."""
        session = check_session_id(session)
        if reminder_id is not None:
            reminder_id = check_id(reminder_id)
        if after is not None:
            return self.store.events.events_after(
                after, limit=limit, reminder_id=reminder_id, session=session
            )
        return self.store.events.recent_events(
            limit=limit, reminder_id=reminder_id, session=session
        )

    # -- sessions a surface takes as its own --------------------------------------------

    def own_session(
        self,
        session_id: str,
        *,
        adapter: str,
        project: str = DEFAULT_PROJECT,
        untyped: bool = True,
    ) -> Session | None:
        """The session a surface that delivers through ``adapter`` (the MCP server, the
        Telegram bot) may take as its own: None when there is none by that id yet; the
        session when it is in ``project`` (its row and its id's namespace: see
        :func:`~remindkit.checks.session_key`) and of ``adapter``, or, with ``untyped``,
        of no adapter yet. Any other is not adopted: ``session_taken``. So a session
        made first by a party that acts in another project (an API token) is never
        taken over, nor one of another surface."""
        sid = check_session_id(session_id)
        assert sid is not None
        sess = self.store.sessions.get_session(sid)
        if sess is None:
            if session_project(sid) != project:
                raise Conflict(
                    f"session id {sid!r} is in project {session_project(sid)!r}'s namespace, "
                    f"not {project!r}'s",
                    code="session_taken",
                    session=sid,
                )
            return None
        home = self.store.projects.project_of(sid)
        if home != project or session_project(sid) != project:
            raise Conflict(
                f"session {sid!r} belongs to project {home!r}, not {project!r}",
                code="session_taken",
                session=sid,
            )
        if sess.adapter != adapter and not (untyped and sess.adapter is None):
            kind = f"a {sess.adapter} session" if sess.adapter else "a session of no adapter"
            raise Conflict(
                f"session {sid!r} is {kind}, not one of {adapter}",
                code="session_taken",
                session=sid,
            )
        return sess

    # -- change --------------------------------------------------------------------------

    def cancel(
        self,
        ids: Sequence[str],
        *,
        session: Any = Any,
        reason: str | None = None,
        surface: Surface | str | None = None,
    ) -> builtins.list[Reminder]:
        """Cancel reminders by id. An unknown id, or one already finished, refuses the
        whole call (``not_found`` / ``not_active``) and nothing changes."""
        ids = [check_id(i) for i in ids]

        def fn(r: Reminder) -> Reminder:
            if r.state not in LIVE_STATES:
                raise Conflict(
                    f"reminder {r.id} is {r.state}; there is nothing to cancel",
                    code="not_active",
                    reminder_id=r.id,
                )
            return replace(r, state=CANCELLED, next_fire_at=None, last_error=reason or r.last_error)

        return self._modify(fn, EventKind.CANCELLED, surface, ids=ids, session=session)

    def cancel_label(
        self, session: str | None, label: str, *, surface: Surface | str | None = None
    ) -> builtins.list[Reminder]:
        label = check_label(label, self.settings.limits.label_max) or ""
        session = check_session_id(session)
        changed = self._modify(
            lambda r: replace(r, state=CANCELLED, next_fire_at=None),
            EventKind.CANCELLED,
            surface,
            session=session,
            label=label,
            states=LIVE_STATES,
        )
        if not changed:
            where = f" in session {session!r}" if session else ""
            raise NotFound(
                f"No active reminder labelled {label!r}{where} was found",
                code="not_found",
                label=label,
            )
        return changed

    def cancel_session(
        self, session: str | None, *, surface: Surface | str | None = None
    ) -> builtins.list[Reminder]:
        session = check_session_id(session)
        return self._modify(
            lambda r: replace(r, state=CANCELLED, next_fire_at=None),
            EventKind.CANCELLED,
            surface,
            session=session,
            states=LIVE_STATES,
        )

    def pause(
        self, ids: Sequence[str], *, session: Any = Any, surface: Surface | str | None = None
    ) -> builtins.list[Reminder]:
        self._modify(
            _paused, EventKind.PAUSED, surface, ids=[check_id(i) for i in ids], session=session
        )
        return [self.get(i) for i in ids]

    def resume(
        self, ids: Sequence[str], *, session: Any = Any, surface: Surface | str | None = None
    ) -> builtins.list[Reminder]:
        """Make paused reminders active again, their count starting again from now
        (:func:`~remindkit.schedules.resume_schedule`). All or nothing: past a limit on
        active reminders (per session, per project, in all), ``too_many_reminders``."""
        self._modify(
            self._resumed(),
            EventKind.RESUMED,
            surface,
            ids=[check_id(i) for i in ids],
            session=session,
            limits=self.settings.limits,
        )
        return [self.get(i) for i in ids]

    def _resumed(self) -> Any:
        """The resume of one reminder (the store checks the limits on what it makes
        active, in the same transaction)."""
        now = self.clock.now()

        def fn(r: Reminder) -> Reminder | None:
            if r.state == ACTIVE:
                return None
            if r.state != PAUSED:
                raise Conflict(
                    f"reminder {r.id} is {r.state}; only paused reminders can be resumed",
                    code="not_active",
                    reminder_id=r.id,
                )
            if r.session is not None:
                sess = self.store.sessions.get_session(r.session)
                if sess is not None and sess.state == SESSION_DELETED:
                    raise Conflict(
                        f"session {r.session!r} was deleted",
                        code="session_deleted",
                        session=r.session,
                    )
            sched, nxt = resume_schedule(
                r.schedule, now, next_fire_at=r.next_fire_at, fired_count=r.fired_count
            )
            if nxt is None:
                return replace(r, state=DONE, next_fire_at=None)
            return replace(
                r, schedule=sched, state=ACTIVE, next_fire_at=nxt, last_error=None, snoozed=False
            )

        return fn

    def snooze(
        self,
        reminder_id: str,
        duration: str | int,
        *,
        session: Any = Any,
        surface: Surface | str | None = None,
    ) -> Reminder:
        """Fire this reminder again after ``duration`` (a fired one-shot comes back;
        a repeating one gets one extra fire, then its series goes on)."""
        fn = self._snoozed(duration)
        self._modify(fn, EventKind.SNOOZED, surface, ids=[check_id(reminder_id)], session=session)
        return self.get(reminder_id)

    def _snoozed(self, duration: str | int) -> Any:
        seconds = parse_duration(duration)
        if seconds > self.settings.limits.horizon_s:
            raise InvalidInput("snooze is longer than the horizon", code="horizon_exceeded")
        when = self.clock.now() + timedelta(seconds=seconds)

        def fn(r: Reminder) -> Reminder:
            if r.state in (CANCELLED,):
                raise Conflict(f"reminder {r.id} is cancelled", code="not_active", reminder_id=r.id)
            return replace(
                r, state=ACTIVE, next_fire_at=when, snoozed=True, last_error=None, quarantine=None
            )

        return fn

    def edit(
        self,
        reminder_id: str,
        *,
        text: str | None = None,
        label: Any = Any,
        session: Any = Any,
        version: int | None = None,
        surface: Surface | str | None = None,
    ) -> Reminder:
        """Change a reminder's text and/or label (``label=None`` removes it). With
        ``version``, a reminder changed since that version refuses (``conflict``)."""
        fn = self._edited(text, label, version)
        self._modify(fn, EventKind.MODIFIED, surface, ids=[check_id(reminder_id)], session=session)
        return self.get(reminder_id)

    def _edited(self, text: str | None, label: Any, version: int | None) -> Any:
        limits = self.settings.limits
        new_text = None if text is None else check_text(text, limits.text_max)
        keep_label = label is Any
        new_label = None if keep_label else check_label(label, limits.label_max)

        at_version = None if version is None else _at_version(version)

        def fn(r: Reminder) -> Reminder:
            if at_version is not None:
                at_version(r)
            if r.state not in LIVE_STATES:
                raise Conflict(
                    f"reminder {r.id} is {r.state}; only live reminders can be changed",
                    code="not_active",
                    reminder_id=r.id,
                )
            return replace(
                r,
                text=r.text if new_text is None else new_text,
                label=r.label if keep_label else new_label,
            )

        return fn

    def update(
        self,
        reminder_id: str,
        *,
        text: str | None = None,
        label: Any = Any,
        enabled: bool | None = None,
        snooze: str | int | None = None,
        version: int | None = None,
        session: Any = Any,
        surface: Surface | str | None = None,
    ) -> Reminder:
        """Several changes of one reminder in one transaction, all or none: the text
        and label (as :meth:`edit`), ``enabled`` (pause / resume), ``snooze``; with
        ``version``, a reminder changed since refuses (``conflict``). One event
        records it, of the kind of the last change (its detail lists every field)."""
        steps: builtins.list[tuple[EventKind, Any]] = []
        if text is not None or label is not Any:
            steps.append((EventKind.MODIFIED, self._edited(text, label, version)))
        elif version is not None:
            steps.append((EventKind.MODIFIED, _at_version(version)))
        if enabled is False:
            steps.append((EventKind.PAUSED, _paused))
        elif enabled is True:
            steps.append((EventKind.RESUMED, self._resumed()))
        if snooze is not None:
            steps.append((EventKind.SNOOZED, self._snoozed(snooze)))
        if not steps:
            return self._own(reminder_id, session)

        def fn(r: Reminder) -> Reminder:
            for _kind, step in steps:
                r = step(r) or r
            return r

        self._modify(
            fn,
            steps[-1][0],
            surface,
            ids=[check_id(reminder_id)],
            session=session,
            limits=self.settings.limits if enabled is True else None,
        )
        return self.get(reminder_id)

    def _own(self, reminder_id: str, session: Any) -> Reminder:
        rem = self.get(reminder_id)
        if session is not Any and rem.session != check_session_id(session):
            raise NotFound.reminder(rem.id)
        return rem

    def pause_all(self, *, surface: Surface | str | None = None) -> None:
        """Stop all firing (persisted; survives restarts). Reminders keep their state."""
        self.store.coordination.set_paused_all(
            True, now_us=to_us(self.clock.now()), surface=self._surface(surface)
        )

    def resume_all(self, *, surface: Surface | str | None = None) -> None:
        """Resume firing; what came due while paused fires per each reminder's policy."""
        self.store.coordination.set_paused_all(
            False, now_us=to_us(self.clock.now()), surface=self._surface(surface)
        )

    @property
    def paused_all(self) -> bool:
        return self.store.coordination.paused_all()

    def _modify(
        self,
        fn: Any,
        kind: EventKind,
        surface: Surface | str | None,
        *,
        limits: Limits | None = None,
        **select: Any,
    ) -> builtins.list[Reminder]:
        by = self._surface(surface)
        if select.get("session", Any) is not Any:  # a scope is checked like any session id
            select["session"] = check_session_id(select["session"])
        pairs = self.store.reminders.modify(
            fn, now_us=to_us(self.clock.now()), event=kind, surface=by, limits=limits, **select
        )
        return [new for _old, new in pairs]

    # -- export / import -----------------------------------------------------------------

    def export(self) -> Iterator[str]:
        """JSON lines: a header, then every session and every reminder (all states)."""
        rems, sessions = self.store.reminders.export_rows()
        yield json.dumps(
            {
                "remindkit_export": EXPORT_VERSION,
                "exported_at": format_utc(self.clock.now()),
                "reminders": len(rems),
                "sessions": len(sessions),
            }
        )
        for s in sessions:
            yield json.dumps(
                {
                    "type": "session",
                    "id": s.id,
                    "adapter": s.adapter,
                    "config": s.config,
                    "state": s.state,
                    "created_at": format_utc(s.created_at),
                    "last_active_at": format_utc(s.last_active_at),
                    "parent_id": s.parent_id,
                    "title": s.title,
                },
                ensure_ascii=False,
            )
        for r in rems:
            yield json.dumps(_export_reminder(r), ensure_ascii=False)

    def import_(
        self,
        lines: Iterable[str],
        *,
        replace_existing: bool = False,
        trust_sessions: bool = False,
        surface: Surface | str = Surface.IMPORT,
    ) -> int:
        """Validate every line first, then insert all in one transaction; the number
        of reminders imported (:meth:`import_report` says more)."""
        return self.import_report(
            lines, replace_existing=replace_existing, trust_sessions=trust_sessions, surface=surface
        ).reminders

    def import_report(
        self,
        lines: Iterable[str],
        *,
        replace_existing: bool = False,
        trust_sessions: bool = False,
        surface: Surface | str = Surface.IMPORT,
    ) -> Imported:
        """Each line is checked like ``remind`` checks its input (``invalid_import``
        with the line number); the limits per session and in total hold after the
        import. Without ``trust_sessions`` a session's ``argv``, ``env``, ``cwd``,
        ``api_key_env``, ``base_url`` and ``extra`` are left out and it comes in
        disabled (listed in the result) until ``session add`` completes it."""
        with collector_paused():  # 100,000 lines: no collection walks them all again and again
            return self._import_report(
                lines,
                replace_existing=replace_existing,
                trust_sessions=trust_sessions,
                surface=surface,
            )

    def _import_report(
        self,
        lines: Iterable[str],
        *,
        replace_existing: bool,
        trust_sessions: bool,
        surface: Surface | str,
    ) -> Imported:
        from .imports import check_reminder, check_session

        reminders: builtins.list[Reminder] = []
        numbers: builtins.list[int] = []
        sessions: builtins.list[Session] = []
        disabled: builtins.list[tuple[str, tuple[str, ...]]] = []
        seen: set[str] = set()
        now = self.clock.now()
        for number, line in enumerate(lines, 1):
            line = line.strip()
            if not line:
                continue
            try:
                data = json.loads(line)
                if not isinstance(data, dict):
                    raise ValueError("not an object")
                if "remindkit_export" in data:
                    if data["remindkit_export"] != EXPORT_VERSION:
                        raise ValueError(
                            f"export version {str(data['remindkit_export'])[:20]} is not supported"
                        )
                    continue
                kind = data.get("type")
                if kind == "session":
                    sess, dropped = check_session(data, trust=trust_sessions)
                    sessions.append(sess)
                    if dropped:
                        disabled.append((sess.id, tuple(dropped)))
                elif kind == "reminder":
                    rem = check_reminder(data, self.settings, now)
                    if rem.id in seen:
                        raise ValueError(f"duplicate id {rem.id}")
                    seen.add(rem.id)
                    reminders.append(rem)
                    numbers.append(number)
                else:
                    raise ValueError(f"unknown line type {str(kind)[:40]!r}")
            except RemindkitError as exc:
                raise InvalidInput(
                    f"line {number}: {exc.code}: {exc.message}", code="invalid_import", line=number
                ) from None
            except (ValueError, KeyError, TypeError, OverflowError) as exc:
                raise InvalidInput(
                    f"line {number}: {str(exc)[:300]}", code="invalid_import", line=number
                ) from None
        n = self.store.reminders.import_rows(
            reminders,
            sessions,
            replace_existing=replace_existing,
            limits=self.settings.limits,
            lines=numbers,
            now_us=to_us(self.clock.now()),
            surface=parse_surface(surface),
        )
        return Imported(n, len(sessions), tuple(disabled))


def _export_reminder(r: Reminder) -> dict[str, Any]:
    return {
        "type": "reminder",
        "id": r.id,
        "session": r.session,
        "label": r.label,
        "text": r.text,
        "schedule": json.loads(r.schedule.to_json()),
        "state": r.state,
        "next_fire_at": format_utc(r.next_fire_at),
        "fired_count": r.fired_count,
        "alarm": r.alarm,
        "announce": r.announce,
        "urgency": r.urgency,
        "misfire": r.misfire,
        "catchup_cap": r.catchup_cap,
        "on_busy": r.on_busy,
        "last_error": r.last_error,
        "source": r.source,
        "slot": r.slot,
        "snoozed": r.snoozed,
        "created_at": format_utc(r.created_at),
        "updated_at": format_utc(r.updated_at),
    }


# An engine's heartbeat counts for two leases (a minute by default); a second more of
# "armed" for a process making reminders in a loop spares it a query per creation.
ARMED_FRESH_S = 1.0


def _any_alive(engines: Iterable[tuple[str, int]]) -> bool:
    """Whether any of these (host, pid) engines is alive (see :meth:`Reminders.engines`)."""
    host = socket.gethostname()
    # an engine of another account on this host counts; off POSIX the heartbeat decides
    return any(h != host or process_alive(pid, others=True) for h, pid in engines)


# -- validation (pure) --------------------------------------------------------------------


def _choice(name: str, value: object, allowed: Sequence[str], code: str) -> None:
    if value not in allowed:
        raise InvalidInput(f"{name} must be one of {', '.join(allowed)} (got {value!r})", code=code)
