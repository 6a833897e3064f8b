"""How the cost grows with the store: 10,000, 100,000 and 1,000,000 stored reminders, on
SQLite and on PostgreSQL, each measure in a fresh process, with the growth factor per
10× beside each figure; then PostgreSQL with 4 engines and 100,000 due at once.

    .venv/bin/python bench/scale.py                  # everything (about 25 minutes)
    .venv/bin/python bench/scale.py --quick          # 1,000 / 10,000 / 100,000, 20,000 due
    .venv/bin/python bench/scale.py --backends sqlite --sizes 10000,100000

The stores are filled by the bench's bulk path (``scale_side.py fill``: rows written
straight into the tables in big batches, one ``created`` event each, 100 reminders to a
session, all due in a day or more but one overdue), not by N API calls. Then, per store:

* engine start to the overdue fire, the engine's peak RSS, and its CPU while idle (once
  it has settled after that fire) — aims: first fire flat (index-bound), RSS under
  100 MB at a million, idle CPU under 0.1 % of a core;
* creates one by one through the reminders API (per s, CPU ms each);
* a session's list (its 100 reminders) through the reminders API, median — aim: flat;
* ``remindkit ls --session S`` as a command with no engine running, median wall and CPU;
* the summary an engine writes to the status file (what ``status --line`` reads),
  median: it counts every live reminder;
* the store's size (the SQLite file; PostgreSQL: the schema's tables and indexes).

PostgreSQL: REMINDKIT_BENCH_PG (default postgresql+psycopg://postgres@127.0.0.1:5432/test),
a schema of its own per store. Results also go to bench/results/scale-<time>.json.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

from common import load, machine, stamp  # noqa: E402
from pg_burst import drop_schema, pg_burst, pg_schema  # noqa: E402

PY = sys.executable
PER_SESSION = 100
# (metric, the key in a size's results, format, aim: "flat" (growth <= 2x per 10x), or a bound)
METRICS: list[tuple[str, str, str, str]] = [
    ("bulk fill (s)", "fill_s", "{:.1f}", "-"),
    ("engine start to first overdue fire (ms)", "first_fire_ms", "{:.1f}", "flat"),
    ("engine start to settled after it (ms)", "settled_ms", "{:.0f}", "-"),
    ("peak RSS of the engine (MB)", "peak_rss_mb", "{:.1f}", "< 100 MB at 1,000,000"),
    ("idle CPU (% of a core)", "idle_cpu_pct", "{:.3f}", "< 0.1 %"),
    ("create one by one (per s)", "create_per_s", "{:.0f}", "-"),
    ("create, CPU each (ms)", "create_cpu_ms", "{:.2f}", "-"),
    ("a session's list of 100, median (ms)", "list_ms", "{:.2f}", "flat"),
    ("`remindkit ls --session`, no engine, median wall (ms)", "ls_ms", "{:.0f}", "flat"),
    ("`remindkit ls --session`, no engine, median CPU (ms)", "ls_cpu_ms", "{:.0f}", "flat"),
    ("status file summary, median (ms)", "summary_ms", "{:.1f}", "-"),
    ("store size (MB)", "size_mb", "{:.1f}", "-"),
]


def side(*args: object, timeout: float = 3600) -> dict[str, Any]:
    os.sync()
    proc = subprocess.run(
        [PY, str(HERE / "scale_side.py"), *map(str, args)],
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"scale_side.py {args[:1]}: {proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def cli(folder: Path, url: str, argv: list[str], runs: int) -> dict[str, float]:
    """Median wall and CPU ms of ``remindkit ARGV`` with no engine on the store (bytecode
    cached in a folder of the run, as an installed package has it)."""
    env = {
        **os.environ,
        "REMINDKIT_HOME": str(folder),
        "REMINDKIT_DB": url,
        "REMINDKIT_TZ": "UTC",
        "REMINDKIT_HANDOFF": "0",
        "PYTHONPYCACHEPREFIX": str(folder / "pycache"),
        "PYTHONPATH": str(ROOT),
    }
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env.pop("REMINDKIT_SESSION", None)
    walls, cpus = [], []
    for i in range(runs + 2):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        proc = subprocess.run(
            [PY, "-m", "remindkit", *argv], env=env, capture_output=True, text=True, cwd=folder
        )
        wall = time.perf_counter() - t0
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        if proc.returncode != 0:
            raise RuntimeError(f"remindkit {argv}: {proc.stderr[-1000:]}")
        if i >= 2:  # two warm-up runs
            walls.append(wall * 1000)
            cpus.append(
                (after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime) * 1000
            )
    return {"ms": statistics.median(walls), "cpu_ms": statistics.median(cpus)}


def store_size_mb(folder: Path, url: str, schema: str | None, raw: str | None) -> float:
    if schema is None:
        return sum(p.stat().st_size for p in folder.glob("remindkit.db*") if p.is_file()) / 1e6
    import psycopg

    assert raw is not None
    with psycopg.connect(raw, autocommit=True) as conn:
        (total,) = conn.execute(
            "SELECT COALESCE(SUM(pg_total_relation_size(c.oid)), 0) FROM pg_class c "
            "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = %s AND c.relkind = 'r'",
            (schema,),
        ).fetchone()
    return int(total) / 1e6


def one_store(backend: str, n: int, idle_s: float, creates: int) -> dict[str, Any]:
    folder = Path(tempfile.mkdtemp(prefix=f"rk-scale-{backend}-"))
    schema = raw = None
    if backend == "sqlite":
        url = f"sqlite:///{folder / 'remindkit.db'}"
    else:
        schema, raw, url = pg_schema()
    out: dict[str, Any] = {"n": n, "load": load()}
    try:
        out["fill_s"] = side("fill", folder, url, n, PER_SESSION)["fill_s"]
        out["size_mb"] = store_size_mb(folder, url, schema, raw)
        out.update(side("engine", folder, url, idle_s))
        made = side("create", folder, url, creates)
        out["create_per_s"], out["create_cpu_ms"] = made["per_s"], made["cpu_ms_each"]
        session = f"s{(n // PER_SESSION) // 2}"
        listed = side("list", folder, url, session, 50)
        assert listed["n"] == PER_SESSION, listed
        out["list_ms"] = listed["median_ms"]
        ls = cli(folder, url, ["ls", "--session", session], 10)
        out["ls_ms"], out["ls_cpu_ms"] = ls["ms"], ls["cpu_ms"]
        out["summary_ms"] = side("summary", folder, url, 5)["median_ms"]
    finally:
        if schema is not None and raw is not None:
            drop_schema(raw, schema)
    print(f"  {backend} {n:,}: " + json.dumps(out), flush=True)
    return out


def growth(values: list[float | None]) -> str:
    """The factor from each size to the next (× per 10×)."""
    parts = []
    for a, b in zip(values, values[1:], strict=False):
        parts.append("-" if not a or b is None else f"{b / a:.2f}×")
    return " / ".join(parts)


def met(aim: str, values: list[float | None], key: str) -> str:
    if aim == "flat":
        steps = [b / a for a, b in zip(values, values[1:], strict=False) if a and b is not None]
        return "-" if not steps else ("yes" if max(steps) <= 2.0 else "no")
    if key == "peak_rss_mb":
        return "yes" if values[-1] is not None and values[-1] < 100 else "no"
    if key == "idle_cpu_pct":
        return "yes" if all(v is not None and v < 0.1 for v in values) else "no"
    return "-"


def table(backend: str, results: list[dict[str, Any]]) -> str:
    sizes = [f"{r['n']:,}" for r in results]
    lines = [
        f"| {backend} | " + " | ".join(sizes) + " | growth per 10× | aim | met |",
        "|---|" + "---|" * (len(sizes) + 3),
    ]
    for name, key, form, aim in METRICS:
        values = [r.get(key) for r in results]
        cells = ["-" if v is None else form.format(v) for v in values]
        lines.append(
            f"| {name} | "
            + " | ".join(cells)
            + f" | {growth(values)} | {aim} | {met(aim, values, key)} |"
        )
    lines.append(
        "| load average at the start | "
        + " | ".join(f"{r['load']:.1f}" for r in results)
        + " | | | |"
    )
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--sizes", help="comma-separated store sizes")
    ap.add_argument("--backends", default="sqlite,postgres")
    ap.add_argument("--idle", type=float, help="seconds of idle CPU measured per store")
    ap.add_argument(
        "--burst", type=int, help="reminders due at once on 4 PostgreSQL engines (0: no)"
    )
    args = ap.parse_args()
    sizes = (
        [int(s) for s in args.sizes.split(",")]
        if args.sizes
        else ([1_000, 10_000, 100_000] if args.quick else [10_000, 100_000, 1_000_000])
    )
    idle = args.idle if args.idle is not None else (10.0 if args.quick else 60.0)
    burst = args.burst if args.burst is not None else (20_000 if args.quick else 100_000)
    print(f"at the start: {machine()}", flush=True)
    tables = []
    results: dict[str, Any] = {}
    for backend in args.backends.split(","):
        print(f"[{backend}]", flush=True)
        got = [one_store(backend, n, idle, 200 if args.quick else 500) for n in sizes]
        results[backend] = got
        tables.append(table(backend, got))
    if burst and "postgres" in args.backends:
        at = load()
        print(f"[PostgreSQL, 4 engines, {burst:,} due at once] load average {at:.1f}", flush=True)
        b = pg_burst(burst, 4)
        results["burst"] = b
        tables.append(
            "| PostgreSQL, 4 engines, {n:,} due at once | measured | aim | met |\n"
            "|---|---|---|---|\n"
            "| drained after (s) | {d:.2f} | < 5 s | {dm} |\n"
            "| lost | {lost} | 0 | {lm} |\n"
            "| duplicates | {dup} | 0 | {um} |\n"
            "| deadlocks (pg_stat_database) | {dl} | 0 | {km} |\n"
            "| per engine | {per} | - | - |\n"
            "| load average at the start | {at:.1f} | | |".format(
                n=burst,
                d=b["drain_s"],
                dm="yes" if b["drain_s"] < 5 else "no",
                lost=b["lost"],
                lm="yes" if b["lost"] == 0 else "no",
                dup=b["duplicates"],
                um="yes" if b["duplicates"] == 0 else "no",
                dl=b["deadlocks"],
                km="yes" if b["deadlocks"] == 0 else "no",
                per="/".join(map(str, b["per_engine"])),
                at=at,
            )
        )
    print(f"at the end: {machine()}")
    print()
    print("\n\n".join(tables))
    out = HERE / "results"
    out.mkdir(exist_ok=True)
    (out / f"scale-{stamp()}.json").write_text(json.dumps(results, indent=1, default=str))


if __name__ == "__main__":
    main()
