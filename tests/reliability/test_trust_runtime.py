"""The runtime folder of the wake-up sockets and the store's own files, attacked by
another Unix user (made with ``useradd`` for the test, so it runs as root), and
a datagram flood on the wake-up socket."""

from __future__ import annotations

import io
import json
import logging
import os
import secrets
import shutil
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from remindkit.cli.main import main
from remindkit.clock import SystemClock
from remindkit.engine import Engine, core
from remindkit.settings import Settings
from remindkit.store import open_store
from tests.conftest import second_user_or_skip
from tests.processes.conftest import Serve, wait_for

from .attacks import record

pytestmark = pytest.mark.reliability
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def attacker() -> Iterator[str]:
    second_user_or_skip("useradd", "userdel")
    name = f"rkatk{secrets.token_hex(3)}"
    subprocess.run(
        ["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", name],
        check=True,
        capture_output=True,
    )
    try:
        yield name
    finally:
        subprocess.run(["userdel", name], capture_output=True)


@pytest.fixture
def shared_tmp() -> Iterator[Path]:
    """A folder like /tmp: sticky, everyone may make entries (short: socket paths are short)."""
    path = Path(tempfile.mkdtemp(prefix="rks-", dir="/tmp"))
    os.chmod(path, 0o1777)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def as_user(user: str, *argv: str) -> None:
    subprocess.run(list(argv), user=user, check=True, capture_output=True, timeout=30)


def cli_env(tmp: Path, shared: Path) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("REMINDKIT_") and k != "XDG_RUNTIME_DIR"
    }
    env.update(
        TMPDIR=str(shared),
        REMINDKIT_HOME=str(tmp / "home"),
        REMINDKIT_TZ="UTC",
        REMINDKIT_DB=f"sqlite:///{tmp / 'home' / 'store.db'}",
    )
    return env


def cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "remindkit", *args],
        env=env,
        text=True,
        capture_output=True,
        timeout=120,
        cwd=ROOT,
    )


ATTACKS = ["another user's folder", "a plain file", "a link to a folder of ours"]


@pytest.mark.parametrize("squat", ATTACKS)
def test_a_squatted_runtime_folder_is_not_used(
    attacker: str, shared_tmp: Path, tmp_path: Path, squat: str
) -> None:
    top = shared_tmp / f"remindkit-{os.getuid()}"
    ours = shared_tmp / "ours"  # a folder of the victim's that a link could get chmod-ed
    ours.mkdir()
    os.chmod(ours, 0o755)
    if squat == ATTACKS[0]:
        as_user(attacker, "mkdir", "-m", "0777", str(top))
    elif squat == ATTACKS[1]:
        as_user(attacker, "touch", str(top))
    else:
        as_user(attacker, "ln", "-s", str(ours), str(top))
    env = cli_env(tmp_path, shared_tmp)
    done = cli(env, "remind", "check", "--in", "5m", "--session", "s1")
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr and done.stderr.count("wake:") == 1, done.stderr
    assert "poll" in done.stderr
    listed = cli(env, "ls", "--json")
    assert listed.returncode == 0 and len(json.loads(listed.stdout)) == 1, listed.stderr
    assert stat.S_IMODE(os.stat(ours).st_mode) == 0o755 and list(ours.iterdir()) == []
    if squat == ATTACKS[0]:
        assert list(top.iterdir()) == [], "remindkit put its sockets in another user's folder"
        assert os.lstat(top).st_uid != os.getuid()
    record(
        f"runtime folder squatted by another Unix user: {squat}",
        {
            ATTACKS[0]: "used (hints and sockets in the other user's hands)",
            ATTACKS[1]: "every command crashed",
            ATTACKS[2]: "the linked folder of ours chmod-ed 0700",
        }[squat],
        "not used: one warning, engines poll; commands work",
    )


def test_an_engine_without_hints_still_sees_new_reminders(
    attacker: str, shared_tmp: Path, tmp_path: Path
) -> None:
    as_user(attacker, "mkdir", "-m", "0777", str(shared_tmp / f"remindkit-{os.getuid()}"))
    env = cli_env(tmp_path, shared_tmp)
    (tmp_path / "home").mkdir(mode=0o700)
    engine = Serve(
        env["REMINDKIT_DB"],
        tmp_path,
        name="polling",
        env={"TMPDIR": str(shared_tmp), "XDG_RUNTIME_DIR": "", "REMINDKIT_WAIT_CAP": "30"},
    )
    try:
        engine.wait_ready()
        assert cli(env, "remind", "soon", "--in", "2s", "--session", "s1").returncode == 0
        fired = wait_for(lambda: json.loads(cli(env, "history", "--json").stdout), 30, 0.3)
        assert fired, "the engine never saw the reminder"
    finally:
        engine.stop()
    assert engine.log.read_text().count("poll") >= 1


def test_an_open_home_and_store_of_ours_are_tightened(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    db = home / "remindkit.db"
    open_store(f"sqlite:///{db}", settings=Settings.from_env(env={}, home=home, tz="UTC")).close()
    os.chmod(home, 0o777)
    os.chmod(db, 0o644)
    monkeypatch.setenv("REMINDKIT_HOME", str(home))
    monkeypatch.setenv("REMINDKIT_TZ", "UTC")
    monkeypatch.delenv("REMINDKIT_DB", raising=False)
    monkeypatch.delenv("REMINDKIT_SESSION", raising=False)
    with caplog.at_level(logging.WARNING):
        assert main(["ls"], stdout=io.StringIO(), stderr=io.StringIO()) == 0
    assert (
        stat.S_IMODE(os.stat(home).st_mode) == 0o700 and stat.S_IMODE(os.stat(db).st_mode) == 0o600
    )
    assert sum("made it" in r.getMessage() for r in caplog.records) == 2, caplog.text
    record(
        "home folder 0777 / database 0644 left by an older version or a hand edit",
        "left readable and writable by others",
        "tightened to 0700 / 0600 with a warning",
    )


def test_a_datagram_flood_costs_one_re_read_per_gap(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two processes flood the engine's real wake-up socket. The store step is replaced
    by a counter (no database work), so the count shows how often the loop would re-read
    the store, whatever CPU the machine can give it: before, once per wake-up (thousands
    a second); now at most once per HINT_GAP."""
    run = Path(tempfile.mkdtemp(prefix="rkf-", dir="/tmp"))
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(run))
    settings = Settings.from_env(env={}, home=tmp_path, tz="UTC")
    store = open_store(f"sqlite:///{tmp_path / 'store.db'}", settings=settings)
    engine = Engine(store, clock=SystemClock(), settings=settings, can_alert=False)
    rounds = [0]

    def counted(t: int, *, flush_only: bool = False) -> int:
        rounds[0] += 1
        return t + 1_000_000  # nothing due for a second: only a hint wakes the loop

    engine.store_step = counted  # type: ignore[method-assign]
    flooders: list[subprocess.Popen[bytes]] = []
    try:
        engine.start()
        folder = store.wake.folder  # type: ignore[attr-defined]
        assert wait_for(lambda: list(folder.glob("*.sock")), 20, 0.05)
        sock = str(next(folder.glob("*.sock")))
        flood = (
            "import socket, sys, time\ns = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)\n"
            "end = time.monotonic() + float(sys.argv[2])\ni = 0\n"
            "while time.monotonic() < end:\n    i += 1\n"
            "    try:\n        s.sendto(str(i).encode(), sys.argv[1])\n"
            "    except OSError:\n        pass\n"
        )
        seconds = 4.0
        before, started = rounds[0], time.monotonic()
        flooders = [
            subprocess.Popen([sys.executable, "-c", flood, sock, str(seconds)]) for _ in range(2)
        ]
        for f in flooders:
            f.wait(60)
        took = time.monotonic() - started
        during = rounds[0] - before
    finally:
        for f in flooders:
            if f.poll() is None:
                f.kill()
        engine.close()
        store.close()
        shutil.rmtree(run, ignore_errors=True)
    allowed = took / core.HINT_GAP + 20
    assert 0 < during <= allowed, (
        f"{during} store rounds in {took:.1f}s of flood (at most {allowed:.0f})"
    )
    record(
        "datagram flood on the wake-up socket",
        "one store re-read per wake-up: an idle engine at 100 % of a core",
        f"at most one re-read per {core.HINT_GAP * 1000:.0f} ms ({during} in {took:.1f} s of flood)",
    )
