"""Claude Code's hooks: how fires reach a Claude Code conversation that takes no
channel events, and how the server learns which conversation it serves.

Three hook events, each a ``remindkit mcp hook EVENT`` command reading the hook's
JSON on stdin (the older names ``mcp bind``, ``session busy --hook`` and
``session idle --hook`` run the same code):

* ``start`` (``SessionStart``): records the host's ``session_id`` for the project
  (:mod:`remindkit.mcp.identity`) and marks the session idle;
* ``prompt`` (``UserPromptSubmit``): marks the session busy (fires due during the
  turn wait for its end) and hands in what waits for it, as the prompt's
  ``additionalContext``: the fires that came due while the conversation sat idle
  come back with the next prompt. A prompt that is a remindkit channel event
  (``<channel source="remindkit" … key="…">``) is the host taking those fires:
  they are recorded delivered, not handed in again;
* ``stop`` (``Stop``): hands in what came due during the turn as
  ``{"decision": "block", "reason": …}`` (Claude goes on with the fired block in
  the same conversation), else marks the session idle.

Only for a host known to take what its hooks print (Claude Code, and Codex CLI, Gemini
CLI and opencode: :data:`remindkit.mcp.hosts.HOOK_CLIENTS`; the session's MCP server
records its host); for any other host the prompt and stop hooks only mark the
session busy and idle, and its fires wait for its resume command. A hook that hands
fires in claims them in the store first (no engine delivers them
meanwhile), prints them, and only then records them delivered and takes their
occurrence keys (a key taken earlier is recorded delivered and not printed again).
A hook killed between printing and recording leaves the claim to run out: the
fires are handed in again (at-least-once, only after a crash). Repeating reminders
that wait to be re-based (policy ``rebase``) are left to the engine.

:func:`run_hook` is the whole of it, over a store; the hook command hands it to a
running engine when one serves the store (:mod:`remindkit.cli.handoff`), and runs
it in its own process otherwise. Output is what the hook prints on stdout.
"""

from __future__ import annotations

import json
import logging
import re
import secrets
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..clock import Clock, now_us
from ..errors import InvalidInput, StoreError
from ..models import DELIVERED, WAITING, Fire, Outcome, WaitFor

if TYPE_CHECKING:
    from ..reminders import Reminders
    from ..store import SqlStore

log = logging.getLogger(__name__)

EVENTS = {"start": "SessionStart", "prompt": "UserPromptSubmit", "stop": "Stop"}
HOOK_LEASE_US = 20_000_000  # a hook's claim: its hand-in is printed well within this
STORE_PATIENCE_S = 5.0  # a busy store is tried again this long before the hook gives up
SEEN_PATIENCE_S = 2.0  # a channel event's fires the engine is still recording as waiting
TAKE_LIMIT = 50  # fires handed in by one hook at most (the rest come with the next)
# hosts whose hooks' output reaches the conversation (and the agent CLIs of .hosts)
HANDS_IN = frozenset({"claude-code"})
# a remindkit channel event as Claude Code puts it in the prompt: <channel source="remindkit" … key="…" …>
_CHANNEL = re.compile(r'<channel source="remindkit"([^>]*)>', re.ASCII)
_KEY = re.compile(r'\skey="([^"<>]{1,300})"', re.ASCII)


@dataclass
class Taken:
    """Fires a hook holds: printed, then :meth:`Hooks.settle` records them."""

    session: str
    fires: list[Fire]
    handover: Any = None  # agent.external.Handover of the fires not taken before
    seen: list[Fire] = field(default_factory=list)  # in the host's prompt (its channel event)
    dups: list[Fire] = field(default_factory=list)  # keys the session took before

    @property
    def empty(self) -> bool:
        return not self.fires and not self.seen and not self.dups


@dataclass
class Answer:
    out: str = ""  # the hook's stdout
    taken: Taken | None = None  # to settle once ``out`` is printed
    info: dict[str, Any] = field(default_factory=dict)  # what ``--json`` prints instead


def channel_keys(prompt: str) -> list[str]:
    """The occurrence keys of the remindkit channel events in a prompt."""
    keys: list[str] = []
    for m in _CHANNEL.finditer(prompt or ""):
        found = _KEY.search(m.group(1))
        if found:
            keys.append(found.group(1))
    return keys


class Hooks:
    """The hook events over a store (``owner`` names whoever holds the claims)."""

    def __init__(self, api: Reminders, *, owner: str) -> None:
        from ..agent.external import ExternalTurns

        self.store: SqlStore = api.store
        self.clock: Clock = api.clock
        self.owner = owner
        self.turns = ExternalTurns(api)

    # -- the events ----------------------------------------------------------------------

    def answer(
        self,
        event: str,
        data: dict[str, Any],
        *,
        project: Path | None = None,
        pids: Sequence[int] = (),
        home: Path | None = None,
    ) -> Answer:
        """The hook's answer; fires it hands in are in ``answer.taken`` until settled."""
        from ..checks import check_session_id

        sid = check_session_id(data.get("session_id"))
        if sid is None:
            raise InvalidInput("hook input has no session_id", code="invalid_argument")
        if event == "start":
            return self._start(sid, data, project=project, pids=pids, home=home)
        if event in ("prompt", "stop") and not self._patient(lambda: self._hands_in(sid)):
            # a host not known to take what a hook prints (the agent CLIs' plugins and
            # hooks): the hook only marks the session; its fires wait for the resume command
            self._patient(lambda: self._mark(sid, busy=event == "prompt"))
            return Answer()
        if event == "prompt":
            self._patient(lambda: self._mark(sid, busy=True))
            seen = set(channel_keys(str(data.get("prompt") or "")))
            deadline = time.monotonic() + SEEN_PATIENCE_S
            while seen and self._on_their_way(sid, seen) and time.monotonic() < deadline:
                time.sleep(0.02)  # pushed a moment ago: the engine is recording that they wait
            taken = self._patient(lambda: self._take(sid, seen=seen))
            if not taken.fires:
                return Answer(taken=taken)
            out = {
                "hookSpecificOutput": {
                    "hookEventName": "UserPromptSubmit",
                    "additionalContext": taken.handover.message,
                }
            }
            return Answer(json.dumps(out) + "\n", taken=taken)
        if event == "stop":
            taken = self._patient(lambda: self._take(sid, seen=set(), idle=True))
            if taken.fires:
                block = {"decision": "block", "reason": taken.handover.message}
                return Answer(json.dumps(block) + "\n", taken=taken)
            self._patient(lambda: self._mark(sid, busy=False))
            return Answer(taken=taken)
        raise InvalidInput(f"unknown hook event {event!r}", code="invalid_argument")

    def settle(self, taken: Taken | None, *, printed: bool) -> None:
        """Record what a hook took: delivered once printed (and the fires the host's
        prompt carried), else given back to wait as before."""
        if taken is None or taken.empty:
            return
        now = now_us(self.clock)
        if not printed:
            self._give_back(
                [*taken.fires, *taken.seen, *taken.dups], "the hook ended before printing"
            )
            return
        if taken.handover is not None:
            self._patient(lambda: self.turns.end(taken.session, taken.handover, None))
        outcomes = [
            Outcome(
                occurrence_id=f.occurrence_id,
                token=f.token,
                state=DELIVERED,
                fired_at_us=None if f.fired_at is None else int(f.fired_at.timestamp() * 1e6),
                delivered_at_us=now,
                delivered_to=taken.session,
                handed_at_us=now,
                error=note,
            )
            for group, note in (
                (taken.fires, None),
                (taken.seen, "taken by the host from its channel event"),
                (taken.dups, "already taken by an earlier turn of the session"),
            )
            for f in group
        ]
        self._patient(lambda: self.store.outcomes.finish(outcomes, now_us=now))

    # -- parts ---------------------------------------------------------------------------

    def _start(
        self,
        sid: str,
        data: dict[str, Any],
        *,
        project: Path | None,
        pids: Sequence[int],
        home: Path | None,
    ) -> Answer:
        from . import identity

        where = home or self.store.settings.home
        folder = project or identity.project_dir(
            data.get("cwd") if isinstance(data.get("cwd"), str) else None
        )
        source = data.get("source") if isinstance(data.get("source"), str) else None
        path = identity.write_binding(where, folder, sid, pids=list(pids), source=source)
        if source in (None, "startup", "resume", "clear"):
            self._patient(lambda: self._mark(sid, busy=False))
        # SessionStart's stdout goes into the conversation: nothing is printed
        return Answer(info={"session": sid, "project": str(folder), "file": str(path)})

    def _hands_in(self, sid: str) -> bool:
        """Does the session's host take what its hooks print into the conversation?
        Claude Code does (Stop: ``decision: block``, UserPromptSubmit:
        ``additionalContext``), and so do the agent CLIs of :mod:`.hosts`; the MCP server
        records which host it serves."""
        from .hosts import HOOK_CLIENTS  # Codex CLI, Gemini CLI, opencode

        sess = self.store.sessions.get_session(sid)
        host = sess.config.get("host") if sess is not None else None
        return host in HANDS_IN or host in HOOK_CLIENTS

    def _on_their_way(self, sid: str, keys: set[str]) -> bool:
        """Are any of these occurrences still held by the engine that pushed them?"""
        for key in keys:
            rid = key.split("@", 1)[0]
            for occ in self.store.reminders.history(reminder_id=rid, states=["claimed"], limit=5):
                if occ.key == key and occ.session == sid:
                    return True
        return False

    def _mark(self, sid: str, *, busy: bool) -> None:
        self.store.sessions.set_session_busy(sid, busy, now_us=now_us(self.clock))

    def _take(self, sid: str, *, seen: set[str], idle: bool = False) -> Taken:
        fires = self.store.waiting.claim_waiting(
            now_us=now_us(self.clock),
            owner=self.owner,
            lease_us=HOOK_LEASE_US,
            sessions=[sid],
            limit=TAKE_LIMIT,
        )
        rebase = [f for f in fires if f.wait_for == WaitFor.REBASE]
        if rebase and idle:  # the turn ended: each fires again one period from now
            self._rebase(rebase)
        elif rebase:
            self._give_back(rebase, "re-based when the session is idle", WaitFor.REBASE)
        fires = [f for f in fires if f.wait_for != WaitFor.REBASE]
        in_prompt = [f for f in fires if f.key in seen]
        rest = [f for f in fires if f.key not in seen]
        handover = self.turns.begin(sid, rest) if rest else None
        fresh = list(handover.fires) if handover is not None else []
        fresh_keys = {f.key for f in fresh}
        dups = [f for f in rest if f.key not in fresh_keys]
        return Taken(sid, fresh, handover, seen=in_prompt, dups=dups)

    def _rebase(self, fires: Sequence[Fire]) -> None:
        """Policy rebase, at the end of the turn the fires came due in: as the engine
        re-bases them (:func:`remindkit.engine.plan.rebased`)."""
        from ..engine.waiting import rebase_fires

        rebase_fires(
            self.store,
            fires,
            now=self.clock.now(),
            note="re-based: the session was busy when it came due (policy: rebase); it fires "
            "again one period after the turn ended",
        )

    def _give_back(
        self, fires: Sequence[Fire], why: str, wait_for: WaitFor = WaitFor.SESSION
    ) -> None:
        self.store.outcomes.finish(
            [
                Outcome(
                    occurrence_id=f.occurrence_id,
                    token=f.token,
                    state=WAITING,
                    error=why,
                    wait_for=f.wait_for or wait_for,
                )
                for f in fires
            ],
            now_us=now_us(self.clock),
        )

    def _patient(self, step: Callable[[], Any]) -> Any:
        """``step``, tried again while the store is busy (up to STORE_PATIENCE_S)."""
        deadline = time.monotonic() + STORE_PATIENCE_S
        delay = 0.02
        while True:
            try:
                return step()
            except StoreError:
                if time.monotonic() + delay > deadline:
                    raise
                time.sleep(delay)
                delay = min(delay * 2, 0.5)


class HookDesk:
    """An engine's side of handed-over hooks (:func:`remindkit.cli.handoff.try_hook`):
    answers at once, and records the fires a hook took when its caller says it printed
    them (within ACK_S; else they go back to wait)."""

    ACK_S = 10.0

    def __init__(self, api: Reminders) -> None:
        import os
        import socket

        self.hooks = Hooks(api, owner=f"hook:{socket.gethostname()}:{os.getpid()}")
        self._pending: dict[str, tuple[Taken, float]] = {}
        self._lock = threading.Lock()

    def handle(self, request: dict[str, Any]) -> dict[str, Any]:
        if "hook_printed" in request:
            with self._lock:
                got = self._pending.pop(str(request.get("hook_printed")), None)
            if got is not None:
                self._settle(got[0], printed=request.get("printed") is True)
            self._expire()
            return {"ok": got is not None}
        hook = request.get("hook")
        if not isinstance(hook, dict) or hook.get("event") not in EVENTS:
            return {"local": "unknown hook"}
        if hook.get("home") != str(self.hooks.store.settings.home):
            return {"local": "another remindkit home"}
        data = hook.get("input")
        if not isinstance(data, dict):
            return {"local": "no hook input"}
        scope = hook.get("scope")
        if scope is not None and data.get("session_id") != scope:
            return {"out": "", "err": f"hook of another session in session scope {scope!r}\n"}
        project = hook.get("project")
        pids = hook.get("pids") or []
        try:
            answer = self.hooks.answer(
                hook["event"],
                data,
                project=Path(project) if isinstance(project, str) else None,
                pids=[int(p) for p in pids if isinstance(p, int)],
            )
        except (InvalidInput, StoreError, OSError) as exc:
            return {"out": "", "err": f"{exc}\n"}
        ticket = None
        if answer.taken is not None and not answer.taken.empty:
            ticket = secrets.token_hex(16)
            with self._lock:
                self._pending[ticket] = (answer.taken, time.monotonic() + self.ACK_S)
        self._expire()
        return {"out": answer.out, "ticket": ticket, "info": answer.info}

    def _expire(self) -> None:
        now = time.monotonic()
        with self._lock:
            late = [t for t, (_taken, until) in self._pending.items() if until < now]
            gone = [self._pending.pop(t)[0] for t in late]
        for taken in gone:
            self._settle(taken, printed=False)

    def _settle(self, taken: Taken, *, printed: bool) -> None:
        try:
            self.hooks.settle(taken, printed=printed)
        except Exception:  # the claims run out and an engine takes them over
            log.exception("could not record a hook's hand-in")


__all__ = ["EVENTS", "Answer", "HookDesk", "Hooks", "Taken", "channel_keys"]
