"""Wake-up hints between processes sharing a store.

A hint only shortens a sleep; correctness never depends on it (engines also
wake at their cap). After a write commits, the store calls :meth:`notify`
with the writer's origin (an engine id, or ``""``); engines wait on
:meth:`Listener.fileno` with ``select`` and ignore hints of their own making.
A write that only added a reminder says when it first fires (``added_due_us``):
an engine that knows when its next fire is due needs no re-read of the store
for it, only the earlier of the two (:func:`remindkit.wakeup.parse_hint`).

* SQLite: every listening process binds a Unix datagram socket in a private
  per-user folder named after the database file; ``notify`` sends the hint
  (its origin, and the first fire of what it only added) to each (and removes
  sockets whose owner is gone). A folder that is not ours alone (made first by
  another user, a link, a file, open to others) is not used: the store works
  without hints (engines poll), and says so once.
* PostgreSQL: ``LISTEN remindkit`` / ``NOTIFY remindkit``.
* Elsewhere (no AF_UNIX datagrams): no hints; engines poll at a short cap.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import socket
import threading
import time
import uuid
import weakref
from pathlib import Path

from ..runtime import UnsafeFolder, process_alive, runtime_dir
from ..wakeup import Hints, Listener, Wake, hint_payload

log = logging.getLogger(__name__)
CHANNEL = "remindkit"
DRAIN_MAX = 1024
LISTING_SETTLE_NS = 100_000_000  # a folder changed this recently is listed again next time


class NoWake:
    def notify(self, origin: str = "", added_due_us: int | None = None) -> None:
        pass

    def listen(self) -> Listener | None:
        return None

    def close(self) -> None:
        pass


def _runtime_dir(db_path: Path) -> Path:
    """The runtime folder's ``<digest>`` folder for the database file (each level
    checked: :func:`remindkit.runtime.runtime_dir`)."""
    return runtime_dir(hashlib.sha1(str(db_path).encode()).hexdigest()[:12])


_warned: set[str] = set()


def _warn_once(key: str, message: str, *args: object) -> None:
    if key not in _warned:
        _warned.add(key)
        log.warning(message, *args)


class SocketListener:
    def __init__(self, folder: Path) -> None:
        self.path = folder / f"{os.getpid()}-{uuid.uuid4().hex[:8]}.sock"
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(str(self.path))
        self.sock.setblocking(False)
        self._closer = weakref.finalize(self, _close_listener, self.sock, self.path)

    def fileno(self) -> int:
        return self.sock.fileno()

    def drain(self) -> set[str]:
        """At most :data:`DRAIN_MAX` datagrams a call: a flood cannot keep it reading."""
        hints = Hints()
        for _ in range(DRAIN_MAX):
            try:
                hints.add(self.sock.recv(256).decode("utf-8", "replace"))
            except (BlockingIOError, InterruptedError, OSError):
                break
        return hints.payloads()

    def close(self) -> None:
        self._closer()


def _close_listener(sock: socket.socket, path: Path) -> None:
    with contextlib.suppress(OSError):
        sock.close()
    with contextlib.suppress(OSError):
        path.unlink()


class SocketWake:
    """Datagram fan-out among processes on one host (SQLite stores)."""

    def __init__(self, db_path: Path) -> None:
        self.folder = _runtime_dir(db_path)
        self._send = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self._send.setblocking(False)
        self._lock = threading.Lock()
        self._listed: tuple[int, list[str]] | None = None  # (folder's mtime, its names)
        # A store dropped without close() still closes its socket (no ResourceWarning).
        self._closer = weakref.finalize(self, self._send.close)

    def _names(self) -> list[str]:
        """The folder's entries. Listed again only when its mtime moved (a stat costs
        half a listing, and every write notifies), or when the folder changed
        within LISTING_SETTLE_NS of the listing: a timestamp is coarse (a clock
        tick), so a socket made in the same tick as the change before it would leave
        the mtime as it was."""
        st = os.stat(self.folder)
        listed = self._listed
        if listed is not None and listed[0] == st.st_mtime_ns:
            return listed[1]
        names = os.listdir(self.folder)
        settled = time.time_ns() - st.st_mtime_ns > LISTING_SETTLE_NS
        self._listed = (st.st_mtime_ns, names) if settled else None
        return names

    def notify(self, origin: str = "", added_due_us: int | None = None) -> None:
        try:
            names = self._names()
        except OSError:
            return
        payload = hint_payload(origin, added_due_us).encode()
        with self._lock:
            for name in names:
                if not name.endswith(".sock"):
                    continue
                path = os.path.join(self.folder, name)
                try:
                    self._send.sendto(payload, path)
                except (ConnectionRefusedError, FileNotFoundError):
                    with contextlib.suppress(OSError):
                        pid = int(name.split("-", 1)[0])
                        if not process_alive(pid, others=True):
                            os.unlink(path)
                except (BlockingIOError, OSError):
                    pass  # its buffer is full: it has hints enough

    def listen(self) -> Listener | None:
        return SocketListener(self.folder)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._closer()


class PgListener:
    def __init__(self, dsn: str) -> None:
        import psycopg

        self.conn = psycopg.connect(dsn, autocommit=True)
        self.conn.execute(f"LISTEN {CHANNEL}")

    def fileno(self) -> int:
        return self.conn.pgconn.socket

    def drain(self) -> set[str]:
        hints = Hints()
        pg = self.conn.pgconn
        try:
            pg.consume_input()
            while (note := pg.notifies()) is not None:
                hints.add(note.extra.decode("utf-8", "replace"))
        except Exception as exc:  # the connection dropped; engines keep waking at their cap
            log.warning("wake: PostgreSQL listener failed: %s", exc)
            raise
        return hints.payloads()

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.conn.close()


class PgWake:
    """LISTEN/NOTIFY (a hint: notifications can be lost with a dropped connection)."""

    def __init__(self, dsn: str, notify_conn_factory) -> None:
        self.dsn = dsn
        self._factory = notify_conn_factory

    def notify(self, origin: str = "", added_due_us: int | None = None) -> None:
        try:
            with self._factory() as conn:
                conn.exec_driver_sql(
                    "SELECT pg_notify(%(c)s, %(o)s)",
                    {"c": CHANNEL, "o": hint_payload(origin, added_due_us)},
                )
                conn.commit()
        except Exception as exc:
            log.debug("wake: NOTIFY failed: %s", exc)

    def listen(self) -> Listener | None:
        try:
            return PgListener(self.dsn)
        except Exception as exc:
            log.warning("wake: cannot LISTEN (%s); engines will poll at their cap", exc)
            return None

    def close(self) -> None:
        pass


def sqlite_wake(db_path: Path) -> Wake:
    """The hints among the processes of the SQLite store in the file ``db_path``
    (resolved): a :class:`SocketWake`, or :class:`NoWake` where that cannot be."""
    if not hasattr(socket, "AF_UNIX"):
        return NoWake()
    try:
        return SocketWake(db_path)
    except UnsafeFolder as exc:
        _warn_once(
            str(exc),
            "wake: %s; no wake-up hints, engines poll instead (set XDG_RUNTIME_DIR "
            "or TMPDIR to a folder of your own)",
            exc,
        )
        return NoWake()


def make_wake(engine) -> Wake:
    if engine.dialect.name == "sqlite":
        return sqlite_wake(Path(str(engine.url.database)).resolve())
    if engine.dialect.name == "postgresql":
        url = engine.url.set(drivername="postgresql")
        dsn = url.render_as_string(hide_password=False)
        return PgWake(dsn, engine.connect)
    return NoWake()
