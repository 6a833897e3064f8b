"""What callers use of each role of the store, as ``typing.Protocol``s.

:class:`~remindkit.store.sql.SqlStore` builds the roles over one database and
exposes them as attributes (``store.claims``, ``store.turns``, ...); code that needs
one part of the store can take the narrow protocol here instead of the whole store
(and a test can hand it a fake).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from ..audit import Event, EventKind, Surface
    from ..models import AlertState, Fire, Message, Occurrence, Outcome, Plan, Reminder, Session
    from ..settings import Limits
    from .projects import Access
    from .reminders import Added


class ReminderStore(Protocol):
    """``SqlStore.reminders``: reminders and their history."""

    def add_reminder(
        self,
        rem: Reminder,
        *,
        limits: Limits,
        now_us: int,
        replace_label: bool = ...,
        surface: Surface | str = ...,
        alive_since_us: int | None = ...,
        project: str | None = ...,
    ) -> Added: ...
    def import_rows(
        self,
        reminders: Sequence[Reminder],
        sessions: Sequence[Session],
        *,
        replace_existing: bool,
        now_us: int = ...,
        surface: Surface | str = ...,
        limits: Limits | None = ...,
        lines: Sequence[int] | None = ...,
    ) -> int: ...
    def get_reminder(self, reminder_id: str) -> Reminder | None: ...
    def find_reminders(
        self,
        *,
        session: str | None | type[Any] = ...,
        states: Iterable[str] | None = ...,
        label: str | None = ...,
        ids: Iterable[str] | None = ...,
        limit: int | None = ...,
        order: str = ...,
    ) -> list[Reminder]: ...
    def count_reminders(
        self, *, session: str | None | type[Any] = ..., states: Iterable[str] | None = ...
    ) -> int: ...
    def modify(
        self,
        fn: Callable[[Reminder], Reminder | None],
        *,
        now_us: int,
        ids: Sequence[str] | None = ...,
        session: str | None | type[Any] = ...,
        label: str | None = ...,
        states: Iterable[str] | None = ...,
        require_all: bool = ...,
        event: EventKind = ...,
        surface: Surface | str = ...,
        limits: Limits | None = ...,
    ) -> list[tuple[Reminder, Reminder]]: ...
    def history(
        self,
        *,
        reminder_id: str | None = ...,
        session: str | None = ...,
        limit: int = ...,
        states: Iterable[str] | None = ...,
    ) -> list[Occurrence]: ...
    def quarantined(self) -> list[tuple[str, str]]: ...
    def export_rows(self) -> tuple[list[Reminder], list[Session]]: ...


class SessionStore(Protocol):
    """``SqlStore.sessions``: sessions of the store."""

    def put_session(self, sess: Session, *, now_us: int) -> Session: ...
    def get_session(self, session_id: str, *, now_us: int | None = ...) -> Session | None: ...
    def get_sessions(
        self, session_ids: Iterable[str], *, now_us: int | None = ...
    ) -> dict[str, Session]: ...
    def list_sessions(
        self, *, include_deleted: bool = ..., now_us: int | None = ...
    ) -> list[Session]: ...
    def most_recent_session(self, *, exclude: Iterable[str] = ...) -> Session | None: ...
    def set_session_busy(self, session_id: str, busy: bool, *, now_us: int) -> Session: ...
    def delete_session(
        self, session_id: str, *, now_us: int, surface: Surface | str = ...
    ) -> list[str]: ...


class ClaimStore(Protocol):
    """``SqlStore.claims``: claiming due reminders, taking over lapsed claims, and
    what to wait for."""

    def claim_due(
        self,
        *,
        now_us: int,
        horizon_us: int,
        owner: str,
        lease_us: int,
        limit: int,
        plan: Callable[[Reminder], Plan],
        leave_alerts: bool = ...,
    ) -> tuple[list[Fire], int]: ...
    def reclaim_expired(
        self,
        *,
        now_us: int,
        owner: str,
        lease_us: int,
        limit: int,
        ids: Sequence[int] | None = ...,
        expired_before: Callable[[str], int] | None = ...,
    ) -> list[Fire]: ...
    def own_claims(self, *, owner: str) -> list[int]: ...
    def next_due_us(self, *, leave_alerts: bool = ...) -> tuple[int | None, int | None]: ...
    def still_claimed(self, ids: Sequence[int], *, owner: str) -> list[int]: ...
    def release_claims(self, *, owner: str, ids: Sequence[int]) -> None: ...
    def warm(self, *also: Callable[[], object]) -> None: ...


class OutcomeStore(Protocol):
    """``SqlStore.outcomes``: acknowledging claimed occurrences (``finish``), their fire
    times and alert states."""

    def finish(
        self,
        outcomes: Sequence[Outcome],
        *,
        fired: Sequence[tuple[int, str, int]] = ...,
        now_us: int | None = ...,
    ) -> list[int]: ...
    def set_alert(
        self, occurrence_id: int, token: str, *, expect: AlertState, to: AlertState
    ) -> bool: ...
    def mark_fired(self, items: Sequence[tuple[int, str, int]]) -> None: ...


class WaitingStore(Protocol):
    """``SqlStore.waiting``: fires waiting for their session, and re-basing."""

    def claim_waiting(
        self,
        *,
        now_us: int,
        owner: str,
        lease_us: int,
        sessions: Iterable[str | None] | None,
        limit: int = ...,
    ) -> list[Fire]: ...
    def supersede(self, fires: Sequence[Fire], *, now_us: int) -> list[Fire]: ...
    def uncounted(
        self, reminder_ids: Sequence[str], *, now_us: int
    ) -> dict[str, tuple[int, int]]: ...
    def waiting_sessions(self) -> list[str | None]: ...
    def waiting_of(
        self, reminder_ids: Sequence[str]
    ) -> dict[str, tuple[str | None, str | None, int, int]]: ...
    def rebasing(self, reminder_ids: Iterable[str]) -> set[str]: ...
    def reminders_of(self, reminder_ids: Iterable[str]) -> dict[str, Reminder]: ...
    def rebase(
        self,
        fires: Sequence[Fire],
        *,
        now_us: int,
        pushed: Mapping[str, tuple[int, Reminder | None]],
        note: str,
    ) -> tuple[list[int], list[int]] | None: ...


class TurnStore(Protocol):
    """``SqlStore.turns``: session turns: the lease delivery and the agent loop both take on a session,
    and each session's streak of failed turns."""

    def claim_turn(
        self, session_id: str, *, owner: str, token: str, until_us: int, now_us: int
    ) -> bool: ...
    def release_turn(self, session_id: str, token: str, *, now_us: int) -> bool: ...
    def renew_turn(self, session_id: str, token: str, *, until_us: int) -> bool: ...
    def record_turn(self, session_id: str, *, ok: bool, error: str | None = ...) -> None: ...
    def renew_leases(
        self, *, owner: str, until_us: int, turn_tokens: Iterable[str] | None = ...
    ) -> int: ...


class TranscriptStore(Protocol):
    """``SqlStore.transcripts``: transcripts of the sessions whose conversation remindkit keeps."""

    def append_messages(
        self, session_id: str, messages: Sequence[Message], *, now_us: int
    ) -> list[Message]: ...
    def append_fired(
        self,
        session_id: str,
        keys: Sequence[str],
        build: Callable[[list[str]], Message | None],
        *,
        now_us: int,
    ) -> tuple[Message | None, list[str]]: ...
    def taken_keys(self, session_id: str, keys: Sequence[str]) -> set[str]: ...
    def messages(
        self,
        session_id: str,
        *,
        after_seq: int = ...,
        limit: int | None = ...,
        last: int | None = ...,
    ) -> list[Message]: ...
    def last_seq(self, session_id: str) -> int: ...


class FlagStore(Protocol):
    """The flags of ``SqlStore.coordination`` (mute, quiet hours, ...)."""

    def get_flag(self, name: str, default: str | None = ...) -> str | None: ...
    def set_flag(self, name: str, value: str, *, now_us: int) -> None: ...


class CoordinationStore(Protocol):
    """``SqlStore.coordination``: engines, leases and flags."""

    def get_flag(self, name: str, default: str | None = ...) -> str | None: ...
    def set_flag(self, name: str, value: str, *, now_us: int) -> None: ...
    def paused_all(self) -> bool: ...
    def set_paused_all(
        self, paused: bool, *, now_us: int, surface: Surface | str = ...
    ) -> None: ...
    def hold_lease(
        self, name: str, *, holder: str, priority: int, until_us: int, now_us: int
    ) -> tuple[str, int, int]: ...
    def lease_holder(self, name: str, *, now_us: int) -> tuple[str, int] | None: ...
    def drop_lease(self, name: str, *, holder: str) -> None: ...
    def heartbeat(
        self, *, engine_id: str, host: str, pid: int, role: str, priority: int, now_us: int
    ) -> None: ...
    def unregister_engine(self, engine_id: str) -> None: ...
    def live_engines(self, *, since_us: int) -> list[dict[str, Any]]: ...


class EventStore(Protocol):
    """``SqlStore.events``: reading the audit trail."""

    def events_after(
        self,
        after_id: int = ...,
        *,
        limit: int = ...,
        reminder_id: str | None = ...,
        session: str | None = ...,
    ) -> list[Event]: ...
    def tail(
        self, after_id: int = ..., *, limit: int = ...
    ) -> list[tuple[Event, dict[str, Any] | None, str | None]]: ...
    def recent_events(
        self, *, limit: int = ..., reminder_id: str | None = ..., session: str | None = ...
    ) -> list[Event]: ...
    def last_event_id(self) -> int: ...


class ReportStore(Protocol):
    """``SqlStore.reports``: read-only summaries: the status line's counts and fire statistics."""

    def status_summary(self, *, now_us: int, max_sessions: int = ...) -> dict[str, Any]: ...
    def fire_stats(self, *, since_us: int, session: str | None = ...) -> dict[str, Any]: ...


class ProjectStore(Protocol):
    """``SqlStore.projects``: projects, their sessions, and API tokens."""

    def create_project(self, name: str, *, now_us: int) -> dict[str, Any]: ...
    def get_project(self, name: str) -> dict[str, Any] | None: ...
    def list_projects(self) -> list[dict[str, Any]]: ...
    def set_feature(self, name: str, feature: str, on: bool, *, now_us: int) -> dict[str, Any]: ...
    def session_in_project(
        self, project: str, session_id: str, *, now_us: int | None = ...
    ) -> Session | None: ...
    def project_sessions(
        self, project: str, *, include_deleted: bool = ..., now_us: int | None = ...
    ) -> list[Session]: ...
    def project_of(self, session_id: str) -> str | None: ...
    def count_live_in_project(self, project: str) -> int: ...
    def add_token(
        self,
        *,
        token_id: str,
        digest: str,
        project: str | None,
        session: str | None,
        read_only: bool,
        now_us: int,
    ) -> None: ...
    def token_by_hash(self, digest: str) -> dict[str, Any] | None: ...
    def list_tokens(self) -> list[dict[str, Any]]: ...
    def remove_token(self, token_id: str) -> bool: ...
    def count_tokens(self) -> int: ...
    def access(
        self,
        digest: str | None,
        project: str,
        session_id: str | None = ...,
        *,
        now_us: int | None = ...,
    ) -> Access: ...


__all__ = [
    "ClaimStore",
    "OutcomeStore",
    "CoordinationStore",
    "EventStore",
    "FlagStore",
    "ProjectStore",
    "ReminderStore",
    "ReportStore",
    "SessionStore",
    "TranscriptStore",
    "TurnStore",
    "WaitingStore",
]
