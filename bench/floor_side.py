"""The machine's floors under ``bench/run.py``'s rows, each in a fresh process like the
sides it is printed beside (``python bench/floor_side.py WORKLOAD DIR [args]``, one
JSON object out):

* ``waiter N SPAN``: a bare Python thread waiting for the same N deadlines, spread
  over SPAN seconds, with ``threading.Event.wait`` (the lateness of each wake-up:
  what any Python scheduler thread gets on this machine at that moment);
* ``commit N SYNC``: a bare ``sqlite3`` loop that inserts one row and commits, N
  times, in a file on the same disk, WAL, ``synchronous=SYNC`` (what the store runs
  at): the commit rate any one-by-one create is bounded by;
* ``bulk N SYNC``: the same rows inserted with one ``executemany`` and one commit.
"""

from __future__ import annotations

import json
import os
import sqlite3
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import cpu_s, percentiles  # noqa: E402


def waiter(n: int, span: float) -> dict:
    start = time.time() + 1.0
    dues = [start + span * i / n for i in range(n)]
    late_ms: list[float] = []
    wake = threading.Event()

    def run() -> None:
        for due in dues:
            while (left := due - time.time()) > 0:
                wake.wait(left)
            late_ms.append((time.time() - due) * 1000)

    thread = threading.Thread(target=run)
    c0 = cpu_s()
    thread.start()
    thread.join()
    return {"n": n, "delivered": len(late_ms), "cpu_s": cpu_s() - c0, **percentiles(late_ms)}


def _open(folder: Path, sync: str) -> sqlite3.Connection:
    conn = sqlite3.connect(folder / "floor.db", isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute(f"PRAGMA synchronous={sync}")
    conn.execute(
        "CREATE TABLE IF NOT EXISTS reminders (id TEXT PRIMARY KEY, session_id TEXT, "
        "text TEXT, next_fire_at INTEGER)"
    )
    conn.execute("CREATE INDEX IF NOT EXISTS due ON reminders (next_fire_at)")
    return conn


def commit(folder: Path, n: int, sync: str) -> dict:
    conn = _open(folder, sync)
    now_us = time.time_ns() // 1000
    c0, t0 = cpu_s(), time.perf_counter()
    for i in range(n):
        conn.execute("BEGIN IMMEDIATE")
        conn.execute(
            "INSERT INTO reminders VALUES (?, ?, ?, ?)",
            (f"rem_{i:012d}", f"s{i % 50}", f"reminder {i}", now_us + 3_600_000_000 + i),
        )
        conn.execute("COMMIT")
    dt = time.perf_counter() - t0
    return {"n": n, "per_s": n / dt, "cpu_ms_each": (cpu_s() - c0) * 1000 / n}


def bulk(folder: Path, n: int, sync: str) -> dict:
    conn = _open(folder, sync)
    now_us = time.time_ns() // 1000
    rows = [
        (f"rem_{i:012d}", f"s{i % 50}", f"bench {i}", now_us + 3_600_000_000 + i) for i in range(n)
    ]
    c0, t0 = cpu_s(), time.perf_counter()
    conn.execute("BEGIN IMMEDIATE")
    conn.executemany("INSERT INTO reminders VALUES (?, ?, ?, ?)", rows)
    conn.execute("COMMIT")
    dt = time.perf_counter() - t0
    return {"n": n, "per_s": n / dt, "cpu_ms_each": (cpu_s() - c0) * 1000 / n}


WORKLOADS = {
    "waiter": lambda d, a: waiter(int(a[0]), float(a[1])),
    "commit": lambda d, a: commit(d, int(a[0]), a[1] if len(a) > 1 else "FULL"),
    "bulk": lambda d, a: bulk(d, int(a[0]), a[1] if len(a) > 1 else "FULL"),
}

if __name__ == "__main__":
    name, folder, *rest = sys.argv[1:]
    os.makedirs(folder, exist_ok=True)
    print(json.dumps(WORKLOADS[name](Path(folder), rest)))
