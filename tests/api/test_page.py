"""The web page of `remindkit api` in Chromium (Playwright): the pill counts down,
× cancels in the store, the add form creates, a fire shows the banner (alarm and
announce), Snooze brings the reminder back; all from the event stream."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from remindkit.client import Client
from remindkit.settings import Settings
from remindkit.store import open_store

from ..processes.openai_server import ScriptedOpenAI, last_user, text
from .conftest import cli, wait_for

pytestmark = [pytest.mark.api, pytest.mark.browser]

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
    "--autoplay-policy=no-user-gesture-required",
]


def test_the_page_counts_down_cancels_adds_and_alerts(api_server, sqlite_url, tmp_path):
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: apt-get install chromium (scripts/setup --test does)")
    sync_api = pytest.importorskip("playwright.sync_api")
    ARTIFACTS.mkdir(exist_ok=True)
    model = ScriptedOpenAI(lambda body: text("Stretched. Back to the deploy."))
    model.__enter__()
    added = cli(
        "session",
        "add",
        "web",
        "--openai",
        "--base-url",
        model.base_url,
        "--model",
        "scripted",
        db=sqlite_url,
        home=tmp_path,
    )
    assert added.returncode == 0, added.stderr
    srv = api_server(sqlite_url)
    store = open_store(sqlite_url, settings=Settings.from_env(env={}, home=tmp_path / "h"))
    client = Client(srv.base_url)
    long = client.session("default", "web").reminders.create("a long one", name="long", in_="1h")
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1000, "height": 800})
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        try:
            opened = cli("api", "open", "--session", "web", "--json", db=sqlite_url, home=tmp_path)
            assert opened.returncode == 0, opened.stderr
            page.goto(json.loads(opened.stdout)["url"])  # the one-time login, then the page
            assert page.url == f"{srv.base_url}/?project=default&session=web", page.url
            (cookie,) = page.context.cookies()
            assert cookie["httpOnly"] and cookie["sameSite"] == "Strict", cookie
            page.wait_for_selector("#live[data-state='live']", timeout=60_000)
            left = page.locator(".rk-pill[data-label='long'] .rk-left")
            left.wait_for(timeout=30_000)
            first = left.text_content()
            assert first and first.startswith(("59:", "1:00:")), first
            page.wait_for_function(
                "t => document.querySelector(\".rk-pill[data-label='long'] .rk-left\").textContent !== t",
                arg=first,
                timeout=30_000,
            )
            # × cancels in the store
            page.click(".rk-pill[data-label='long'] .rk-cancel")
            assert wait_for(
                lambda: store.reminders.get_reminder(long["id"]).state == "cancelled", 30
            )
            # the add form; the pill comes from the event stream
            page.fill("#add input[name='prompt']", "stand up and stretch")
            page.fill("#add input[name='in']", "4s")
            page.fill("#add input[name='name']", "standup")
            page.fill("#add input[name='announce']", "stand up now")
            page.check("#add input[name='alarm']")
            page.click("#add button[type='submit']")
            page.wait_for_selector(".rk-pill[data-label='standup']", timeout=30_000)
            made = [
                r for r in store.reminders.find_reminders(session="web") if r.label == "standup"
            ]
            assert len(made) == 1 and made[0].alarm and made[0].announce == "stand up now"
            # the fire: a banner, the alarm through <audio>, the announcement spoken
            banner = page.locator(".rk-alert[data-label='standup']")
            banner.wait_for(timeout=60_000)
            assert "stand up now" in (banner.text_content() or "")
            page.wait_for_function(
                "() => { const b = document.querySelector(\".rk-alert[data-label='standup']\");"
                " return b && b.dataset.audio !== 'starting'; }",
                timeout=30_000,
            )
            assert banner.get_attribute("data-audio") in ("played", "blocked"), (
                banner.get_attribute("data-audio")
            )
            assert banner.get_attribute("data-speech") in ("spoken", "unavailable")
            # the agent's reply to the hidden fired turn, below its marker, from the stream
            page.wait_for_selector(".rk-chat .rk-line.rk-agent", timeout=60_000)
            assert page.locator(".rk-chat .rk-line.rk-fired").count() == 1
            assert "standup" in (page.locator(".rk-chat .rk-line.rk-fired").text_content() or "")
            assert "Back to the deploy" in (
                page.locator(".rk-chat .rk-line.rk-agent").text_content() or ""
            )
            page.screenshot(path=str(ARTIFACTS / "api-page.png"), full_page=True)
            assert wait_for(lambda: store.reminders.get_reminder(made[0].id).state == "done", 30)
            page.click(".rk-alert[data-label='standup'] .rk-alert-snooze")
            assert wait_for(lambda: store.reminders.get_reminder(made[0].id).state == "active", 30)
            page.wait_for_selector(".rk-pill[data-label='standup']", timeout=30_000)
            assert page.locator(".rk-alert").count() == 0
            assert not errors, errors
        except Exception:
            page.screenshot(path=str(ARTIFACTS / "api-page-failure.png"), full_page=True)
            raise
        finally:
            browser.close()
            client.close()
            store.close()
            model.__exit__(None, None, None)


def test_a_pill_whose_fire_waits_says_why(api_server, sqlite_url, tmp_path):
    """A session opened only in the page has no agent: a reminder there with no alarm
    fires, reaches no one (the server plays no alarms), and waits; its pill reads
    ``waiting`` and says why rather than ``due``."""
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: apt-get install chromium (scripts/setup --test does)")
    sync_api = pytest.importorskip("playwright.sync_api")
    ARTIFACTS.mkdir(exist_ok=True)
    api_server(sqlite_url)
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1000, "height": 700})
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        try:
            opened = cli("api", "open", "--session", "page", "--json", db=sqlite_url, home=tmp_path)
            assert opened.returncode == 0, opened.stderr
            page.goto(json.loads(opened.stdout)["url"])
            page.wait_for_selector("#live[data-state='live']", timeout=60_000)
            page.fill("#add input[name='prompt']", "water the plants")
            page.fill("#add input[name='in']", "2s")
            page.fill("#add input[name='name']", "water")
            page.click("#add button[type='submit']")
            pill = page.locator(".rk-pill[data-label='water']")
            pill.wait_for(timeout=30_000)
            why = page.locator(".rk-pill[data-label='water'] .rk-why")
            why.wait_for(timeout=60_000)  # the fire's waiting outcome, from the event stream
            assert "no delivery adapter" in (why.text_content() or ""), why.text_content()
            page.wait_for_function(
                "() => document.querySelector(\".rk-pill[data-label='water'] .rk-left\")"
                ".textContent === 'waiting'",
                timeout=30_000,
            )
            assert "waiting: session" in (pill.get_attribute("title") or "")
            page.screenshot(path=str(ARTIFACTS / "api-page-waiting.png"), full_page=True)
            assert not errors, errors
        except Exception:
            page.screenshot(path=str(ARTIFACTS / "api-page-waiting-failure.png"), full_page=True)
            raise
        finally:
            browser.close()


TEA = (
    '<schedule label="tea" delay="5s" alarm="true" announce="Tea time">the tea is ready</schedule>'
)


def chat_model(body):  # type: ignore[no-untyped-def]
    """The stand-in agent of the chat test: a tag when asked for a reminder, a long
    reply when asked for one, and an answer to each fired turn."""
    said = last_user(body)
    if "<schedule-fired" in said:
        return text("Ding! " + ("Your tea is ready." if "tea" in said else "Time to stand up."))
    if "long" in said:
        return text("Here is a long answer. " + "la " * 40)
    return text(f"Sure, I will tell you when the tea is ready. {TEA} Enjoy the wait.")


def test_the_page_is_a_chat(api_server, sqlite_url, tmp_path):
    """The first seed's web chat: the person types, the reply streams in, the tag in
    it sets a pill that counts down, the fire sounds the alarm in the browser and
    wakes the agent, whose reply appears under a fired marker; a fire due during the
    person's turn comes after it."""
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: apt-get install chromium (scripts/setup --test does)")
    sync_api = pytest.importorskip("playwright.sync_api")
    ARTIFACTS.mkdir(exist_ok=True)
    with ScriptedOpenAI(chat_model) as model:
        model.piece = 3
        model.piece_delay = 0.06
        added = cli(
            "session", "add", "web", "--openai", "--base-url", model.base_url, "--model", "m",
            db=sqlite_url, home=tmp_path,
        )  # fmt: skip
        assert added.returncode == 0, added.stderr
        srv = api_server(sqlite_url)
        store = open_store(sqlite_url, settings=Settings.from_env(env={}, home=tmp_path / "h"))
        with sync_api.sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            page = browser.new_page(viewport={"width": 1000, "height": 900})
            errors: list[str] = []
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            try:
                opened = cli(
                    "api", "open", "--session", "web", "--json", db=sqlite_url, home=tmp_path
                )
                assert opened.returncode == 0, opened.stderr
                page.goto(json.loads(opened.stdout)["url"])
                page.wait_for_selector("#live[data-state='live']", timeout=60_000)
                # the person types; the reply streams in, piece by piece, without its tag
                page.fill(".rk-chat-text", "remind me when the tea is ready")
                page.click(".rk-chat-send")
                page.wait_for_selector(".rk-chat .rk-you", timeout=30_000)
                streaming = page.locator(".rk-chat .rk-streaming .rk-text")
                streaming.wait_for(timeout=30_000)
                partial = streaming.text_content() or ""
                assert partial and not partial.endswith("Enjoy the wait."), partial
                page.wait_for_function(
                    "t => { const e = document.querySelector('.rk-chat .rk-streaming .rk-text');"
                    " return e && e.textContent.length > t.length; }",
                    arg=partial,
                    timeout=30_000,
                )
                page.wait_for_selector(".rk-chat .rk-streaming", state="detached", timeout=30_000)
                agent = page.locator(".rk-chat .rk-line.rk-agent").last
                said = agent.text_content() or ""
                assert "Enjoy the wait." in said and "<schedule" not in said, said
                assert "Tea time" not in said, said
                # the tag set a pill that counts down in the browser
                left = page.locator(".rk-pill[data-label='tea'] .rk-left")
                left.wait_for(timeout=30_000)
                first = left.text_content()
                page.wait_for_function(
                    "t => { const e = document.querySelector(\".rk-pill[data-label='tea'] .rk-left\");"
                    " return !e || e.textContent !== t; }",
                    arg=first,
                    timeout=30_000,
                )
                (tea,) = [
                    r for r in store.reminders.find_reminders(session="web") if r.label == "tea"
                ]
                assert tea.alarm and tea.announce == "Tea time" and tea.source != "http"
                # the fire: the banner, the alarm, the announcement; then the agent wakes
                banner = page.locator(".rk-alert[data-label='tea']")
                banner.wait_for(timeout=60_000)
                assert "Tea time" in (banner.text_content() or "")
                page.wait_for_function(
                    "() => { const b = document.querySelector(\".rk-alert[data-label='tea']\");"
                    " return b && b.dataset.audio !== 'starting'; }",
                    timeout=30_000,
                )
                assert banner.get_attribute("data-audio") in ("played", "blocked")
                assert banner.get_attribute("data-speech") in ("spoken", "unavailable")
                page.wait_for_function(
                    "() => [...document.querySelectorAll('.rk-chat .rk-line')].some("
                    "l => l.textContent.includes('Your tea is ready.'))",
                    timeout=60_000,
                )
                whos = page.eval_on_selector_all(
                    ".rk-chat .rk-line", "ls => ls.map(l => [l.className, l.textContent])"
                )
                assert [w for w, _ in whos] == [
                    "rk-line rk-you", "rk-line rk-agent", "rk-line rk-fired", "rk-line rk-agent",
                ], whos  # fmt: skip
                assert "tea" in whos[2][1] and "Your tea is ready." in whos[3][1], whos
                # a fire due during the person's turn comes after the turn, as its own
                with Client(srv.base_url) as client:
                    client.session("default", "web").reminders.create(
                        "stand up", name="standup", in_="2s"
                    )
                page.fill(".rk-chat-text", "give me a long answer")
                page.click(".rk-chat-send")
                page.wait_for_selector(".rk-chat .rk-streaming", timeout=30_000)
                page.wait_for_function(
                    "() => [...document.querySelectorAll('.rk-chat .rk-line')].some("
                    "l => l.textContent.includes('Time to stand up.'))",
                    timeout=60_000,
                )
                whos = page.eval_on_selector_all(
                    ".rk-chat .rk-line", "ls => ls.map(l => [l.className, l.textContent])"
                )
                tail = whos[4:]
                assert [w for w, _ in tail] == [
                    "rk-line rk-you", "rk-line rk-agent", "rk-line rk-fired", "rk-line rk-agent",
                ], whos  # fmt: skip
                assert "long answer" in tail[1][1] and "standup" in tail[2][1], whos
                page.screenshot(path=str(ARTIFACTS / "api-chat.png"), full_page=True)
                assert not errors, errors
            except Exception:
                page.screenshot(path=str(ARTIFACTS / "api-chat-failure.png"), full_page=True)
                raise
            finally:
                browser.close()
                store.close()


def test_a_message_typed_during_a_fired_turn_waits_on_the_page(api_server, sqlite_url, tmp_path):
    """The person types while the agent answers a fired reminder: the page says so
    (its waiting line), and the person's turn comes after the fired one, not inside it."""
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: apt-get install chromium (scripts/setup --test does)")
    sync_api = pytest.importorskip("playwright.sync_api")
    ARTIFACTS.mkdir(exist_ok=True)

    def respond(body):  # type: ignore[no-untyped-def]
        if "<schedule-fired" in last_user(body):
            time.sleep(4)  # the fired turn takes a while
            return text("Ding! Time to stand up.")
        return text("Yes, I am here.")

    with ScriptedOpenAI(respond) as model:
        added = cli(
            "session", "add", "web", "--openai", "--base-url", model.base_url, "--model", "m",
            db=sqlite_url, home=tmp_path,
        )  # fmt: skip
        assert added.returncode == 0, added.stderr
        srv = api_server(sqlite_url)
        with sync_api.sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            page = browser.new_page(viewport={"width": 1000, "height": 800})
            errors: list[str] = []
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            try:
                opened = cli(
                    "api", "open", "--session", "web", "--json", db=sqlite_url, home=tmp_path
                )
                assert opened.returncode == 0, opened.stderr
                page.goto(json.loads(opened.stdout)["url"])
                page.wait_for_selector("#live[data-state='live']", timeout=60_000)
                with Client(srv.base_url) as client:
                    client.session("default", "web").reminders.create(
                        "stand up", name="standup", in_="1s"
                    )
                assert wait_for(
                    lambda: any("<schedule-fired" in last_user(r) for r in model.requests), 30
                )
                page.fill(".rk-chat-text", "are you there?")
                page.click(".rk-chat-send")
                thinking = page.locator(".rk-chat .rk-thinking")
                page.wait_for_function(
                    "() => { const e = document.querySelector('.rk-chat .rk-thinking');"
                    " return e && e.textContent.startsWith('waiting:'); }",
                    timeout=30_000,
                )
                assert "answering a reminder" in (thinking.text_content() or "")
                page.wait_for_function(
                    "() => [...document.querySelectorAll('.rk-chat .rk-line.rk-agent')].some("
                    "l => l.textContent.includes('Yes, I am here.'))",
                    timeout=60_000,
                )
                page.wait_for_selector(".rk-chat .rk-streaming", state="detached", timeout=30_000)
                whos = page.eval_on_selector_all(
                    ".rk-chat .rk-line", "ls => ls.map(l => [l.className, l.textContent])"
                )
                assert [w for w, _ in whos] == [
                    "rk-line rk-fired", "rk-line rk-agent", "rk-line rk-you", "rk-line rk-agent",
                ], whos  # fmt: skip
                assert "Time to stand up." in whos[1][1] and "are you there?" in whos[2][1]
                page.screenshot(path=str(ARTIFACTS / "api-page-waits.png"), full_page=True)
                assert not errors, errors
            except Exception:
                page.screenshot(path=str(ARTIFACTS / "api-page-waits-failure.png"), full_page=True)
                raise
            finally:
                browser.close()
