"""What every request passes before the application reads it (ASGI middleware).

In order, before a byte of the body is read:

1. ``Host`` is one of the names the server answers to (``localhost``, an IP
   literal, the names given with ``--allow-host``): a page whose own name resolves
   to this machine (DNS rebinding) is refused, ``403 host_not_allowed``.
2. A browser request from another origin is refused, ``403 origin_not_allowed``:
   an ``Origin`` other than the request's own, ``Sec-Fetch-Site: cross-site`` or
   ``same-site`` (another port of this host is the same site to a cookie).
3. ``/login?ticket=…`` trades a one-time ticket for the login cookie (HttpOnly,
   SameSite=Strict) and redirects to the page without the ticket.
4. Under ``/v1/``: the credential, ``401 unauthorized`` without one. The user's
   local credential (:mod:`remindkit.credential`) or the login cookie act as the
   user (admin); a stored token as its scope. A cookie's state-changing request
   must carry its ``Origin``.
5. A body over ``MAX_BODY`` is refused, ``413 body_too_large``: at once by its
   ``Content-Length``, else while it is read.
"""

from __future__ import annotations

import ipaddress
import json
import time
from collections.abc import Iterable
from typing import Any
from urllib.parse import parse_qs, urlsplit

from ..credential import LocalCredential, check_cookie, check_ticket, cookie_value
from ..errors import (
    Conflict,
    Forbidden,
    InvalidInput,
    LimitExceeded,
    NotFound,
    RemindkitError,
    StoreError,
    Unauthorized,
    error_body,
)
from . import tokens as tk

MAX_BODY = 256 * 1024  # bytes: the longest reminder (8,000 characters) escaped, with room
SCOPE_KEY = "remindkit.principal"
UNSAFE = frozenset({"POST", "PUT", "PATCH", "DELETE"})
LOCAL = tk.Principal("admin", token_id="local")
USED_MAX = 10_000


STATUS: dict[type[RemindkitError], int] = {
    InvalidInput: 400,
    Unauthorized: 401,
    Forbidden: 403,
    NotFound: 404,
    Conflict: 409,
    LimitExceeded: 409,
    StoreError: 503,
}


def status_of(exc: RemindkitError) -> int:
    """The HTTP status of a refusal: its family's."""
    for cls in type(exc).__mro__:
        if cls in STATUS:
            return STATUS[cls]
    return 400  # InvalidSchedule and any other refusal of input


def _split_host(value: str) -> tuple[str, int | None] | None:
    """``name[:port]`` or ``[v6][:port]`` → (name, port); None if malformed."""
    value = value.strip().lower()
    if not value or len(value) > 300:
        return None
    if value.startswith("["):
        end = value.find("]")
        if end < 0:
            return None
        name, rest = value[1:end], value[end + 1 :]
    else:
        name, _, port_text = value.partition(":")
        rest = ":" + port_text if _ else ""
    port: int | None = None
    if rest:
        if not rest.startswith(":") or not rest[1:].isascii() or not rest[1:].isdigit():
            return None
        port = int(rest[1:])
    return name.rstrip("."), port


def _is_ip(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


class HostNames:
    """The names a server answers to: ``localhost``, any IP literal (a rebinding page
    has a name of its own, never an address), and the extra ones given."""

    def __init__(self, extra: Iterable[str] = ()) -> None:
        self.names = {"localhost"} | {n.strip().lower().rstrip(".") for n in extra if n.strip()}
        self._seen: dict[str, bool] = {}  # Host values answered (a pure function of the value)

    def allows(self, host: str | None) -> bool:
        if host is None:
            return False
        known = self._seen.get(host)
        if known is None:
            got = _split_host(host)
            known = got is not None and (got[0] in self.names or _is_ip(got[0]))
            if len(self._seen) >= 256:  # bounded: any Host a client sends
                self._seen.clear()
            self._seen[host] = known
        return known


def _same_origin(origin: str, host: str, scheme: str) -> bool:
    try:
        parts = urlsplit(origin)
        oport = parts.port
    except ValueError:
        return False
    if parts.scheme not in ("http", "https") or not parts.hostname or parts.path:
        return False
    got = _split_host(host)
    if got is None:
        return False
    default = {"http": 80, "https": 443}
    hport = got[1] or default.get(scheme)
    return (
        parts.hostname.lower().rstrip(".") == got[0] and (oport or default[parts.scheme]) == hport
    )


def _json(status: int, code: str, message: str) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
    body = json.dumps(error_body(code, message)).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    if status == 401:
        headers.append((b"www-authenticate", b"Bearer"))
    return status, headers, body


SECURITY_HEADERS = [
    (b"x-frame-options", b"DENY"),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
]


class Guard:
    def __init__(
        self,
        app: Any,
        *,
        projects: Any,
        credential: LocalCredential | None,
        names: HostNames,
        cookie: str,
        instance: str,
        max_body: int = MAX_BODY,
    ) -> None:
        self.app = app
        self.projects = projects
        self.credential = credential
        self.names = names
        self.cookie = cookie
        self.instance = instance
        self.max_body = max_body
        self._used: dict[str, int] = {}  # login nonces used, with their expiry
        self._cookie_prefix = cookie.encode() + b"="

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers: dict[bytes, bytes] = {}
        for name, value in scope["headers"]:
            if name in headers and name == b"cookie":
                headers[name] += b"; " + value
            else:
                headers.setdefault(name, value)
        refusal = self._refusal(scope, headers)
        if refusal is not None:
            await _answer(send, *refusal)
            return
        path = scope["path"]
        if path == "/login":
            await self._login(scope, send)
            return
        cookie_used = False
        if path.startswith("/v1/"):
            try:
                who, cookie_used = self._principal(headers)
            except RemindkitError as exc:
                await _answer(send, *_json(status_of(exc), exc.code, exc.message))
                return
            if cookie_used and scope["method"] in UNSAFE and b"origin" not in headers:
                await _answer(
                    send,
                    *_json(403, "origin_not_allowed", "a browser's change must carry its Origin"),
                )
                return
            scope[SCOPE_KEY] = who
        length = headers.get(b"content-length")
        if length is not None:
            if not length.isdigit():
                await _answer(send, *_json(400, "invalid_argument", "bad Content-Length"))
                return
            if int(length) > self.max_body:
                await _answer(send, *_too_large(self.max_body))
                return
        started = [False]
        try:
            await self.app(scope, self._bounded(receive), _secured(send, started))
        except _Overflow:  # a body past the bound, found while reading it
            if not started[0]:
                await _answer(send, *_too_large(self.max_body))

    def _refusal(
        self, scope: Any, headers: dict[bytes, bytes]
    ) -> tuple[int, list[tuple[bytes, bytes]], bytes] | None:
        host = headers.get(b"host")
        host_text = host.decode("latin-1") if host is not None else None
        if not self.names.allows(host_text):
            return _json(
                403,
                "host_not_allowed",
                f"this server does not answer to Host {host_text!r} (--allow-host NAME)",
            )
        site = headers.get(b"sec-fetch-site")
        if site in (b"cross-site", b"same-site"):
            return _json(403, "origin_not_allowed", "requests from another site are refused")
        origin = headers.get(b"origin")
        if origin is not None and not _same_origin(
            origin.decode("latin-1"), host_text or "", scope.get("scheme", "http")
        ):
            return _json(403, "origin_not_allowed", "requests from another origin are refused")
        return None

    def _principal(self, headers: dict[bytes, bytes]) -> tuple[tk.Principal, bool]:
        auth = headers.get(b"authorization")
        if auth is not None:
            scheme, _, value = auth.decode("latin-1").partition(" ")
            token = value.strip()
            if scheme.lower() != "bearer" or not token:
                raise Unauthorized("use Authorization: Bearer <token>", code="unauthorized")
            if self.credential is not None and self.credential.matches(token):
                return LOCAL, False
            return tk.authenticate(self.projects, token), False
        raw = headers.get(b"cookie")
        if raw is not None and self.credential is not None:
            for part in raw.split(b";"):
                part = part.strip()
                if part.startswith(self._cookie_prefix):
                    value = part[len(self._cookie_prefix) :].decode("latin-1")
                    if check_cookie(self.credential.value, value, now=time.time()):
                        return LOCAL, True
        raise Unauthorized(
            "a credential is needed: the SDKs find yours in the remindkit home; a browser "
            "logs in with `remindkit api open`; others send Authorization: Bearer rk_…",
            code="unauthorized",
        )

    async def _login(self, scope: Any, send: Any) -> None:
        query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
        ticket = (query.get("ticket") or [""])[0]
        now = time.time()
        nonce = None
        if self.credential is not None:
            nonce = check_ticket(self.credential.value, self.instance, ticket, now=now)
        for old, expires in list(self._used.items()):
            if expires < now:
                del self._used[old]
        if nonce is None or nonce in self._used or len(self._used) >= USED_MAX:
            await _answer(
                send,
                *_json(
                    401,
                    "login_expired",
                    "this login URL was used already or has expired: run `remindkit api open`",
                ),
            )
            return
        self._used[nonce] = int(ticket.split(".")[1])
        target = (query.get("next") or ["/"])[0]
        if not target.startswith("/") or target.startswith(("//", "/\\")):
            target = "/"
        assert self.credential is not None
        value = cookie_value(self.credential.value, now=now)
        cookie = f"{self.cookie}={value}; Path=/; HttpOnly; SameSite=Strict; Max-Age={7 * 86400}"
        await _answer(
            send,
            303,
            [
                (b"location", target.encode("latin-1", "replace")),
                (b"set-cookie", cookie.encode()),
                (b"cache-control", b"no-store"),
                (b"content-length", b"0"),
            ],
            b"",
        )

    def _bounded(self, receive: Any) -> Any:
        seen = 0
        limit = self.max_body

        async def bounded() -> Any:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > limit:
                    # not an Exception: no parser on the way turns it into a 400 or a 500
                    raise _Overflow
            return message

        return bounded


def _too_large(limit: int) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
    status, headers, body = _json(413, "body_too_large", f"a request body is at most {limit} bytes")
    return status, [*headers, (b"connection", b"close")], body


class _Overflow(BaseException):
    """A request body grew past the bound while it was read."""


def _secured(send: Any, started: list[bool]) -> Any:
    async def secured(message: Any) -> None:
        if message["type"] == "http.response.start":
            started[0] = True
            message["headers"] = [*message.get("headers", ()), *SECURITY_HEADERS]
        await send(message)

    return secured


async def _answer(send: Any, status: int, headers: list[tuple[bytes, bytes]], body: bytes) -> None:
    await send(
        {"type": "http.response.start", "status": status, "headers": headers + SECURITY_HEADERS}
    )
    await send({"type": "http.response.body", "body": body})


__all__ = ["MAX_BODY", "SCOPE_KEY", "Guard", "HostNames", "status_of"]
