"""Is the engine that owns a claim still alive? (engines on this host)

A lease says how long a claim is good for, but an engine that is merely slow
to renew it (a store under heavy write contention) is not dead, and taking its
claims over would deliver them twice. So each running engine holds an
exclusive ``flock`` on a file named after it, in a private per-user folder for
its store; the kernel releases the lock when the process dies, SIGKILL
included. Before taking over an expired claim, an engine on the same host looks:

* the owner's lock is free (or its file is gone): the owner is dead, take over;
* the owner holds it: it is alive, so wait, unless the lease ran out long ago:
  ``FROZEN_AFTER`` leases for an owner the kernel shows stopped (SIGSTOP, a
  debugger), ``STALLED_AFTER`` leases for one that runs (a machine so loaded that
  its renewals lag for seconds is not a reason to deliver its fires twice; one
  hung for that long is);
* the owner is on another host: the lease alone decides.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import socket
from pathlib import Path

from ..runtime import UnsafeFolder, runtime_dir

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: leases alone decide
    fcntl = None  # type: ignore[assignment]

log = logging.getLogger(__name__)
FROZEN_AFTER = 3  # leases past expiry after which a stopped owner is taken over
STALLED_AFTER = 20  # ... and one that runs but has not renewed


def _folder(store_identity: str) -> Path | None:
    """``<runtime folder>/<digest>.engines`` (:func:`remindkit.runtime.runtime_dir`), or
    None when a level is not ours alone: another user who made it first could hold
    or remove the locks, and make engines take over live claims or spare dead ones."""
    digest = hashlib.sha1(store_identity.encode()).hexdigest()[:12]
    try:
        return runtime_dir(f"{digest}.engines")
    except UnsafeFolder as exc:
        log.warning("liveness: %s; claims are taken over by their lease alone", exc)
        return None


def _name(engine_id: str) -> str:
    return hashlib.sha1(engine_id.encode()).hexdigest()[:20] + ".alive"


class Liveness:
    def __init__(self, store_identity: str) -> None:
        self.enabled = fcntl is not None
        self.folder = _folder(store_identity) if self.enabled else None
        self.enabled = self.enabled and self.folder is not None
        self.host = socket.gethostname()
        self._fd: int | None = None
        self._path: Path | None = None

    def hold(self, engine_id: str) -> None:
        """Mark this engine alive for as long as the process lives."""
        if not self.enabled or self.folder is None:
            return
        self._path = self.folder / _name(engine_id)
        self._fd = os.open(self._path, os.O_CREAT | os.O_RDWR, 0o600)
        fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)

    def release(self) -> None:
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd = None
        if self._path is not None:
            with contextlib.suppress(OSError):
                self._path.unlink()
            self._path = None

    def owner_alive(self, owner: str) -> bool | None:
        """True / False for an engine of this host, None when it cannot be told."""
        if not self.enabled or self.folder is None or not owner.startswith(self.host + ":"):
            return None
        path = self.folder / _name(owner)
        try:
            fd = os.open(path, os.O_RDWR)
        except FileNotFoundError:
            return False
        except OSError:
            return None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        except OSError:
            return None
        else:
            fcntl.flock(fd, fcntl.LOCK_UN)
            with contextlib.suppress(OSError):
                path.unlink()  # its owner is gone: tidy up
            return False
        finally:
            os.close(fd)

    def expired_before(self, owner: str, now_us: int, lease_us: int) -> int:
        """The instant before which ``owner``'s leases count as run out: now for an
        owner that is dead or cannot be told, ``FROZEN_AFTER`` leases ago for one of
        this host that is alive and stopped, ``STALLED_AFTER`` leases ago for one that
        runs."""
        if not self.owner_alive(owner):
            return now_us
        stopped = _stopped(owner)
        return now_us - (STALLED_AFTER if stopped is False else FROZEN_AFTER) * lease_us


def _stopped(owner: str) -> bool | None:
    """Whether the kernel shows the process of engine ``owner`` (``host:pid:…``)
    stopped (``T``, ``t``: SIGSTOP, a debugger), from ``/proc``; None where that
    cannot be read (no ``/proc``, an id of another form)."""
    try:
        pid = int(owner.split(":")[1])
        with open(f"/proc/{pid}/stat", "rb") as fh:
            stat = fh.read()
    except (IndexError, ValueError, OSError):
        return None
    fields = stat[stat.rfind(b")") + 2 :].split()  # the name in (...) may hold spaces
    return bool(fields) and fields[0] in (b"T", b"t")
