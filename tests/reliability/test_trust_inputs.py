"""Small doors: a repeat count of thousands of digits through every surface (the
command line, the HTTP API, the MCP server), and a store password where remindkit
prints or writes a store URL (the no-engine hint, the service it installs)."""

from __future__ import annotations

import json
import os
import stat
import subprocess
from pathlib import Path

import pytest
from sqlalchemy.engine import make_url

from .attacks import record
from .test_trust_runtime import cli as run

pytestmark = pytest.mark.reliability
ROOT = Path(__file__).resolve().parents[2]
HUGE = "1" * 5000  # past Python's 4,300-digit limit on int <-> str


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    e = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("REMINDKIT_")
        and k not in ("DISPLAY", "WAYLAND_DISPLAY", "XDG_CURRENT_DESKTOP")
    }
    e.update(
        REMINDKIT_HOME=str(tmp_path / "home"),
        REMINDKIT_TZ="UTC",
        REMINDKIT_DB=f"sqlite:///{tmp_path / 'rk.db'}",
        XDG_CONFIG_HOME=str(tmp_path / "config"),
        REMINDKIT_HANDOFF="0",
    )
    return e


def test_a_repeat_of_thousands_of_digits_is_invalid_repeat_everywhere(
    env: dict[str, str], tmp_path: Path
) -> None:
    pytest.importorskip("fastapi")
    pytest.importorskip("mcp")
    import anyio
    import httpx

    from tests.api.conftest import ApiServer
    from tests.mcp.conftest import mcp_client

    done = run(env, "remind", "x", "--every", "1h", "--repeat", HUGE, "--session", "s1")
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr[-500:]
    assert done.stderr.startswith("error: invalid_repeat: ") and len(done.stderr) < 300
    home = Path(env["REMINDKIT_HOME"])
    home.mkdir(parents=True, exist_ok=True)
    server = ApiServer(env["REMINDKIT_DB"], home, env=env).wait_ready()
    try:
        with httpx.Client(base_url=server.base_url, headers=server.headers, timeout=30) as http:
            for body in (
                json.dumps({"prompt": "x", "every": "1h", "repeat": HUGE}).encode(),
                b'{"prompt": "x", "every": "1h", "repeat": ' + HUGE.encode() + b"}",
            ):
                got = http.post(
                    "/v1/projects/default/sessions/s1/reminders",
                    content=body,
                    headers={"content-type": "application/json"},
                )
                assert got.status_code == 400, got.text[:300]
                assert got.json()["error"]["code"] in ("invalid_repeat", "invalid_argument")
    finally:
        server.stop()

    async def over_mcp() -> None:
        async with mcp_client(env["REMINDKIT_DB"], tmp_path, "--session", "s1") as c:
            got = await c.call("schedule_create", {"prompt": "x", "every": "1h", "repeat": HUGE})
            assert got.is_error and got.structured_content["error"]["code"] == "invalid_repeat"

    anyio.run(over_mcp)
    listed = run(env, "ls", "--json")
    assert json.loads(listed.stdout) == []
    record(
        "a `repeat` of 5,000 digits (CLI, HTTP, MCP)",
        "a traceback, a 500, JSON-RPC error code 0",
        "`invalid_repeat` (at most 1,000,000,000), nothing written",
    )


def test_the_no_engine_hint_hides_the_store_password(
    env: dict[str, str], pg_schema_url: str
) -> None:
    url = make_url(pg_schema_url).set(password="s3cret-Pa55").render_as_string(hide_password=False)
    done = run(env, "remind", "x", "--in", "1h", "--session", "s1", "--db", url)
    assert done.returncode == 0, done.stderr  # trust auth: the password is not checked
    assert "no engine is running" in done.stderr
    assert "s3cret-Pa55" not in done.stderr + done.stdout and ":***@" in done.stderr
    status = run(env, "status", "--db", url)
    assert "s3cret-Pa55" not in status.stdout + status.stderr
    record(
        "a store URL with a password, no engine running",
        "the hint printed the password",
        "`postgresql+psycopg://postgres:***@…`",
    )


def test_service_install_keeps_the_password_out_of_the_unit(
    env: dict[str, str], tmp_path: Path
) -> None:
    url = "postgresql+psycopg://rk:s3cret-Pa55@db.example:5432/rk"
    done = run(env, "service", "install", "--db", url, "--tray")
    assert done.returncode == 0, done.stderr
    config = tmp_path / "config"
    unit = config / "systemd" / "user" / "remindkit.service"
    entry = config / "autostart" / "remindkit-tray.desktop"
    secrets = config / "remindkit" / "service.env"
    for path in (unit, entry):
        assert "s3cret-Pa55" not in path.read_text(), path
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
    assert f"EnvironmentFile={secrets}" in unit.read_text()
    assert f"REMINDKIT_DB='{url}'" in secrets.read_text()
    assert stat.S_IMODE(secrets.stat().st_mode) == 0o600
    assert "s3cret-Pa55" not in done.stdout + done.stderr
    # the tray entry's command reads the file as sh does, and hands the URL on
    (exec_line,) = [ln for ln in entry.read_text().splitlines() if ln.startswith("Exec=")]
    script = exec_line.split(' -c "', 1)[1].rsplit('"', 1)[0].replace("\\$", "$")
    script = script.split("; exec ", 1)[0] + '; printf %s "$REMINDKIT_DB"'
    shown = subprocess.run(["/bin/sh", "-c", script], capture_output=True, text=True, timeout=30)
    assert shown.stdout == url, shown.stderr
    # installed again without the password: the file goes, the unit names the store
    plain = f"sqlite:///{tmp_path / 'rk.db'}"
    assert run(env, "service", "install", "--db", plain).returncode == 0
    assert not secrets.exists() and plain in unit.read_text()
    assert run(env, "service", "uninstall").returncode == 0
    assert not unit.exists() and not entry.exists()
    record(
        "`service install --db` with a password",
        "the password in a 0644 unit and on the engine's command line (`ps`)",
        "in `remindkit/service.env` (0600) read by the unit and the tray entry; every file 0600",
    )
