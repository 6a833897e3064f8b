"""Errors, each with a stable snake_case ``code`` and a human message.

::

    RemindkitError
    ├── InvalidSchedule (ValueError)     a schedule that cannot be made
    ├── InvalidInput (ValueError)        any other bad input (an argument, a setting, a file)
    │   └── CliError                     a command line's usage
    ├── LimitExceeded                    a limit reached (reminders, streams)
    ├── NotFound (LookupError)           no such reminder, session or project
    ├── Conflict                         the state does not allow it now
    │   └── SessionBusy                  a turn of the session runs already
    ├── Unauthorized                     no credential, or an unknown one
    ├── Forbidden (PermissionError)      a credential or scope that may not do it
    ├── StoreError (RuntimeError)        the store cannot be reached or read
    ├── PlanRefused (ValueError)         a stored reminder past an engine's own bounds
    ├── ModelError                       a model (or an agent) turn failed
    └── TrayUnavailable (RuntimeError)   no tray toolkit or no display

Every code any part of remindkit gives (these errors', the HTTP API's own, the tools',
the tags', ``set_callback``'s) is a member of
:class:`remindkit.error_codes.ErrorCode`, with what it means and where it comes from
(tests/test_errors.py holds each code written in the package to it); ``python -m
remindkit.errors`` prints that reference as a Markdown table (:func:`reference`). The
codes here are plain strings: the command line imports this module on every start,
and an enum of a hundred members costs milliseconds to make. Adapters (CLI, tools, HTTP) turn errors into
results: ``error: <code>: <message>`` (``str()`` of the error) or :func:`error_body`,
``{"error": {"code": ..., "message": ...}}`` (a tool's result puts ``"ok": false``
beside it). A refusal never writes anything.
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


class CliError(RemindkitError):
    """A command line's usage (an unknown option, options that do not go together)."""

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


class SessionBusy(Conflict):
    """A turn of the session runs already (through this process or another)."""

    code = "session_busy"


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


class ModelError(RemindkitError):
    """The model call failed. ``instant``: it failed at once for this
    conversation (a fresh session may succeed), as opposed to a model that is
    down or slow."""

    code = "model_error"

    def __init__(
        self,
        message: str,
        *,
        code: str | None = None,
        instant: bool = False,
        retry_after: float | None = None,
        **details: Any,
    ) -> None:
        super().__init__(message, code=code, **details)
        self.instant = instant
        self.retry_after = retry_after  # seconds the server asked us to wait (Retry-After)


class TrayUnavailable(RemindkitError, RuntimeError):
    code = "tray_unavailable"


def reference() -> str:
    """The error reference as a Markdown table (code, meaning, where), in the order of
    :class:`~remindkit.error_codes.ErrorCode`: ``python -m remindkit.errors``."""
    from .error_codes import ErrorCode

    lines = ["| code | meaning | where |", "|---|---|---|"]
    for code in ErrorCode:
        lines.append(f"| `{code}` | {code.meaning} | {code.where} |")
    return "\n".join(lines) + "\n"


__all__ = [
    "CliError",
    "Conflict",
    "Forbidden",
    "InvalidInput",
    "InvalidSchedule",
    "LimitExceeded",
    "ModelError",
    "NotFound",
    "PlanRefused",
    "RemindkitError",
    "SessionBusy",
    "StoreError",
    "TrayUnavailable",
    "Unauthorized",
    "error_body",
    "reference",
]


if __name__ == "__main__":  # pragma: no cover - python -m remindkit.errors
    import sys

    sys.stdout.write(reference())
