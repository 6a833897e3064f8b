"""In a real browser: JupyterLab on loopback, Debian's Chromium driven by
Playwright (its ``executable_path``: a browser download cannot work here).

It opens the quickstart, runs it all, sees the *oven* pill count down and the
*stretch* reminder ring in the page, pauses, resumes and snoozes *oven*, then
runs a long cell and clicks ×: the pill disappears at once, in the page, and
the reminder is cancelled in the store. (When the kernel takes the click
depends on the front-end: JupyterLab 4.6 with ipykernel 7 hands widget messages
to a subshell, so they run even while a cell blocks; older front-ends queue them
until the kernel is idle. Either way the page does not wait.) Screenshots of
the panel go to ``test-artifacts/``.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from remindkit.notebook import wait_for
from remindkit.reminders import Reminders
from remindkit.settings import Settings
from remindkit.store import open_store

pytestmark = pytest.mark.browser
ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "test-artifacts"
CHROMIUM = os.environ.get("REMINDKIT_TEST_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--headless=new",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
]


@dataclass(frozen=True)
class Lab:
    url: str
    db_url: str
    runtime_dir: Path


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def lab(jupyter_env: dict[str, str], tmp_path: Path) -> Iterator[Lab]:
    """JupyterLab on a free loopback port, no token, serving a copy of the quickstart."""
    pytest.importorskip("jupyterlab")
    root = tmp_path / "lab"
    root.mkdir()
    # no "Jupyter news?" prompt over the page, no update check (there is no network anyway)
    settings = tmp_path / "lab-settings" / "@jupyterlab" / "apputils-extension"
    settings.mkdir(parents=True)
    (settings / "notification.jupyterlab-settings").write_text(
        '{"fetchNews": "false", "checkForUpdates": false}'
    )
    env = dict(
        jupyter_env,
        JUPYTERLAB_SETTINGS_DIR=str(tmp_path / "lab-settings"),
        JUPYTERLAB_WORKSPACES_DIR=str(tmp_path / "lab-workspaces"),
    )
    shutil.copy(ROOT / "notebooks" / "quickstart.ipynb", root)
    port = _free_port()
    log_path = tmp_path / "jupyterlab.log"
    log = open(log_path, "w")  # noqa: SIM115
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "jupyter",
            "lab",
            "--no-browser",
            "--ServerApp.ip=127.0.0.1",
            f"--ServerApp.port={port}",
            "--ServerApp.port_retries=0",
            "--IdentityProvider.token=",
            "--ServerApp.password=",
            "--ServerApp.allow_root=True",
            f"--ServerApp.root_dir={root}",
            "--LabApp.news_url=None",
            "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
        ],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:

        def up() -> bool:
            if proc.poll() is not None:
                raise AssertionError(f"JupyterLab exited: {log_path.read_text()}")
            try:
                return httpx.get(f"{url}/api/status", timeout=2).status_code == 200
            except httpx.HTTPError:
                return False

        wait_for(up, timeout=60)
        yield Lab(
            url,
            f"sqlite:///{Path(jupyter_env['REMINDKIT_DEMO_DIR']) / 'reminders.db'}",
            Path(jupyter_env["JUPYTER_RUNTIME_DIR"]),
        )
    finally:
        proc.send_signal(signal.SIGTERM)  # the server shuts its kernels down
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
        log.close()


def _kernel_state(lab: Lab) -> str | None:
    sessions = httpx.get(f"{lab.url}/api/sessions", timeout=5).json()
    return sessions[0]["kernel"]["execution_state"] if sessions else None


@contextlib.contextmanager
def _long_cell(lab: Lab, code: str) -> Iterator[None]:
    """Run ``code`` in the notebook's kernel (as a long cell would) from a second client."""
    from jupyter_client import BlockingKernelClient

    kernel_id = httpx.get(f"{lab.url}/api/sessions", timeout=5).json()[0]["kernel"]["id"]
    client = BlockingKernelClient(connection_file=str(lab.runtime_dir / f"kernel-{kernel_id}.json"))
    client.load_connection_file()
    client.start_channels()
    try:
        client.execute(code)
        yield
    finally:
        client.stop_channels()


def _seconds(text: str) -> int:
    minutes, _, secs = text.partition(":")
    return int(minutes) * 60 + int(secs)


def _states(lab: Lab, tmp_path: Path) -> dict[str, str]:
    store = open_store(
        lab.db_url, settings=Settings.from_env(env={}, home=tmp_path / "reader", tz="UTC")
    )
    try:
        return {r.label or r.id: r.state for r in Reminders(store).list(all=True)}
    finally:
        store.close()


def test_quickstart_in_jupyterlab(lab: Lab, tmp_path: Path) -> None:
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: apt-get install chromium (scripts/setup --test does)")
    sync_api = pytest.importorskip("playwright.sync_api")
    ARTIFACTS.mkdir(exist_ok=True)
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1280, "height": 1000})
        page_errors: list[str] = []
        page.on("pageerror", lambda exc: page_errors.append(str(exc)))
        try:
            page.goto(f"{lab.url}/lab/tree/quickstart.ipynb")
            page.wait_for_selector(
                ".jp-Notebook-ExecutionIndicator[data-status='idle']", timeout=90_000
            )
            wait_for(lambda: _kernel_state(lab) == "idle", timeout=60)

            # Run > Run All Cells
            page.get_by_role("menuitem", name="Run", exact=True).click()
            page.get_by_role("menuitem", name="Run All Cells", exact=False).first.click()

            oven = page.locator(".rk-pill[data-label='oven']")
            sync_api.expect(oven).to_be_visible(timeout=90_000)
            left = oven.locator(".rk-left")
            # the pill shows before its first tick writes the countdown
            wait_for(lambda: left.inner_text()[:1].isdigit(), timeout=15)
            t0 = time.monotonic()
            first = _seconds(left.inner_text())
            t1 = time.monotonic()
            page.wait_for_timeout(2_500)
            t2 = time.monotonic()
            second = _seconds(left.inner_text())
            t3 = time.monotonic()
            # counting down, every second: by the seconds that passed between the two reads
            # (a busy machine stretches the wait and each read)
            assert 500 < first <= 600, first
            assert (t2 - t1) - 1.5 <= first - second <= (t3 - t0) + 1.5, (
                first,
                second,
                t3 - t0,
            )

            alert = page.locator(".rk-alert[data-label='stretch']")
            sync_api.expect(alert).to_be_visible(
                timeout=60_000
            )  # fired while the kernel ran a cell
            assert alert.get_attribute("data-audio") in ("starting", "played", "blocked", "failed")
            assert alert.get_attribute("data-speech") in ("spoken", "unavailable")

            page.get_by_text("('sam', 'cancelled')").wait_for(timeout=90_000)  # the last cell ran
            sync_api.expect(page.locator(".rk-pill")).to_have_count(1)
            page.wait_for_timeout(300)
            panel = page.locator(".rk-panel").first
            panel.screenshot(path=str(ARTIFACTS / "notebook-panel.png"))
            assert _states(lab, tmp_path)["oven"] == "active"

            # Pause, resume and snooze: shown at once, done in the store when the kernel takes the click.
            oven.locator(".rk-pause").click()
            sync_api.expect(left).to_have_text("paused", timeout=2_000)
            wait_for(lambda: _states(lab, tmp_path)["oven"] == "paused", timeout=15)
            oven.locator(".rk-resume").click()
            wait_for(lambda: _states(lab, tmp_path)["oven"] == "active", timeout=15)
            sync_api.expect(left).not_to_have_text("paused", timeout=5_000)
            oven.locator(".rk-snooze").click()  # 5 minutes from now instead of about 10
            wait_for(
                lambda: left.inner_text()[:1].isdigit() and _seconds(left.inner_text()) <= 300,
                timeout=15,
            )

            # Keep the kernel busy with a long cell, then click ×: the pill goes at once, in the page.
            with _long_cell(lab, "import time; time.sleep(6)"):
                wait_for(lambda: _kernel_state(lab) == "busy", timeout=30, every=0.05)
                before = _seconds(left.inner_text())
                page.wait_for_timeout(1_100)
                assert (
                    before - _seconds(left.inner_text()) >= 1
                )  # the countdown runs on while the cell blocks
                oven.locator(".rk-cancel").click()
                sync_api.expect(oven).to_have_count(0, timeout=2_000)  # the cell sleeps 6 s
            wait_for(lambda: _states(lab, tmp_path)["oven"] == "cancelled", timeout=30)
            sync_api.expect(page.locator(".rk-pills .rk-empty")).to_be_visible(timeout=5_000)
            panel.screenshot(path=str(ARTIFACTS / "notebook-panel-cancelled.png"))
            assert page_errors == []
        except BaseException:
            page.screenshot(path=str(ARTIFACTS / "notebook-browser-failure.png"), full_page=True)
            raise
        finally:
            browser.close()
    assert _states(lab, tmp_path) == {"stretch": "done", "oven": "cancelled", "sam": "cancelled"}
