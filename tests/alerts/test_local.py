"""The local alerter inside a real engine: notification, alarm and speech in
order before delivery; no device, a hung speaker, mute and quiet hours never
block or lose the delivery; the notification's buttons snooze and stop."""

from __future__ import annotations

import io
import json
import sys
import time
import wave
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from remindkit import Engine, Reminders
from remindkit import events as ev
from remindkit.alerts.alarm import AlarmPlayer
from remindkit.alerts.config import ALARM_WAV, AlertConfig
from remindkit.alerts.local import LocalAlerter
from remindkit.alerts.quiet import QuietHours, Switches
from remindkit.alerts.speech import Speaker
from remindkit.cli.main import main
from remindkit.clock import UTC, SystemClock, to_us
from remindkit.models import Occurrence, Session
from remindkit.store import SqlStore
from remindkit.wiring import build

from ..desktop_env import NotificationBus
from .conftest import Capture, wav_frames
from .test_speech import pcm_stats

pytestmark = [pytest.mark.audio, pytest.mark.desktop]


@dataclass
class Rig:
    store: SqlStore
    api: Reminders
    alerter: LocalAlerter
    engine: Engine
    fired: list[datetime] = field(default_factory=list)
    turns: list[datetime] = field(default_factory=list)

    def wait_final(self, reminder_id: str, timeout: float = 30) -> Occurrence:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            hist = self.api.history(reminder_id)
            if hist and hist[0].state in ("delivered", "failed", "skipped"):
                return hist[0]
            time.sleep(0.05)
        raise AssertionError(f"no final outcome for {reminder_id}: {self.api.history(reminder_id)}")


@pytest.fixture
def make_rig(sqlite_store: SqlStore) -> Iterator[Callable[..., Rig]]:
    rigs: list[Rig] = []

    def make(config: AlertConfig | None = None, **kwargs: object) -> Rig:
        clock = SystemClock()
        sqlite_store.sessions.put_session(
            Session(id="s1", adapter="python"), now_us=to_us(clock.now())
        )
        alerter = LocalAlerter(config or AlertConfig(players=("simpleaudio",)), **kwargs)  # type: ignore[arg-type]
        graph = build(store=sqlite_store, clock=clock)
        engine = graph.engine(alerter=alerter, role="tray", alert_priority=10)  # attached
        rig = Rig(sqlite_store, graph.api, alerter, engine)
        engine.events.subscribe(ev.Fired, lambda _e: rig.fired.append(clock.now()))
        engine.adapters.get("python").register("s1", lambda _m, _f: rig.turns.append(clock.now()))
        rigs.append(rig)
        engine.start()
        return rig

    yield make
    for rig in rigs:
        rig.engine.stop()
        rig.engine.close()
        rig.alerter.close()


def test_fire_publishes_then_alarm_then_speech_then_delivery(
    make_rig: Callable[..., Rig], alsa_capture: Capture, notification_bus: NotificationBus
) -> None:
    rig = make_rig()
    rem = rig.api.create(
        "Check the deploy",
        session="s1",
        label="deploy",
        in_="1s",
        alarm=True,
        announce="Time to check the deploy",
        urgency="critical",
    )
    occ = rig.wait_final(rem.id)
    assert occ.state == "delivered" and occ.alert == "done"
    rec = rig.alerter.records[-1]
    assert rec.key == occ.key and rec.state == "done"
    assert rec.alarm is not None and rec.alarm.ok and rec.alarm.player == "simpleaudio"
    assert rec.speech is not None and rec.speech.ok
    assert occ.fired_at is not None and occ.delivered_at is not None
    order = [
        occ.fired_at,
        rig.fired[0],
        rec.at("notify"),
        rec.at("alarm.start"),
        rec.at("alarm.end"),
        rec.at("speech.start"),
        rec.at("speech.end"),
        rig.turns[0],
        occ.delivered_at,
    ]
    assert all(t is not None for t in order)
    assert order == sorted(order), [t.isoformat() for t in order]  # type: ignore[union-attr]
    # the sound device got the alarm, then speech
    played = alsa_capture.read()
    alarm = wav_frames(ALARM_WAV)
    assert played.startswith(alarm)
    seconds, rms = pcm_stats(played[len(alarm) :], 22050)
    assert seconds > 0.8 and rms > 0.03
    # and the desktop got one critical notification with the buttons
    (note,) = notification_bus.wait_notifications(1)
    assert note["summary"] == "Reminder: deploy" and note["body"] == "Time to check the deploy"
    assert note["hints"]["urgency"] == 2 and note["expire"] == 0
    assert note["actions"] == ["snooze", "Snooze 10m", "dismiss", "Dismiss"]
    assert any('"Reminder: deploy"' in line for line in notification_bus.logged_notify_lines())


def test_without_any_sound_device_the_fire_is_delivered_and_the_failure_recorded(
    make_rig: Callable[..., Rig], alsa_no_device: None, notification_bus: NotificationBus
) -> None:
    rig = make_rig(AlertConfig(players=("simpleaudio", "paplay", "pw-play", "aplay")))
    rem = rig.api.create("Stretch", session="s1", in_="1s", alarm=True, announce="Stretch")
    occ = rig.wait_final(rem.id)
    assert occ.state == "delivered"
    assert occ.alert == "failed"
    rec = rig.alerter.records[-1]
    assert rec.state == "failed"
    assert any("alarm: audio unavailable" in p for p in rec.problems)
    assert any(p.startswith("speech:") and "audio unavailable" in p for p in rec.problems)
    assert len(notification_bus.wait_notifications(1)) == 1  # the person is still told
    assert rig.turns and occ.delivered_at is not None
    # ... and `history` shows the failed alert, in its text and its --json
    url = rig.store.url
    out, err = io.StringIO(), io.StringIO()
    assert main(["--db", url, "history", rem.id], stdout=out, stderr=err) == 0, err.getvalue()
    assert " delivered " in out.getvalue() and " alert failed" in out.getvalue(), out.getvalue()
    out = io.StringIO()
    assert main(["--db", url, "history", rem.id, "--json"], stdout=out, stderr=err) == 0
    (row,) = json.loads(out.getvalue())
    assert row["outcome"] == "delivered" and row["alert"] == "failed", row


def test_a_reminder_for_the_person_ends_once_the_alarm_played(
    make_rig: Callable[..., Rig], alsa_capture: Capture, notification_bus: NotificationBus
) -> None:
    """A session with no agent (one opened only in the web page): its fire ends
    ``alerted`` once the alarm played on the sound device; the reminder is done."""
    rig = make_rig()
    rem = rig.api.create("Tea", session="page", in_="1s", alarm=True)
    occ = wait_outcome(rig, rem.id, ("alerted", "waiting"))
    assert occ.state == "alerted" and occ.alert == "done", occ
    assert alsa_capture.read().startswith(wav_frames(ALARM_WAV))  # it was heard
    assert wait_until(lambda: rig.api.get(rem.id).state == "done", 10)
    assert not rig.turns  # no agent was handed anything


def test_a_reminder_for_the_person_whose_alarm_failed_waits(
    make_rig: Callable[..., Rig], alsa_no_device: None, notification_bus: NotificationBus
) -> None:
    rig = make_rig(AlertConfig(players=("simpleaudio", "aplay"), notify=False))
    rem = rig.api.create("Tea", session="page", in_="1s", alarm=True)
    occ = wait_outcome(rig, rem.id, ("alerted", "waiting"))
    assert occ.state == "waiting" and occ.alert == "failed", occ
    assert "the person was not reached" in (occ.error or "")
    got = rig.api.get(rem.id)
    assert got.state == "active" and got.delivery is not None


def wait_outcome(rig: Rig, reminder_id: str, states: tuple[str, ...], timeout: float = 30):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        hist = rig.api.history(reminder_id)
        if hist and hist[0].state in states:
            return hist[0]
        time.sleep(0.05)
    raise AssertionError(
        f"no outcome in {states} for {reminder_id}: {rig.api.history(reminder_id)}"
    )


def wait_until(predicate: Callable[[], bool], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return predicate()


def test_a_hung_speaker_is_killed_and_delivery_goes_on(
    make_rig: Callable[..., Rig], alsa_capture: Capture, tmp_path: Path
) -> None:
    hang = [sys.executable, "-c", "import time; time.sleep(120)"]
    cfg = AlertConfig(players=("simpleaudio",), speech_timeout_s=1.0, notify=False)
    player = AlarmPlayer(cfg.players)
    rig = make_rig(
        cfg, player=player, speaker=Speaker(player, engines=["pyttsx3"], worker_argv=hang)
    )
    rem = rig.api.create("Hung", session="s1", in_="1s", alarm=True, announce="never spoken")
    occ = rig.wait_final(rem.id)
    assert occ.state == "delivered" and occ.alert == "failed"
    rec = rig.alerter.records[-1]
    assert rec.alarm is not None and rec.alarm.ok
    assert rec.speech is not None and rec.speech.timed_out
    assert occ.fired_at is not None and occ.delivered_at is not None
    took = (occ.delivered_at - occ.fired_at).total_seconds()
    assert 1.0 <= took < 4.0


@pytest.mark.parametrize("how", ["mute", "quiet-hours"])
def test_muted_or_quiet_means_no_sound_but_a_notification(
    how: str,
    make_rig: Callable[..., Rig],
    alsa_capture: Capture,
    notification_bus: NotificationBus,
    sqlite_store: SqlStore,
) -> None:
    sw = Switches(sqlite_store.coordination, env={})
    now = datetime.now(UTC)
    if how == "mute":
        sw.set_muted(True, now_us=to_us(now))
    else:
        start = (now - timedelta(minutes=5)).astimezone()
        end = (now + timedelta(minutes=30)).astimezone()
        sw.set_quiet_hours(QuietHours.parse(f"{start:%H:%M}-{end:%H:%M}"), now_us=to_us(now))
    rig = make_rig()
    rem = rig.api.create("Quietly", session="s1", in_="1s", alarm=True, announce="Shh")
    occ = rig.wait_final(rem.id)
    assert occ.state == "delivered" and occ.alert == "muted"
    rec = rig.alerter.records[-1]
    assert rec.alarm is None and rec.speech is None and rec.silence.silent
    assert alsa_capture.read() == b""
    assert len(notification_bus.wait_notifications(1)) == 1


def test_snooze_from_the_notification_brings_the_reminder_back(
    make_rig: Callable[..., Rig], alsa_capture: Capture, notification_bus: NotificationBus
) -> None:
    rig = make_rig()
    rem = rig.api.create("Call back", session="s1", in_="1s", alarm=True)
    rig.wait_final(rem.id)
    assert rig.api.get(rem.id).state == "done"
    rec = rig.alerter.records[-1]
    assert rec.notify is not None and rec.notify.id is not None
    before = datetime.now(UTC)
    notification_bus.invoke_action(rec.notify.id, "snooze")
    deadline = time.monotonic() + 5
    while rig.api.get(rem.id).state != "active" and time.monotonic() < deadline:
        time.sleep(0.05)
    again = rig.api.get(rem.id)
    assert again.state == "active" and again.next_fire_at is not None
    assert (
        timedelta(minutes=9, seconds=55)
        < again.next_fire_at - before
        < timedelta(minutes=10, seconds=5)
    )


def test_dismiss_stops_the_alarm_and_skips_the_speech(
    make_rig: Callable[..., Rig],
    alsa_paced: Capture,
    notification_bus: NotificationBus,
    tmp_path: Path,
) -> None:
    long_wav = tmp_path / "long.wav"
    with wave.open(str(long_wav), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(22050)
        w.writeframes(wav_frames(ALARM_WAV) * 30)  # about a minute of chimes
    rig = make_rig(AlertConfig(alarm_path=long_wav, players=("simpleaudio",), alarm_timeout_s=60))
    rem = rig.api.create("Loud", session="s1", in_="1s", alarm=True, announce="not after dismiss")
    notification_bus.wait_notifications(1)
    deadline = time.monotonic() + 5
    while not rig.alerter.sounding and time.monotonic() < deadline:
        time.sleep(0.02)
    assert rig.alerter.sounding
    notification_bus.invoke_action(1, "dismiss")  # the mock numbers notifications from 1
    occ = rig.wait_final(rem.id, timeout=10)
    rec = rig.alerter.records[-1]
    assert rec.alarm is not None and rec.alarm.stopped
    assert rec.speech is None
    assert occ.state == "delivered" and occ.alert == "done"
    assert len(alsa_paced.read()) < len(wav_frames(long_wav)) // 2


def test_a_fire_without_alarm_still_gets_one_notification(
    make_rig: Callable[..., Rig], notification_bus: NotificationBus
) -> None:
    rig = make_rig()
    rem = rig.api.create("Plain text reminder", session="s1", in_="1s", urgency="low")
    occ = rig.wait_final(rem.id)
    assert occ.state == "delivered" and occ.alert is None
    (note,) = notification_bus.wait_notifications(1)
    assert note["summary"] == "Reminder: Plain text reminder" and note["hints"]["urgency"] == 0
    time.sleep(0.3)
    assert len(notification_bus.notifications()) == 1


def test_the_alarm_sounds_on_time_while_the_session_is_busy(
    make_rig: Callable[..., Rig], alsa_capture: Capture, sqlite_store: SqlStore
) -> None:
    rig = make_rig(AlertConfig(players=("simpleaudio",), notify=False))
    sqlite_store.sessions.set_session_busy("s1", True, now_us=to_us(datetime.now(UTC)))
    rem = rig.api.create("Busy", session="s1", in_="1s", alarm=True)
    deadline = time.monotonic() + 10
    while not rig.alerter.records and time.monotonic() < deadline:
        time.sleep(0.05)
    rec = rig.alerter.records[-1]
    assert rec.state == "done"
    due = rig.api.history(rem.id)[0].due_at
    assert (rec.at("alarm.start") - due).total_seconds() < 1.0  # type: ignore[operator]
    time.sleep(0.3)
    assert rig.api.history(rem.id)[0].state == "waiting" and not rig.turns
    sqlite_store.sessions.set_session_busy("s1", False, now_us=to_us(datetime.now(UTC)))
    occ = rig.wait_final(rem.id)
    assert occ.state == "delivered" and len(rig.turns) == 1
    assert alsa_capture.read() == wav_frames(ALARM_WAV)
