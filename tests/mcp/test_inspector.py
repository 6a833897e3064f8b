"""The MCP Inspector in CLI mode (npm ``@modelcontextprotocol/inspector``, installed
into tests/mcp/node_modules by ``scripts/setup --test``) listing and calling the tools."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from remindkit.protocol.tools import TOOL_NAMES, mcp_tools

from .conftest import ROOT, server_env

pytestmark = pytest.mark.processes
INSPECTOR = ROOT / "tests" / "mcp" / "node_modules" / ".bin" / "mcp-inspector"


def inspector(home: Path, db: str, *args: str, status: int = 0) -> dict[str, Any]:
    if not INSPECTOR.exists() or shutil.which("node") is None:
        pytest.skip("the MCP Inspector is not installed (scripts/setup --test)")
    env = server_env(home)
    env["HOME"] = str(home)  # its catalog under ~/.mcp-inspector stays in the test's folder
    server_env_args = [a for k in ("PYTHONPATH", "REMINDKIT_HOME") for a in ("-e", f"{k}={env[k]}")]
    proc = subprocess.run(
        [
            str(INSPECTOR),
            "--cli",
            "--connect-timeout",
            "150000",
            "--format",
            "json",
            *server_env_args,
            *args,
            sys.executable,
            "-m",
            "remindkit",
            "mcp",
            "--db",
            db,
            "--session",
            "insp",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert proc.returncode == status, proc.stdout[-2000:] + proc.stderr[-3000:]
    return json.loads(proc.stdout)


def test_inspector_lists_and_calls_the_tools(home: Path, db: str) -> None:
    listed = inspector(home, db, "--strict", "--method", "tools/list")["result"]["tools"]
    assert [t["name"] for t in listed] == list(TOOL_NAMES)
    assert [(t["inputSchema"], t["outputSchema"]) for t in listed] == [
        (t["inputSchema"], t["outputSchema"]) for t in mcp_tools()
    ]

    created = inspector(
        home,
        db,
        "--method",
        "tools/call",
        "--tool-name",
        "schedule_create",
        "--tool-args-json",
        json.dumps({"prompt": "from the inspector", "after": "10m"}),
    )["result"]
    assert created["isError"] is False
    rid = created["structuredContent"]["reminder"]["id"]
    assert json.loads(created["content"][0]["text"]) == created["structuredContent"]

    listed_rems = inspector(home, db, "--method", "tools/call", "--tool-name", "schedule_list")[
        "result"
    ]
    assert [r["id"] for r in listed_rems["structuredContent"]["reminders"]] == [rid]

    refused = inspector(
        home,
        db,
        "--method",
        "tools/call",
        "--tool-name",
        "schedule_snooze",
        "--tool-args-json",
        json.dumps({"id": "rem_000000000000", "duration": "5m"}),
        status=5,
    )["result"]  # 5: the tool answered isError
    assert refused["isError"] is True
    assert refused["structuredContent"]["error"]["code"] == "schedule_not_found"
