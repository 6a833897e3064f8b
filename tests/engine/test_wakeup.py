"""The waiter the engine's threads, the tray and the notebook hub sleep in: a poke, a
hint of another process's write, a deadline or a stop ends a wait."""

from __future__ import annotations

import os
import socket
import threading
import time

import pytest

from remindkit.clock import FakeClock, SystemClock, now_us
from remindkit.wakeup import Hints, Waiter, hint_payload, parse_hint


class FakeListener:
    def __init__(self) -> None:
        self.ours, self.theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.ours.setblocking(False)
        self.fail = False
        self.closed = False

    def fileno(self) -> int:
        return self.ours.fileno()

    def drain(self) -> set[str]:
        if self.fail:
            raise ConnectionError("the listener's connection dropped")
        origins: set[str] = set()
        while True:
            try:
                origins.add(self.ours.recv(256).decode())
            except BlockingIOError:
                return origins

    def close(self) -> None:
        self.closed = True
        self.ours.close()
        self.theirs.close()


class FakeWake:
    def __init__(self, *, refuse: bool = False) -> None:
        self.refuse = refuse
        self.listeners: list[FakeListener] = []

    def notify(self, origin: str = "", added_due_us: int | None = None) -> None:
        self.listeners[-1].theirs.send(hint_payload(origin, added_due_us).encode())

    def listen(self) -> FakeListener:
        if self.refuse:
            raise OSError("no socket for you")
        listener = FakeListener()
        self.listeners.append(listener)
        return listener

    def close(self) -> None:
        pass


@pytest.fixture
def waiter():  # type: ignore[no-untyped-def]
    w = Waiter()
    yield w
    w.close()


def test_a_poke_from_another_thread_ends_the_wait(waiter: Waiter) -> None:
    started = threading.Event()

    def poke_soon() -> None:
        started.wait(5)
        waiter.poke()

    threading.Thread(target=poke_soon, daemon=True).start()
    t0 = time.monotonic()
    started.set()
    assert waiter.wait(20.0) is False  # a poke is no hint
    assert time.monotonic() - t0 < 10.0


def test_a_wait_without_a_poke_lasts_its_timeout(waiter: Waiter) -> None:
    t0 = time.monotonic()
    waiter.wait(0.05)
    assert time.monotonic() - t0 >= 0.045


def test_hints_from_others_end_the_wait_and_our_own_are_ignored(waiter: Waiter) -> None:
    wake = FakeWake()
    with waiter.listening(wake, ignore="me"):
        assert waiter.hints
        wake.notify("me")
        assert waiter.wait(20.0) is False  # our own write: read, but no change to look at
        wake.notify("someone else")
        assert waiter.wait(20.0) is True
    assert wake.listeners[-1].closed  # the block's end closes the listener


def test_a_hint_says_when_a_write_that_only_added_first_fires() -> None:
    assert parse_hint(hint_payload("engine-1", 1_700_000_000_000_000)) == (
        "engine-1",
        1_700_000_000_000_000,
    )
    assert parse_hint(hint_payload("engine-1")) == ("engine-1", None)
    assert parse_hint(hint_payload("two\nlines", 5)) == ("two lines", 5)  # no forged due
    assert parse_hint("engine-1\nnot a time") == ("engine-1", None)  # anything may have changed
    assert parse_hint(hint_payload("é" * 500, 7))[1] == 7  # a long origin is cut, not the time
    assert len(hint_payload("é" * 500, 7).encode()) <= 256  # one datagram's worth


def test_hints_fold_by_origin_a_plain_one_outweighs_and_the_earliest_fire_is_kept() -> None:
    hints = Hints()
    for payload in (hint_payload("a", 30), hint_payload("a", 10), hint_payload("b", 5)):
        hints.add(payload)
    hints.add(hint_payload("c", 1))
    hints.add(hint_payload("c"))  # c also changed something else
    hints.add(hint_payload("c", 2))
    assert {parse_hint(p) for p in hints.payloads()} == {("a", 10), ("b", 5), ("c", None)}
    for i in range(100):
        hints.add(hint_payload(f"engine-{i}", i))
    assert hints.payloads() == {"*"}  # many writers: look at the store


def test_a_waiter_reports_the_first_fire_of_writes_that_only_added(waiter: Waiter) -> None:
    wake = FakeWake()
    with waiter.listening(wake, ignore="me"):
        wake.notify("other", added_due_us=2_000)
        wake.notify("other", added_due_us=1_000)
        wake.notify("me")  # our own write: not a hint, whatever it did
        assert waiter.wait(20.0) is True
        assert waiter.added_due_us == 1_000
        wake.notify("other", added_due_us=500)
        wake.notify("third")  # a write that may have changed anything
        assert waiter.wait(20.0) is True
        assert waiter.added_due_us is None
        assert waiter.wait(0.0) is False and waiter.added_due_us is None


def test_a_failed_listener_is_replaced_and_counts_as_a_hint(waiter: Waiter) -> None:
    wake = FakeWake()
    with waiter.listening(wake):
        first = wake.listeners[-1]
        first.fail = True
        first.theirs.send(b"x")
        assert waiter.wait(20.0) is True  # something may have changed: look
        assert first.closed and len(wake.listeners) == 2
        wake.notify("again")
        assert waiter.wait(20.0) is True  # the new listener hears hints


def test_a_store_without_hints_leaves_deadlines_only(waiter: Waiter) -> None:
    with waiter.listening(FakeWake(refuse=True)):
        assert not waiter.hints
        t0 = time.monotonic()
        assert waiter.wait(0.05) is False
        assert time.monotonic() - t0 >= 0.045
    with waiter.listening(None):
        assert not waiter.hints


def test_with_retry_a_store_that_could_not_listen_is_listened_to_again(waiter: Waiter) -> None:
    """The event feed's way: a store that refused a listener (a PostgreSQL LISTEN that
    cannot connect now) is asked again at the next wait; without retry it is not."""
    wake = FakeWake(refuse=True)
    with waiter.listening(wake, retry=True):
        assert not waiter.hints
        wake.refuse = False
        assert waiter.wait(0) is False
        assert waiter.hints
        wake.notify("another process")
        assert waiter.wait(20.0) is True
    wake.refuse = True
    with waiter.listening(wake):
        wake.refuse = False
        waiter.wait(0)
        assert not waiter.hints


def test_a_wait_says_whether_a_poke_ended_it(waiter: Waiter) -> None:
    wake = FakeWake()
    waiter.wait(0)
    assert not waiter.poked
    waiter.poke()
    waiter.wait(20.0)
    assert waiter.poked
    with waiter.listening(wake):
        wake.notify("another process")
        assert waiter.wait(20.0) is True
        assert not waiter.poked
        waiter.poke()
        assert waiter.wait(20.0) is False
        assert waiter.poked


def test_hints_in_a_flood_are_reported_at_most_once_per_gap() -> None:
    waiter = Waiter(hint_gap=0.2)
    wake = FakeWake()
    try:
        with waiter.listening(wake):
            wake.notify("a")
            assert waiter.wait(20.0) is True
            wake.notify("b")
            t0 = time.monotonic()
            assert waiter.wait(20.0) is True
            assert time.monotonic() - t0 >= 0.15  # held back until the gap since the last
    finally:
        waiter.close()


def test_wait_until_ends_at_the_due_time_not_before(waiter: Waiter) -> None:
    clock = SystemClock()
    for _ in range(5):
        until = now_us(clock) + 30_000
        while now_us(clock) < until:  # the loop goes round until the time has come
            waiter.wait_until(until, clock, cap=30.0)
        late_ms = (now_us(clock) - until) / 1000
        assert 0 <= late_ms < 50


def test_wait_until_a_clock_that_stands_still_does_not_spin_forever(waiter: Waiter) -> None:
    clock = FakeClock()
    until = now_us(clock) + 100  # 0.1 ms ahead on a clock that never moves
    t0 = time.monotonic()
    waiter.wait_until(until, clock, cap=30.0)
    assert time.monotonic() - t0 < 5.0


def test_the_loop_runs_rounds_until_stopped_and_survives_a_failing_round() -> None:
    stop = threading.Event()
    waiter = Waiter(stop=stop)
    rounds: list[int] = []
    errors: list[int] = []

    def round_() -> None:
        rounds.append(1)
        if len(rounds) == 2:
            raise RuntimeError("one bad round")
        if len(rounds) == 4:
            stop.set()
        waiter.wait(0.01)

    try:
        waiter.loop(round_, on_error=lambda: errors.append(1), pause=0.01)
    finally:
        waiter.close()
    assert len(rounds) == 4 and len(errors) == 1


def test_stop_ends_a_long_wait_in_a_loop() -> None:
    waiter = Waiter()
    done = threading.Event()

    def run() -> None:
        waiter.loop(lambda: waiter.wait(60.0), on_error=lambda: None, pause=60.0)
        done.set()

    threading.Thread(target=run, daemon=True).start()
    waiter.stop()
    assert done.wait(10.0)
    waiter.close()


def test_a_poke_after_close_writes_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    waiter = Waiter()
    waiter.close()
    writes: list[int] = []
    monkeypatch.setattr("remindkit.wakeup.os.write", lambda fd, data: writes.append(fd))
    waiter.poke()  # the descriptors may be someone else's by now
    assert writes == []


def test_a_poke_while_a_wait_drains_the_pipe_is_not_lost(monkeypatch: pytest.MonkeyPatch) -> None:
    """Another thread pokes just as the waiting thread empties the pipe (here: from
    within its read). Later pokes must still end waits: a poke is never swallowed
    with the pipe left empty and the waiter believing a byte is in it."""
    import remindkit.wakeup as wakeup

    waiter = Waiter()
    real_read = wakeup.os.read
    raced = []

    def read(fd: int, n: int) -> bytes:
        if not raced:
            raced.append(1)
            waiter.poke()  # the other thread's poke, in the middle of the drain
        return real_read(fd, n)

    try:
        waiter.poke()
        monkeypatch.setattr(wakeup.os, "read", read)
        waiter.wait(20.0)  # the first poke ends it; the drain meets the racing poke
        monkeypatch.setattr(wakeup.os, "read", real_read)
        assert raced
        waiter.poke()  # a later poke, for work handed over after the round
        t0 = time.monotonic()
        waiter.wait(5.0)
        assert time.monotonic() - t0 < 4.0, "the poke was lost: the wait ran to its timeout"
    finally:
        waiter.close()


def test_hints_reach_a_listener_that_starts_right_after_a_notify(tmp_path) -> None:
    """SocketWake keeps its listing of the engines' sockets while the folder's mtime
    stays; a listener made in the same clock tick as the change before it (which
    leaves the mtime as it was) and one made after the listing settled both get
    the next hint."""
    from remindkit.store.wake import LISTING_SETTLE_NS, SocketWake

    def received(listener) -> set[str]:
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            got = listener.drain()
            if got:
                return got
            time.sleep(0.001)
        return set()

    wake = SocketWake(tmp_path / "store.db")
    first = wake.listen()
    wake.notify("a")  # listed just after a change: not kept
    second = wake.listen()  # made within the same tick, perhaps
    wake.notify("b")
    assert received(first) >= {"a"}
    assert "b" in received(second)
    settled = lambda: time.time_ns() - os.stat(wake.folder).st_mtime_ns > LISTING_SETTLE_NS  # noqa: E731
    deadline = time.monotonic() + 5
    while not settled() and time.monotonic() < deadline:
        time.sleep(0.01)
    wake.notify("c")  # settled: this listing is kept ...
    assert wake._listed is not None
    third = wake.listen()  # ... until the folder changes
    wake.notify("d")
    assert "d" in received(third)
    for listener in (first, second, third):
        listener.close()
    wake.close()
