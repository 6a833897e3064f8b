"""Widget logic without a browser: widget state and messages through a
recording comm. Pills appear and carry their due times, clicks (custom messages
from the browser) cancel, pause, resume and snooze in the store, the form adds,
the chat view hides fired turns, and alerts go to the page."""

from __future__ import annotations

from typing import Any

import pytest

from remindkit.chats import ChatSession
from remindkit.clock import FakeClock, to_us
from remindkit.models import CANCELLED, PAUSED
from remindkit.notebook import Panel, ScriptedAssistant
from remindkit.notebook.alerts import BrowserAlerter, alarm_asset, alarm_data_uri, beep_wav
from remindkit.notebook.state import format_left, seconds_left
from remindkit.reminders import Reminders

from .conftest import CommLog, from_browser


def api_of(runtime: Any) -> Reminders:
    return Reminders(runtime.store, clock=runtime.clock, settings=runtime.settings)


def test_pills_appear_and_reach_the_browser(runtime: Any, comm_log: CommLog) -> None:
    api = api_of(runtime)
    panel = Panel(runtime, session="s1")
    assert panel.labels == []
    first = api.create(
        "Stand up", session="s1", label="stretch", in_="5s", alarm=True, announce="Stretch!"
    )
    api.create("Other session", session="s2", label="elsewhere", in_="5s")
    panel.sync()
    assert panel.labels == ["stretch"]
    sent = comm_log.updates(panel.pills, "pills")[-1]
    assert sent == [
        {
            "id": first.id,
            "session": "s1",
            "label": "stretch",
            "text": "Stand up",
            "kind": "after",
            "schedule": "in 5s",
            "state": "active",
            "due_ms": to_us(first.next_fire_at) // 1000,
            "remaining": 1,
            "alarm": True,
            "announce": "Stretch!",
            "waiting": None,
        }
    ]
    # the browser counts down from due_ms; nothing more goes over the comm while nothing changes
    before = len(comm_log.sent)
    panel.sync()
    panel.sync()
    assert len(comm_log.sent) == before


def test_pills_count_down(runtime: Any, clock: FakeClock) -> None:
    api = api_of(runtime)
    panel = Panel(runtime, session="s1")
    api.create("tea", session="s1", label="tea", in_="1m30s")
    panel.sync()
    due = panel.pills.pills[0]["due_ms"]
    shown = []
    for _ in range(3):
        shown.append(format_left(seconds_left(due, to_us(clock.now()) // 1000)))
        clock.advance(1)
    assert shown == ["1:30", "1:29", "1:28"]


def test_the_browser_side_counts_down_every_second() -> None:
    from remindkit.notebook.pills import PillsWidget

    esm = PillsWidget._esm
    assert "setInterval(tick" in esm and "Date.now()" in esm  # the countdown runs in the page
    assert (
        "hidden.add(p.id)" in esm and "pill.remove()" in esm
    )  # × hides at once, before the kernel answers


def test_cancel_from_the_browser(runtime: Any, comm_log: CommLog) -> None:
    api = api_of(runtime)
    panel = Panel(runtime, session="s1")
    keep = api.create("keep", session="s1", label="keep", in_="10m")
    gone = api.create("gone", session="s1", label="gone", in_="5m")
    panel.sync()
    assert panel.labels == ["gone", "keep"]
    from_browser(panel.pills, {"action": "cancel", "id": gone.id})
    assert api.get(gone.id).state == CANCELLED
    assert api.get(keep.id).state == "active"
    assert panel.labels == ["keep"]
    assert comm_log.updates(panel.pills, "pills")[-1][0]["id"] == keep.id


def test_pause_resume_snooze_from_the_browser(runtime: Any, clock: FakeClock) -> None:
    api = api_of(runtime)
    panel = Panel(runtime, session="s1")
    rem = api.create("poll", session="s1", label="poll", every="10s")
    panel.sync()
    from_browser(panel.pills, {"action": "pause", "id": rem.id})
    assert api.get(rem.id).state == PAUSED
    assert panel.pills.pills[0]["state"] == "paused"
    clock.advance(3)
    from_browser(panel.pills, {"action": "resume", "id": rem.id})
    assert api.get(rem.id).state == "active"
    from_browser(panel.pills, {"action": "snooze", "id": rem.id})
    snoozed = api.get(rem.id)
    assert snoozed.snoozed and snoozed.next_fire_at == clock.now() + __import__(
        "datetime"
    ).timedelta(minutes=5)
    assert panel.pills.pills[0]["due_ms"] == to_us(snoozed.next_fire_at) // 1000


def test_a_refused_click_shows_a_notice_and_changes_nothing(runtime: Any) -> None:
    api = api_of(runtime)
    panel = Panel(runtime, session="s1")
    other = api.create("not yours", session="s2", label="other", in_="5m")
    from_browser(panel.pills, {"action": "cancel", "id": other.id})  # another session's reminder
    assert api.get(other.id).state == "active"
    assert panel.pills.notice.startswith("cancel: not_found")
    mine = api.create("mine", session="s1", label="mine", in_="5m")
    from_browser(panel.pills, {"action": "cancel", "id": mine.id})
    assert panel.pills.notice == ""
    from_browser(panel.pills, {"action": "cancel", "id": mine.id})  # a second click on a stale pill
    assert panel.pills.notice.startswith("cancel: not_active")
    from_browser(panel.pills, {"action": "explode", "id": mine.id})  # not an action: ignored
    assert panel.pills.notice.startswith("cancel: not_active")


def test_a_panel_for_every_session(runtime: Any) -> None:
    api = api_of(runtime)
    api.create("a", session="s1", label="a", in_="1m")
    api.create("b", session="s2", label="b", in_="2m")
    panel = Panel(runtime)
    assert panel.labels == ["a", "b"] and panel.pills.show_session
    assert panel.form is not None and panel.form.session is None and panel.chat_view is None


def test_form_adds_every_kind(runtime: Any) -> None:
    api = api_of(runtime)
    panel = Panel(runtime, session="s1")
    form = panel.form
    assert form is not None
    form.text.value, form.label.value, form.value.value = "Stretch", "stretch", "90s"
    form.alarm.value, form.announce.value = True, "Time to stretch"
    form.add.click()
    (rem,) = api.list(session="s1")
    assert (rem.text, rem.label, rem.kind, rem.alarm, rem.announce, rem.source) == (
        "Stretch",
        "stretch",
        "after",
        True,
        "Time to stretch",
        "notebook",
    )
    assert form.status.value.startswith("✓ stretch: in 1m30s") and form.text.value == ""
    assert panel.labels == ["stretch"]

    form.text.value, form.when.value, form.value.value, form.repeat.value = (
        "Poll",
        "every",
        "30s",
        "4",
    )
    assert not form.repeat.disabled
    assert form.submit() is not None
    form.text.value, form.when.value, form.value.value, form.zone.value = (
        "Standup",
        "cron",
        "0 9 * * 1-5",
        "Europe/Berlin",
    )
    cron = form.submit()
    assert cron is not None and cron.schedule.tz == "Europe/Berlin" and cron.kind == "cron"
    form.text.value, form.when.value, form.value.value, form.zone.value = (
        "Launch",
        "at",
        "2026-12-01T09:00",
        "UTC",
    )
    assert form.submit() is not None
    assert sorted(r.kind for r in api.list(session="s1")) == ["after", "at", "cron", "every"]


@pytest.mark.parametrize(
    ("when", "value", "code"),
    [
        ("every", "0s", "invalid_duration"),
        ("in", "soon", "invalid_duration"),
        ("cron", "* * *", "invalid_cron"),
        ("at", "2020-01-01T00:00:00Z", "time_not_future"),
    ],
    ids=["zero-interval", "bad-duration", "bad-cron", "past"],
)
def test_form_shows_refusals(runtime: Any, when: str, value: str, code: str) -> None:
    panel = Panel(runtime, session="s1")
    form = panel.form
    assert form is not None
    form.text.value, form.when.value, form.value.value = "x", when, value
    assert form.submit() is None
    assert code in form.status.value
    assert api_of(runtime).list(all=True) == []


def test_chat_view_hides_fired_turns(runtime: Any, clock: FakeClock, comm_log: CommLog) -> None:
    chat = ChatSession(
        runtime.store,
        session="c1",
        model=ScriptedAssistant(),
        engine=runtime.engine,
        settings=runtime.settings,
    )
    panel = Panel(runtime, chat=chat)
    chat.send("Remind me in 5 seconds to stretch")
    panel.sync()
    assert panel.labels == ["stretch"]
    clock.advance(5)
    runtime.engine.tick()  # fires; the python session runs the fired turn inline
    panel.sync()
    assert panel.labels == []
    assert panel.chat_view is not None
    lines = panel.chat_view.lines
    assert [ln["who"] for ln in lines] == ["you", "agent", "fired", "agent"]
    assert lines[2]["text"] == "⏰ stretch fired 09:00"
    assert lines[3]["text"].startswith("[scripted local model] Your reminder is due: stretch")
    sent = comm_log.updates(panel.chat_view, "lines")
    assert sent and not any("<schedule" in ln["text"] for state in sent for ln in state)
    assert "<schedule" not in lines[1]["text"]  # the reply's tag is stripped for display


def test_chat_view_box_runs_a_turn_off_the_main_thread(runtime: Any) -> None:
    chat = ChatSession(
        runtime.store,
        session="c1",
        model=ScriptedAssistant(),
        engine=runtime.engine,
        settings=runtime.settings,
    )
    panel = Panel(runtime, chat=chat)
    assert panel.chat_view is not None
    from_browser(panel.chat_view, {"action": "send", "text": "Remind me in 2 minutes to call Sam"})
    panel.chat_view.join()
    panel.sync()
    assert [ln["who"] for ln in panel.chat_view.lines] == ["you", "agent"]
    assert panel.labels == ["sam"] and not panel.chat_view.busy


def test_chat_view_shows_a_failed_turn(runtime: Any) -> None:
    def broken(messages: Any, tools: Any) -> str:
        raise RuntimeError("model down")

    chat = ChatSession(
        runtime.store, session="c1", model=broken, engine=runtime.engine, settings=runtime.settings
    )
    panel = Panel(runtime, chat=chat)
    assert panel.chat_view is not None
    panel.chat_view.send_message("hello").join(10)
    panel.sync()
    assert panel.chat_view.lines[-1]["who"] == "note"
    assert "model down" in panel.chat_view.lines[-1]["text"]


def test_alerts_play_in_the_browser(runtime: Any, clock: FakeClock, comm_log: CommLog) -> None:
    api = api_of(runtime)
    panel = Panel(runtime, session="s1")
    api.create(
        "Stand up", session="s1", label="stretch", in_="2s", alarm=True, announce="Time to stretch"
    )
    clock.advance(2)
    runtime.engine.tick()
    (alert,) = comm_log.custom(panel.pills)
    assert alert["type"] == "alert" and alert["label"] == "stretch" and alert["alarm"] is True
    assert alert["announce"] == "Time to stretch" and alert["key"].startswith(alert["id"] + "@")
    (occ,) = api.history()
    assert occ.alert == "done"
    assert panel.pills.alerts == "this browser"
    esm = panel.pills._esm
    assert "speechSynthesis.speak" in esm and "audio.play()" in esm
    assert panel.pills.alarm_src.startswith("data:audio/wav;base64,")


def test_browser_alerter_without_a_panel_is_muted(clock: FakeClock) -> None:
    from remindkit.models import Fire

    fire = Fire(
        occurrence_id=1, reminder_id="rem_x", session=None, due_at=clock.now(), text="t", alarm=True
    )
    alerter = BrowserAlerter()
    assert alerter.alert(fire) == "muted"

    class Broken:
        def show_alert(self, payload: dict[str, Any]) -> None:
            raise RuntimeError("gone")

    target = Broken()
    alerter.add(target)
    assert alerter.alert(fire) == "failed"


def test_alarm_sound_is_the_asset_or_a_generated_beep(tmp_path: Any) -> None:
    wav = beep_wav()
    assert wav[:4] == b"RIFF" and wav[8:12] == b"WAVE" and len(wav) > 5000
    import io
    import wave

    with wave.open(io.BytesIO(wav)) as w:
        assert (w.getnchannels(), w.getsampwidth(), w.getframerate()) == (1, 1, 8000)
        assert 0.8 < w.getnframes() / 8000 < 1.2  # under a second
    assert alarm_asset([tmp_path]) is None
    assert alarm_data_uri([tmp_path]).startswith("data:audio/wav;base64,UklGR")
    (tmp_path / "alarm.wav").write_bytes(b"RIFF-our-own")
    assert alarm_asset([tmp_path]) == tmp_path / "alarm.wav"
    assert alarm_data_uri([tmp_path]) == "data:audio/wav;base64,UklGRi1vdXItb3du"


def test_closing_a_panel_stops_its_refreshes_and_alerts(runtime: Any) -> None:
    panel = Panel(runtime, session="s1")
    assert runtime.alerter.targets == 1
    panel.close()
    assert runtime.alerter.targets == 0
    api_of(runtime).create("x", session="s1", in_="1m")
    runtime.hub.sync()  # no error: the closed panel is gone from the hub


def test_chat_view_shows_a_failed_fired_turn(runtime: Any, clock: FakeClock) -> None:
    def fails_on_fires(messages: Any, tools: Any) -> str:
        if "<schedule-fired" in (messages[-1].get("content") or ""):
            raise RuntimeError("model lost its GPU")
        return "hello"

    chat = ChatSession(
        runtime.store,
        session="c1",
        model=fails_on_fires,
        engine=runtime.engine,
        settings=runtime.settings,
    )
    panel = Panel(runtime, chat=chat)
    rid = api_of(runtime).create("stretch", session="c1", label="stretch", in_="5s").id
    clock.advance(5)
    runtime.engine.tick()
    runtime.engine.notice_change()
    runtime.engine.tick()
    panel.sync()
    assert [o.state for o in runtime.store.reminders.history(reminder_id=rid)] == ["failed"]
    assert panel.chat_view is not None
    lines = panel.chat_view.lines
    assert [ln["who"] for ln in lines][-2:] == ["fired", "note"]
    assert (
        "reminder 'stretch' could not be delivered" in lines[-1]["text"]
        and "GPU" in lines[-1]["text"]
    )
