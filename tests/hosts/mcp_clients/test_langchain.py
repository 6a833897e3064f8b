"""LangChain: langchain-mcp-adapters 0.3 (mcp 1, so the 2025-11-25 handshake only) with
``ChatOpenAI`` on a scripted loopback model and ``bind_tools(tools, strict=True)``; one
session for the conversation over stdio and Streamable HTTP, and ``get_tools()``, whose
every tool call starts a ``remindkit mcp`` of its own."""

from __future__ import annotations

import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

import pytest

from remindkit.protocol.tools import TOOLS

from .conftest import (
    START_S,
    ApiServer,
    Driver,
    check_seen,
    client_python,
    drive_eras,
    fire_outcome,
    history,
    http_job,
    mcp_command,
    remindkit_env,
    stdio_job,
    wait_for,
)
from .standin import StrictModel

pytestmark = [pytest.mark.clients, pytest.mark.processes]
ERAS = ["legacy"]
VALIDATION_WARNING = "Failed to validate notification"


def check_strict(driver: Driver, model: StrictModel) -> None:
    """LangChain's own strict conversion left every schema as it is, and the model was
    sent them strict."""
    (converted,) = driver.of("strict_tools")
    by_name = {t["function"]["name"]: t["function"] for t in converted["tools"]}
    for spec in TOOLS:
        assert by_name[spec.name]["strict"] is True
        assert by_name[spec.name]["parameters"] == spec.parameters, spec.name
    for sent in model.tools:
        assert all(t["function"].get("strict") is True for t in sent), sent
    create = model.calls[0][1]
    assert set(create) == set(TOOLS[0].parameters["properties"]) and create["every"] is None


def test_langchain_over_stdio(db: str, home: Path, drivers: list[Driver], tmp_path: Path) -> None:
    with StrictModel() as model:
        spec = stdio_job(db, home, "langchain-stdio", ERAS, model_url=model.base_url)
        driver = Driver.start(
            client_python("mcp1"), "langchain_client.py", spec, tmp_path / "d.log"
        )
        drivers.append(driver)
        seen = drive_eras(driver, db, home, ERAS)
    check_strict(driver, model)
    check_seen("langchain", "stdio", seen)
    # mcp 1 logs a validation warning for every notification it does not know: none came
    assert VALIDATION_WARNING not in driver.stderr(), driver.stderr()[-3000:]


def test_langchain_over_http(api: ApiServer, drivers: list[Driver], tmp_path: Path) -> None:
    with StrictModel() as model:
        spec = http_job(api, "langchain-http", ERAS, model_url=model.base_url)
        driver = Driver.start(
            client_python("mcp1"), "langchain_client.py", spec, tmp_path / "d.log"
        )
        drivers.append(driver)
        seen = drive_eras(driver, api.db, api.home, ERAS)
    check_strict(driver, model)
    check_seen("langchain", "http", seen)
    assert VALIDATION_WARNING not in driver.stderr(), driver.stderr()[-3000:]


def _due(reminder: dict) -> float:
    return datetime.fromisoformat(reminder["target_at_utc"].replace("Z", "+00:00")).timestamp()


@pytest.mark.parametrize("engine", [False, True], ids=["no-engine", "serve"])
def test_langchain_per_call_servers(
    engine: bool, db: str, home: Path, drivers: list[Driver], tmp_path: Path
) -> None:
    """``get_tools()``: a create answers ``armed`` only when an engine that outlives the
    call runs; a fire that waits (or comes due between calls) and meets a later short
    call is neither pushed into it nor breaks it."""
    serve = None
    if engine:
        serve = subprocess.Popen(
            [sys.executable, "-m", "remindkit", "serve", "--db", db, "--no-alerts"],
            env=remindkit_env(home),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        wait_for(lambda: list(home.glob("status-*.json")), START_S, "remindkit serve to run")
    try:
        spec = {
            "transport": "stdio",
            "mode": "per_call",
            "command": mcp_command(db, "langchain-per-call"),
            "env": remindkit_env(home),
            "cwd": str(home),
        }
        driver = Driver.start(
            client_python("mcp1"), "langchain_client.py", spec, tmp_path / "d.log"
        )
        drivers.append(driver)
        made = driver.next("called")["data"]
        assert made["ok"], made
        assert made["armed"] is engine, made  # no engine outlives a per-call server
        rid = made["reminder"]["id"]
        driver.next("await_fire")
        if engine:
            first = fire_outcome(db, home, rid)  # fired by serve while no client is there
            assert first.outcome == "waiting", first.to_dict()
        else:  # nothing runs until the next call's server, which finds it overdue
            due = _due(made["reminder"])
            wait_for(lambda: time.time() > due + 0.2, 30, "the reminder to be due")
        driver.go()
        listed = driver.next("called")["data"]
        driver.finish()
    finally:
        if serve is not None:
            serve.terminate()
            serve.wait(30)
    assert listed["ok"], listed
    log = driver.stderr()
    assert "BrokenResourceError" not in log and "Traceback" not in log, log[-4000:]
    assert VALIDATION_WARNING not in log, log[-3000:]
    fire = fire_outcome(db, home, rid)
    assert fire.outcome == "waiting" and fire.error, fire.to_dict()
    assert [o.outcome for o in history(db, home, rid)] == ["waiting"]
