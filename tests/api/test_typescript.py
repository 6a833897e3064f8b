"""The TypeScript client's own tests (`npm test`, node's test runner) against a live
`remindkit api`."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from ..processes.openai_server import ScriptedOpenAI, text
from .conftest import cli

CLIENT = Path(__file__).resolve().parents[2] / "clients" / "typescript"

pytestmark = [pytest.mark.api, pytest.mark.processes]


REPLY = 'Noted. <schedule label="ts" delay="1h">from TypeScript</schedule> Anything else?'


def test_the_typescript_client_against_a_live_server(api_server, sqlite_url, tmp_path):
    npm = shutil.which("npm")
    if npm is None:
        pytest.skip("npm is not installed (scripts/setup --test installs nodejs and npm)")
    with ScriptedOpenAI(lambda body: text(REPLY)) as model:
        added = cli(
            "session", "add", "ts-chat", "--openai", "--base-url", model.base_url, "--model", "m",
            db=sqlite_url, home=tmp_path,
        )  # fmt: skip
        assert added.returncode == 0, added.stderr
        srv = api_server(sqlite_url)
        env = dict(os.environ, REMINDKIT_API_URL=srv.base_url, REMINDKIT_CHAT_SESSION="ts-chat")
        done = subprocess.run(
            [npm, "test", "--silent"], cwd=CLIENT, env=env, capture_output=True, text=True,
            timeout=240,
        )  # fmt: skip
        assert done.returncode == 0, done.stdout + done.stderr
        assert "# fail 0" in done.stdout and "# pass 5" in done.stdout, done.stdout
        assert any(r.get("stream") for r in model.requests), model.requests
