"""The kernel side: the engine leaves alerts to the tray while it runs and
alerts in the browser when it does not; ``rk.chat`` with your own function;
panels see changes made by other processes within a second; ``import
remindkit`` needs no ipywidgets."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from remindkit.clock import FakeClock, to_us
from remindkit.notebook import Panel, wait_for
from remindkit.notebook.runtime import NOTEBOOK_ALERT_PRIORITY, TRAY_ALERT_PRIORITY, KernelRuntime
from remindkit.reminders import Reminders
from remindkit.settings import Settings
from remindkit.store import SqlStore, open_store
from remindkit.store.wake import NoWake

from .conftest import CommLog

ROOT = Path(__file__).resolve().parents[2]
TRAY = "tray:host:1"


def _api(rt: KernelRuntime) -> Reminders:
    return Reminders(rt.store, clock=rt.clock, settings=rt.settings)


def test_kernel_engine_leaves_alerts_to_the_tray(
    runtime: KernelRuntime, clock: FakeClock, comm_log: CommLog
) -> None:
    store, api = runtime.store, _api(runtime)
    panel = Panel(runtime, session="s1")
    t = to_us(clock.now())
    store.coordination.hold_lease(
        "alerter", holder=TRAY, priority=TRAY_ALERT_PRIORITY, until_us=t + 120_000_000, now_us=t
    )
    loud = api.create(
        "Stand up", session="s1", label="stretch", in_="2s", alarm=True, announce="Stretch"
    )
    quiet = api.create("Quiet one", session="s1", label="quiet", in_="2s")
    clock.advance(2)
    runtime.engine.tick()
    assert runtime.engine.leave_alerts and not runtime.engine.is_alerter
    assert comm_log.custom(panel.pills) == [] and runtime.alerter.sent == []
    fired = {o.reminder_id for o in api.history()}
    assert fired == {quiet.id}  # the alerting one is left for the tray to claim
    panel.sync()
    assert panel.pills.alerts == "the tray"

    # the tray quits and drops its lease: the kernel engine alerts from its next housekeeping on
    store.coordination.drop_lease("alerter", holder=TRAY)
    clock.advance(runtime.settings.lease_s / 3 + 1)
    runtime.engine.tick()
    assert runtime.engine.is_alerter
    (alert,) = comm_log.custom(panel.pills)
    assert alert["id"] == loud.id and alert["announce"] == "Stretch"
    assert {o.reminder_id: o.alert for o in api.history()}[loud.id] == "done"
    panel.sync()
    assert panel.pills.alerts == "this browser"


def test_the_tray_takes_alerting_over_from_the_kernel(
    runtime: KernelRuntime, clock: FakeClock, comm_log: CommLog
) -> None:
    store, api = runtime.store, _api(runtime)
    panel = Panel(runtime, session="s1")
    runtime.engine.tick()
    assert runtime.engine.is_alerter  # no tray: the kernel engine alerts
    assert NOTEBOOK_ALERT_PRIORITY < TRAY_ALERT_PRIORITY
    t = to_us(clock.now())
    holder, _prio, _until = store.coordination.hold_lease(
        "alerter", holder=TRAY, priority=TRAY_ALERT_PRIORITY, until_us=t + 120_000_000, now_us=t
    )
    assert holder == TRAY  # a higher priority takes the lease at once
    api.create("Stand up", session="s1", label="stretch", in_="15s", alarm=True)
    clock.advance(runtime.settings.lease_s / 3 + 1)
    runtime.engine.tick()  # housekeeping: the lease is the tray's now
    clock.advance(5)
    runtime.engine.tick()
    assert runtime.engine.leave_alerts and comm_log.custom(panel.pills) == []
    assert api.history() == []


def test_an_agent_cancelling_its_own_callback_keeps_an_honest_record(
    runtime: KernelRuntime, clock: FakeClock
) -> None:
    """An agent polling with a callback: the fired turn that sees the build green
    cancels the callback it came from. That fire was delivered, and the history
    says so."""
    from remindkit.chats import ChatSession
    from remindkit.notebook import ScriptedPoller

    looks = iter(["running", "running", "green"])
    agent = ScriptedPoller(check=lambda: next(looks), until=lambda s: s == "green", every_s=2)
    chat = ChatSession(
        runtime.store, session="loop", model=agent, engine=runtime.engine, settings=runtime.settings
    )
    chat.send("watch the build")
    for _ in range(3):
        clock.advance(2)
        runtime.engine.tick()
    (callback,) = _api(runtime).list(session="loop", all=True)
    assert callback.state == "cancelled" and agent.checks == ["running", "running", "green"]
    assert [o.outcome for o in _api(runtime).history(callback.id)] == ["delivered"] * 3
    assert chat.entries()[-1].text.startswith(
        "[scripted local model] The build is green after 3 checks"
    )


def test_rk_chat_with_your_own_function(tmp_path: Path) -> None:
    import remindkit as rk
    from remindkit.notebook import runtime as kernel

    settings = Settings.from_env(env={}, home=tmp_path, tz="UTC")
    db = f"sqlite:///{tmp_path / 'chat.db'}"

    def agent(messages: list[dict[str, Any]], tools: Any) -> str:
        last = str(messages[-1]["content"])
        if "<schedule-fired" in last:
            return "I'm back: time to look."
        return 'Will do. <schedule label="look" delay="1s">look at it</schedule>'

    try:
        chat = rk.chat(model=agent, db=db, settings=settings)
        again = rk.chat(model=agent, db=db, settings=settings)
        assert (
            chat.engine is again.engine is kernel.runtime_for(chat.store).engine
        )  # one engine per store
        assert chat.adapter == "python"
        assert chat.send("look at it in a second").text == "Will do."
        wait_for(lambda: chat.entries()[-1].text == "I'm back: time to look.", timeout=15)
        assert [e.who for e in chat.entries()] == ["you", "agent", "fired", "agent"]
    finally:
        kernel.shutdown()


def test_rk_chat_with_an_openai_compatible_endpoint(tmp_path: Path, comm_log: CommLog) -> None:
    import remindkit as rk
    from remindkit.notebook import runtime as kernel

    from ..processes.openai_server import ScriptedOpenAI, last_user, text, tool

    def model(body: dict[str, Any]) -> Any:
        if body["messages"][-1]["role"] == "tool":
            return text("Set: I'll be back in a second.")
        if "<schedule-fired" in last_user(body):
            return text("Back, as promised.")
        return tool("schedule_create", {"prompt": "check the oven", "after": "1s", "label": "oven"})

    settings = Settings.from_env(env={}, home=tmp_path, tz="UTC")
    with ScriptedOpenAI(model) as server:
        try:
            chat = rk.chat(
                base_url=server.base_url,
                model="scripted",
                db=f"sqlite:///{tmp_path / 'o.db'}",
                settings=settings,
            )
            assert chat.adapter == "openai"
            panel = rk.panel(chat)
            assert (
                chat.send("remind me about the oven in a second").text
                == "Set: I'll be back in a second."
            )
            panel.sync()
            assert panel.labels == ["oven"]
            # the fired turn runs in this kernel's engine (an openai session: any engine can run it)
            wait_for(lambda: chat.entries()[-1].text == "Back, as promised.", timeout=15)

            def gone() -> (
                bool
            ):  # the pill goes once the delivery's outcome is written (just after the reply)
                panel.sync()
                return panel.labels == []

            wait_for(gone, timeout=15)
            assert panel.chat_view is not None
            assert [ln["who"] for ln in panel.chat_view.lines] == ["you", "agent", "fired", "agent"]
        finally:
            kernel.shutdown()


def test_wait_for_times_out() -> None:
    with pytest.raises(TimeoutError):
        wait_for(lambda: False, timeout=0.2, every=0.05)
    assert wait_for(lambda: 42) == 42


def _cli(url: str, home: Path, *args: str) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("REMINDKIT_")}
    env.update(REMINDKIT_HOME=str(home), REMINDKIT_TZ="UTC")
    out = subprocess.run(
        [sys.executable, "-m", "remindkit", *args, "--db", url],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_a_panel_sees_other_processes_within_a_second(
    store_url: str, settings: Settings, comm_log: CommLog, tmp_path: Path
) -> None:
    store = open_store(store_url, settings=settings)
    rt = KernelRuntime(store)  # a live hub; the engine is not needed here
    try:
        panel = Panel(rt, session="s1")
        _cli(
            store_url,
            tmp_path,
            "remind",
            "Written by the CLI",
            "--session",
            "s1",
            "--label",
            "cli",
            "--in",
            "10m",
        )
        t0 = time.monotonic()
        wait_for(lambda: panel.labels == ["cli"], timeout=5, every=0.01)
        assert time.monotonic() - t0 < 1.0
        rid = panel.pills.pills[0]["id"]
        _cli(store_url, tmp_path, "pause", rid)
        t0 = time.monotonic()
        wait_for(lambda: panel.pills.pills[0]["state"] == "paused", timeout=5, every=0.01)
        assert time.monotonic() - t0 < 1.0
        _cli(store_url, tmp_path, "rm", rid)
        t0 = time.monotonic()
        wait_for(lambda: panel.labels == [], timeout=5, every=0.01)
        assert time.monotonic() - t0 < 1.0
    finally:
        rt.close()
        store.close()


def test_without_wake_up_hints_a_panel_refreshes_every_second(
    nb_store: SqlStore, demo_settings: Settings, comm_log: CommLog, tmp_path: Path
) -> None:
    other = open_store(str(nb_store.engine.url), settings=demo_settings)
    for store in (nb_store, other):  # as on a database without hints
        store.wake.close()
        store.wake = NoWake()
    rt = KernelRuntime(nb_store)
    try:
        panel = Panel(rt, session="s1")
        time.sleep(0.3)
        Reminders(other).create("no hint", session="s1", label="quiet", in_="10m")
        t0 = time.monotonic()
        wait_for(lambda: panel.labels == ["quiet"], timeout=5, every=0.01)
        assert time.monotonic() - t0 < 1.3
        assert rt.hub.refreshes >= 1
    finally:
        rt.close()
        other.close()


def test_import_remindkit_needs_no_ipywidgets(tmp_path: Path) -> None:
    code = textwrap.dedent(f"""
        import sys
        sys.modules["ipywidgets"] = None   # as if not installed
        sys.modules["anywidget"] = None
        import remindkit as rk
        assert "ipywidgets" not in [m for m in sys.modules if sys.modules[m] is not None]
        chat = rk.chat(model=lambda messages, tools: "hello", db="sqlite:///{tmp_path / "x.db"}")
        print(chat.send("hi").text)
        try:
            rk.panel(chat)
        except ImportError as exc:
            print("ImportError:", exc)
    """)
    env = {k: v for k, v in os.environ.items() if not k.startswith("REMINDKIT_")}
    env.update(REMINDKIT_HOME=str(tmp_path / "home"), REMINDKIT_TZ="UTC")
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60, cwd=ROOT
    )
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == "hello"
    assert lines[1].startswith(
        "ImportError: remindkit's notebook widgets need ipywidgets and anywidget"
    )


def test_a_kernel_with_no_panel_leaves_alerting_to_an_engine_that_can(
    runtime: KernelRuntime, clock: FakeClock, comm_log: CommLog
) -> None:
    """With no panel shown the kernel engine has nowhere to play an alarm: it does not
    take the alerter lease, so a `serve` engine sounds the alert instead of it being
    recorded `muted`. A panel shown takes the lease at once; closed, it gives it back."""
    from remindkit.alerts import NullAlerter
    from remindkit.engine import Engine

    store, api = runtime.store, _api(runtime)
    played = NullAlerter()
    serve = Engine(
        store, clock=clock, settings=runtime.settings, alerter=played, role="serve", inline=True
    )
    try:
        serve.tick()  # a `serve` engine runs on the store; the kernel starts its engine
        runtime.engine.tick()
        assert not runtime.engine.is_alerter and serve.is_alerter and runtime.engine.leave_alerts
        assert store.coordination.lease_holder("alerter", now_us=to_us(clock.now())) == (
            serve.id,
            0,
        )
        loud = api.create("Stand up", session="s1", label="stretch", in_="2s", alarm=True)
        clock.advance(2)
        for engine in (runtime.engine, serve):  # the store's hint, as a running engine gets it
            engine.notice_change()
            engine.tick()
        (occ,) = api.history()
        assert (occ.reminder_id, occ.alert) == (
            loud.id,
            "done",
        )  # sounded by serve, not muted in the kernel
        assert len(played.played) == 1 and played.played[0].startswith(loud.id)
        assert runtime.alerter.sent == []

        panel = Panel(
            runtime, session="s1"
        )  # somewhere to play: the kernel engine (priority 5) takes over
        runtime.engine.tick()
        assert runtime.engine.is_alerter
        assert (
            store.coordination.lease_holder("alerter", now_us=to_us(clock.now()))[0]
            == runtime.engine.id
        )

        panel.close()  # nowhere again: the lease is given back at the next step, not at its expiry
        runtime.engine.tick()
        assert not runtime.engine.is_alerter
        clock.advance(runtime.settings.lease_s / 3 + 1)
        serve.tick()
        assert serve.is_alerter
    finally:
        serve.shutdown()
