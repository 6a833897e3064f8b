"""The fast lane: turns of an adapter known to be fast run in batches, one batch after
another on one worker at a time; a turn of it that runs long leaves the queued batches
to another worker. A running engine (its threads, the real clock) on a SQLite file."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Sequence
from datetime import timedelta

import pytest

import remindkit.engine.lanes as lanes
from remindkit.clock import SystemClock, format_utc
from remindkit.engine import Engine
from remindkit.models import Fire, Session
from remindkit.reminders import Reminders
from remindkit.sessions.base import TurnResult
from remindkit.sessions.registry import Adapters
from remindkit.store import open_store
from tests.processes.conftest import wait_for


class Lane:
    """An adapter whose turns return at once, except in sessions told to block."""

    name = "lane"
    shared = False

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.running = 0
        self.most_at_once = 0
        self.done: list[str] = []
        self.threads: set[int] = set()
        self.block: dict[str, threading.Event] = {}
        self.delay = 0.0  # seconds every turn takes (once the adapter is known to be fast)
        self.entered: dict[str, threading.Event] = {}

    def can_deliver(self, session: Session) -> bool:
        return True

    def run_turn(self, session: Session, message: str, fires: Sequence[Fire]) -> TurnResult:
        with self.lock:
            self.running += 1
            self.most_at_once = max(self.most_at_once, self.running)
            self.threads.add(threading.get_ident())
        try:
            if session.id in self.entered:
                self.entered[session.id].set()
            gate = self.block.get(session.id)
            if gate is not None:
                gate.wait(60)
            if self.delay:
                time.sleep(self.delay)
            return TurnResult(True)
        finally:
            with self.lock:
                self.running -= 1
                self.done.append(session.id)


def overdue(ids: Sequence[str]) -> list[str]:
    """Import lines: a session and a reminder overdue by a minute for each id."""
    at = format_utc(SystemClock().now() - timedelta(minutes=1))
    lines = []
    for sid in ids:
        lines.append(
            json.dumps(
                {"type": "session", "id": sid, "adapter": "lane", "created_at": at}
                | {"last_active_at": at}
            )
        )
        lines.append(
            json.dumps(
                {
                    "type": "reminder",
                    "id": f"rem_{sid}",
                    "session": sid,
                    "text": f"for {sid}",
                    "schedule": {"v": 1, "kind": "at", "tz": "UTC", "first_at": at, "repeat": 1},
                    "state": "active",
                    "next_fire_at": at,
                    "created_at": at,
                }
            )
        )
    return lines


@pytest.fixture
def running(tmp_path, settings):
    settings = settings.with_limits(per_session=None, total=None, min_period_s=1)
    store = open_store(f"sqlite:///{tmp_path / 'lane.db'}", settings=settings)
    api = Reminders(store, settings=settings)
    lane = Lane()
    engine = Engine(store, settings=settings, adapters=Adapters(lane), can_alert=False)
    engine.start()
    # One turn first, so that the engine knows the adapter's turns are fast.
    api.import_(overdue(["warm"]))
    assert wait_for(lambda: "warm" in lane.done, 30, step=0.01), "the first turn"
    with lane.lock:
        lane.threads.clear()
        lane.most_at_once = 0
    try:
        yield api, lane, engine
    finally:
        for gate in lane.block.values():
            gate.set()
        engine.stop()
        store.close()


def test_a_burst_of_fast_turns_runs_one_turn_at_a_time(running, monkeypatch):
    """200 sessions due at once: their turns run one after another, not on eight
    threads fighting over the GIL. (No turn may count as long here, whatever the
    machine's load: that would rightly start a second worker.)"""
    monkeypatch.setattr(lanes, "LANE_STUCK_US", 30_000_000)
    monkeypatch.setattr(lanes, "FAST_TURN_US", 30_000_000)
    api, lane, engine = running
    ids = [f"s{i:03d}" for i in range(200)]
    api.import_(overdue(ids))
    assert wait_for(lambda: set(ids) <= set(lane.done), 60, step=0.01), "200 turns"
    assert lane.most_at_once == 1
    assert len(lane.threads) == 1
    assert sorted(lane.done[1:]) == ids  # each once


def test_a_fast_turn_that_hangs_leaves_the_lane_to_the_others(running):
    """A session of a fast adapter whose turn blocks: the batches queued behind it
    are taken by another worker, and every other session gets its turn while it
    still blocks."""
    api, lane, engine = running
    lane.block["s000"] = threading.Event()
    lane.entered["s000"] = threading.Event()
    ids = [f"s{i:03d}" for i in range(100)]
    api.import_(overdue(ids))
    assert lane.entered["s000"].wait(60), "the blocking turn never started"
    others = set(ids) - {"s000"}
    assert wait_for(lambda: others <= set(lane.done), 60, step=0.01), "the other sessions' turns"
    assert "s000" not in lane.done  # still blocked: the others did not wait for it
    lane.block["s000"].set()
    assert wait_for(lambda: "s000" in lane.done, 30, step=0.01), "the blocked turn to end"
    assert sorted(lane.done[1:]) == ids


def test_turns_of_an_adapter_that_became_slow_leave_the_lane(running):
    """The adapter was fast; now each of its turns takes 50 ms. After its first slow
    turn, the turns queued in the lane get a worker each: they run side by side,
    not one after another (64 turns would take 3.2 s that way)."""
    api, lane, engine = running
    lane.delay = 0.05
    ids = [f"s{i:03d}" for i in range(64)]
    api.import_(overdue(ids))
    assert wait_for(lambda: set(ids) <= set(lane.done), 60, step=0.01), "64 turns"
    assert lane.most_at_once >= 2
    assert sorted(lane.done[1:]) == ids


def test_a_large_burst_is_routed_in_two_parts_each_session_whole():
    """A burst goes to delivery as a first part of about HAND_OVER_CHUNK fires (its
    turns start at once) and the rest in one, never a session's fires split."""
    from remindkit.engine.core import HAND_OVER_CHUNK, _chunks_by_session

    due = SystemClock().now()
    fires = [Fire(i, f"rem_{i}", f"s{i % 700}", due, "x") for i in range(2100)]
    chunks = _chunks_by_session(fires, HAND_OVER_CHUNK)
    assert len(chunks) == 2
    assert HAND_OVER_CHUNK <= len(chunks[0]) < HAND_OVER_CHUNK + 3  # three fires a session
    assert sorted(f.occurrence_id for c in chunks for f in c) == list(range(2100))
    first, rest = ({f.session for f in c} for c in chunks)
    assert not first & rest
    assert _chunks_by_session(fires[:HAND_OVER_CHUNK], HAND_OVER_CHUNK) == [fires[:HAND_OVER_CHUNK]]
