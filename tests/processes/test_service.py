"""`remindkit service`: the unit it writes passes `systemd-analyze verify`, its
ExecStart line run as a real process is an engine that fires reminders (and makes
new ones `armed`), and install / uninstall are idempotent."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from remindkit.clock import SystemClock
from remindkit.reminders import Reminders
from remindkit.store import open_store

from .conftest import wait_for

pytestmark = pytest.mark.processes


def rk(env: dict[str, str], *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "remindkit", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
    )


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    e = {
        k: v
        for k, v in os.environ.items()
        if k
        not in (
            "DISPLAY",
            "WAYLAND_DISPLAY",
            "XDG_CURRENT_DESKTOP",
            "REMINDKIT_DB",
            "REMINDKIT_SESSION",
        )
    }
    e.update(
        {
            "XDG_CONFIG_HOME": str(tmp_path / "config"),
            "REMINDKIT_HOME": str(tmp_path / "home"),
            "REMINDKIT_TZ": "UTC",
        }
    )
    return e


@pytest.fixture
def db(tmp_path: Path) -> str:
    folder = tmp_path / "my store"  # a space: the unit must quote it
    folder.mkdir()
    return f"sqlite:///{folder / 'rk.db'}"


def unit_path(tmp_path: Path) -> Path:
    return tmp_path / "config" / "systemd" / "user" / "remindkit.service"


def unit_values(unit: Path, key: str) -> list[list[str]]:
    """The words of each ``key=`` line, unquoted as systemd does for our quoting."""
    out = []
    for line in unit.read_text().splitlines():
        if line.startswith(key + "="):
            words = shlex.split(line[len(key) + 1 :])
            out.append([w.replace("%%", "%").replace("$$", "$") for w in words])
    return out


def test_install_is_idempotent_and_uninstall_removes_what_it_wrote(tmp_path, env, db):
    unit = unit_path(tmp_path)
    desktop = tmp_path / "config" / "autostart" / "remindkit-tray.desktop"
    first = rk(env, "service", "install", "--db", db)
    assert first.returncode == 0, first.stderr
    assert unit.is_file() and not desktop.exists()  # no desktop here: no tray entry
    assert "wrote: " + str(unit) in first.stdout
    (argv,) = unit_values(unit, "ExecStart")
    assert argv[0] == sys.executable and argv[1:] == ["-m", "remindkit", "serve", "--db", db]
    assert "Restart=on-failure" in unit.read_text().splitlines()
    stamp = unit.stat().st_mtime_ns
    again = json.loads(rk(env, "service", "install", "--db", db, "--json").stdout)
    assert again["changed"] is False and "already installed; nothing changed" in again["messages"]
    assert unit.stat().st_mtime_ns == stamp
    with_tray = rk(env, "service", "install", "--db", db, "--tray")
    assert with_tray.returncode == 0 and desktop.is_file()
    entry = desktop.read_text()
    assert "[Desktop Entry]" in entry and "remindkit tray" in entry and '"' + db + '"' in entry
    status = json.loads(rk(env, "service", "status", "--json").stdout)
    assert status["installed"] is True and status["desktop"] is True
    gone = json.loads(rk(env, "service", "uninstall", "--json").stdout)
    assert sorted(gone["removed"]) == sorted([str(unit), str(desktop)])
    assert not unit.exists() and not desktop.exists()
    assert "not installed; nothing to remove" in rk(env, "service", "uninstall").stdout
    assert json.loads(rk(env, "service", "status", "--json").stdout)["installed"] is False


def test_a_unit_it_did_not_write_is_left_alone(tmp_path, env):
    unit = unit_path(tmp_path)
    unit.parent.mkdir(parents=True)
    unit.write_text("[Service]\nExecStart=/bin/true\n")
    done = rk(env, "service", "install")
    assert done.returncode == 1 and done.stderr.startswith("error: already_exists:")
    assert "left " + str(unit) in rk(env, "service", "uninstall").stdout
    assert unit.read_text() == "[Service]\nExecStart=/bin/true\n"


def test_the_unit_passes_systemd_analyze_verify(tmp_path, env, db):
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.skip(
            "systemd-analyze is missing (Debian package systemd; scripts/setup --test installs it)"
        )
    assert rk(env, "service", "install", "--db", db).returncode == 0
    runtime = tmp_path / "runtime"
    runtime.mkdir(mode=0o700)
    check = subprocess.run(
        [analyze, "--user", "verify", str(unit_path(tmp_path))],
        capture_output=True,
        text=True,
        env={**env, "XDG_RUNTIME_DIR": str(runtime)},
        timeout=120,
    )
    assert check.returncode == 0, check.stderr
    assert "remindkit.service" not in check.stderr, check.stderr  # no warning about our unit
    # and verify does complain about a broken unit, so the check above can fail
    broken = tmp_path / "broken" / "remindkit.service"
    broken.parent.mkdir()
    broken.write_text(
        unit_path(tmp_path).read_text().replace(sys.executable, str(tmp_path / "no-such-python"))
    )
    bad = subprocess.run(
        [analyze, "--user", "verify", str(broken)],
        capture_output=True,
        text=True,
        env={**env, "XDG_RUNTIME_DIR": str(runtime)},
        timeout=120,
    )
    assert bad.returncode != 0 or "remindkit.service" in bad.stderr


def test_the_units_execstart_is_an_engine_that_fires(tmp_path, env, db):
    assert rk(env, "service", "install", "--db", db).returncode == 0
    unit = unit_path(tmp_path)
    (argv,) = unit_values(unit, "ExecStart")
    unit_env = dict(
        word.split("=", 1) for words in unit_values(unit, "Environment") for word in words
    )
    # what systemd would give it: the unit's environment, a home, a PATH
    proc_env = {
        "HOME": str(tmp_path / "home"),
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "REMINDKIT_LEASE": "2",
        **unit_env,
    }
    made = rk(env, "remind", "before the engine", "--db", db, "--in", "1h", "--json")
    assert json.loads(made.stdout)["armed"] is False and "remindkit serve" in made.stderr
    log = (tmp_path / "serve.log").open("w")
    proc = subprocess.Popen(
        argv, env=proc_env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
    )
    store = open_store(db)
    try:
        api = Reminders(store, clock=SystemClock())
        assert wait_for(lambda: api.armed(), 60), (tmp_path / "serve.log").read_text()
        rem = api.add("fire me", in_="1s")
        assert rem.armed is True
        fired = wait_for(
            lambda: [
                e
                for e in store.events.recent_events(reminder_id=rem.reminder.id)
                if e.kind == "fired"
            ],
            60,
        )
        assert fired and fired[0].surface == "engine"
        made = rk(env, "remind", "with the engine", "--db", db, "--in", "1h", "--json")
        assert json.loads(made.stdout)["armed"] is True and made.stderr == ""
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(60) == 0
        assert wait_for(lambda: not api.armed(), 30)  # a stopped engine leaves the registry
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        log.close()
        store.close()


def test_status_reports_the_engine(tmp_path, env, db, serves):
    out = json.loads(rk(env, "status", "--db", db, "--json").stdout)
    assert out["armed"] is False
    serves(db, 1)
    deadline = time.monotonic() + 60
    while (
        time.monotonic() < deadline
        and not json.loads(rk(env, "status", "--db", db, "--json").stdout)["armed"]
    ):
        time.sleep(0.2)
    done = rk(env, "status", "--db", db)
    assert "armed:" not in done.stdout and "engines:  1" in done.stdout


def test_a_unit_installed_with_a_home_runs_its_engine_on_that_home(tmp_path, env):
    """With REMINDKIT_HOME set and no --db, the unit's engine opens the store that
    `remind` writes in that home (it opened the default home's store)."""
    done = rk(env, "service", "install")
    assert done.returncode == 0, done.stderr
    unit = unit_path(tmp_path)
    (argv,) = unit_values(unit, "ExecStart")
    unit_env = dict(w.split("=", 1) for words in unit_values(unit, "Environment") for w in words)
    assert unit_env.get("REMINDKIT_HOME") == str(Path(env["REMINDKIT_HOME"]).resolve()), unit_env
    # the unit as systemd runs it: its own environment, not the installing shell's
    fake_home = tmp_path / "user-home"
    fake_home.mkdir()
    run_env = {"PATH": os.environ["PATH"], "HOME": str(fake_home), **unit_env}
    engine = subprocess.Popen(argv, env=run_env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        assert rk(env, "remind", "check the unit", "--session", "u", "--in", "1h").returncode == 0
        seen = wait_for(lambda: json.loads(rk(env, "status", "--json").stdout)["engines"], 60)
        assert seen, "the unit's engine is not on the store of REMINDKIT_HOME"
        assert not (fake_home / ".local" / "share" / "remindkit").exists()
    finally:
        engine.terminate()
        engine.wait(30)
        assert engine.stderr is not None
        engine.stderr.close()


@pytest.mark.parametrize("host", ["claude-code", "codex", "gemini", "opencode"])
def test_an_agent_cli_install_with_service_installs_the_unit(tmp_path, env, db, host):
    """``remindkit mcp install-<host> --service`` writes the host's files and installs
    the same unit as ``service install`` (an engine on the named store, which outlives
    the host); without ``--service`` it installs none and says how."""
    project = tmp_path / "project"
    project.mkdir()
    rk_exe = str(Path(sys.executable).parent / "remindkit")
    args = ["mcp", f"install-{host}", "--project", str(project), "--command", rk_exe]
    if host != "claude-code":
        args += [f"--{host}", f"/opt/{host}"]
    plain = rk(env, *args, "--db", db)
    assert plain.returncode == 0, plain.stderr
    assert "keep an engine running: remindkit service install (or add --service)" in plain.stdout
    assert not unit_path(tmp_path).exists()
    dry = rk(env, *args, "--db", db, "--service", "--dry-run")
    assert dry.returncode == 0 and not unit_path(tmp_path).exists(), dry.stdout
    done = rk(env, *args, "--db", db, "--service")
    assert done.returncode == 0, done.stdout + done.stderr
    unit = unit_path(tmp_path)
    assert "wrote: " + str(unit) in done.stdout and "keep an engine running" not in done.stdout
    (argv,) = unit_values(unit, "ExecStart")
    assert argv[0] == sys.executable and argv[1:] == ["-m", "remindkit", "serve", "--db", db]
    assert json.loads(rk(env, "service", "status", "--json").stdout)["installed"] is True
