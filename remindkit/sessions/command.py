"""``command`` sessions: an external program run once per turn.

Configured with an argv template (``remindkit session add s1 --command 'ARGV…'``);
``{session}`` and ``{message}`` in an argument are replaced. The framed message
is also written to stdin (a message past 64 KiB goes on stdin only: ``{message}``
then says so). It runs in the session's folder (config ``cwd``; an ``mcp``
session's is its project). The environment is built from an allowlist, not
inherited (:func:`command_env`): ``PATH``, ``HOME``, ``LANG``, ``LC_*``, ``TZ``,
``TMPDIR``, ``USER``, the engine's variables that the definition names in
``pass_env`` (a list of names, e.g. ``ANTHROPIC_API_KEY`` for Claude Code), what
its ``env`` sets, ``REMINDKIT_HOME``, ``REMINDKIT_DB`` (only a URL without a
password), ``REMINDKIT_SESSION``, ``REMINDKIT_REMINDER_IDS`` and
``REMINDKIT_OCCURRENCE_KEYS`` (the idempotency keys, comma-separated). Exit
status 0 is a delivered turn whose reply is stdout; anything else is a failed
turn (the tails of stderr and stdout are recorded), and so is a reply that is a
JSON result with ``"is_error": true`` (as agent CLIs print with
``--output-format json``). A failed turn counts as failing at once, which sends
the delivery to a fresh session when the definition has a ``fresh_argv`` of its
own; a timed-out one is tried again later (the fires wait, with back-off). A
command that cannot be started for want of resources (``EMFILE``, ``ENFILE``,
``EAGAIN``, ``ENOMEM``: the engine's process or the machine is out of descriptors,
processes or memory) is not the session's failure either: the fires wait, and
commands are tried again after a back-off of the engine's own (1 s doubling, up to
1 min).

With ``turns`` (an :class:`~remindkit.agent.external.ExternalTurns`), the
occurrence keys are taken in the store when the command has answered, so no
key is handed to it again after a turn that finished (after a crash mid-turn
it is: at-least-once, under the same key); the feedback on the tags of its
previous reply goes in front of the message, and the tags of its stdout are
carried out.
"""

from __future__ import annotations

import errno
import json
import os
import shlex
import subprocess
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..clock import Clock, SystemClock, now_us
from ..errors import InvalidInput
from ..models import Fire, Session
from .base import TurnResult, fresh_argv_differs

if TYPE_CHECKING:
    from ..agent.external import ExternalTurns

DEFAULT_TIMEOUT = 600.0
MAX_ARG_MESSAGE = (
    64 * 1024
)  # bytes: a longer message goes on stdin only (Linux refuses an argument past 128 KiB)
PASSED_ENV = frozenset({"PATH", "HOME", "LANG", "LANGUAGE", "TZ", "TMPDIR", "USER", "LOGNAME"})
RETRY_FIRST_US = 30_000_000  # a turn to try again waits this long first, then twice as long ...
RETRY_MAX_US = 600_000_000  # ... up to this
TAIL = 240  # characters of stderr and of stdout kept in a failed turn's error
# a spawn that fails with one of these is the engine's shortage, not the session's failure
SHORTAGES = frozenset({errno.EMFILE, errno.ENFILE, errno.EAGAIN, errno.ENOMEM})
SHORT_FIRST_US = 1_000_000  # no command starts for this long after a shortage, doubling ...
SHORT_MAX_US = 60_000_000  # ... up to this


def pass_env_names(names: Sequence[str]) -> list[str]:
    """``names`` as a ``pass_env`` list: environment variable names, each once;
    ``REMINDKIT_*`` ones are refused (remindkit sets those itself)."""
    from ..checks import check_env_names

    check_env_names(names)
    out: list[str] = []
    for name in names:
        if name.startswith("REMINDKIT_"):
            raise InvalidInput(
                f"{name} is set by remindkit itself; it cannot be passed on",
                code="invalid_argument",
            )
        if name not in out:
            out.append(name)
    return out


def parse_argv(command: str | Sequence[str]) -> list[str]:
    argv = shlex.split(command) if isinstance(command, str) else [str(a) for a in command]
    if not argv:
        raise ValueError("empty command")
    return argv


class CommandSession:
    name = "command"
    shared = True

    def __init__(
        self,
        *,
        timeout: float | None = None,
        turns: ExternalTurns | None = None,
        extra_env: Callable[[Session], Mapping[str, str]] | None = None,
        clock: Clock | None = None,
    ) -> None:
        self.timeout = timeout
        self.turns = turns
        # more variables for a turn's process, from the process that runs the engine (the
        # HTTP API gives each session's command a token of that session: REMINDKIT_TOKEN)
        self.extra_env = extra_env
        self.clock: Clock = clock or SystemClock()
        self._later: dict[str, tuple[int, int, str]] = {}  # session -> (not before, back-off, why)
        self._short_lock = threading.Lock()
        self._short: tuple[int, int, str] = (0, 0, "")  # any session: (not before, back-off, why)

    def can_deliver(self, session: Session) -> bool:
        return bool(session.config.get("argv")) and self.why_not(session) is None

    def claims_turn(self, session: Session) -> bool:
        return True  # any engine may run the command: its turn is claimed in the store

    def fresh_differs(self, session: Session) -> bool:
        return fresh_argv_differs(session)

    def why_not(self, session: Session) -> str | None:
        """Why no turn runs in ``session`` now (its last one is to be tried again
        later), or None."""
        with self._short_lock:
            short = self._short
        later = self._later.get(session.id)
        for until, _backoff, why in (short, later or (0, 0, "")):
            wait_us = until - now_us(self.clock)
            if wait_us > 0:
                return f"{why}; trying again in {wait_us / 1e6:.0f}s"
        return None

    def _shortage(self, exc: OSError) -> TurnResult:
        """A spawn failed for want of resources: no command starts for a while (1 s,
        doubling up to 1 min, until one starts), and the fires wait."""
        name = errno.errorcode.get(exc.errno or 0, str(exc.errno))
        why = f"cannot start the command now ({name}: {exc.strerror})"
        with self._short_lock:
            last = self._short[1]
            backoff = min(SHORT_MAX_US, last * 2) if last else SHORT_FIRST_US
            self._short = (now_us(self.clock) + backoff, backoff, why)
        return TurnResult(False, error=f"{why}; the fires wait", retry=True)

    def try_later(self, session_id: str, why: str) -> None:
        """Hold turns in ``session_id`` back: 30 s after the first failure to be
        tried again, doubling up to 10 min; a turn that works ends it."""
        _, last, _ = self._later.get(session_id, (0, 0, ""))
        backoff = min(RETRY_MAX_US, last * 2) if last else RETRY_FIRST_US
        self._later[session_id] = (now_us(self.clock) + backoff, backoff, why[:300])

    def run_turn(self, session: Session, message: str, fires: Sequence[Fire]) -> TurnResult:
        try:
            if self.turns is None:
                result = self._run(session, message, fires)
            else:
                handover = self.turns.begin(session.id, fires, framed=message)
                if handover is None:
                    return TurnResult(True, duplicate=True)
                result = self._run(session, handover.message, handover.fires)
                if result.ok:
                    self.turns.end(session.id, handover, result.reply)
        except _Shortage as short:  # the engine's, not the session's: no back-off of its own
            return self._shortage(short.exc)
        if result.retry:
            self.try_later(session.id, result.error or "the command failed")
        elif result.ok:
            self._later.pop(session.id, None)
        return result

    def _run(self, session: Session, message: str, fires: Sequence[Fire]) -> TurnResult:
        template = session.config.get("argv") or []
        in_argv = (
            message
            if len(message.encode("utf-8", "surrogatepass")) <= MAX_ARG_MESSAGE
            else _on_stdin(message)
        )
        argv = [
            str(a).replace("{session}", session.id).replace("{message}", in_argv) for a in template
        ]
        env = command_env(session, fires, store_url=self._store_url())
        if self.extra_env is not None:
            env.update(self.extra_env(session))
        timeout = self.timeout or float(session.config.get("timeout") or DEFAULT_TIMEOUT)
        try:
            proc = subprocess.run(
                argv,
                input=message,
                capture_output=True,
                text=True,
                timeout=timeout,
                env=env,
                cwd=session.config.get("cwd") or None,
            )
        except FileNotFoundError:
            return TurnResult(False, error=f"command not found: {argv[0]}", instant=True)
        except subprocess.TimeoutExpired:
            # it may come back: the fires wait and the turn is tried again later
            return TurnResult(False, error=f"command timed out after {timeout:g}s", retry=True)
        except OSError as exc:
            if exc.errno in SHORTAGES:
                raise _Shortage(exc) from exc
            return TurnResult(False, error=f"command failed to start: {exc}", instant=True)
        with self._short_lock:
            self._short = (0, 0, "")  # a command started: the shortage is over
        if proc.returncode != 0:
            return TurnResult(
                False, error=exit_error(proc.returncode, proc.stdout, proc.stderr), instant=True
            )
        error = _error_result(proc.stdout)
        if error is not None:
            return TurnResult(False, error=error, instant=True)
        return TurnResult(True, reply=_reply_text(proc.stdout))

    def _store_url(self) -> str | None:
        if self.turns is None:
            return os.environ.get("REMINDKIT_DB")
        return str(self.turns.store.engine.url.render_as_string(hide_password=False))


class _Shortage(Exception):
    def __init__(self, exc: OSError) -> None:
        super().__init__(str(exc))
        self.exc = exc


def exit_error(code: int, stdout: str | None, stderr: str | None) -> str:
    """``exit status N: <tail of stderr>; stdout: <tail of stdout>`` (what is there):
    agent CLIs print some of their errors on stdout (``Not logged in``)."""
    err = _tail(stderr)
    out = _tail(stdout)
    text = f"exit status {code}"
    if err:
        text += f": {err}"
    if out:
        text += f"; stdout: {out}"
    return text


def _tail(text: str | None) -> str:
    text = (text or "").strip()
    return text if len(text) <= TAIL else "…" + text[-TAIL:]


def _on_stdin(message: str) -> str:
    return f"(the message is on stdin: {len(message)} characters)"


def command_env(
    session: Session,
    fires: Sequence[Fire],
    *,
    store_url: str | None,
    base: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The environment of a turn's process: a few variables of the engine's
    (:data:`PASSED_ENV`, ``LC_*``), those the session definition names in
    ``pass_env``, what it sets in ``env`` (a value, or null to pass the engine's
    own), and what the agent needs to reach remindkit. ``REMINDKIT_DB`` only when
    its URL has no password. Nothing else of the engine's environment."""
    base = os.environ if base is None else base
    env = {k: v for k, v in base.items() if k in PASSED_ENV or k.startswith("LC_")}
    for name in session.config.get("pass_env") or []:
        if isinstance(name, str) and name in base:
            env[name] = base[name]
    for name, value in (session.config.get("env") or {}).items():
        if value is None:
            if name in base:
                env[str(name)] = base[name]
        else:
            env[str(name)] = str(value)
    for name in [k for k in env if k.startswith("REMINDKIT_")]:
        del env[name]  # only what remindkit sets below
    if base.get("REMINDKIT_HOME"):
        env["REMINDKIT_HOME"] = base["REMINDKIT_HOME"]
    if store_url and _no_password(store_url):
        env["REMINDKIT_DB"] = store_url
    env["REMINDKIT_SESSION"] = session.id
    env["REMINDKIT_REMINDER_IDS"] = ",".join(dict.fromkeys(f.reminder_id for f in fires))
    env["REMINDKIT_OCCURRENCE_KEYS"] = ",".join(f.key for f in fires)
    return env


def _no_password(url: str) -> bool:
    from sqlalchemy.engine import make_url

    try:
        return make_url(url).password is None
    except Exception:
        return False


def _reply_text(stdout: str) -> str:
    """The reply: stdout, or the ``result`` of a JSON result object."""
    text = stdout.strip()
    if text.startswith("{") and '"result"' in text:
        try:
            data: Any = json.loads(text)
        except ValueError:
            return stdout
        if isinstance(data, dict) and isinstance(data.get("result"), str):
            return str(data["result"])
    return stdout


def _error_result(stdout: str) -> str | None:
    """The error of a JSON result that says ``"is_error": true``, else None."""
    text = stdout.strip()
    if not text.startswith("{") or '"is_error"' not in text:
        return None
    try:
        data: Any = json.loads(text)
    except ValueError:
        return None
    if isinstance(data, dict) and data.get("is_error") is True:
        detail = data.get("result") or data.get("error") or data.get("subtype") or "error result"
        return f"the agent reported an error: {str(detail)[:500]}"
    return None
