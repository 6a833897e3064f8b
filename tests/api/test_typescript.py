"""The TypeScript client's own tests (`npm test`, node's test runner) against a live
`remindkit api`."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

CLIENT = Path(__file__).resolve().parents[2] / "clients" / "typescript"

pytestmark = [pytest.mark.api, pytest.mark.processes]


def test_the_typescript_client_against_a_live_server(api_server, sqlite_url):
    npm = shutil.which("npm")
    if npm is None:
        pytest.skip("npm is not installed (scripts/setup --test installs nodejs and npm)")
    srv = api_server(sqlite_url)
    env = dict(os.environ, REMINDKIT_API_URL=srv.base_url)
    done = subprocess.run(
        [npm, "test", "--silent"], cwd=CLIENT, env=env, capture_output=True, text=True, timeout=240
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "# fail 0" in done.stdout and "# pass 4" in done.stdout, done.stdout
