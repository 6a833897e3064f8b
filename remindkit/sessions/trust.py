"""What an engine will run: a session definition is code.

A ``command`` session names a program to run, an ``openai`` session a server to
send a key to. Only the local user creates or changes a definition
(``remindkit session add`` outside a session scope, or ``import
--trust-sessions``); an import without that flag brings sessions in with the
fields that run code or send keys left out (:data:`SENSITIVE`) and marks them
disabled: their fires wait, with the reason, until ``session add`` completes
them.

Whoever can write the store can still write a definition. An engine therefore
reads its own settings (the environment, never the shared store) to pin what it
runs, and checks every turn against them (:class:`EnginePolicy`)::

    REMINDKIT_ENGINE_ADAPTERS=python,openai          adapters this engine runs (default: all)
    REMINDKIT_ENGINE_COMMANDS=/usr/bin/my-agent,...  programs a command session may run (default: any)
    REMINDKIT_API_KEY_ENVS=MY_KEY,...                variables an openai session may read its key
                                                     from, besides OPENAI_API_KEY
    REMINDKIT_WEBHOOK_SECRET_ENVS=HOOK_SECRET,...    variables a webhook session may sign with,
                                                     besides REMINDKIT_WEBHOOK_SECRET
    REMINDKIT_WEBHOOK_HOSTS=hooks.example.com,...    where webhooks may go (sessions/hosts.py)

A fire for a session outside the policy waits with the reason on that engine;
another engine that allows it may take it.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..checks import (  # noqa: F401 - re-exported: the trust rules live beside the adapters' guard
    DEFAULT_KEY_ENV,
    DEFAULT_SECRET_ENV,
    DISABLED,
    RESERVED_REQUEST_KEYS,
    SENSITIVE,
    allowed_key_envs,
    allowed_secret_envs,
    check_env_names,
    check_key_env,
    comma_names,
    request_extra,
    untrusted_session_config,
)
from ..models import Fire, Session
from .base import SessionAdapter, TurnResult


@dataclass(frozen=True)
class EnginePolicy:
    """The adapters and command programs this engine runs (None: any)."""

    adapters: frozenset[str] | None = None
    commands: tuple[str, ...] | None = None
    key_envs: frozenset[str] = frozenset({DEFAULT_KEY_ENV})
    secret_envs: frozenset[str] = frozenset({DEFAULT_SECRET_ENV})

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> EnginePolicy:
        env = os.environ if env is None else env
        adapters = env.get("REMINDKIT_ENGINE_ADAPTERS")
        commands = env.get("REMINDKIT_ENGINE_COMMANDS")
        return cls(
            adapters=None if adapters is None else frozenset(comma_names(adapters)),
            commands=None
            if commands is None
            else tuple(_resolve(c) or c for c in comma_names(commands)),
            key_envs=allowed_key_envs(env),
            secret_envs=allowed_secret_envs(env),
        )

    def why_not(self, session: Session) -> str | None:
        """Why this engine will not run a turn in ``session``, or None."""
        config = session.config or {}
        if config.get(DISABLED):
            return f"session {session.id} is disabled: {config[DISABLED]}"
        if self.adapters is not None and session.adapter not in self.adapters:
            return (
                f"this engine does not run {session.adapter} sessions "
                f"(REMINDKIT_ENGINE_ADAPTERS={','.join(sorted(self.adapters))})"
            )
        if session.adapter in ("command", "mcp") and self.commands is not None:
            for key in ("argv", "fresh_argv"):
                argv = config.get(key)
                if argv and not self._command_allowed(argv):
                    return f"this engine does not run {str(argv[0])[:200]!r} (not in REMINDKIT_ENGINE_COMMANDS)"
        if session.adapter == "openai":
            key_env = config.get("api_key_env")
            if key_env is not None and key_env not in self.key_envs:
                return f"api_key_env {str(key_env)[:200]!r} is not allowed here (REMINDKIT_API_KEY_ENVS)"
        if session.adapter == "webhook":
            secret_env = config.get("secret_env")
            if secret_env is not None and secret_env not in self.secret_envs:
                return f"secret_env {str(secret_env)[:200]!r} is not allowed here (REMINDKIT_WEBHOOK_SECRET_ENVS)"
        return None

    def _command_allowed(self, argv: Sequence[Any]) -> bool:
        assert self.commands is not None
        program = str(argv[0]) if isinstance(argv, list | tuple) and argv else ""
        resolved = _resolve(program)
        return resolved is not None and resolved in self.commands


def _resolve(program: str) -> str | None:
    found = shutil.which(program) if program else None
    return os.path.realpath(found) if found else None


class GuardedAdapter:
    """An adapter that runs only the turns its engine's policy allows."""

    def __init__(self, inner: SessionAdapter, policy: EnginePolicy) -> None:
        self.inner = inner
        self.policy = policy
        self.name = inner.name
        self.shared = inner.shared

    def can_deliver(self, session: Session) -> bool:
        return self.policy.why_not(session) is None and self.inner.can_deliver(session)

    def why_not(self, session: Session) -> str | None:
        reason = self.policy.why_not(session)
        if reason is not None:
            return reason
        inner = getattr(self.inner, "why_not", None)
        return inner(session) if inner is not None else None

    def run_turn(self, session: Session, message: str, fires: Sequence[Fire]) -> TurnResult:
        reason = self.policy.why_not(session)
        if reason is not None:  # changed since it was routed: it waits
            return TurnResult(False, error=reason, retry=True)
        return self.inner.run_turn(session, message, fires)

    def __getattr__(self, name: str) -> Any:  # register(), unregister(), ... of the adapter inside
        return getattr(self.inner, name)


__all__ = [
    "DISABLED",
    "SENSITIVE",
    "EnginePolicy",
    "GuardedAdapter",
    "allowed_key_envs",
    "check_key_env",
    "request_extra",
    "untrusted_session_config",
]
