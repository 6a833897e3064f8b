"""fastmcp 4.2's Client, in both eras at once (``mode="legacy"`` and its default
``"auto"``, which negotiates 2026-07-28), over stdio and Streamable HTTP."""

from __future__ import annotations

from pathlib import Path

import pytest

from .conftest import ApiServer, Driver, check_seen, client_python, drive_eras, http_job, stdio_job

pytestmark = [pytest.mark.clients, pytest.mark.processes]
ERAS = ["legacy", "modern"]


def test_fastmcp_over_stdio(db: str, home: Path, drivers: list[Driver], tmp_path: Path) -> None:
    spec = stdio_job(db, home, "fastmcp-stdio", ERAS)
    driver = Driver.start(client_python("mcp2"), "fastmcp_client.py", spec, tmp_path / "d.log")
    drivers.append(driver)
    check_seen("fastmcp", "stdio", drive_eras(driver, db, home, ERAS))


def test_fastmcp_over_http(api: ApiServer, drivers: list[Driver], tmp_path: Path) -> None:
    spec = http_job(api, "fastmcp-http", ERAS)
    driver = Driver.start(client_python("mcp2"), "fastmcp_client.py", spec, tmp_path / "d.log")
    drivers.append(driver)
    check_seen("fastmcp", "http", drive_eras(driver, api.db, api.home, ERAS))
