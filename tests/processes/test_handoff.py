"""Commands handed over to the running engine (``remindkit.cli.handoff``), through real
processes: a ``remindkit serve`` and ``python -m remindkit …`` commands. Whether a
command ran in the engine is read from the command's own ``-X importtime`` trace: a
command that ran here opened the store itself (SQLAlchemy, or for a read with no engine
the driver-only reader ``remindkit.store.lite``), one that was handed over did neither."""

from __future__ import annotations

import json
import os
import signal
import socket
import stat
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from remindkit.cli.handoff import socket_path

from .test_agent_processes import ROOT, wait_for

pytestmark = pytest.mark.processes

OWN_STORE = ("sqlalchemy", "remindkit.store.lite")


def run(env: dict[str, str], *args: str) -> tuple[subprocess.CompletedProcess[str], bool]:
    """Run a command; (its result, whether it ran in its own process)."""
    cp = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "remindkit", *args],
        env=env,
        text=True,
        capture_output=True,
        timeout=120,
        cwd=ROOT,
    )
    local = any(line.split("|")[-1].strip() in OWN_STORE for line in cp.stderr.splitlines())
    cp.stderr = "".join(
        line + "\n" for line in cp.stderr.splitlines() if not line.startswith("import time:")
    )
    return cp, local


def sock_of(env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    return socket_path(env["REMINDKIT_DB"], make=True)


def answering(path: Path) -> bool:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.connect(str(path))
        return True
    except OSError:
        return False
    finally:
        s.close()


def test_reminder_commands_run_in_the_engine(env, serve, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    path = sock_of(env, monkeypatch)
    serve()
    wait_for(lambda: answering(path), timeout=30)
    made, local = run(env, "remind", "hello", "--session", "s1", "--in", "1h", "--json")
    assert made.returncode == 0, made.stderr
    assert not local
    rid = json.loads(made.stdout)["id"]
    listed, local = run(env, "ls", "--json")
    assert not local and [r["id"] for r in json.loads(listed.stdout)] == [rid]
    # the same answer as the command gives on its own
    here, local = run({**env, "REMINDKIT_HANDOFF": "0"}, "ls", "--json")
    assert local and json.loads(here.stdout) == json.loads(listed.stdout)
    # refusals keep their code, exit status and stream, and change nothing
    bad, local = run(env, "rm", "rem_000000000000")
    assert not local and bad.returncode == 1 and bad.stdout == ""
    assert bad.stderr.startswith("error: not_found: "), bad.stderr
    bad, local = run(env, "remind", "x", "--session", "s1", "--cron", "0 9 * * ¹", "--json")
    assert not local and bad.returncode == 1
    assert json.loads(bad.stdout)["error"]["code"] == "invalid_cron"
    paused, local = run(env, "pause", rid)
    assert not local and paused.returncode == 0
    shown, _ = run(env, "show", rid, "--json")
    assert json.loads(shown.stdout)["state"] == "paused"
    # --help is printed here (argparse writes it itself)
    helped, _ = run(env, "ls", "--help")
    assert helped.returncode == 0 and "usage:" in helped.stdout
    # the socket is private: a 0700 folder of ours, the socket itself not open to others
    assert stat.S_IMODE(os.stat(path.parent).st_mode) == 0o700
    assert not os.stat(path).st_mode & 0o077


def test_another_environment_or_a_session_scope_runs_here(env, serve, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    path = sock_of(env, monkeypatch)
    serve()
    wait_for(lambda: answering(path), timeout=30)
    # a command run by remindkit for an agent: its scope is enforced, in its own process
    scoped = {**env, "REMINDKIT_SESSION": "s1"}
    made, local = run(scoped, "remind", "mine", "--in", "1h", "--json")
    assert local and made.returncode == 0 and json.loads(made.stdout)["session"] == "s1"
    refused, _ = run(scoped, "ls", "--session", "s2")  # refused before any store is opened
    assert refused.returncode == 1
    assert refused.stderr.startswith("error: forbidden: ")
    # a setting the engine was not started with
    other, local = run(
        {**env, "REMINDKIT_MAX_PER_SESSION": "1"}, "remind", "two", "--session", "s1", "--in", "2h"
    )
    assert local and other.returncode == 1 and "too_many_reminders" in other.stderr


def test_a_killed_engine_leaves_the_commands_working_and_another_takes_over(
    env, serve, monkeypatch
) -> None:  # type: ignore[no-untyped-def]
    path = sock_of(env, monkeypatch)
    first = serve()
    wait_for(lambda: answering(path), timeout=30)
    second = serve()
    _, local = run(env, "ls")
    assert not local
    first.send_signal(signal.SIGKILL)
    first.wait(timeout=30)
    # the first engine's socket is left behind; a command does not wait on it
    made, _ = run(env, "remind", "after the kill", "--session", "s1", "--in", "1h", "--json")
    assert made.returncode == 0, made.stderr
    rid = json.loads(made.stdout)["id"]
    # the second engine takes the socket over within its retry period
    wait_for(lambda: not run(env, "ls")[1], timeout=60)
    listed, local = run(env, "ls", "--json")
    assert not local and [r["id"] for r in json.loads(listed.stdout)] == [rid]
    assert second.poll() is None


def test_parallel_handed_over_commands_lose_nothing(env, serve, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    path = sock_of(env, monkeypatch)
    serve()
    wait_for(lambda: answering(path), timeout=30)
    n = 40

    def make(i: int) -> tuple[int, str, bool]:
        cp, local = run(
            env,
            "remind",
            f"r{i}",
            "--session",
            f"s{i % 4}",
            "--label",
            f"l{i}",
            "--in",
            "1h",
            "--json",
        )
        return cp.returncode, cp.stdout, local

    with ThreadPoolExecutor(max_workers=12) as pool:
        results = list(pool.map(make, range(n)))
    assert [code for code, _, _ in results] == [0] * n
    assert not any(local for _, _, local in results)
    ids = {json.loads(out)["id"] for _, out, _ in results}
    listed, _ = run(env, "ls", "--json")
    assert {r["id"] for r in json.loads(listed.stdout)} == ids and len(ids) == n


def test_an_engine_that_dies_mid_command(env, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """A listener that takes the command and closes without answering, as an engine
    killed mid-way would: a changing command says store_unavailable rather than run
    twice; a read-only one runs again here."""
    import threading

    path = sock_of(env, monkeypatch)
    path.parent.mkdir(mode=0o700, exist_ok=True)
    path.unlink(missing_ok=True)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    listener.listen(8)
    taken: list[bytes] = []

    def swallow() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            with conn:
                taken.append(conn.recv(65536))

    thread = threading.Thread(target=swallow, daemon=True)
    thread.start()
    try:
        made, _ = run(env, "remind", "x", "--session", "s1", "--in", "1h")
        assert made.returncode == 1 and made.stderr.startswith("error: store_unavailable: ")
        made, _ = run(env, "remind", "x", "--session", "s1", "--in", "1h", "--json")
        assert json.loads(made.stdout)["error"]["code"] == "store_unavailable"
        listed, local = run(env, "ls", "--json")
        assert listed.returncode == 0 and local and json.loads(listed.stdout) == []
        assert len(taken) == 3 and b'"argv"' in taken[0]
    finally:
        listener.close()
        path.unlink(missing_ok=True)
