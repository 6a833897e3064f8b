"""``remindkit api``: one process that serves HTTP (uvicorn) and runs an engine."""

from __future__ import annotations

import ipaddress
import logging
import os
import re
import socket
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, TextIO

from .. import events as ev
from ..errors import InvalidInput
from ..wiring import Graph

if TYPE_CHECKING:
    from ..reminders import Reminders
    from .tokens import AgentTokens

log = logging.getLogger(__name__)
PROJECT_LIMIT = 200  # live reminders per project, unless REMINDKIT_MAX_PER_PROJECT says otherwise
# seconds without the engine's quiet garbage collection after a commit of its fires
# or outcomes, while event streams are open: one collection held the GIL for 12 ms
# just as a fire's event was being written to 50 streams (bench/api_speed.py's p99)
STREAMS_GC_HOLD_S = 0.2


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
    allow_hosts: Sequence[str] = (),
) -> int:
    """Serve until SIGINT/SIGTERM. Another address than loopback needs tokens."""
    import secrets
    import time

    import uvicorn

    from ..credential import LocalCredential, login_ticket, remove_server, write_server
    from .app import create_app
    from .events import EventFeed
    from .guard import HostNames
    from .limits import Gate, descriptor_room, protocol_class

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
    logging.getLogger("uvicorn.access").addFilter(redact_secrets)
    home = settings.home
    credential = LocalCredential(home)
    instance = secrets.token_hex(8)
    cap = descriptor_room()
    sock = bind(host, port)
    where = sock.getsockname()
    shown = f"[{where[0]}]" if ":" in where[0] else where[0]
    url = f"http://{shown}:{where[1]}"
    urls = [url]
    if host == "0.0.0.0":
        urls.append(f"http://127.0.0.1:{where[1]}")
    elif host == "::":
        urls.append(f"http://[::1]:{where[1]}")
    names = list(allow_hosts)
    if not loopback:
        names += [host, socket.gethostname(), socket.getfqdn()]
    eng: Any = graph.engine(alerter=None if no_alerts else "local", role="api") if engine else None
    feed = (
        EventFeed(api.store, local_mark=lambda: _mark(credential.value))
        if hasattr(api.store, "events")
        else None
    )
    if eng is not None and feed is not None:
        # this engine's fires and outcomes, once committed: read them at once; and no
        # quiet garbage collection (the engine's, right after this commit in the same
        # round) while their events go out to the open streams
        collector = eng.collector

        def written(_event: ev.Written) -> None:
            feed.committed()
            if feed.open_streams():
                collector.hold(STREAMS_GC_HOLD_S)

        eng.events.subscribe(ev.Written, written)
    cookie = f"remindkit-{where[1]}"
    app = create_app(
        api,
        engine=eng,
        feed=feed,
        credential=credential,
        names=HostNames(names),
        cookie=cookie,
        instance=instance,
    )
    agent_tokens = give_commands_tokens(api, eng, url) if eng is not None else None
    config = uvicorn.Config(
        app,
        http=protocol_class(
            http_parser(),
            Gate(cap, head_s=settings.head_timeout_s, body_s=settings.body_timeout_s),
        ),
        loop="auto",  # uvloop when installed (the api extra), else asyncio's own
        log_level="info" if verbose else "warning",
        access_log=verbose,
        timeout_graceful_shutdown=2,
        timeout_keep_alive=5,
        lifespan="on",
    )
    server = uvicorn.Server(config)
    if eng is not None:
        eng.start()
    if feed is not None:
        feed.start()
    info = write_server(
        home, {"urls": urls, "instance": instance, "cookie": cookie, "started": time.time()}
    )
    ticket = login_ticket(credential.value, instance)
    out.write(
        f"remindkit api: listening on {url} "
        f"(engine {getattr(eng, 'id', '-')}, store {api.store.url})\n"
        f"remindkit api: to log a browser in, open {url}/login?ticket={ticket}\n"
        "  (good once, for 10 minutes; `remindkit api open` makes another)\n"
    )
    out.flush()
    _keep_signals_for_cleanup()
    try:
        server.run(sockets=[sock])
    finally:
        remove_server(info)
        if feed is not None:
            feed.stop()
        if eng is not None:
            eng.stop()
        if agent_tokens is not None:
            agent_tokens.revoke_all()
        sock.close()
    out.write("remindkit api: stopped\n")
    return 0


def _mark(value: str) -> str:
    import hashlib

    return hashlib.sha256(value.encode()).hexdigest()[:16]


# a query parameter that may carry a secret (a login ticket, a token a client put in
# the address: ?access_token=, ?token=, ...), and anything shaped like a remindkit token
_SECRET_PARAM = re.compile(
    r"(?i)\b(ticket|access_token|token|api_key|apikey|key|password|secret)=[^&\s\"]*"
)
_TOKEN = re.compile(r"\brk_[A-Za-z0-9_-]{8,}")


def redact_secrets(record: logging.LogRecord) -> bool:
    """The access log without secrets in addresses: ``/login?ticket=…``, a token sent
    as ``?access_token=…`` (the server never reads one there: it answers ``401``, and
    the address is logged without it)."""
    if isinstance(record.args, tuple):
        record.args = tuple(_hide(a) if isinstance(a, str) else a for a in record.args)
    return True


def _hide(text: str) -> str:
    return _TOKEN.sub("rk_…", _SECRET_PARAM.sub(lambda m: m.group(1) + "=…", text))


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
