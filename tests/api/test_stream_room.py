"""A server holds at most STREAMS_MAX event streams: the next is refused with
``too_many_streams`` (409) before it starts, and a closed stream makes room."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from remindkit.api import events as api_events
from remindkit.api.app import status_of
from remindkit.errors import LimitExceeded
from remindkit.settings import Settings
from remindkit.store import open_store


def test_streams_past_the_bound_are_refused_and_closing_one_makes_room(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(api_events, "STREAMS_MAX", 2)
    settings = Settings.from_env(env={}, home=tmp_path, tz="UTC")
    store = open_store(f"sqlite:///{tmp_path / 'store.db'}", settings=settings)
    feed = api_events.EventFeed(store)

    async def run() -> None:
        gens = [feed.stream(("default", None), None) for _ in range(2)]
        first = [asyncio.ensure_future(g.__anext__()) for g in gens]
        while feed.open_streams() < 2:  # each registers when it starts
            await asyncio.sleep(0.01)
        with pytest.raises(LimitExceeded) as full:
            feed.check_room()
        assert full.value.code == "too_many_streams" and status_of(full.value) == 409
        extra = feed.stream(("default", None), None)
        with pytest.raises(LimitExceeded):
            await extra.__anext__()  # one that got past the check is refused as well
        first[0].cancel()
        await asyncio.gather(first[0], return_exceptions=True)
        await gens[0].aclose()
        while feed.open_streams() > 1:
            await asyncio.sleep(0.01)
        feed.check_room()  # room again
        first[1].cancel()
        await asyncio.gather(first[1], return_exceptions=True)
        await gens[1].aclose()

    try:
        asyncio.run(asyncio.wait_for(run(), 60))
        assert feed.open_streams() == 0
    finally:
        store.close()


def test_a_quiet_stream_gets_a_keep_alive_and_an_event_still_comes_after(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A stream offered nothing for KEEPALIVE_S gets a comment line (the feed thread
    looks about once a second); events keep coming on it after, once each."""
    from remindkit.reminders import Reminders

    monkeypatch.setattr(api_events, "KEEPALIVE_S", 0.5)
    settings = Settings.from_env(env={}, home=tmp_path, tz="UTC")
    store = open_store(f"sqlite:///{tmp_path / 'store.db'}", settings=settings)
    api = Reminders(store, settings=settings)
    feed = api_events.EventFeed(store).start()

    async def run() -> None:
        gen = feed.stream((None, None), None)
        assert await gen.__anext__() == api_events.CONNECTED
        got = await asyncio.wait_for(gen.__anext__(), 10)
        assert got == api_events.KEEPALIVE_COMMENT
        rem = await asyncio.to_thread(api.create, "after the quiet", session="s", in_="1h")
        frame = await asyncio.wait_for(gen.__anext__(), 10)
        while frame == api_events.KEEPALIVE_COMMENT:
            frame = await asyncio.wait_for(gen.__anext__(), 10)
        assert b"event: created" in frame and rem.id.encode() in frame
        await gen.aclose()

    try:
        asyncio.run(asyncio.wait_for(run(), 60))
    finally:
        feed.stop()
        store.close()


def test_a_commit_of_this_process_is_read_on_the_streams_loop(tmp_path: Path) -> None:
    """EventFeed.committed (this process's engine committed): the streams' event loop
    reads the new events and offers them itself, in order, with no feed thread."""
    import threading

    from remindkit.reminders import Reminders

    settings = Settings.from_env(env={}, home=tmp_path, tz="UTC")
    store = open_store(f"sqlite:///{tmp_path / 'store.db'}", settings=settings)
    api = Reminders(store, settings=settings)
    feed = api_events.EventFeed(store)  # not started: only committed() reads
    feed.last_id = store.events.last_event_id()

    async def run() -> None:
        gen = feed.stream((None, None), None)
        assert await gen.__anext__() == api_events.CONNECTED
        made = [api.create(f"r{i}", session="s", in_="1h") for i in range(3)]
        threading.Thread(target=feed.committed).start()  # as from the engine's thread
        frames = [await asyncio.wait_for(gen.__anext__(), 10) for _ in made]
        assert [f.split(b"\n")[0] for f in frames] == [b"event: created"] * 3
        assert all(r.id.encode() in f for r, f in zip(made, frames, strict=True))
        await gen.aclose()

    try:
        asyncio.run(asyncio.wait_for(run(), 60))
    finally:
        store.close()
