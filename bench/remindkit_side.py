"""remindkit's side of the benchmarks. Each workload runs in a fresh process
(``python bench/remindkit_side.py WORKLOAD DIR [args]``) and prints one JSON
object. Delivery is a no-op adapter that records when it is handed each fire."""

from __future__ import annotations

import json
import resource
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import cpu_s, percentiles  # noqa: E402

import remindkit as rk  # noqa: E402
from remindkit.clock import format_utc, from_us, to_us  # noqa: E402
from remindkit.models import Fire, Session  # noqa: E402
from remindkit.sessions.base import TurnResult  # noqa: E402
from remindkit.sessions.registry import Adapters  # noqa: E402


class NoopSessions:
    """A bench adapter: records the moment each fire is handed to it."""

    name = "noop"
    shared = False

    def __init__(self) -> None:
        self.late_ms: list[float] = []
        self.keys: list[str] = []
        self.last_us = 0
        self.lock = threading.Lock()
        self.first_at: float | None = None

    def can_deliver(self, session: Session) -> bool:
        return True

    def run_turn(self, session: Session, message: str, fires: Sequence[Fire]) -> TurnResult:
        now = time.time_ns() // 1000
        with self.lock:
            if self.first_at is None:
                self.first_at = time.perf_counter()
            for f in fires:
                self.late_ms.append((now - to_us(f.due_at)) / 1000)
                self.keys.append(f.key)
            self.last_us = now
        return TurnResult(True)


def settings_for(folder: Path, url: str | None = None) -> rk.Settings:
    s = rk.Settings.from_env(env={}, home=folder, tz="UTC", db_url=url)
    return s.with_limits(per_session=None, total=None, min_period_s=1)


def open_bench(
    folder: Path, url: str | None = None
) -> tuple[rk.SqlStore, rk.Reminders, rk.Settings]:
    settings = settings_for(folder, url)
    db = url or f"sqlite:///{folder / 'remindkit.db'}"
    if not hasattr(rk, "build"):  # run.py --remindkit: a checkout from before the composition root
        store = rk.open_store(db, settings=settings)
        return store, rk.Reminders(store, settings=settings), settings
    graph = rk.build(settings, db=db)
    return graph.store, graph.api, settings


def bulk(api: rk.Reminders, dues_us: Sequence[int], sessions: int) -> None:
    """Load one-shots through the export format (one transaction)."""
    lines = []
    for i, due in enumerate(dues_us):
        at = format_utc(from_us(due))
        lines.append(
            json.dumps(
                {
                    "type": "reminder",
                    "id": f"rem_b{i:09d}",
                    "session": f"s{i % sessions}",
                    "text": f"bench {i}",
                    "schedule": {"v": 1, "kind": "at", "tz": "UTC", "first_at": at, "repeat": 1},
                    "state": "active",
                    "next_fire_at": at,
                    "created_at": "2026-01-01T00:00:00Z",
                }
            )
        )
    sess = [
        json.dumps(
            {
                "type": "session",
                "id": f"s{j}",
                "adapter": "noop",
                "created_at": "2026-01-01T00:00:00Z",
                "last_active_at": "2026-01-01T00:00:00Z",
            }
        )
        for j in range(sessions)
    ]
    api.import_(sess + lines)


def engine_for(store: rk.SqlStore, settings: rk.Settings) -> tuple[rk.Engine, NoopSessions]:
    noop = NoopSessions()
    if not hasattr(rk, "build"):  # a checkout from before the composition root
        return rk.Engine(store, settings=settings, adapters=Adapters(noop), can_alert=False), noop
    graph = rk.build(settings, store=store, adapters=Adapters(noop))
    return graph.engine(can_alert=False), noop


def spread(folder: Path, n: int, span: float, sessions: int) -> dict:
    store, api, settings = open_bench(folder)
    # The lead covers loading them (an import of n lines: seconds on a busy machine);
    # a first fire already due when the engine starts would time the loading instead.
    start = time.time() + 3.0 + n / 2500
    bulk(api, [int((start + span * i / n) * 1e6) for i in range(n)], sessions)
    engine, noop = engine_for(store, settings)
    c0 = cpu_s()
    engine.start()
    started_late = time.time() > start - 0.5
    while len(noop.late_ms) < n and time.time() < start + span + 30:
        time.sleep(0.05)
    engine.stop()
    return {
        "n": n,
        "delivered": len(noop.late_ms),
        "cpu_s": cpu_s() - c0,
        "started_late": started_late,
        **percentiles(noop.late_ms),
    }


def burst(folder: Path, n: int, sessions: int, url: str | None = None) -> dict:
    store, api, settings = open_bench(folder, url)
    due = time.time() + 3.0
    bulk(api, [int(due * 1e6)] * n, sessions)
    engine, noop = engine_for(store, settings)
    engine.start()
    while len(noop.late_ms) < n and time.time() < due + 30:
        time.sleep(0.01)
    engine.stop()
    return {
        "n": n,
        "delivered": len(noop.late_ms),
        "drain_s": (noop.last_us / 1e6) - due,
        "duplicates": len(noop.keys) - len(set(noop.keys)),
        **percentiles(noop.late_ms),
    }


def create_rate(folder: Path, n: int) -> dict:
    store, api, _settings = open_bench(folder)
    c0, t0 = cpu_s(), time.perf_counter()
    for i in range(n):
        api.create(f"reminder {i}", session=f"s{i % 50}", in_="1h")
    dt = time.perf_counter() - t0
    return {"n": n, "per_s": n / dt, "cpu_ms_each": (cpu_s() - c0) * 1000 / n}


def import_rate(folder: Path, n: int) -> dict:
    store, api, _settings = open_bench(folder)
    now = time.time()
    lines = list(_lines([int((now + 3600 + i) * 1e6) for i in range(n)]))
    c0, t0 = cpu_s(), time.perf_counter()
    api.import_(lines)
    dt = time.perf_counter() - t0
    return {"n": n, "per_s": n / dt, "cpu_ms_each": (cpu_s() - c0) * 1000 / n}


def _lines(dues_us):
    for i, due in enumerate(dues_us):
        at = format_utc(from_us(due))
        yield json.dumps(
            {
                "type": "reminder",
                "id": f"rem_i{i:09d}",
                "session": f"s{i % 50}",
                "text": f"bench {i}",
                "schedule": {"v": 1, "kind": "at", "tz": "UTC", "first_at": at, "repeat": 1},
                "state": "active",
                "next_fire_at": at,
                "created_at": "2026-01-01T00:00:00Z",
            }
        )


def big_store_prepare(folder: Path, n: int) -> dict:
    store, api, _settings = open_bench(folder)
    now = time.time()
    dues = [int((now + 86_400 + i) * 1e6) for i in range(n - 1)] + [int((now - 60) * 1e6)]
    bulk(api, dues, 100)
    size = (folder / "remindkit.db").stat().st_size
    return {"n": n, "db_mb": size / 1e6}


def _settled(engine: rk.Engine) -> bool:
    st = engine.status
    written = None if st is None else st._written_us
    return (
        engine.dispatcher.idle
        and st is not None
        and not st._pending
        and written is not None
        and written >= engine._flushed_us
    )


def big_store_run(folder: Path, idle_s: float) -> dict:
    """Store already prepared; open it, then time engine start -> first overdue fire,
    then idle CPU over ``idle_s`` and the peak RSS."""
    store, api, settings = open_bench(folder)
    store.reminders.count_reminders()  # store open and warm
    engine, noop = engine_for(store, settings)
    t0 = time.perf_counter()
    engine.start()
    while noop.first_at is None and time.perf_counter() - t0 < 10:
        time.sleep(0.0002)
    first_ms = ((noop.first_at or time.perf_counter()) - t0) * 1000
    # Idle from when the engine is done with the fire: its outcome written and the
    # status file written after that (a summary of 100,000 reminders, 45-80 ms, is
    # the fire's aftermath, not idle cost; a fixed 2 s left it inside the window
    # when the machine was slow).
    deadline = time.perf_counter() + 30
    while time.perf_counter() < deadline and not _settled(engine):
        time.sleep(0.05)
    c0 = cpu_s()
    w0 = time.perf_counter()
    time.sleep(idle_s)
    cpu = cpu_s() - c0
    wall = time.perf_counter() - w0
    engine.stop()
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {
        "first_fire_ms": first_ms,
        "idle_cpu_pct": 100 * cpu / wall,
        "peak_rss_mb": rss_mb,
        "active": store.reminders.count_reminders(states=["active"]),
    }


def cross_process_engine(folder: Path, url: str, n: int, out: Path) -> dict:
    """The engine side: run until ``n`` fires were handed over; write lateness."""
    store, api, settings = open_bench(folder, url)
    engine, noop = engine_for(store, settings)
    engine.start()
    (folder / "engine-ready").write_text("1")
    deadline = time.time() + 60 + n
    while len(noop.late_ms) < n and time.time() < deadline:
        time.sleep(0.05)
    engine.stop()
    result = {"n": n, "delivered": len(noop.late_ms), **percentiles(noop.late_ms)}
    out.write_text(json.dumps(result))
    return result


def cross_process_creator(folder: Path, url: str, n: int, lead_ms: float) -> dict:
    store, api, settings = open_bench(folder, url)
    store.sessions.put_session(Session("x", adapter="noop"), now_us=to_us(api.clock.now()))
    for i in range(n):
        due = time.time() + lead_ms / 1000
        api.create(f"quick {i}", session="x", at=format_utc(from_us(int(due * 1e6))))
        time.sleep(lead_ms / 1000 + 0.1)
    return {"created": n}


def pg_engine(folder: Path, url: str, out: Path, n: int, seconds: float) -> dict:
    store, api, settings = open_bench(folder, url)
    engine, noop = engine_for(store, settings)
    engine.start()
    (out.with_suffix(".ready")).write_text("1")
    deadline = time.time() + seconds
    while time.time() < deadline:
        time.sleep(0.05)
    engine.stop()
    out.write_text(
        json.dumps({"keys": noop.keys, "last_us": noop.last_us, "late_ms": noop.late_ms})
    )
    return {"delivered": len(noop.keys)}


def pg_load(folder: Path, url: str, n: int, due: float, sessions: int) -> dict:
    store, api, settings = open_bench(folder, url)
    bulk(api, [int(due * 1e6)] * n, sessions)
    return {"loaded": n}


def init(folder: Path, url: str | None = None) -> dict:
    store, _api, _settings = open_bench(folder, url)
    store.close()
    return {"created": str(folder)}


WORKLOADS = {
    "init": lambda d, a: init(d, a[0] if a else None),
    "spread": lambda d, a: spread(d, int(a[0]), float(a[1]), int(a[2])),
    "burst": lambda d, a: burst(d, int(a[0]), int(a[1]), a[2] if len(a) > 2 else None),
    "create": lambda d, a: create_rate(d, int(a[0])),
    "import": lambda d, a: import_rate(d, int(a[0])),
    "big_prepare": lambda d, a: big_store_prepare(d, int(a[0])),
    "big_run": lambda d, a: big_store_run(d, float(a[0])),
    "cross_engine": lambda d, a: cross_process_engine(d, a[0], int(a[1]), Path(a[2])),
    "cross_creator": lambda d, a: cross_process_creator(d, a[0], int(a[1]), float(a[2])),
    "pg_engine": lambda d, a: pg_engine(d, a[0], Path(a[1]), int(a[2]), float(a[3])),
    "pg_load": lambda d, a: pg_load(d, a[0], int(a[1]), float(a[2]), int(a[3])),
}

if __name__ == "__main__":
    name, folder, *rest = sys.argv[1:]
    print(json.dumps(WORKLOADS[name](Path(folder), rest)))
