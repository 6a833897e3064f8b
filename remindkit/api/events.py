"""The event stream: the store's audit trail (``events`` table) as server-sent events.

One thread per server tails the trail by id and hands each new event to the
connected streams (a bounded queue each). While a stream is open, it reads at
once when a wake-up hint comes (a change through any process on the store) or
this process's engine says it committed fires or outcomes (``events.Written``),
and otherwise every ``POLL_S``, so fires made by another engine on a shared
store reach the stream too; with none open it reads nothing. A stream that
resumes (``Last-Event-ID``) reads what it missed from the store, so resuming
works across restarts; a stream whose queue overflows does the same instead of
dropping events.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from fastapi.sse import KEEPALIVE_COMMENT, format_sse_event

from ..checks import session_name
from ..errors import LimitExceeded
from ..store import SqlStore
from ..wakeup import Waiter

log = logging.getLogger(__name__)

POLL_S = 0.2  # between reads when no hint comes (fires of other engines on the store)
QUEUE_MAX = 1_000  # events queued for one stream before it re-reads from the store
STREAMS_MAX = 1_000  # streams one server keeps open
STREAMS_PER_CREDENTIAL = 100  # streams of one token (or of the user's own credential)
RECHECK_S = 0.5  # open streams' tokens and projects are checked this often
PAGE = 500
KEEPALIVE_S = 15.0  # a comment line on a stream this long without an event


@dataclass(eq=False)
class _Stream:
    loop: asyncio.AbstractEventLoop
    queue: asyncio.Queue[dict[str, Any]]
    project: str | None
    session: str | None
    overflow: bool = False
    start: int | None = None  # the last event id it does not want; None while it looks
    credential: str = "local"  # the token id it was opened with ("local": the user's own)
    ended: str | None = None  # why the server ends it (the token revoked, the feature off)
    mark: str = ""  # the user's own credential as it was when the stream opened
    quiet_since: float = field(default_factory=time.monotonic)  # offered nothing since


class EventFeed:
    def __init__(self, store: SqlStore, *, poll_s: float = POLL_S, local_mark: Any = None) -> None:
        self.store: Any = store  # the audit trail's readers (events_after, last_event_id)
        self.poll_s = poll_s
        self.local_mark = local_mark  # () -> a mark of the user's own credential as it is now
        self._checked = 0.0
        self._kept = 0.0  # when the streams were last looked at for a keep-alive
        self._streams: set[_Stream] = set()
        self._lock = threading.Lock()
        self._reading = threading.Lock()  # one reader of the tail at a time (last_id)
        self._projects: dict[str, str | None] = {}
        self._waiter = Waiter()  # pokes, the store's hints, the stop
        self._opened = threading.Event()  # a stream opened (or the stop): ends an idle wait
        self._behind = False  # reads were left out while no stream was open
        self._thread: threading.Thread | None = None
        self.last_id = 0

    # -- the tail ----------------------------------------------------------------------

    def start(self) -> EventFeed:
        self.last_id = self.store.events.last_event_id()
        self._thread = threading.Thread(target=self._run, name="remindkit-event-feed", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._waiter.stop()
        self._opened.set()
        if self._thread is not None:
            self._thread.join(5)
            if self._thread.is_alive():
                return
        self._waiter.close()

    def committed(self) -> None:
        """This process's engine committed fires or outcomes (called from its thread):
        read them on the streams' event loop, which then writes them to the streams
        without a hand-over from this feed's thread (one thread's wake-up fewer
        between a fire's commit and its streams: each cost 1-10 ms on a busy
        machine). With streams on several loops, or none, the feed thread reads."""
        with self._lock:
            loops = {s.loop for s in self._streams}
        if len(loops) != 1:
            self.poke()
            return
        (loop,) = loops
        try:
            loop.call_soon_threadsafe(self._read_here)
        except RuntimeError:  # that loop is closed
            self.poke()

    def _read_here(self) -> None:
        """On the streams' event loop: read what is new and offer it from here. If the
        feed thread is reading, it reads again right after (the poke is kept for its
        next wait): its read may have begun before this commit."""
        if not self._reading.acquire(blocking=False):
            self.poke()
            return
        try:
            if self._catch_up_to_streams():
                self._read_new(here=asyncio.get_running_loop())
            else:
                self.poke()
        except Exception:  # the store is away: the feed thread tries again
            log.warning("event feed: reading the store failed", exc_info=True)
            self.poke()
        finally:
            self._reading.release()

    def poke(self) -> None:
        """Read now: this process's engine committed fires or outcomes, or a stream
        opened."""
        self._waiter.poke()

    def _run(self) -> None:
        waiter = self._waiter
        # retry: a store that listens but cannot now (a PostgreSQL LISTEN that dropped)
        # is listened to again each round; meanwhile the feed reads every poll_s.
        # One read per wake-up: a poke or a hint comes after its commit (and a poke
        # during a read is kept for the next wait: Waiter.drain), so a read then sees
        # it; re-reads a few ms later took the GIL from the event loop while it wrote
        # the events just read to the streams.
        with waiter.listening(self.store.wake, retry=True):
            while not waiter.stopped:
                self._opened.clear()
                if self.open_streams():
                    waiter.wait(self.poll_s)
                else:
                    # No stream to read for: sleep through the hints of every write
                    # (a create through this server woke this thread each time); they
                    # wait in the listener, drained by the first wait once one opens.
                    self._opened.wait(self.poll_s)
                self._recheck()
                self._keep_alive()
                try:
                    with self._reading:
                        if self._catch_up_to_streams():
                            self._read_new()
                except Exception:  # the store is away: try again at the next round
                    log.warning("event feed: reading the store failed", exc_info=True)

    def _keep_alive(self) -> None:
        """A keep-alive comment for each stream offered nothing for ``KEEPALIVE_S``
        (looked at about once a second). From here rather than a timeout around each
        stream's wait for its next event: one timer made and cancelled per stream per
        event was a tenth of the event loop's work for a fire at 100 streams."""
        now = time.monotonic()
        if now - self._kept < 1.0:
            return
        self._kept = now
        with self._lock:
            quiet = [s for s in self._streams if now - s.quiet_since >= KEEPALIVE_S]
        offers: dict[asyncio.AbstractEventLoop, list[tuple[_Stream, list[dict[str, Any]]]]] = {}
        for s in quiet:
            s.quiet_since = now
            offers.setdefault(s.loop, []).append((s, [_KEEPALIVE]))
        for loop, some in offers.items():
            loop.call_soon_threadsafe(_offer_all, some)

    def _recheck(self) -> None:
        """End the streams whose token was revoked or whose project's feature was
        turned off (or, for the user's own, whose credential was replaced): each is
        read every ``RECHECK_S``, so a stream ends within a second of it."""
        now = time.monotonic()
        if now - self._checked < RECHECK_S:
            return
        self._checked = now
        with self._lock:
            streams = list(self._streams)
        if not streams:
            return
        try:
            tokens = {t["id"] for t in self.store.projects.list_tokens()}
            projects = {
                p: self.store.projects.get_project(p)
                for p in {s.project for s in streams if s.project is not None}
            }
            local = self.local_mark() if self.local_mark is not None else ""
        except Exception:  # the store is away: look again at the next round
            log.warning("event feed: checking the streams' tokens failed", exc_info=True)
            return
        for s in streams:
            why = None
            if s.credential == "local" and s.mark != local:
                why = "credential_changed"
            elif s.credential != "local" and s.credential not in tokens:
                why = "token_revoked"
            elif s.project is not None:
                got = projects.get(s.project)
                if got is None or not got["features"]["reminders"]:
                    why = "feature_disabled"
            if why is not None and s.ended is None:
                s.ended = why
                s.loop.call_soon_threadsafe(_offer, s, [_END])

    def _catch_up_to_streams(self) -> bool:
        """Whether to read now. With no stream open, nothing is read (a busy server
        with no listener does no work per write); the first stream to open after
        that says where it starts, and the tail goes on from there."""
        with self._lock:
            starts = [s.start for s in self._streams]
            if not starts:
                self._behind = True
                return False
            if not self._behind:
                return True
            if any(start is None for start in starts):
                return False  # a stream is still reading where it starts: next round
            self.last_id = max(self.last_id, min(s for s in starts if s is not None))
            self._behind = False
            return True

    def _read_new(self, here: asyncio.AbstractEventLoop | None = None) -> int:
        """Read what is new since ``last_id`` and offer it to the streams (holding
        ``_reading``); ``here``: the loop this runs on."""
        total = 0
        while True:
            rows = self.store.events.tail(self.last_id, limit=PAGE)
            if not rows:
                return total
            items = [self.payload(*row) for row in rows]
            self.last_id = items[-1]["id"]
            total += len(items)
            with self._lock:
                streams = list(self._streams)
            # One hand-over per event loop for all its streams: a call_soon_threadsafe
            # per stream woke the loop once per stream, and this thread and the loop
            # took the GIL from each other a hundred times for one fire.
            scoped: dict[tuple[str | None, str | None], list[dict[str, Any]]] = {}
            offers: dict[asyncio.AbstractEventLoop, list[tuple[_Stream, list[dict[str, Any]]]]] = {}
            now = time.monotonic()
            for s in streams:
                key = (s.project, s.session)
                mine = scoped.get(key)
                if mine is None:
                    mine = scoped[key] = [i for i in items if _visible(i, s.project, s.session)]
                if mine:
                    s.quiet_since = now
                    offers.setdefault(s.loop, []).append((s, mine))
            for loop, some in offers.items():
                if loop is here:  # after what the feed thread handed over before (FIFO)
                    loop.call_soon(_offer_all, some)
                else:
                    loop.call_soon_threadsafe(_offer_all, some)
            if len(rows) < PAGE:
                return total

    def payload(
        self,
        event: Any,
        fired: dict[str, Any] | None = None,
        project: str | None = None,
    ) -> dict[str, Any]:
        """An event as streams send it, framed. ``fired`` and ``project`` as the
        store's :meth:`~remindkit.store.events.Events.tail` reads them beside the
        event: a fired event's reminder (its text, label, alarm, announce, urgency as
        they are now) and the project of its session's row."""
        data = event.to_dict()
        sid = data.get("session")
        data["project"] = self._project_of(sid, project) if sid else None
        if sid:  # as its project names it (checks.session_key)
            data["session"] = session_name(sid)
        if data["kind"] == "fired" and data.get("reminder_id") and fired is not None:
            data["reminder"] = fired
        # Framed once, not once per stream: every stream sends these same bytes.
        data["_frame"] = format_sse_event(
            data_str=json.dumps(data, ensure_ascii=False, separators=(",", ":")),
            event=data["kind"],
            id=str(data["id"]),
        )
        return data

    def _project_of(self, session: str, read: str | None) -> str | None:
        """The project of ``session``: as first read (a session never changes project),
        from its row as the tail read it (``read``)."""
        if session not in self._projects:
            if len(self._projects) > 100_000:
                self._projects.clear()
            self._projects[session] = read
        return self._projects[session]

    # -- one stream ----------------------------------------------------------------------

    def open_streams(self) -> int:
        with self._lock:
            return len(self._streams)

    def check_room(self, who: Any = None) -> None:
        """Refuse (``too_many_streams``) a stream past its credential's share, or past
        the server's bound; the user's own credential always has its share left."""
        with self._lock:
            self._check_room(_credential_of(who))

    def _check_room(self, credential: str) -> None:
        mine = sum(1 for s in self._streams if s.credential == credential)
        if mine >= STREAMS_PER_CREDENTIAL:
            raise LimitExceeded(
                f"this credential has {STREAMS_PER_CREDENTIAL} event streams open; close one first",
                code="too_many_streams",
            )
        room = STREAMS_MAX
        if credential != "local":  # the others leave the user's own share free
            room -= STREAMS_PER_CREDENTIAL
            total = sum(1 for s in self._streams if s.credential != "local")
        else:
            total = len(self._streams)
        if total >= room:
            raise LimitExceeded(
                f"this server has {len(self._streams)} event streams open; try again later",
                code="too_many_streams",
            )

    async def stream(
        self, scope: tuple[str | None, str | None], after: int | None, *, who: Any = None
    ) -> AsyncIterator[bytes]:
        project, session = scope
        s = _Stream(asyncio.get_running_loop(), asyncio.Queue(QUEUE_MAX), project, session)
        s.credential = _credential_of(who)
        if s.credential == "local" and self.local_mark is not None:
            s.mark = self.local_mark()
        with self._lock:
            self._check_room(s.credential)
            self._streams.add(s)
            self._opened.set()
            behind = self._behind
            if after is not None:
                s.start = after
            elif not behind:
                s.start = self.last_id
        try:
            if s.start is None:  # the tail is not kept while no stream is open: ask the store
                last: int = await asyncio.to_thread(self.store.events.last_event_id)
                s.start = last
                self.poke()
            else:
                last = s.start
            yield CONNECTED
            if after is not None:
                async for item in self._catch_up(s, last):
                    last = item["id"]
                    yield item["_frame"]
            # The streaming response ends the stream (cancelling this generator) when
            # the client goes away.
            while True:
                item = await s.queue.get()
                if s.ended is not None:  # the server ends it: said in a comment, then closed
                    yield f": ended {s.ended}\n\n".encode()
                    return
                if item is _KEEPALIVE:  # offered nothing for KEEPALIVE_S (_keep_alive)
                    yield KEEPALIVE_COMMENT
                    continue
                if s.overflow:  # the queue filled up: read the rest from the store
                    s.overflow = False
                    _drain(s.queue)
                    async for item in self._catch_up(s, last):
                        last = item["id"]
                        yield item["_frame"]
                    continue
                if item["id"] > last:
                    last = item["id"]
                    yield item["_frame"]
        finally:
            with self._lock:
                self._streams.discard(s)

    async def _catch_up(self, s: _Stream, after: int) -> AsyncIterator[dict[str, Any]]:
        while True:
            rows = await asyncio.to_thread(self.store.events.tail, after, limit=PAGE)
            if not rows:
                return
            for row in rows:
                item = self.payload(*row)
                after = item["id"]
                if _visible(item, s.project, s.session):
                    yield item
            if len(rows) < PAGE:
                return


_END: dict[str, Any] = {"id": -1}
_KEEPALIVE: dict[str, Any] = {"id": -1}


def _credential_of(who: Any) -> str:
    token_id = getattr(who, "token_id", None)
    return "local" if token_id in (None, "local") else str(token_id)


def _visible(item: dict[str, Any], project: str | None, session: str | None) -> bool:
    if project is not None and item.get("project") != project:
        return False
    return not (session is not None and item.get("session") != session)


def _offer_all(offers: list[tuple[_Stream, list[dict[str, Any]]]]) -> None:
    for s, items in offers:
        _offer(s, items)


def _offer(s: _Stream, items: list[dict[str, Any]]) -> None:
    for item in items:
        try:
            s.queue.put_nowait(item)
        except asyncio.QueueFull:
            s.overflow = True
            return


def _drain(q: asyncio.Queue[Any]) -> None:
    while True:
        try:
            q.get_nowait()
        except asyncio.QueueEmpty:
            return


CONNECTED = format_sse_event(comment="connected", retry=1000)
