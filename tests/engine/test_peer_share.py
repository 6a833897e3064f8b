"""A peer's share of the turn workers: the sessions whose turns reach one peer (an
adapter's ``peer(session)``, e.g. a webhook receiver's origin) run at most half of an
engine's workers at once, however the turns were started (a worker each, or the fast
lane of an adapter known to be fast); the other workers serve every other session
while the peer hangs. A running engine (its threads, the real clock) on a SQLite file;
the dripping receivers of a real engine process are in
tests/reliability/test_trust_outbound.py."""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence

import pytest

from remindkit.engine import Engine
from remindkit.models import Fire, Session
from remindkit.reminders import Reminders
from remindkit.sessions.base import TurnResult, origin
from remindkit.sessions.registry import Adapters
from remindkit.store import open_store
from tests.processes.conftest import wait_for

from .test_fast_lane import Lane, overdue

SLOW = "http://slow.example/hook"


class Peered(Lane):
    """The fast lane's adapter, each session's peer the origin of its ``url``; the turns
    of sessions told to block wait until released."""

    urls: dict[str, str]

    def __init__(self) -> None:
        super().__init__()
        self.urls = {}
        self.at_once: dict[str, int] = {}  # peer -> its turns running now
        self.most: dict[str, int] = {}  # peer -> the most of its turns that ran at once

    def peer(self, session: Session) -> str | None:
        return origin(self.urls.get(session.id))

    def run_turn(self, session: Session, message: str, fires: Sequence[Fire]) -> TurnResult:
        peer = self.peer(session) or session.id
        with self.lock:
            self.at_once[peer] = self.at_once.get(peer, 0) + 1
            self.most[peer] = max(self.most.get(peer, 0), self.at_once[peer])
        try:
            return super().run_turn(session, message, fires)
        finally:
            with self.lock:
                self.at_once[peer] -= 1


@pytest.fixture(params=["a worker each", "the fast lane"])
def engine(request, tmp_path, settings) -> Iterator[tuple[Reminders, Peered, Engine]]:  # type: ignore[no-untyped-def]
    settings = settings.with_limits(per_session=None, total=None, min_period_s=1)
    store = open_store(f"sqlite:///{tmp_path / 'share.db'}", settings=settings)
    api = Reminders(store, settings=settings)
    lane = Peered()
    engine = Engine(store, settings=settings, adapters=Adapters(lane), can_alert=False)
    engine.start()
    if request.param == "the fast lane":  # the adapter's turns known to be fast first
        api.import_(overdue(["warm"]))
        assert wait_for(lambda: "warm" in lane.done, 30, step=0.01), "the first turn"
        assert engine.dispatcher.lanes.times.fast(lane.name)
    try:
        yield api, lane, engine
    finally:
        for gate in lane.block.values():
            gate.set()
        engine.stop()
        store.close()


def test_a_hanging_peer_holds_half_the_workers_and_the_others_are_served(engine) -> None:  # type: ignore[no-untyped-def]
    api, lane, eng = engine
    share = eng.dispatcher.lanes.share
    assert share == 4  # half of the engine's 8 turn workers
    slow = [f"slow{i}" for i in range(8)]
    others = [f"other{i}" for i in range(6)]
    for sid in slow:
        lane.urls[sid] = SLOW
        lane.block[sid] = threading.Event()
        lane.entered[sid] = threading.Event()
    for i, sid in enumerate(others):  # each on a peer of its own, or none
        if i % 2:
            lane.urls[sid] = f"http://fine{i}.example:8080/"
    api.import_(overdue(slow))
    assert wait_for(lambda: sum(e.is_set() for e in lane.entered.values()) >= share, 60, 0.01)
    api.import_(overdue(others))
    # every other session gets its turn while the slow peer's turns hang
    assert wait_for(lambda: set(others) <= set(lane.done), 60, step=0.01), lane.done
    assert sum(e.is_set() for e in lane.entered.values()) == share, "past the peer's share"
    assert not set(slow) & set(lane.done)
    for gate in lane.block.values():  # the peer answers again: its other turns follow
        gate.set()
    assert wait_for(lambda: set(slow) <= set(lane.done), 60, step=0.01), lane.done
    assert lane.most[origin(SLOW)] == share
    assert sorted(d for d in lane.done if d != "warm") == sorted(slow + others)  # each once


def test_an_engine_that_stops_leaves_a_peers_waiting_turns_to_other_engines(
    tmp_path, settings
) -> None:  # type: ignore[no-untyped-def]
    """Turns waiting for their peer's share when the engine stops (its running turns
    still hang after the 10 s it gives them) are not run there and not lost: their
    fires are recorded waiting, for any engine to take."""
    settings = settings.with_limits(per_session=None, total=None, min_period_s=1)
    store = open_store(f"sqlite:///{tmp_path / 'stop.db'}", settings=settings)
    api = Reminders(store, settings=settings)
    lane = Peered()
    eng = Engine(store, settings=settings, adapters=Adapters(lane), can_alert=False)
    eng.start()
    slow = [f"slow{i}" for i in range(6)]
    for sid in slow:
        lane.urls[sid] = SLOW
        lane.block[sid] = threading.Event()
        lane.entered[sid] = threading.Event()
    try:
        api.import_(overdue(slow))
        assert wait_for(lambda: sum(e.is_set() for e in lane.entered.values()) == 4, 60, 0.01)
        eng.stop()
        ran = [sid for sid in slow if lane.entered[sid].is_set()]
        assert len(ran) == 4 and lane.done == []
        for sid in slow:
            got = [(o.state, o.error) for o in api.history(f"rem_{sid}")]
            if sid in ran:  # still in its turn: the claim lapses if it never ends
                assert [state for state, _e in got] != ["delivered"], got
            else:
                assert got == [("waiting", "engine stopped before its turn")], got
    finally:
        for gate in lane.block.values():
            gate.set()
        eng.stop()
        store.close()


def test_a_peer_is_the_origin_of_a_url() -> None:
    """Sessions posting to one receiver share a peer, whatever the path; another port,
    or the default port named, is told apart as a browser tells origins apart."""
    assert origin("https://Hooks.Example/x") == "https://hooks.example:443"
    assert origin("http://127.0.0.1:9/a") == origin("http://127.0.0.1:9/b")
    assert origin("http://127.0.0.1:9/") != origin("http://127.0.0.1:10/")
    assert origin("http://h.example/") == origin("http://H.example:80/other")
    assert origin("") is None and origin("not a url") is None and origin("http://[::1") is None
