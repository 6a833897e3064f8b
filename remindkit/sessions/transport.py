"""The transport of outbound HTTP: bounded as a whole and aimed.

httpx's timeouts bound each operation (connect, each read), not the request: a
server that sends one byte every few seconds keeps a plain ``client.post`` open for
ever. Every request remindkit sends from an engine (webhooks, model servers) runs
under a :func:`deadline`: each socket operation (name resolution, connect, the TLS
handshake, every read and write) gets at most the time that is left, so the
exchange ends at the deadline whatever the peer does, and its socket is closed.

:class:`BoundedTransport` is the httpx transport that does it. Given a
:class:`~remindkit.sessions.hosts.HostAllowlist` (webhooks), it also resolves the
name itself, checks every address it got, and connects to an address it checked:
there is no second resolution for a name server to answer differently (DNS
rebinding). Aimed so, it never goes through a proxy (``HTTP_PROXY`` is not read): a
proxy would resolve the name where the list cannot see. Without a list (model
servers) it goes through the proxy the environment names for the URL
(:func:`env_proxy`), under the same deadline.

It loads httpx: modules that an engine imports at start import this one where
they send a request.
"""

from __future__ import annotations

import contextlib
import contextvars
import ipaddress
import select
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

import httpcore
import httpx

if TYPE_CHECKING:
    from .hosts import HostAllowlist

# the monotonic time at which the exchange running in this context must be over
_DEADLINE: contextvars.ContextVar[float | None] = contextvars.ContextVar(
    "remindkit_http_deadline", default=None
)
WRITE_SLICE = 64 * 1024  # bytes handed to one send(), so each gets the time left


@contextlib.contextmanager
def deadline(seconds: float) -> Iterator[float]:
    """Every socket operation of :class:`BoundedTransport` inside the block ends by
    ``seconds`` from now (an inner deadline never extends an outer one)."""
    outer = _DEADLINE.get()
    at = time.monotonic() + seconds
    token = _DEADLINE.set(at if outer is None else min(outer, at))
    try:
        yield at
    finally:
        _DEADLINE.reset(token)


def _left(timeout: float | None, error: type[Exception]) -> float | None:
    """The time an operation may take: its own timeout, within the deadline."""
    at = _DEADLINE.get()
    if at is None:
        return timeout
    left = at - time.monotonic()
    if left <= 0:
        raise error("the deadline of the whole request passed")
    return left if timeout is None else min(timeout, left)


class _Stream(httpcore.NetworkStream):
    """A socket whose every operation ends within the deadline."""

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        self._sock.settimeout(_left(timeout, httpcore.ReadTimeout))
        try:
            return self._sock.recv(max_bytes)
        except TimeoutError as exc:
            raise httpcore.ReadTimeout(str(exc) or "read timed out") from exc
        except OSError as exc:
            raise httpcore.ReadError(str(exc)) from exc

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        view = memoryview(buffer)
        while view:
            self._sock.settimeout(_left(timeout, httpcore.WriteTimeout))
            try:
                sent = self._sock.send(view[:WRITE_SLICE])
            except TimeoutError as exc:
                raise httpcore.WriteTimeout(str(exc) or "write timed out") from exc
            except OSError as exc:
                raise httpcore.WriteError(str(exc)) from exc
            view = view[sent:]

    def close(self) -> None:
        self._sock.close()

    def start_tls(
        self,
        ssl_context: ssl.SSLContext,
        server_hostname: str | None = None,
        timeout: float | None = None,
    ) -> httpcore.NetworkStream:
        try:
            self._sock.settimeout(_left(timeout, httpcore.ConnectTimeout))
            wrapped = ssl_context.wrap_socket(self._sock, server_hostname=server_hostname)
        except TimeoutError as exc:
            self.close()
            raise httpcore.ConnectTimeout(str(exc) or "TLS handshake timed out") from exc
        except (OSError, ssl.SSLError) as exc:
            self.close()
            raise httpcore.ConnectError(str(exc)) from exc
        return _Stream(wrapped)

    def get_extra_info(self, info: str) -> Any:
        if info == "ssl_object" and isinstance(self._sock, ssl.SSLSocket):
            return self._sock._sslobj  # type: ignore[attr-defined]  # as httpcore's own stream
        if info == "client_addr":
            return self._sock.getsockname()
        if info == "server_addr":
            return self._sock.getpeername()
        if info == "socket":
            return self._sock
        if info == "is_readable":  # an idle pooled connection the server closed
            return bool(select.select([self._sock], [], [], 0)[0])
        return None


_RESOLVER = ThreadPoolExecutor(max_workers=4, thread_name_prefix="remindkit-resolve")


Resolver = Callable[..., list[tuple[Any, ...]]]  # socket.getaddrinfo's shape


def resolve(
    host: str, port: int, timeout: float | None, resolver: Resolver = socket.getaddrinfo
) -> list[tuple[Any, ...]]:
    """``getaddrinfo`` within ``timeout`` (it has no timeout of its own; a resolver
    that hangs is left to finish on its own thread)."""
    future = _RESOLVER.submit(resolver, host, port, 0, socket.SOCK_STREAM)
    try:
        return future.result(timeout=timeout)
    except TimeoutError:
        raise httpcore.ConnectTimeout(f"resolving {host} took too long") from None
    except OSError as exc:
        raise httpcore.ConnectError(f"cannot resolve {host}: {exc}") from exc


class _Backend(httpcore.NetworkBackend):
    def __init__(self, allow: HostAllowlist | None, resolver: Resolver) -> None:
        self.allow = allow
        self.resolver = resolver

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.NetworkStream:
        infos = resolve(host, port, _left(timeout, httpcore.ConnectTimeout), self.resolver)
        refused: list[str] = []
        last: Exception | None = None
        for family, kind, proto, _name, sockaddr in infos:
            if self.allow is not None:
                addr = ipaddress.ip_address(str(sockaddr[0]).split("%", 1)[0])
                why = self.allow.why_not(host, addr)
                if why is not None:
                    refused.append(why)
                    continue
            sock = socket.socket(family, kind, proto)
            try:
                for option in socket_options or ():
                    sock.setsockopt(*option)
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                sock.settimeout(_left(timeout, httpcore.ConnectTimeout))
                sock.connect(sockaddr)  # the address just checked, not the name again
            except TimeoutError as exc:
                sock.close()
                last = httpcore.ConnectTimeout(f"connecting to {sockaddr[0]} timed out")
                last.__cause__ = exc
                continue
            except OSError as exc:
                sock.close()
                last = exc
                continue
            return _Stream(sock)
        if last is None and refused:
            raise httpcore.ConnectError("refused: " + "; ".join(dict.fromkeys(refused)))
        if isinstance(last, httpcore.ConnectTimeout):
            raise last
        raise httpcore.ConnectError(f"cannot connect to {host}:{port}: {last}")

    def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.NetworkStream:
        raise httpcore.ConnectError("remindkit does not send requests to Unix sockets")

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)


class BoundedTransport(httpx.HTTPTransport):
    """An httpx transport whose connections keep to :func:`deadline` and, given
    ``allow``, reach only the addresses it allows (see the module's docstring).
    ``resolver``: another ``getaddrinfo`` (tests: a name server that answers as told)."""

    def __init__(
        self,
        *,
        allow: HostAllowlist | None = None,
        resolver: Resolver = socket.getaddrinfo,
        proxy: str | None = None,
    ) -> None:
        super().__init__(verify=_tls(), trust_env=False)
        backend = _Backend(allow, resolver)
        if proxy is not None and allow is None:
            self._pool = httpcore.HTTPProxy(
                proxy_url=proxy, ssl_context=_tls(), max_connections=10, network_backend=backend
            )
            return
        self._pool = httpcore.ConnectionPool(
            ssl_context=_tls(),
            max_connections=10,
            max_keepalive_connections=4,
            keepalive_expiry=5.0,
            network_backend=backend,
        )


def env_proxy(url: str) -> str | None:
    """The http(s) proxy the environment names for ``url`` (``HTTPS_PROXY``,
    ``HTTP_PROXY``, ``ALL_PROXY``, less ``NO_PROXY``), as httpx would take it; None."""
    import urllib.request
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    proxies = urllib.request.getproxies()
    proxy = proxies.get(parts.scheme) or proxies.get("all")
    if not proxy or not proxy.startswith(("http://", "https://")):
        return None
    if parts.hostname and urllib.request.proxy_bypass(parts.hostname):
        return None
    return proxy


_TLS: list[ssl.SSLContext] = []
_TLS_LOCK = threading.Lock()


def _tls() -> ssl.SSLContext:
    """One TLS context for every call (building one reads the CA bundle: slow)."""
    with _TLS_LOCK:
        if not _TLS:
            _TLS.append(httpx.create_ssl_context())
        return _TLS[0]


__all__ = ["BoundedTransport", "deadline", "env_proxy", "resolve"]
