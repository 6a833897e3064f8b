"""pydantic-ai 2.68: an Agent with an ``MCPToolset`` over a fastmcp ``Client``, its model
a scripted ``FunctionModel``, in both eras at once (``mode="legacy"`` and ``"auto"``,
which negotiates 2026-07-28), over stdio and Streamable HTTP."""

from __future__ import annotations

from pathlib import Path

import pytest

from .conftest import ApiServer, Driver, check_seen, client_python, drive_eras, http_job, stdio_job

pytestmark = [pytest.mark.clients, pytest.mark.processes]
ERAS = ["legacy", "modern"]


def check_strict(driver: Driver) -> None:
    """pydantic-ai's OpenAI profile would send every tool with strict mode on, unchanged."""
    for tools in driver.of("tools"):
        assert tools["strict"] and all(tools["strict"].values()), tools["strict"]


def test_pydantic_ai_over_stdio(db: str, home: Path, drivers: list[Driver], tmp_path: Path) -> None:
    spec = stdio_job(db, home, "pydantic-ai-stdio", ERAS)
    driver = Driver.start(client_python("mcp2"), "pydantic_ai_client.py", spec, tmp_path / "d.log")
    drivers.append(driver)
    check_seen("pydantic-ai", "stdio", drive_eras(driver, db, home, ERAS))
    check_strict(driver)


def test_pydantic_ai_over_http(api: ApiServer, drivers: list[Driver], tmp_path: Path) -> None:
    spec = http_job(api, "pydantic-ai-http", ERAS)
    driver = Driver.start(client_python("mcp2"), "pydantic_ai_client.py", spec, tmp_path / "d.log")
    drivers.append(driver)
    check_seen("pydantic-ai", "http", drive_eras(driver, api.db, api.home, ERAS))
    check_strict(driver)
