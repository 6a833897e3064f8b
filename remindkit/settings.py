"""Settings with defaults, overridable from the environment.

=========================  =====================================  ==========
environment                meaning                                default
=========================  =====================================  ==========
REMINDKIT_HOME             data folder (store, logs)              user data dir
REMINDKIT_DB               SQLAlchemy URL of the store            SQLite in home
REMINDKIT_TZ               zone for reminders that give none      local zone
REMINDKIT_MAX_PER_SESSION  active reminders per session           20
REMINDKIT_MAX_TOTAL        active reminders in the store          200
REMINDKIT_MAX_PER_PROJECT  active reminders per project           200 (api)
REMINDKIT_MIN_PERIOD       shortest repeat period (seconds)       60
REMINDKIT_HORIZON_DAYS     how far ahead a reminder may reach     366
                           (days)
REMINDKIT_MAX_TEXT         longest reminder text (characters)     8000
REMINDKIT_LEASE            claim lease (seconds)                  30
REMINDKIT_WAIT_CAP         longest engine sleep (seconds)         30
REMINDKIT_SQLITE_SYNC      SQLite synchronous: FULL or NORMAL     FULL
REMINDKIT_BUSY_TIMEOUT_MS  how long SQLite waits for its lock     30000
REMINDKIT_CATCHUP_MAX      most occurrences one claim may fire    1000
                           (a row asking for more is quarantined)
REMINDKIT_QUIET_GC         engines run Python's garbage           1
                           collector when no fire is near (0: off)
=========================  =====================================  ==========

``openai`` sessions' model servers (:class:`ModelLimits`): ``REMINDKIT_MODEL_CONTEXT``
(context size in tokens; default: what the server says, else 4096),
``REMINDKIT_MODEL_MAX_TOKENS`` (a reply's ``max_tokens``, 1024),
``REMINDKIT_MODEL_MAX_BYTES`` (largest response read, 4 MiB),
``REMINDKIT_MODEL_MAX_MESSAGE`` (longest stored model message, 32,000 characters),
``REMINDKIT_MODEL_MAX_TOOL_CALLS`` (tool calls carried out per completion, 16).

``0`` or ``none`` disables a count limit. The four times take a plain number in the
unit shown, or a duration as the command line writes it (``5m``, ``30s``, ``366d``,
``1h30m``). A value that cannot be read raises ``invalid_setting`` naming the variable. The per-project limit applies where
projects are served (``remindkit api``: 200 unless set); set it to hold every
surface to it.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field, replace
from pathlib import Path

from .errors import InvalidInput
from .statusfile import default_db_url, default_home, home_from_env


@dataclass(frozen=True)
class Limits:
    per_session: int | None = 20
    total: int | None = 200
    per_project: int | None = None  # `remindkit api` makes it PROJECT_LIMIT unless set
    min_period_s: int = 60
    horizon_s: int = 366 * 86_400
    text_max: int = 8_000
    label_max: int = 100
    announce_max: int = 500


@dataclass(frozen=True)
class ModelLimits:
    """Bounds on what an ``openai`` session's model server can make remindkit do."""

    context_tokens: int | None = None  # None: ask the server, else DEFAULT_CONTEXT_TOKENS
    max_tokens: int = 1024  # the reply's max_tokens (at most a quarter of the context)
    max_response_bytes: int = 4 * 1024 * 1024
    max_message_chars: int = 32_000
    max_tool_calls: int = 16


DEFAULT_CONTEXT_TOKENS = 4096


@dataclass(frozen=True)
class Settings:
    home: Path = field(default_factory=lambda: default_home())
    db_url: str | None = None
    tz: str | None = None
    limits: Limits = field(default_factory=Limits)
    lease_s: float = 30.0
    wait_cap_s: float = 30.0
    lookahead_s: float = 1.0
    claim_batch: int = 1000
    catchup_cap: int = 10
    catchup_max: int = 1000
    sqlite_synchronous: str = "FULL"
    busy_timeout_ms: int = 30_000
    quiet_gc: bool = True  # engines collect garbage between fires (engine/collector.py)
    breaker_after: int = 3  # failed turns in a row after which a session's fallback is tried first
    # remindkit api: an MCP session (/mcp) with no request this long is ended; a
    # connection's request head, and a request's body, must arrive within these
    mcp_idle_s: float = 300.0
    head_timeout_s: float = 10.0
    body_timeout_s: float = 30.0
    model: ModelLimits = field(default_factory=lambda: ModelLimits())

    @classmethod
    def from_env(cls, env: dict[str, str] | None = None, **overrides: object) -> Settings:
        env = dict(os.environ if env is None else env)
        limits = Limits()
        lim = {
            "per_session": _count(env, "REMINDKIT_MAX_PER_SESSION", limits.per_session),
            "total": _count(env, "REMINDKIT_MAX_TOTAL", limits.total),
            "min_period_s": int(
                _duration(env, "REMINDKIT_MIN_PERIOD", limits.min_period_s, unit=1, zero=True)
            ),
            "horizon_s": int(
                _duration(env, "REMINDKIT_HORIZON_DAYS", limits.horizon_s, unit=86_400)
            ),
            "text_max": _integer(env, "REMINDKIT_MAX_TEXT", limits.text_max),
            "per_project": _count(env, "REMINDKIT_MAX_PER_PROJECT", limits.per_project),
        }
        home = home_from_env(env)
        settings = cls(
            home=home,
            db_url=env.get("REMINDKIT_DB") or None,
            tz=env.get("REMINDKIT_TZ") or None,
            limits=replace(limits, **lim),  # type: ignore[arg-type]
            lease_s=_duration(env, "REMINDKIT_LEASE", 30.0, unit=1),
            wait_cap_s=_duration(env, "REMINDKIT_WAIT_CAP", 30.0, unit=1),
            sqlite_synchronous=env.get("REMINDKIT_SQLITE_SYNC", "FULL").upper(),
            busy_timeout_ms=_integer(env, "REMINDKIT_BUSY_TIMEOUT_MS", 30_000),
            breaker_after=_integer(env, "REMINDKIT_BREAKER_AFTER", 3),
            quiet_gc=env.get("REMINDKIT_QUIET_GC", "1").strip().lower()
            not in ("0", "off", "no", "false"),
            catchup_max=max(1, _integer(env, "REMINDKIT_CATCHUP_MAX", 1000)),
            mcp_idle_s=_duration(env, "REMINDKIT_MCP_IDLE", 300.0, unit=1),
            head_timeout_s=_duration(env, "REMINDKIT_HEAD_TIMEOUT", 10.0, unit=1),
            body_timeout_s=_duration(env, "REMINDKIT_BODY_TIMEOUT", 30.0, unit=1),
            model=_model_limits(env),
        )
        return replace(settings, **overrides)  # type: ignore[arg-type]

    def with_limits(self, **changes: object) -> Settings:
        return replace(self, limits=replace(self.limits, **changes))  # type: ignore[arg-type]

    @property
    def default_db_url(self) -> str:
        return default_db_url(self.home)

    @property
    def url(self) -> str:
        return self.db_url or self.default_db_url


def _model_limits(env: dict[str, str]) -> ModelLimits:
    d = ModelLimits()
    context = env.get("REMINDKIT_MODEL_CONTEXT", "").strip()
    return ModelLimits(
        context_tokens=int(context) if context else None,
        max_tokens=int(env.get("REMINDKIT_MODEL_MAX_TOKENS", d.max_tokens)),
        max_response_bytes=int(env.get("REMINDKIT_MODEL_MAX_BYTES", d.max_response_bytes)),
        max_message_chars=int(env.get("REMINDKIT_MODEL_MAX_MESSAGE", d.max_message_chars)),
        max_tool_calls=int(env.get("REMINDKIT_MODEL_MAX_TOOL_CALLS", d.max_tool_calls)),
    )


def _count(env: dict[str, str], name: str, default: int | None) -> int | None:
    value = env.get(name)
    if value is None or value == "":
        return default
    if value.strip().lower() in ("0", "none", "off", "unlimited"):
        return None
    return _integer(env, name, 0)


def _integer(env: dict[str, str], name: str, default: int) -> int:
    value = env.get(name, "").strip()
    if value == "":
        return default
    if not _PLAIN_INT.fullmatch(value):
        raise _bad_setting(name, value, "a whole number")
    return int(value)


def _duration(
    env: dict[str, str], name: str, default: float, *, unit: int, zero: bool = False
) -> float:
    """A plain number in ``unit`` seconds, or a duration as the CLI reads it (``5m``, ``366d``)."""
    value = env.get(name, "").strip()
    if value == "":
        return default
    if _PLAIN_NUMBER.fullmatch(value):
        seconds = float(value) * unit
    else:
        from .errors import RemindkitError
        from .schedules.durations import parse_duration

        try:
            seconds = parse_duration(value)
        except RemindkitError:
            seconds = -1.0
    if seconds < 0 or (seconds == 0 and not zero):
        what = "seconds" if unit == 1 else "days"
        raise _bad_setting(
            name, value, f"a number of {what} or a duration like 30s, 5m, 2h, 366d, 1y, 1h30m"
        )
    return float(seconds)


_PLAIN_INT = re.compile(r"[0-9]{1,12}", re.ASCII)
_PLAIN_NUMBER = re.compile(r"[0-9]{1,12}(?:\.[0-9]{1,9})?", re.ASCII)


def _bad_setting(name: str, value: str, wanted: str) -> InvalidInput:
    shown = value if len(value) <= 40 else value[:40] + "…"
    return InvalidInput(f"{name}: {shown!r} is not {wanted}", code="invalid_setting")
