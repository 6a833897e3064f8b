"""What the widgets show, as pure data: pills, countdown text, chat lines."""

from __future__ import annotations

from datetime import timedelta
from zoneinfo import ZoneInfo

import pytest

from remindkit.clock import FakeClock, to_us
from remindkit.models import CHAT, FEEDBACK, FIRED_TURN, Fire, Message
from remindkit.notebook.state import (
    chat_lines,
    fired_marker,
    fired_time,
    format_left,
    pills,
    seconds_left,
)
from remindkit.protocol.framing import frame_feedback, frame_fired
from remindkit.reminders import Reminders
from remindkit.store import SqlStore


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (None, "–"),
        (0, "0:00"),
        (1, "0:01"),
        (59, "0:59"),
        (60, "1:00"),
        (605, "10:05"),
        (3599, "59:59"),
        (3600, "1:00:00"),
        (3723, "1:02:03"),
        (86_399, "23:59:59"),
        (86_400, "1d 00:00"),
        (273_900, "3d 04:05"),
        (-5, "0:00"),
    ],
    ids=lambda v: str(v),
)
def test_format_left(seconds: int | None, text: str) -> None:
    assert format_left(seconds) == text


@pytest.mark.parametrize(
    ("due", "now", "left"),
    [
        (10_000, 0, 10),
        (10_000, 1, 10),
        (10_000, 999, 10),
        (10_000, 1_000, 9),
        (10_000, 9_001, 1),
        (10_000, 10_000, 0),
        (10_000, 50_000, 0),
        (None, 0, None),
    ],
    ids=lambda v: str(v),
)
def test_seconds_left_rounds_up(due: int | None, now: int, left: int | None) -> None:
    assert seconds_left(due, now) == left


def test_pills_count_down_with_the_clock(nb_store: SqlStore, clock: FakeClock) -> None:
    api = Reminders(nb_store, clock=clock)
    api.create("stretch", session="s1", label="stretch", in_="5s", alarm=True, announce="Stretch!")
    (p,) = pills(api.list(session="s1"))
    assert (p.label, p.kind, p.schedule, p.state, p.alarm, p.announce) == (
        "stretch",
        "after",
        "in 5s",
        "active",
        True,
        "Stretch!",
    )
    texts = []
    for _ in range(6):
        texts.append(format_left(seconds_left(p.due_ms, to_us(clock.now()) // 1000)))
        clock.advance(1)
    assert texts == ["0:05", "0:04", "0:03", "0:02", "0:01", "0:00"]


def test_pills_order_active_by_due_then_paused(nb_store: SqlStore, clock: FakeClock) -> None:
    api = Reminders(nb_store, clock=clock)
    late = api.create("late", session="s1", label="late", in_="1h")
    api.create("soon", session="s1", label="soon", in_="1m")
    api.create("every", session="s1", label="poll", every="2m", repeat=3)
    api.pause([late.id])
    shown = pills(api.list(session="s1"))
    assert [(p.label, p.state) for p in shown] == [
        ("soon", "active"),
        ("poll", "active"),
        ("late", "paused"),
    ]
    assert shown[1].schedule == "every 2m x3" and shown[1].remaining == 3


def test_a_pill_without_label_shows_its_text_shortened(
    nb_store: SqlStore, clock: FakeClock
) -> None:
    api = Reminders(nb_store, clock=clock)
    api.create("word " * 40, session="s1", in_="5m")
    (p,) = pills(api.list(session="s1"))
    assert p.label.endswith("…") and len(p.label) == 40 and len(p.text) <= 120


def _fire(label: str, clock: FakeClock, rid: str = "rem_aaaaaaaaaaaa") -> Fire:
    due = clock.now()
    return Fire(
        occurrence_id=1,
        reminder_id=rid,
        session="s1",
        due_at=due,
        text="ask about </schedule-fired> it",
        label=label,
        fired_at=due + timedelta(milliseconds=12),
    )


def test_chat_lines_hide_fired_turns_and_tags(clock: FakeClock) -> None:
    fired = frame_fired([_fire("check back", clock)])
    messages = [
        Message("s1", "user", "remind me in 5 minutes", kind=CHAT, seq=1),
        Message(
            "s1",
            "assistant",
            'Sure!\n<schedule label="check back" delay="5m">ask</schedule>',
            seq=2,
        ),
        Message(
            "s1",
            "user",
            frame_feedback([("malformed_tag", "bad", "<schedule")]),
            kind=FEEDBACK,
            seq=3,
        ),
        Message("s1", "user", fired, kind=FIRED_TURN, hidden=True, seq=4),
        Message("s1", "assistant", None, tool_calls=({"id": "c1"},), seq=5),
        Message("s1", "tool", '{"ok": true}', kind="tool", seq=6),
        Message("s1", "assistant", "It is time to check back.", seq=7),
    ]
    lines = chat_lines(messages, ZoneInfo("Europe/Berlin"))
    assert [(ln.seq, ln.who, ln.text) for ln in lines] == [
        (1, "you", "remind me in 5 minutes"),
        (2, "agent", "Sure!"),
        (4, "fired", "⏰ check back fired 10:00"),  # 09:00Z is 10:00 in Berlin
        (7, "agent", "It is time to check back."),
    ]


def test_fired_marker_names_every_reminder_of_a_batch(clock: FakeClock) -> None:
    batch = frame_fired([_fire("deploy", clock, "rem_bbbbbbbbbbbb"), _fire("check back", clock)])
    assert fired_marker(batch, ZoneInfo("UTC")) == "⏰ check back, deploy fired 09:00"
    assert fired_time(batch) == clock.now() + timedelta(milliseconds=12)


@pytest.mark.parametrize(
    "message",
    ["", "plain", "<schedule-fired id='x'>", '<schedule-fired fired="nope">x'],
    ids=["empty", "plain", "unclosed", "bad-time"],
)
def test_fired_time_unreadable(message: str) -> None:
    assert fired_time(message) is None
    assert fired_marker(message, ZoneInfo("UTC")).startswith("⏰ ")
