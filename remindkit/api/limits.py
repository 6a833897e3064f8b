"""Bounds on connections, in uvicorn's HTTP protocol, before any request is handled.

uvicorn has a keep-alive timeout but none for a request's head or body, and its
``limit_concurrency`` is checked only once a head is complete, so unfinished heads
could hold every descriptor of the process (and the store, the engine's commands
and ``/healthz`` with them). :func:`bounded_protocol` adds, to uvicorn's own
protocol class:

* a **head timeout**: a connection that has not sent a whole request head within
  ``HEAD_S`` of opening (or of its last response) is closed;
* a **body timeout**: a request whose body has not arrived within ``BODY_S`` of its
  head is answered ``408`` (if nothing was sent yet) and closed;
* a **connection cap**: past ``cap`` open connections, the one that has waited
  longest for its head is closed to make room (a flood of slow heads pushes out its
  own oldest, not a request being answered); with none waiting, the new one is
  answered ``503`` and closed.

:func:`descriptor_room` raises the soft descriptor limit to the hard one and says
how many connections fit beside what the store, the engine and its commands need.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

from ..errors import error_body

log = logging.getLogger(__name__)

HEAD_S = 10.0
BODY_S = 30.0
SWEEP_S = 0.5
RESERVE = 256  # descriptors kept for the store, the engine, its commands and logs
CONNECTIONS_MAX = 4096


def _raw(status: bytes, code: str, message: str) -> bytes:
    body = json.dumps(error_body(code, message)).encode()
    return (
        b"HTTP/1.1 " + status + b"\r\ncontent-type: application/json\r\nconnection: close\r\n"
        b"content-length: " + str(len(body)).encode() + b"\r\n\r\n" + body
    )


_503 = _raw(b"503 Service Unavailable", "too_many_connections", "the server is full; try again")
_408 = _raw(b"408 Request Timeout", "request_timeout", "the request body came too slowly")


def descriptor_room() -> int:
    """Raise the soft limit of open descriptors to the hard one; the connections that
    fit, leaving ``RESERVE`` for everything else (at most ``CONNECTIONS_MAX``)."""
    try:
        import resource
    except ImportError:  # pragma: no cover - not on POSIX
        return 1000
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = hard if hard != resource.RLIM_INFINITY else max(soft, 65536)
    if want > soft:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
            soft = want
        except (ValueError, OSError):
            pass
    return max(16, min(CONNECTIONS_MAX, soft - RESERVE))


class Gate:
    """The connections of one server: those waiting for a head, oldest first."""

    def __init__(self, cap: int, *, head_s: float = HEAD_S, body_s: float = BODY_S) -> None:
        self.cap = cap
        self.head_s = head_s
        self.body_s = body_s
        self.open: set[Any] = set()
        self.waiting: dict[Any, float] = {}  # protocol -> since when (insertion order)
        self.bodies: dict[Any, float] = {}  # protocol -> head complete at, body still coming
        self._sweeping = False
        self.evicted = 0
        self.refused = 0
        self.timed_out = 0

    def arrived(self, proto: Any, loop: asyncio.AbstractEventLoop) -> bool:
        """A new connection: False if it was refused (and closed)."""
        if not self._sweeping:
            self._sweeping = True
            loop.call_later(SWEEP_S, self._sweep, loop)
        while len(self.open) >= self.cap:
            if not self.waiting:
                self.refused += 1
                proto.transport.write(_503)
                proto.transport.close()
                return False
            oldest = next(iter(self.waiting))
            self.evicted += 1
            self._close(oldest)
        self.open.add(proto)
        self.waiting[proto] = loop.time()
        return True

    def head_done(self, proto: Any, loop: asyncio.AbstractEventLoop) -> None:
        self.waiting.pop(proto, None)
        cycle = getattr(proto, "cycle", None)
        if cycle is not None and getattr(cycle, "more_body", False):
            self.bodies[proto] = loop.time()

    def response_done(self, proto: Any, loop: asyncio.AbstractEventLoop) -> None:
        self.bodies.pop(proto, None)
        if proto in self.open:
            self.waiting.pop(proto, None)
            self.waiting[proto] = loop.time()  # to the end: waits for its next head

    def left(self, proto: Any) -> None:
        self.open.discard(proto)
        self.waiting.pop(proto, None)
        self.bodies.pop(proto, None)

    def _close(self, proto: Any) -> None:
        self.left(proto)
        transport = getattr(proto, "transport", None)
        if transport is not None and not transport.is_closing():
            transport.close()

    def _sweep(self, loop: asyncio.AbstractEventLoop) -> None:
        now = loop.time()
        try:
            while self.waiting:
                proto, since = next(iter(self.waiting.items()))
                if now - since < self.head_s:
                    break
                self.timed_out += 1
                self._close(proto)
            for proto, since in list(self.bodies.items()):
                cycle = getattr(proto, "cycle", None)
                if cycle is None or not getattr(cycle, "more_body", False):
                    self.bodies.pop(proto, None)
                elif now - since >= self.body_s:
                    self.timed_out += 1
                    if not getattr(cycle, "response_started", True):
                        proto.transport.write(_408)
                    self._close(proto)
        finally:
            loop.call_later(SWEEP_S, self._sweep, loop)


class OneWrite:
    """A response cycle's transport that sends a response's head with the first part
    of its body, in one write. uvicorn writes the head when the application starts
    the response and the body when it sends it, and Starlette sends both in the same
    turn of the event loop: two writes were two segments on the wire and two wake-ups
    of the client (with TCP_NODELAY, each went out at once). A head is held until the
    body's first write or the end of this turn of the loop, whichever comes first;
    nothing else changes (``close`` sends a held head first)."""

    __slots__ = ("_transport", "_loop", "_held", "_first")

    def __init__(self, transport: Any, loop: asyncio.AbstractEventLoop) -> None:
        self._transport = transport
        self._loop = loop
        self._held: bytes | None = None
        self._first = True

    def write(self, data: bytes) -> None:
        if self._first:
            self._first = False
            if not data.startswith(b"HTTP/1.1 100 "):  # not a 100 Continue: the head
                self._held = bytes(data)
                self._loop.call_soon(self.flush)
                return
            self._first = True  # the head comes after it
        if self._held is not None:
            data, self._held = self._held + data, None
        self._transport.write(data)

    def flush(self) -> None:
        if self._held is not None:
            data, self._held = self._held, None
            if not self._transport.is_closing():
                self._transport.write(data)

    def close(self) -> None:
        self.flush()
        self._transport.close()

    def is_closing(self) -> bool:
        return bool(self._transport.is_closing())

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


def bounded_protocol(base: type, gate: Gate) -> type:
    """``base`` (uvicorn's httptools or h11 protocol) with the gate's bounds."""

    class Bounded(base):
        def connection_made(self, transport: Any) -> None:
            super().connection_made(transport)
            if not gate.arrived(self, self.loop):
                self.connections.discard(self)

        def connection_lost(self, exc: Exception | None) -> None:
            gate.left(self)
            super().connection_lost(exc)

        def on_response_complete(self) -> None:
            super().on_response_complete()
            gate.response_done(self, self.loop)

        if hasattr(base, "on_headers_complete"):  # httptools

            def on_headers_complete(self) -> None:
                super().on_headers_complete()
                gate.head_done(self, self.loop)
                cycle = getattr(self, "cycle", None)
                if cycle is not None and cycle.transport is self.transport:
                    cycle.transport = OneWrite(self.transport, self.loop)

            def on_message_complete(self) -> None:
                super().on_message_complete()
                gate.bodies.pop(self, None)

        else:  # h11: a head is complete when a new request cycle starts

            def handle_events(self) -> None:
                before = self.cycle
                super().handle_events()
                if self.cycle is not before and self.cycle is not None:
                    gate.head_done(self, self.loop)

    Bounded.__name__ = f"Bounded{base.__name__}"
    return Bounded


def protocol_class(parser: str, gate: Gate) -> type:
    if parser == "httptools":
        from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

        return bounded_protocol(HttpToolsProtocol, gate)
    from uvicorn.protocols.http.h11_impl import H11Protocol

    return bounded_protocol(H11Protocol, gate)
