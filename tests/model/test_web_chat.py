"""The web chat against the real llama.cpp server (llama-cpp-python on SmolLM2-135M):
Chromium types into the page of a real ``remindkit api``, the reply streams from the
model server (``"stream": true``), the tag the model writes (a grammar steers it)
sets a pill, the fire sounds in the browser and wakes the agent, whose reply lands
under the fired marker. What is asserted is remindkit's side, never the model's text."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from remindkit.models import FIRED_TURN, Session
from remindkit.settings import Settings
from remindkit.store import open_store

from ..api.conftest import ApiServer
from ..api.test_page import ARTIFACTS, CHROMIUM, CHROMIUM_ARGS

pytestmark = [pytest.mark.model, pytest.mark.api, pytest.mark.browser]

TAG = '<schedule label="tea" delay="4s" alarm="true" announce="Tea time">the tea</schedule>'
GRAMMAR = (
    'root ::= "Sure, I will tell you when the tea is ready. ' + TAG.replace('"', '\\"') + ' Enjoy."'
)


def test_the_web_chat_with_smollm2(llama_server, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: apt-get install chromium (scripts/setup --test does)")
    sync_api = pytest.importorskip("playwright.sync_api")
    ARTIFACTS.mkdir(exist_ok=True)
    url = f"sqlite:///{tmp_path / 'store.db'}"
    store = open_store(url, settings=Settings.from_env(env={}, home=tmp_path / "h"))
    store.sessions.put_session(
        Session(
            "web",
            adapter="openai",
            config={
                "base_url": llama_server.base_url,
                "model": "smollm2",
                "timeout": 300,
                "extra": {"grammar": GRAMMAR},
            },
        ),
        now_us=0,
    )
    srv = ApiServer(url, tmp_path).wait_ready()
    try:
        with sync_api.sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            page = browser.new_page(viewport={"width": 1000, "height": 900})
            errors: list[str] = []
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            try:
                opened = subprocess.run(
                    [sys.executable, "-m", "remindkit", "api", "open", "--session", "web",
                     "--json", "--db", url],
                    capture_output=True, text=True, timeout=60,
                    env=dict(os.environ, REMINDKIT_HOME=str(tmp_path)),
                )  # fmt: skip
                assert opened.returncode == 0, opened.stderr
                page.goto(json.loads(opened.stdout)["url"])
                page.wait_for_selector("#live[data-state='live']", timeout=60_000)
                page.evaluate(
                    "() => { window.__seen = new Set(); new MutationObserver(() => {"
                    " const e = document.querySelector('.rk-chat .rk-streaming .rk-text');"
                    " if (e) window.__seen.add(e.textContent.length); })"
                    ".observe(document.querySelector('.rk-chat'), {subtree: true, childList: true,"
                    " characterData: true}); }"
                )
                page.fill(".rk-chat-text", "remind me when the tea is ready")
                page.click(".rk-chat-send")
                # streamed: the line being written shows before the reply is whole
                page.wait_for_selector(".rk-chat .rk-streaming", timeout=300_000)
                page.wait_for_selector(".rk-chat .rk-streaming", state="detached", timeout=300_000)
                lengths = page.evaluate("() => [...window.__seen]")
                assert len(lengths) >= 3, lengths  # the text grew piece by piece
                said = page.locator(".rk-chat .rk-line.rk-agent").last.text_content() or ""
                assert "<schedule" not in said and "Tea time" not in said, said
                page.wait_for_selector(".rk-pill[data-label='tea']", timeout=60_000)
                banner = page.locator(".rk-alert[data-label='tea']")
                banner.wait_for(timeout=120_000)
                assert "Tea time" in (banner.text_content() or "")
                page.wait_for_selector(".rk-chat .rk-line.rk-fired", timeout=300_000)
                page.wait_for_function(
                    "() => { const ls = [...document.querySelectorAll('.rk-chat .rk-line')];"
                    " const i = ls.findIndex(l => l.classList.contains('rk-fired'));"
                    " return i >= 0 && ls.slice(i + 1).some(l => l.classList.contains('rk-agent')); }",
                    timeout=300_000,
                )
                page.screenshot(path=str(ARTIFACTS / "api-chat-smollm2.png"), full_page=True)
                assert not errors, errors
            except Exception:
                page.screenshot(
                    path=str(ARTIFACTS / "api-chat-smollm2-failure.png"), full_page=True
                )
                raise
            finally:
                browser.close()
        requests = [m for m in store.transcripts.messages("web") if m.kind == FIRED_TURN]
        assert requests, "the fire did not reach the agent"
        history = store.reminders.history(session="web", limit=10)
        assert any(o.state == "delivered" for o in history), history
    finally:
        srv.stop()
        store.close()
