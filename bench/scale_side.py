"""The workloads of ``bench/scale.py``, each in a fresh process
(``python bench/scale_side.py WORKLOAD DIR URL [args]``, one JSON object out):

* ``fill N PER_SESSION``: N one-shot reminders written straight into the tables, the
  way an import writes them (one ``created`` event each), PER_SESSION to a session,
  all due in a day or more except one overdue; through the driver in big batches
  (SQLite ``executemany``, PostgreSQL ``COPY``): a bench's bulk path, not N creates;
* ``engine IDLE_S``: engine start to the overdue fire, then the engine's CPU over
  IDLE_S seconds once it has settled, and the process's peak RSS;
* ``create N``: N creates one by one through the reminders API;
* ``list SESSION ROUNDS``: ``Reminders.list`` of one session, median;
* ``summary ROUNDS``: the summary an engine writes to the status file (and ``status
  --line`` reads when no engine runs), median.
"""

from __future__ import annotations

import json
import os
import resource
import statistics
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import remindkit_side as rs  # noqa: E402
from common import cpu_s  # noqa: E402

from remindkit.clock import format_utc, from_us  # noqa: E402
from remindkit.models import Reminder  # noqa: E402
from remindkit.schedules import Schedule  # noqa: E402
from remindkit.store.rows import REMINDER_COLUMNS, new_session_row, reminder_values  # noqa: E402

BATCH = 50_000
SESSION_COLUMNS = ("id", "adapter", "config", "state", "created_at", "last_active_at")
EVENT_COLUMNS = "at, kind, surface, session_id, reminder_id, occurrence_id, detail"
DETAIL = json.dumps({"imported": True, "state": "active"}, separators=(",", ":"))


def rows(n: int, per_session: int, now_us: int) -> Any:
    """(reminder row, event row) for each of the n: the template is a real reminder's
    row (``reminder_values``); each gets its id, session, text, due time and spec."""
    at = format_utc(from_us(now_us))
    template = Reminder(
        id="rem_template",
        session="s0",
        text="t",
        schedule=Schedule.from_json(
            json.dumps({"v": 1, "kind": "at", "tz": "UTC", "first_at": at, "repeat": 1})
        ),
        next_fire_at=from_us(now_us),
        created_at=from_us(now_us),
        updated_at=from_us(now_us),
        source="import",
    )
    base = list(reminder_values(template))
    spec = base[5]
    assert at in spec
    for i in range(n):
        due = now_us - 60_000_000 if i == n - 1 else now_us + 86_400_000_000 + i * 1000
        sid = f"s{i // per_session}"
        rid = f"rem_s{i:011d}"
        row = base.copy()
        row[0], row[1], row[3] = rid, sid, f"scale {i}"
        row[5] = spec.replace(at, format_utc(from_us(due)))
        row[8] = due
        yield tuple(row), (now_us, "created", "import", sid, rid, None, DETAIL)


def fill(folder: Path, url: str, n: int, per_session: int) -> dict:
    store, _api, _settings = rs.open_bench(folder, url)
    store.close()
    now_us = time.time_ns() // 1000
    sessions = [
        {**new_session_row(f"s{j}", now_us), "adapter": "noop"}  # the bench's adapter
        for j in range((n + per_session - 1) // per_session)
    ]
    t0 = time.perf_counter()
    if url.startswith("sqlite"):
        _fill_sqlite(folder / "remindkit.db", n, per_session, now_us, sessions)
    else:
        _fill_postgres(url, n, per_session, now_us, sessions)
    return {"n": n, "fill_s": time.perf_counter() - t0}


def _fill_sqlite(path: Path, n: int, per_session: int, now_us: int, sessions: list) -> None:
    import sqlite3

    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA synchronous=OFF")  # the fill's own commit; the store's stay FULL
    conn.execute("BEGIN IMMEDIATE")
    conn.executemany(
        f"INSERT INTO sessions ({', '.join(SESSION_COLUMNS)}) VALUES ({', '.join('?' * 6)})",
        [tuple(s[c] for c in SESSION_COLUMNS) for s in sessions],
    )
    marks = ", ".join("?" * len(REMINDER_COLUMNS.split(",")))
    rem_sql = f"INSERT INTO reminders ({REMINDER_COLUMNS}) VALUES ({marks})"
    ev_sql = f"INSERT INTO events ({EVENT_COLUMNS}) VALUES ({', '.join('?' * 7)})"
    batch_r: list = []
    batch_e: list = []
    for r, e in rows(n, per_session, now_us):
        batch_r.append(r)
        batch_e.append(e)
        if len(batch_r) >= BATCH:
            conn.executemany(rem_sql, batch_r)
            conn.executemany(ev_sql, batch_e)
            batch_r, batch_e = [], []
    conn.executemany(rem_sql, batch_r)
    conn.executemany(ev_sql, batch_e)
    conn.execute("COMMIT")
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.execute("ANALYZE")
    conn.close()


def _fill_postgres(url: str, n: int, per_session: int, now_us: int, sessions: list) -> None:
    import psycopg
    from sqlalchemy.engine import make_url

    parsed = make_url(url)
    options = parsed.query.get("options")
    raw = parsed.set(drivername="postgresql", query={}).render_as_string(hide_password=False)
    with psycopg.connect(raw, options=options) as conn, conn.cursor() as cur:
        with cur.copy(f"COPY sessions ({', '.join(SESSION_COLUMNS)}) FROM STDIN") as copy:
            for s in sessions:
                copy.write_row(tuple(s[c] for c in SESSION_COLUMNS))
        with cur.copy(f"COPY reminders ({REMINDER_COLUMNS}) FROM STDIN") as copy_r:
            events = []
            for r, e in rows(n, per_session, now_us):
                copy_r.write_row(r)
                events.append(e)
        with cur.copy(f"COPY events ({EVENT_COLUMNS}) FROM STDIN") as copy_e:
            for e in events:
                copy_e.write_row(e)
        conn.commit()
    with psycopg.connect(raw, options=options, autocommit=True) as conn:
        conn.execute("ANALYZE")


def engine(folder: Path, url: str, idle_s: float) -> dict:
    store, _api, settings = rs.open_bench(folder, url)
    store.reminders.count_reminders()  # store open and warm
    eng, noop = rs.engine_for(store, settings)
    t0 = time.perf_counter()
    eng.start()
    while noop.first_at is None and time.perf_counter() - t0 < 60:
        time.sleep(0.0002)
    first_ms = ((noop.first_at or time.perf_counter()) - t0) * 1000
    deadline = time.perf_counter() + 120
    while time.perf_counter() < deadline and not rs._settled(eng):
        time.sleep(0.05)
    settled_ms = (time.perf_counter() - t0) * 1000
    c0, w0 = cpu_s(), time.perf_counter()
    time.sleep(idle_s)
    cpu = cpu_s() - c0
    wall = time.perf_counter() - w0
    eng.stop()
    return {
        "first_fire_ms": first_ms,
        "settled_ms": settled_ms,
        "idle_cpu_pct": 100 * cpu / wall,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "fired": len(noop.keys),
    }


def create(folder: Path, url: str, n: int) -> dict:
    store, api, _settings = rs.open_bench(folder, url)
    api.create("warm", session="c0", in_="2h")
    c0, t0 = cpu_s(), time.perf_counter()
    for i in range(n):
        api.create(f"new {i}", session=f"c{i % 50}", in_="2h")
    dt = time.perf_counter() - t0
    return {"per_s": n / dt, "cpu_ms_each": (cpu_s() - c0) * 1000 / n}


def listing(folder: Path, url: str, session: str, rounds: int) -> dict:
    store, api, _settings = rs.open_bench(folder, url)
    got = api.list(session=session)
    ms = []
    c0 = cpu_s()
    for _ in range(rounds):
        t0 = time.perf_counter()
        api.list(session=session)
        ms.append((time.perf_counter() - t0) * 1000)
    return {
        "n": len(got),
        "median_ms": statistics.median(ms),
        "cpu_ms": (cpu_s() - c0) * 1000 / rounds,
    }


def summary(folder: Path, url: str, rounds: int) -> dict:
    store, _api, _settings = rs.open_bench(folder, url)
    ms = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        store.reports.status_summary(now_us=time.time_ns() // 1000)
        ms.append((time.perf_counter() - t0) * 1000)
    return {"median_ms": statistics.median(ms)}


WORKLOADS = {
    "fill": lambda d, u, a: fill(d, u, int(a[0]), int(a[1])),
    "engine": lambda d, u, a: engine(d, u, float(a[0])),
    "create": lambda d, u, a: create(d, u, int(a[0])),
    "list": lambda d, u, a: listing(d, u, a[0], int(a[1])),
    "summary": lambda d, u, a: summary(d, u, int(a[0])),
}

if __name__ == "__main__":
    name, folder, url, *rest = sys.argv[1:]
    os.makedirs(folder, exist_ok=True)
    print(json.dumps(WORKLOADS[name](Path(folder), url, rest)))
