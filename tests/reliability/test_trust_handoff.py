"""The command hand-off, attacked by another Unix user. Two users are made with
``useradd`` (so the test runs as root): a victim, who runs ``remindkit`` with no
``XDG_RUNTIME_DIR`` (cron, ssh without pam_systemd, containers), so its runtime
folder is ``/tmp/remindkit-<uid>``, and an attacker, who makes that folder first,
or links it, or listens on a socket in it, and answers like an engine. The command
must send nothing there and run in its own process."""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from remindkit.cli.handoff import socket_name
from tests.conftest import cannot_run, second_user_or_skip

from .attacks import record

pytestmark = pytest.mark.reliability
ROOT = Path(__file__).resolve().parents[2]
SYSTEM_PYTHON = Path("/usr/bin/python3")  # the test's interpreter may be where users cannot go

# The attacker's listener: it records what it is sent and answers like an engine.
LISTENER = r"""
import json, os, socket, sys
path, log = sys.argv[1], sys.argv[2]
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.bind(path)
os.chmod(path, 0o777)
s.listen(8)
open(log + ".ready", "w").close()
while True:
    conn, _ = s.accept()
    data = b""
    while True:
        chunk = conn.recv(65536)
        if not chunk:
            break
        data += chunk
    with open(log, "ab") as fh:
        fh.write(data)
    try:
        conn.sendall(json.dumps({"out": "pwned\n", "err": "", "code": 0}).encode())
    except OSError:
        pass
    conn.close()
"""

SQUATS = [
    "another user's folder",
    "a link to another user's folder",
    "a socket in our folder, answered by another user",
]


def _system_python_fits() -> bool:
    if not SYSTEM_PYTHON.exists():
        return False
    got = subprocess.run(
        [str(SYSTEM_PYTHON), "-c", "import sys; print(sys.version_info[:2])"],
        capture_output=True,
        text=True,
    )
    return got.stdout.strip() == str(tuple(sys.version_info[:2]))


@pytest.fixture
def users() -> Iterator[tuple[str, str]]:
    """(victim, attacker): two fresh Unix users."""
    second_user_or_skip("useradd", "userdel")
    if not _system_python_fits():
        cannot_run(
            f"the users run remindkit on {SYSTEM_PYTHON}, which must be Python {sys.version_info[:2]}",
            "REMINDKIT_REQUIRE_USERS",
        )
    made: list[str] = []
    try:
        for role in ("vic", "atk"):
            name = f"rk{role}{secrets.token_hex(3)}"
            subprocess.run(
                ["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", name],
                check=True,
                capture_output=True,
            )
            made.append(name)
        yield made[0], made[1]
    finally:
        for name in made:
            subprocess.run(["userdel", name], capture_output=True)


def uid_of(user: str) -> int:
    import pwd

    return pwd.getpwnam(user).pw_uid


def as_user(user: str, *argv: str) -> None:
    subprocess.run(list(argv), user=user, check=True, capture_output=True, timeout=30)


def remindkit(
    user: str, home: Path, *args: str, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    site = next((ROOT / ".venv" / "lib").glob("python3*/site-packages"), None)
    path = [str(ROOT)] + ([str(site)] if site is not None else [])
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(home),
        "PYTHONPATH": os.pathsep.join(path),
        "REMINDKIT_HOME": str(home),
        "REMINDKIT_TZ": "UTC",
        "REMINDKIT_DB": f"sqlite:///{home / 'store.db'}",
    }
    return subprocess.run(
        [str(SYSTEM_PYTHON), "-m", "remindkit", *args],
        user=user,
        env=env,
        cwd=str(home),
        text=True,
        capture_output=True,
        timeout=120,
        input=stdin,
    )


@pytest.mark.parametrize("squat", SQUATS)
def test_a_command_is_not_handed_to_another_user(users: tuple[str, str], squat: str) -> None:
    victim, attacker = users
    home = Path(tempfile.mkdtemp(prefix="rkvic-", dir="/tmp"))  # (pytest's folder is root's alone)
    os.chown(home, uid_of(victim), -1)
    top = Path("/tmp") / f"remindkit-{uid_of(victim)}"  # where the victim's commands look
    theirs = Path(f"/tmp/rkatk-{secrets.token_hex(4)}")
    log = theirs / "heard.log"
    name = socket_name(f"sqlite:///{home / 'store.db'}")
    as_user(attacker, "mkdir", "-m", "0777", str(theirs))
    as_user(attacker, "touch", str(log))
    try:
        if squat == SQUATS[0]:
            as_user(attacker, "mkdir", "-m", "0777", str(top))
            folder = top
        elif squat == SQUATS[1]:
            as_user(attacker, "ln", "-s", str(theirs), str(top))
            folder = theirs
        else:  # the victim's own folder, open for a moment while the attacker binds in it
            as_user(victim, "mkdir", "-m", "0700", str(top))
            os.chmod(top, 0o777)
            folder = top
        listener = subprocess.Popen(
            [str(SYSTEM_PYTHON), "-c", LISTENER, str(folder / name), str(log)], user=attacker
        )
        try:
            deadline = time.monotonic() + 30
            while not Path(f"{log}.ready").exists():
                assert listener.poll() is None and time.monotonic() < deadline, "no listener"
                time.sleep(0.05)
            if squat == SQUATS[2]:  # closed again, and the socket's file made the victim's
                os.chmod(top, 0o700)
                os.chown(top / name, uid_of(victim), -1)
            done = remindkit(victim, home, "remind", "the merger is on Friday", "--in", "1h")
            assert done.returncode == 0, done.stderr
            assert "pwned" not in done.stdout and done.stdout.startswith("rem_"), done.stdout
            listed = remindkit(victim, home, "ls", "--json")
            assert listed.returncode == 0, listed.stderr
            assert [r["text"] for r in json.loads(listed.stdout)] == ["the merger is on Friday"]
            # a Claude Code hook (the user's prompt in its input) is handed over the same way
            hook = json.dumps({"session_id": "c1", "prompt": "the bid is 4.2M", "cwd": str(home)})
            done = remindkit(victim, home, "mcp", "hook", "prompt", stdin=hook)
            assert done.returncode == 0 and "pwned" not in done.stdout, done.stdout
            assert log.read_bytes() == b"", log.read_bytes()[:300]  # (a connection at most)
        finally:
            listener.kill()
            listener.wait(10)
    finally:
        for path in (top, theirs, home):
            if path.is_symlink():
                path.unlink()
            else:
                shutil.rmtree(path, ignore_errors=True)
    record(
        f"the hand-off socket squatted by another Unix user ({squat})",
        "the command line (reminder text, a `--db` password) or a hook's input (the user's prompt) went to that user, who answered it; nothing stored",
        "nothing sent (the folder, the socket's owner and SO_PEERCRED checked first); it ran in its own process",
    )
