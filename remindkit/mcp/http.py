"""The MCP server over Streamable HTTP, behind bearer tokens.

:func:`http_app` returns a Starlette app that serves MCP at ``path``. Every
request must carry ``Authorization: Bearer <token>``; ``verify(token)`` returns
the session the token reaches (its tool calls act for that session only), or
``None``, answered ``401`` before the MCP layer sees the request. Tools only:
fires are pushed as channel events on stdio, where Claude Code runs channels.

To serve it inside another ASGI app, mount it and run its lifespan (the MCP
session manager) from the outer app's::

    inner = http_app(api, verify, path="/")
    app = Starlette(routes=[Mount("/mcp", app=inner)],
                    lifespan=lambda _app: inner.router.lifespan_context(inner))
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from starlette.applications import Starlette
from starlette.types import ASGIApp, Receive, Scope, Send

from ..reminders import Reminders
from ..wiring import build
from .server import RemindkitMcp

SCOPE_KEY = "remindkit.session"
MAX_TOKEN = 4096


class BearerGate:
    """ASGI middleware: 401 unless ``verify`` maps the bearer token to a session."""

    def __init__(self, app: ASGIApp, verify: Callable[[str], str | None]) -> None:
        self.app = app
        self.verify = verify

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        token = _bearer(scope)
        session = None
        if token is not None:
            try:
                session = self.verify(token)
            except Exception:
                session = None
        if not session:
            body = json.dumps(
                {
                    "error": {
                        "code": "unauthorized",
                        "message": "a bearer token that reaches a session is required",
                    }
                }
            ).encode()
            await send(
                {
                    "type": "http.response.start",
                    "status": 401,
                    "headers": [
                        (b"content-type", b"application/json"),
                        (b"www-authenticate", b'Bearer realm="remindkit"'),
                        (b"content-length", str(len(body)).encode()),
                    ],
                }
            )
            await send({"type": "http.response.body", "body": body})
            return
        scope[SCOPE_KEY] = session
        await self.app(scope, receive, send)


def _bearer(scope: Scope) -> str | None:
    for name, value in scope.get("headers") or []:
        if name.lower() == b"authorization":
            if len(value) > MAX_TOKEN + 7:
                return None
            text = value.decode("latin-1")
            scheme, _, token = text.partition(" ")
            if scheme.lower() == "bearer" and token.strip():
                return token.strip()
            return None
    return None


def _session_of(request: Any) -> str | None:
    scope = getattr(request, "scope", None)
    return scope.get(SCOPE_KEY) if isinstance(scope, dict) else None


def http_app(
    api: Reminders,
    verify: Callable[[str], str | None],
    *,
    path: str = "/mcp",
    allowed_hosts: list[str] | None = None,
    session_idle_timeout: float | None = 1800,
) -> Starlette:
    """Streamable HTTP MCP at ``path``, each call acting for the session of its token."""
    from mcp.server.transport_security import TransportSecuritySettings

    server = RemindkitMcp(build(api=api), session="-", channel=False, session_for=_session_of)
    security = None
    if allowed_hosts is not None:
        security = TransportSecuritySettings(
            enable_dns_rebinding_protection=True,
            allowed_hosts=allowed_hosts,
            allowed_origins=[f"http://{h}" for h in allowed_hosts],
        )
    app = server.server.streamable_http_app(
        streamable_http_path=path,
        transport_security=security,
        session_idle_timeout=session_idle_timeout,
    )
    app.add_middleware(BearerGate, verify=verify)
    return app


__all__ = ["BearerGate", "http_app"]
