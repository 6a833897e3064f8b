"""Whose lapsed claims may be taken over, told from real processes on this host: a
dead owner's at once, a stopped one's (SIGSTOP) after ``FROZEN_AFTER`` leases, and
one that runs but renews late (a loaded machine) only after ``STALLED_AFTER``."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import uuid

from remindkit.engine.liveness import FROZEN_AFTER, STALLED_AFTER, Liveness

CHILD = (
    "import os, socket, sys\n"
    "from remindkit.engine.liveness import Liveness\n"
    "live = Liveness(sys.argv[1])\n"
    "live.hold(f'{socket.gethostname()}:{os.getpid()}:child')\n"
    "print('ready', flush=True)\n"
    "sys.stdin.read()\n"
)


def _state(pid: int) -> bytes:
    with open(f"/proc/{pid}/stat", "rb") as fh:
        stat = fh.read()
    return stat[stat.rfind(b")") + 2 :].split()[0]


def _until(pred, timeout: float = 30.0) -> bool:  # type: ignore[no-untyped-def]
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(0.01)
    return False


def test_a_running_owner_is_spared_longer_than_a_stopped_one_and_a_dead_one_not_at_all() -> None:
    store = f"sqlite:///liveness-{uuid.uuid4().hex}.db"
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, store],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "ready"
        owner = f"{socket.gethostname()}:{child.pid}:child"
        live = Liveness(store)
        now, lease = 1_000_000_000, 2_000_000
        assert live.owner_alive(owner) is True
        assert live.expired_before(owner, now, lease) == now - STALLED_AFTER * lease
        os.kill(child.pid, signal.SIGSTOP)
        assert _until(lambda: _state(child.pid) in (b"T", b"t"))
        assert live.expired_before(owner, now, lease) == now - FROZEN_AFTER * lease
        os.kill(child.pid, signal.SIGCONT)
        assert _until(lambda: _state(child.pid) not in (b"T", b"t"))
        assert live.expired_before(owner, now, lease) == now - STALLED_AFTER * lease
        child.kill()
        child.wait(30)
        assert live.owner_alive(owner) is False
        assert live.expired_before(owner, now, lease) == now
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(30)
        for pipe in (child.stdin, child.stdout):
            if pipe is not None:
                pipe.close()
