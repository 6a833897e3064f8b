"""Errors, each with a stable snake_case ``code`` and a human message.

::

    RemindkitError
    ├── InvalidSchedule (ValueError)     invalid_duration, invalid_time, time_not_future,
    │                                    nonexistent_local_time, unknown_time_zone,
    │                                    invalid_cron, interval_too_short, horizon_exceeded,
    │                                    conflicting_schedule, invalid_repeat, until_not_after_start,
    │                                    no_future_fire
    ├── InvalidInput (ValueError)        empty_text, text_too_long, label_too_long,
    │                                    announce_too_long, invalid_argument, invalid_id,
    │                                    invalid_import, invalid_quiet_hours, invalid_label,
    │                                    invalid_session, invalid_on_busy, invalid_urgency,
    │                                    invalid_misfire, invalid_command, invalid_setting,
    │                                    key_env_not_allowed, invalid_store_url,
    │                                    telegram_token_missing, telegram_not_installed, missing_dependency, invalid_project
    ├── LimitExceeded                    too_many_reminders
    ├── NotFound (LookupError)           not_found, session_not_found, project_not_found
    ├── Conflict                         not_active, already_exists, session_deleted, conflict
    ├── Unauthorized                     unauthorized
    ├── Forbidden (PermissionError)      forbidden, read_only, feature_disabled
    ├── StoreError (RuntimeError)        store_unavailable, schema_too_new, unreadable_row
    └── PlanRefused (ValueError)         plan_refused

Adapters (CLI, tools, HTTP) turn these into results: ``error: <code>: <message>``
(``str()`` of the error) or :func:`error_body`, ``{"error": {"code": ..., "message":
...}}`` (a tool's result puts ``"ok": false`` beside it). A refusal never writes anything.
"""

from __future__ import annotations

from typing import Any


class RemindkitError(Exception):
    code = "error"

    def __init__(self, message: str, *, code: str | None = None, **details: Any) -> None:
        super().__init__(message)
        if code is not None:
            self.code = code
        self.message = message
        self.details = details

    def __str__(self) -> str:
        return f"{self.code}: {self.message}"


def error_body(code: str, message: str) -> dict[str, Any]:
    """A refusal as every adapter sends it: an HTTP body, a line of ``--json``, a
    server-sent ``error`` event, a tool's result (with ``"ok": false`` beside it)."""
    return {"error": {"code": code, "message": message}}


class InvalidSchedule(RemindkitError, ValueError):
    code = "invalid_schedule"


class InvalidInput(RemindkitError, ValueError):
    code = "invalid_argument"


class LimitExceeded(RemindkitError):
    code = "too_many_reminders"


class NotFound(RemindkitError, LookupError):
    code = "not_found"

    @classmethod
    def reminder(cls, reminder_id: str) -> NotFound:
        return cls(f"No reminder by the id of {reminder_id!r} was found", reminder_id=reminder_id)


class Conflict(RemindkitError):
    code = "conflict"


class Unauthorized(RemindkitError):
    """No credential, or one that is not known (HTTP 401)."""

    code = "unauthorized"


class Forbidden(RemindkitError, PermissionError):
    """A known credential outside its scope, a read-only one that writes, or a
    project whose ``reminders`` feature is off (HTTP 403)."""

    code = "forbidden"


class StoreError(RemindkitError, RuntimeError):
    code = "store_unavailable"


class PlanRefused(RemindkitError, ValueError):
    """A stored reminder whose plan an engine will not carry out, whoever wrote the row
    (past the engine's own bounds: ``remindkit.engine.plan.guarded_plan``); the claim
    quarantines it."""

    code = "plan_refused"
