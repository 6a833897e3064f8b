"""Store commands run in the engine that is already up.

A ``remindkit`` command costs mostly imports (SQLAlchemy alone is about a quarter of a
second on a small machine), while the engine that normally runs on the store
(``serve``, ``tray``, ``api``) has everything loaded and the store open. So that engine
listens on a private Unix socket, and the reminder commands (``remind``, ``ls``,
``show``, ``rm``, ``history``, ``stats`` …) hand their arguments over and print what
comes back: the same :func:`remindkit.cli.main.main` runs in the engine's process,
against its open store, with its output captured. Agents that call the command line
in loops no longer start SQLAlchemy each time, nor open a connection each.

A command is handed over only where that cannot change its outcome:

* it is one of :data:`HANDED` (they read no standard input, no file named relative to
  the working directory, and draw no terminal UI), without ``-h``/``--help``;
* the environment that commands read (``REMINDKIT_*``, ``TZ``, ``HOME``, the XDG
  folders, the locale) is exactly the engine's: a command in a session scope
  (``REMINDKIT_SESSION``, set for the agent commands remindkit runs) is only ever handed
  to an engine started in that same scope, so in practice it runs in its own process;
* the peer is the same user: the socket lives in the runtime folder
  (:mod:`remindkit.runtime`), and before it sends anything (a command line, a hook's
  input) the caller checks that folder (a directory of its own, 0700, not a link),
  the socket's owner and the engine's uid (``SO_PEERCRED``); the engine checks the
  caller's uid too. In a shared ``/tmp`` another user can make the folder first.

Otherwise, or when no engine answers, the command runs in its own process as before.
A read-only command whose engine goes away before answering is run again locally; a
changing one is not (it may have been done) and says so. ``REMINDKIT_HANDOFF=0``
turns handing over off: in a command's environment for that command, in an engine's
for that engine (it then serves none).

Claude Code's hooks (``remindkit mcp hook …``) are handed over the same way, as
``{"hook": …}`` requests that carry the hook's input, and are answered by
:class:`remindkit.mcp.hooks.HookDesk` (a hook's outcome depends on the store and
its input, not on the environment: the engine checks the remindkit home and the
session scope it is given); the caller prints the answer, then says so
(``{"hook_printed": ticket}``), and only then are the fires it carried recorded
delivered.

The wire: the caller sends one JSON object (at most :data:`MAX_REQUEST` bytes) and
shuts its side; the engine answers one JSON object ``{"out", "err", "code"}`` or
``{"local": reason}`` (run it yourself).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import socket
import struct
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from ..errors import error_body
from .context import REMINDER_COMMANDS, command_of

if TYPE_CHECKING:
    from ..wiring import Graph

# the reminder commands and the read-only reports: what an engine may run for a caller
HANDED = REMINDER_COMMANDS | {"status", "stats", "log"}
# the commands that only read: safe to run again here if the engine went away mid-way
READ_ONLY = frozenset({"ls", "list", "show", "history", "status", "stats", "log"})
MAX_REQUEST = 256 * 1024
MAX_ANSWER = 64 * 1024 * 1024
CONNECT_TIMEOUT_S = 2.0
ANSWER_TIMEOUT_S = 120.0
HOOK_ANSWER_TIMEOUT_S = 15.0  # a hook's answer (the store may be busy a few seconds)
WORKERS = 8  # commands an engine runs at once; more callers wait in the listen backlog
_ENV_EXACT = ("TZ", "HOME", "LANG", "LC_ALL", "LC_CTYPE", "LC_TIME", "PYTHONIOENCODING")
_ENV_PREFIXES = ("REMINDKIT_", "XDG_")


def env_digest(env: dict[str, str] | os._Environ[str]) -> str:
    """What of the environment a command's outcome can depend on, as a digest."""
    keep = sorted(
        (k, v)
        for k, v in env.items()
        if (k in _ENV_EXACT or k.startswith(_ENV_PREFIXES)) and k != "REMINDKIT_HANDOFF"
    )
    return hashlib.sha256(json.dumps(keep).encode("utf-8", "surrogateescape")).hexdigest()


def socket_path(url: str, *, make: bool = False) -> Path:
    """The store's hand-off socket in the runtime folder (:mod:`remindkit.runtime`);
    :class:`~remindkit.runtime.UnsafeFolder` when that folder is not ours alone (or,
    without ``make``, does not exist)."""
    from ..runtime import runtime_dir

    return runtime_dir(make=make) / socket_name(url)


def socket_name(url: str) -> str:
    from ..statusfile import store_key

    digest = hashlib.sha256(store_key(url).encode("utf-8", "surrogateescape")).hexdigest()[:20]
    return f"cli-{digest}.sock"


def peer_uid(sock: socket.socket) -> int:
    """The uid of the process at the other end of a connected Unix socket (``SO_PEERCRED``)."""
    creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    return int(struct.unpack("3i", creds)[1])


def _our_socket(path: Path) -> bool:
    """``path`` is a socket of ours (not a link, not another user's)."""
    import stat

    try:
        st = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISSOCK(st.st_mode) and st.st_uid == os.getuid()


# -- the caller ----------------------------------------------------------------------------


def store_url(argv: Sequence[str]) -> str | None:
    """The store URL the command names (``--db``) or the settings give, or None."""
    for i, arg in enumerate(argv):
        if arg == "--db":
            return argv[i + 1] if i + 1 < len(argv) else None
        if arg.startswith("--db="):
            return arg[len("--db=") :]
    from ..settings import Settings

    try:
        return Settings.from_env().url
    except Exception:  # a bad setting: the command itself will say so
        return None


def try_handoff(argv: Sequence[str], out: TextIO, err: TextIO) -> int | None:
    """Run ``argv`` in an engine if one serves this store and may; its exit status, or
    None to run it here."""
    if os.environ.get("REMINDKIT_HANDOFF", "1") == "0":
        return None
    if not _handed(argv) or "--line" in argv:
        return None  # (status --line reads a small file: quicker here than a round trip)
    url = store_url(argv)
    if url is None:
        return None
    sock = _connect(url)
    if sock is None:
        return None
    try:
        try:
            request = json.dumps(
                {"v": 1, "argv": list(argv), "env": env_digest(os.environ)},
                ensure_ascii=True,
            ).encode()
            if len(request) > MAX_REQUEST:
                return None
            sock.sendall(request)
            sock.shutdown(socket.SHUT_WR)
        except OSError:
            return None  # nobody serves (a stale socket), or it would not take the request
        sock.settimeout(ANSWER_TIMEOUT_S)
        try:
            answer = json.loads(_read_all(sock, MAX_ANSWER))
        except (OSError, ValueError):
            if _reads(argv):
                return None
            why = (
                "the engine that ran this command stopped before answering; "
                "see `remindkit ls` for what it did"
            )
            if "--json" in argv:
                out.write(json.dumps(error_body("store_unavailable", why)) + "\n")
            else:
                err.write(f"error: store_unavailable: {why}\n")
            return 1
    finally:
        sock.close()
    if not isinstance(answer, dict) or "local" in answer:
        return None
    out.write(str(answer.get("out", "")))
    out.flush()
    err.write(str(answer.get("err", "")))
    err.flush()
    return int(answer.get("code", 1))


def try_hook(request: dict[str, Any], url: str) -> dict[str, Any] | None:
    """Hand a Claude Code hook (:mod:`remindkit.mcp.hooks`) to the engine serving the
    store at ``url``: its answer ``{"out", "ticket", "info"}``, or None to run it here.
    The caller prints ``out``, then :func:`hook_printed` the ticket."""
    if os.environ.get("REMINDKIT_HANDOFF", "1") == "0":
        return None
    answer = _exchange(url, {"v": 1, "hook": request})
    if not isinstance(answer, dict) or "local" in answer or not isinstance(answer.get("out"), str):
        return None
    return answer


def hook_printed(url: str, ticket: str, printed: bool = True) -> None:
    """Tell the engine that the hook's answer was printed (the fires it took are then
    recorded delivered) or not (they go back to wait)."""
    _exchange(url, {"v": 1, "hook_printed": ticket, "printed": printed})


def _connect(url: str) -> socket.socket | None:
    """A connection to the engine serving ``url``'s store, or None. Nothing is sent
    before the runtime folder (a directory of ours, closed to others), the socket's
    owner (us) and the peer's uid (``SO_PEERCRED``: us) are checked: in a shared
    ``/tmp`` another user can make the folder first, or link it, and listen there."""
    try:
        path = socket_path(url)
    except OSError:
        return None
    if len(str(path)) > 100 or not _our_socket(path):
        return None
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.settimeout(CONNECT_TIMEOUT_S)
        sock.connect(str(path))
        if peer_uid(sock) == os.getuid():
            return sock
    except OSError:
        pass  # nobody serves (a stale socket)
    sock.close()
    return None


def _exchange(url: str, request: dict[str, Any]) -> Any:
    """One request to the engine serving ``url``'s store; its answer, or None."""
    body = json.dumps(request, ensure_ascii=True).encode()
    if len(body) > MAX_REQUEST:
        return None
    sock = _connect(url)
    if sock is None:
        return None
    try:
        sock.sendall(body)
        sock.shutdown(socket.SHUT_WR)
        sock.settimeout(HOOK_ANSWER_TIMEOUT_S)
        return json.loads(_read_all(sock, MAX_ANSWER))
    except (OSError, ValueError):
        return None
    finally:
        sock.close()


def _reads(argv: Sequence[str]) -> bool:
    """Does ``argv`` only read (``ls``, ``reminders ls`` …)?"""
    command = command_of(argv)
    if command == "reminders":
        command = command_of(list(argv)[list(argv).index("reminders") + 1 :])
    return command in READ_ONLY


def _handed(argv: Sequence[str]) -> bool:
    """May ``argv`` run in an engine (the caller asks, and the engine checks again)?"""
    return command_of(argv) in HANDED and "-h" not in argv and "--help" not in argv


def _read_all(sock: socket.socket, limit: int) -> bytes:
    chunks: list[bytes] = []
    size = 0
    while True:
        chunk = sock.recv(65536)
        if not chunk:
            return b"".join(chunks)
        size += len(chunk)
        if size > limit:
            raise ValueError("answer too large")
        chunks.append(chunk)


# -- the engine's side ---------------------------------------------------------------------


class HandoffServer:
    """Serves :func:`try_handoff` callers for the store of ``graph`` until :meth:`close`.

    Only one engine per store serves: it holds ``<socket>.lock`` (``flock``) while it
    does; another engine on the same store keeps trying, every few seconds, to take
    over when that one stops."""

    def __init__(self, graph: Graph, run: Callable[..., int]) -> None:
        from ..audit import Surface

        # the commands' own view of the store: the engine's graph, as the CLI surface
        self.api = graph.reminders(Surface.CLI)
        self.url = graph.store.url
        self.path: Path | None = None
        self.env = env_digest(os.environ)
        self._run = run
        self._stop = threading.Event()
        self._slots = threading.BoundedSemaphore(WORKERS)
        self._sock: socket.socket | None = None
        self._lock_fd: int | None = None
        self._thread = threading.Thread(target=self._serve, name="remindkit-handoff", daemon=True)
        self._hooks: Any = None  # remindkit.mcp.hooks.HookDesk, made on the first hook

    def start(self) -> HandoffServer:
        import logging

        try:
            path = socket_path(self.url, make=True)
        except OSError as exc:
            logging.getLogger(__name__).warning("command hand-off is off: %s", exc)
            return self
        if len(str(path)) <= 100:
            self.path = path
            self._thread.start()
        return self

    @property
    def serving(self) -> bool:
        return self._sock is not None

    def close(self) -> None:
        self._stop.set()
        sock, self._sock = self._sock, None
        if sock is not None and self.path is not None:
            with contextlib.suppress(OSError):
                os.unlink(self.path)
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()
        if self._thread.is_alive():
            self._thread.join(timeout=5)
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    # -- inside the thread

    def _take(self) -> bool:
        import fcntl

        assert self.path is not None
        fd = os.open(f"{self.path}.lock", os.O_CREAT | os.O_RDWR, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            return False
        self._lock_fd = fd
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)  # a socket left by an engine that was killed
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        old = os.umask(0o077)
        try:
            sock.bind(str(self.path))
        finally:
            os.umask(old)
        sock.listen(64)
        sock.settimeout(1.0)
        self._sock = sock
        return True

    def _serve(self) -> None:
        import logging

        log = logging.getLogger(__name__)
        try:
            while not self._stop.is_set() and not self._take():
                self._stop.wait(5.0)
        except OSError as exc:
            log.warning("command hand-off is off: %s", exc)
            return
        while not self._stop.is_set():
            sock = self._sock
            if sock is None:
                return
            try:
                conn, _ = sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            if not self._slots.acquire(timeout=ANSWER_TIMEOUT_S):
                conn.close()
                continue
            threading.Thread(
                target=self._answer, args=(conn,), name="remindkit-handoff-cmd", daemon=True
            ).start()

    def _answer(self, conn: socket.socket) -> None:
        try:
            with conn:
                conn.settimeout(10.0)
                if peer_uid(conn) != os.getuid():
                    return
                try:
                    request = json.loads(_read_all(conn, MAX_REQUEST))
                except (OSError, ValueError):
                    return
                answer = self._handle(request)
                conn.sendall(json.dumps(answer, ensure_ascii=True).encode())
        except OSError:
            pass  # the caller went away
        finally:
            self._slots.release()

    def _handle(self, request: Any) -> dict[str, Any]:
        if not isinstance(request, dict) or request.get("v") != 1:
            return {"local": "unknown request"}
        if "hook" in request or "hook_printed" in request:  # Claude Code's hooks
            if self._hooks is None:
                from ..mcp.hooks import HookDesk

                self._hooks = HookDesk(self.api)
            return self._hooks.handle(request)
        argv = request.get("argv")
        if not isinstance(argv, list) or not all(isinstance(a, str) for a in argv):
            return {"local": "unknown request"}
        if request.get("env") != self.env:
            return {"local": "another environment"}
        if not _handed(argv):
            return {"local": "not handed over"}
        import io

        out, err = io.StringIO(), io.StringIO()
        code = self._run(argv, stdout=out, stderr=err, stdin=io.StringIO(""), api=self.api)
        return {"out": out.getvalue(), "err": err.getvalue(), "code": code}
