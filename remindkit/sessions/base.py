"""Session adapters: how a ``<schedule-fired>`` message becomes a turn.

An adapter runs one turn with the framed message and returns a
:class:`TurnResult`. Adapters that remindkit owns (command, openai, python with
a store) take the occurrence keys in the store with the turn, so a repeat of a
key is dropped, and carry out the tags of the reply for the session. ``shared`` adapters (command, openai) can be driven by any
engine process, so their turns are claimed in the store; a local adapter
(python) only by the process that registered the session.

An adapter whose turns reach a server over the network may also say which one
(``peer(session) -> str | None``, e.g. :func:`origin` of a webhook's URL): an engine
runs at most a share of its turn workers for one peer at once, so that a slow peer
holds that share, not every worker.

Delivery asks an adapter two more things (:func:`claims_turn`, :func:`fresh_differs`
ask them for an adapter that does not say): ``claims_turn(session)``, whether a turn
in ``session`` is claimed in the store (default: ``shared``; an MCP client connected
to this process is pushed to without one), and ``fresh_differs(session)``, whether a
fresh session of ``session`` would be a real fallback (default: a session that runs
a command needs a ``fresh_argv`` of its own, any other does).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from .._compat import quick_init
from ..checks import MAX_SESSION_ID
from ..models import Fire, Session


def origin(url: object) -> str | None:
    """``scheme://host:port`` of a URL (the port made explicit), lowercased; None when
    it names no host. Two sessions whose turns reach the same origin share a peer."""
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(str(url or "").strip())
        host, port = parts.hostname, parts.port
    except ValueError:
        return None
    if not host:
        return None
    scheme = parts.scheme.lower()
    if port is None:
        port = 443 if scheme == "https" else 80
    return f"{scheme}://{host.lower()}:{port}"


def fresh_session_id(parent: str, suffix: str) -> str:
    """``parent~suffix``, within the 200 characters of a session id: a long parent
    (or a fresh session's own fresh session) is cut before the suffix."""
    tail = f"~{suffix}"
    return parent[: MAX_SESSION_ID - len(tail)] + tail


def fresh_argv_differs(session: Session) -> bool:
    """Whether a fresh session of ``session``, which runs a command, would run another:
    it needs a ``fresh_argv`` of its own (re-running its command under a made-up id
    resumes nothing: ``claude --resume <id>~abc`` is refused)."""
    fresh = session.config.get("fresh_argv")
    return bool(fresh) and fresh != session.config.get("argv")


def claims_turn(adapter: SessionAdapter, session: Session) -> bool:
    """Whether a turn of ``adapter`` in ``session`` is claimed in the store (any engine
    may drive the session): the adapter's ``claims_turn(session)``, else its ``shared``."""
    ask = getattr(adapter, "claims_turn", None)
    return bool(ask(session)) if ask is not None else bool(adapter.shared)


def fresh_differs(adapter: SessionAdapter, session: Session) -> bool:
    """Whether a fresh session of ``session`` would really differ from it (the
    fallback of a turn that failed at once): the adapter's ``fresh_differs(session)``,
    else :func:`fresh_argv_differs` for a session with a command, True for others."""
    ask = getattr(adapter, "fresh_differs", None)
    if ask is not None:
        return bool(ask(session))
    return fresh_argv_differs(session) if session.config.get("argv") else True


@quick_init
@dataclass(frozen=True)
class TurnResult:
    ok: bool
    reply: str | None = None
    error: str | None = None
    instant: bool = False  # failed at once (e.g. the session cannot be resumed)
    session: str | None = None  # the session that actually took the turn, if another
    busy: bool = False  # not run: the session started a turn of its own meanwhile (the fires wait)
    duplicate: bool = False  # not run: every occurrence key was taken by an earlier turn
    retry: bool = False  # the agent could not be reached: the fires wait and are tried again


class SessionAdapter(Protocol):
    name: str
    shared: bool

    def can_deliver(self, session: Session) -> bool:
        """This process can run a turn in ``session`` now."""
        ...

    def run_turn(self, session: Session, message: str, fires: Sequence[Fire]) -> TurnResult: ...
