"""``remindkit api``: one process that serves HTTP (uvicorn) and runs an engine."""

from __future__ import annotations

import ipaddress
import logging
import os
import socket
from typing import TYPE_CHECKING, Any, TextIO

from .. import events as ev
from ..errors import InvalidInput
from ..wiring import Graph

if TYPE_CHECKING:
    from ..reminders import Reminders
    from .tokens import AgentTokens

log = logging.getLogger(__name__)
PROJECT_LIMIT = 200  # live reminders per project, unless REMINDKIT_MAX_PER_PROJECT says otherwise


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    # accepted connections inherit it: a response's head and body go out at once, not
    # the body after the client's delayed ACK of the head
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise InvalidInput(
            f"cannot listen on {host}:{port}: {exc.strerror}", code="invalid_argument"
        ) from None
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock


def run_api(
    graph: Graph,
    out: TextIO,
    *,
    host: str = "127.0.0.1",
    port: int = 8765,
    no_alerts: bool = False,
    engine: bool = True,
    verbose: bool = False,
) -> int:
    """Serve until SIGINT/SIGTERM. Another address than loopback needs tokens."""
    import uvicorn

    from .app import create_app
    from .events import EventFeed

    settings = graph.settings
    if settings.limits.per_project is None and "REMINDKIT_MAX_PER_PROJECT" not in os.environ:
        settings = settings.with_limits(per_project=PROJECT_LIMIT)
    graph = graph.for_surface("api", settings=settings)
    api = graph.api
    loopback = is_loopback(host)
    if not loopback and api.store.projects.count_tokens() == 0:
        raise InvalidInput(
            f"{host} is not a loopback address: create a token first (`remindkit token create --project P`)",
            code="tokens_required",
        )
    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    eng = graph.engine(alerter=None if no_alerts else "local", role="api") if engine else None
    feed = EventFeed(api.store) if hasattr(api.store, "events") else None
    if eng is not None and feed is not None:
        # this engine's fires and outcomes, once committed: read them at once
        eng.events.subscribe(ev.WRITTEN, lambda *_a, **_k: feed.poke())
    app = create_app(api, open_loopback=loopback, engine=eng, feed=feed)
    sock = bind(host, port)
    where = sock.getsockname()
    shown = f"[{where[0]}]" if ":" in where[0] else where[0]
    url = f"http://{shown}:{where[1]}"
    agent_tokens = give_commands_tokens(api, eng, url) if eng is not None else None
    config = uvicorn.Config(
        app,
        http=http_parser(),
        loop="auto",  # uvloop when installed (the api extra), else asyncio's own
        log_level="info" if verbose else "warning",
        access_log=verbose,
        timeout_graceful_shutdown=2,
        lifespan="on",
    )
    server = uvicorn.Server(config)
    if eng is not None:
        eng.start()
    if feed is not None:
        feed.start()
    out.write(
        f"remindkit api: listening on {url} "
        f"(engine {getattr(eng, 'id', '-')}, store {api.store.url})\n"
    )
    out.flush()
    _keep_signals_for_cleanup()
    try:
        server.run(sockets=[sock])
    finally:
        if feed is not None:
            feed.stop()
        if eng is not None:
            eng.stop()
        if agent_tokens is not None:
            agent_tokens.revoke_all()
        sock.close()
    out.write("remindkit api: stopped\n")
    return 0


def http_parser() -> str:
    """uvicorn's C parser (httptools, in the ``api`` extra) when it is installed, else
    pure-Python h11: parsing a request with h11 costs as much as the admission read."""
    import importlib.util

    return "httptools" if importlib.util.find_spec("httptools") is not None else "h11"


def give_commands_tokens(api: Reminders, engine: Any, url: str) -> AgentTokens | None:
    """The agent commands this server's engine runs reach the API as their session:
    each gets ``REMINDKIT_TOKEN`` (a session token, made on first use, revoked when the
    server stops) and ``REMINDKIT_API_URL``."""
    from ..clock import to_us
    from .tokens import AgentTokens

    command = engine.adapters.unguarded("command")
    if command is None or not hasattr(command, "extra_env"):
        return None
    tokens = AgentTokens(api.store.projects)

    def extra(session: Any) -> dict[str, str]:
        env = tokens.env(session.id, now_us=to_us(api.clock.now()))
        env["REMINDKIT_API_URL"] = url
        return env

    command.extra_env = extra
    return tokens


def _keep_signals_for_cleanup() -> None:
    """uvicorn, once it has shut down for SIGTERM or SIGINT, raises that signal again
    with the handler it found; with Python's defaults that kills the process before the
    engine gives its claims back and the agents' tokens are revoked. A handler of ours
    that only notes the signal lets run_api finish and exit 0, as ``serve`` does."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        return
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_args: None)
