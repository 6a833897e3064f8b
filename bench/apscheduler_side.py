"""APScheduler 3.11 + SQLAlchemyJobStore on the same SQLite disk: the peer.

Each workload runs in a fresh process and prints one JSON object. A job is a
module-level function that records how late it started (the analogue of
remindkit handing a fire to delivery)."""

from __future__ import annotations

import json
import logging
import resource
import subprocess
import sys
import threading
import time
from datetime import datetime, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from apscheduler.executors.pool import ThreadPoolExecutor  # noqa: E402
from apscheduler.jobstores.sqlalchemy import SQLAlchemyJobStore  # noqa: E402
from apscheduler.schedulers.background import BackgroundScheduler  # noqa: E402
from common import cpu_s, percentiles  # noqa: E402

logging.getLogger("apscheduler").setLevel(logging.ERROR)
LATE: list[float] = []
LAST = [0.0]
FIRST = [None]
CPU = [0.0]
LOCK = threading.Lock()
REF = "apscheduler_side:record"


def record(due_ts: float) -> None:
    now = time.time()
    with LOCK:
        if FIRST[0] is None:
            FIRST[0] = time.perf_counter()
        LATE.append((now - due_ts) * 1000)
        LAST[0] = now


def me():
    import apscheduler_side

    return apscheduler_side


def scheduler(folder: Path) -> BackgroundScheduler:
    store = SQLAlchemyJobStore(url=f"sqlite:///{folder / 'apscheduler.db'}")
    return BackgroundScheduler(
        jobstores={"default": store},
        executors={"default": ThreadPoolExecutor(10)},
        job_defaults={"misfire_grace_time": 3600, "coalesce": False},
        timezone="UTC",
    )


def add(s: BackgroundScheduler, i: int, due: float) -> None:
    s.add_job(
        REF, "date", run_date=datetime.fromtimestamp(due, timezone.utc), args=[due], id=f"j{i}"
    )


def run_jobs(folder: Path, offsets: list[float], grace: float) -> tuple[dict, float]:
    """:func:`load_and_run` in a fresh store, with a lead twice, then four and eight
    times what the adds are measured to take, until the jobs are in before they are due."""
    for attempt, factor in enumerate((2, 4, 8)):
        where = folder / f"try{attempt}"
        where.mkdir()
        try:
            return load_and_run(where, offsets, grace, factor)
        except LoadedLate:
            continue
    raise SystemExit("loading took longer than planned, three times")


class LoadedLate(Exception):
    pass


def load_and_run(
    folder: Path, offsets: list[float], grace: float, factor: float
) -> tuple[dict, float]:
    """Add a job due at ``start + offset`` for each offset, then run the scheduler until
    all have run (or ``grace`` seconds after the last is due). ``start`` is set once
    the time an add takes here is known: each ``add_job`` commits, and a busy disk
    takes several times longer than a quiet one."""
    s = scheduler(folder)
    s.start(paused=True)
    t0 = time.perf_counter()
    probe = min(100, len(offsets))
    for i in range(probe):
        add(s, 10_000_000 + i, time.time() + 86_400)
    per_add = (time.perf_counter() - t0) / probe
    s.remove_all_jobs()
    start = time.time() + factor * per_add * len(offsets) + 3
    dues = [start + o for o in offsets]
    for i, due in enumerate(dues):
        add(s, i, due)
    if time.time() > min(dues):
        s.shutdown(wait=False)
        raise LoadedLate()
    c0 = cpu_s()
    s.resume()
    m = me()
    while len(m.LATE) < len(dues) and time.time() < max(dues) + grace:
        time.sleep(0.01)
    s.shutdown(wait=False)
    m.CPU[0] = cpu_s() - c0
    return m, start


def spread(folder: Path, n: int, span: float) -> dict:
    m, _start = run_jobs(folder, [span * i / n for i in range(n)], 60)
    return {"n": n, "delivered": len(m.LATE), "cpu_s": m.CPU[0], **percentiles(m.LATE)}


def burst(folder: Path, n: int) -> dict:
    m, due = run_jobs(folder, [0.0] * n, 120)
    return {"n": n, "delivered": len(m.LATE), "drain_s": m.LAST[0] - due, **percentiles(m.LATE)}


def create_rate(folder: Path, n: int) -> dict:
    s = scheduler(folder)
    s.start(paused=True)
    base = time.time() + 3600
    c0, t0 = cpu_s(), time.perf_counter()
    for i in range(n):
        add(s, i, base + i)
    dt = time.perf_counter() - t0
    s.shutdown(wait=False)
    return {"n": n, "per_s": n / dt, "cpu_ms_each": (cpu_s() - c0) * 1000 / n}


def big_prepare(folder: Path, n: int) -> dict:
    s = scheduler(folder)
    s.start(paused=True)
    base = time.time() + 86_400
    for i in range(n - 1):
        add(s, i, base + i)
    add(s, n - 1, time.time() - 60)  # overdue
    s.shutdown(wait=False)
    return {"n": n, "db_mb": (folder / "apscheduler.db").stat().st_size / 1e6}


def big_run(folder: Path, idle_s: float) -> dict:
    s = scheduler(folder)
    m = me()
    t0 = time.perf_counter()
    s.start()
    while m.FIRST[0] is None and time.perf_counter() - t0 < 10:
        time.sleep(0.0002)
    first_ms = ((m.FIRST[0] or time.perf_counter()) - t0) * 1000
    time.sleep(2)
    c0, w0 = cpu_s(), time.perf_counter()
    time.sleep(idle_s)
    cpu = cpu_s() - c0
    wall = time.perf_counter() - w0
    s.shutdown(wait=False)
    return {
        "first_fire_ms": first_ms,
        "idle_cpu_pct": 100 * cpu / wall,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def cross_process(folder: Path, n: int, lead_ms: float) -> dict:
    """A runs the scheduler (one far job, so it sleeps); B adds jobs due ``lead_ms``
    later to the same store. Count how many ran within 5 s of their due time."""
    s = scheduler(folder)
    s.start(paused=True)
    add(s, 999_999, time.time() + 86_400)
    s.resume()
    m = me()
    for i in range(n):
        due = time.time() + lead_ms / 1000
        code = (
            f"import sys; sys.path.insert(0, {str(Path(__file__).parent)!r}); import apscheduler_side as a; "
            f"s = a.scheduler(__import__('pathlib').Path({str(folder)!r})); s.start(paused=True); "
            f"a.add(s, {i}, {due}); s.shutdown(wait=False)"
        )
        subprocess.run([sys.executable, "-c", code], check=True)
    time.sleep(5)
    s.shutdown(wait=False)
    return {"n": n, "ran_within_5s": len(m.LATE), **percentiles(m.LATE)}


WORKLOADS = {
    "spread": lambda d, a: spread(d, int(a[0]), float(a[1])),
    "burst": lambda d, a: burst(d, int(a[0])),
    "create": lambda d, a: create_rate(d, int(a[0])),
    "big_prepare": lambda d, a: big_prepare(d, int(a[0])),
    "big_run": lambda d, a: big_run(d, float(a[0])),
    "cross": lambda d, a: cross_process(d, int(a[0]), float(a[1])),
}

if __name__ == "__main__":
    name, folder, *rest = sys.argv[1:]
    print(json.dumps(WORKLOADS[name](Path(folder), rest)))
