"""remindkit vs APScheduler 3.11 + SQLAlchemyJobStore, on the same SQLite disk, in one run.

    .venv/bin/python bench/run.py            # everything (about 10 minutes)
    .venv/bin/python bench/run.py --quick    # smaller sizes, shorter idle window
    .venv/bin/python bench/run.py --only spread,burst

Each workload runs each side in a fresh process, after ``os.sync()``. The table prints each figure
for both systems, the ratio (how many times better remindkit is; > 1 means
ahead) and the target from the issue. Results are also written to
bench/results/<time>.json. PostgreSQL rows need REMINDKIT_BENCH_PG (default
postgresql+psycopg://postgres@127.0.0.1:5432/test).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sqlite3
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

HERE = Path(__file__).resolve().parent
PY = sys.executable
PG = os.environ.get("REMINDKIT_BENCH_PG", "postgresql+psycopg://postgres@127.0.0.1:5432/test")


def side(script: str, *args: object, timeout: float = 900) -> dict:
    # The pages the workload before left dirty are written first: a side's fsyncs
    # (a create's commit) would otherwise wait behind their writeback.
    os.sync()
    proc = subprocess.run(
        [PY, str(HERE / script), *map(str, args)], capture_output=True, text=True, timeout=timeout
    )
    if proc.returncode != 0:
        raise RuntimeError(f"{script} {args}: {proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def fresh() -> Path:
    return Path(tempfile.mkdtemp(prefix="rk-bench-", dir=os.environ.get("REMINDKIT_BENCH_DIR")))


ROWS: list[tuple[str, object, object, str, str]] = []


def row(metric: str, ours: object, peer: object, target: str, better: str = "lower") -> None:
    ROWS.append((metric, ours, peer, target, better))
    print(f"  {metric}: remindkit={fmt(ours)} apscheduler={fmt(peer)} target={target}", flush=True)


def fmt(v: object) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:,.2f}" if abs(v) < 100 else f"{v:,.0f}"
    return str(v)


def ratio(ours: object, peer: object, better: str) -> str:
    if (
        not isinstance(ours, (int, float))
        or not isinstance(peer, (int, float))
        or isinstance(ours, bool)
    ):
        return "-"
    if better == "lower":
        return "-" if ours <= 0 else f"{peer / ours:,.1f}x"
    return "-" if peer <= 0 else f"{ours / peer:,.1f}x"


def bench_spread(q: bool) -> None:
    for n, span, target in ((10_000, 10.0, "p99 <= 5 ms"), (1_000, 5.0, "p99 <= 1 ms")):
        n = n // 5 if q and n > 2000 else n
        ours = side("remindkit_side.py", "spread", fresh(), n, span, 1000)
        peer = side("apscheduler_side.py", "spread", fresh(), n, span)
        row(
            f"{n:,} one-shots over {span:g} s: lateness p50 (ms)",
            ours["p50_ms"],
            peer["p50_ms"],
            "-",
        )
        row(
            f"{n:,} one-shots over {span:g} s: lateness p99 (ms)",
            ours["p99_ms"],
            peer["p99_ms"],
            target,
        )
        row(
            f"{n:,} one-shots over {span:g} s: lateness max (ms)",
            ours["max_ms"],
            peer["max_ms"],
            "-",
        )
        row(
            f"{n:,} one-shots over {span:g} s: delivered",
            ours["delivered"],
            peer["delivered"],
            f"{n}",
            "higher",
        )


def bench_create(q: bool) -> None:
    n = 2_000 if q else 5_000
    ours = side("remindkit_side.py", "create", fresh(), n)
    peer = side("apscheduler_side.py", "create", fresh(), n)
    row(
        "create one by one, each committed (per s)",
        ours["per_s"],
        peer["per_s"],
        ">= 2,000",
        "higher",
    )
    imp = side("remindkit_side.py", "import", fresh(), 20_000 if q else 100_000)
    row("import, one transaction (per s)", imp["per_s"], peer["per_s"], ">= 30,000", "higher")


def bench_burst(q: bool) -> None:
    n = 2_000 if q else 10_000
    peer = side("apscheduler_side.py", "burst", fresh(), n)
    # Occurrences of one session that come due together go out as one turn, so the
    # figure depends on how many sessions they belong to: both ends are shown.
    for sessions in (100, n):
        ours = side("remindkit_side.py", "burst", fresh(), n, sessions)
        what = f"{n:,} due at one instant, {sessions:,} sessions"
        row(f"{what}: all handed over after (s)", ours["drain_s"], peer["drain_s"], "<= 0.5 s")
        row(f"{what}: delivered", ours["delivered"], peer["delivered"], f"{n}", "higher")


def bench_big(q: bool) -> None:
    n_ours = 20_000 if q else 100_000
    n_peer = 5_000 if q else 20_000
    idle = 10 if q else 60
    d_ours, d_peer = fresh(), fresh()
    prep = side("remindkit_side.py", "big_prepare", d_ours, n_ours)
    side("apscheduler_side.py", "big_prepare", d_peer, n_peer)
    ours = side("remindkit_side.py", "big_run", d_ours, idle)
    peer = side("apscheduler_side.py", "big_run", d_peer, idle)
    label = f"{n_ours:,} stored (APScheduler: {n_peer:,})"
    row(
        f"{label}: engine start to first overdue fire (ms)",
        ours["first_fire_ms"],
        peer["first_fire_ms"],
        "<= 5 ms",
    )
    row(f"{label}: peak RSS (MB)", ours["peak_rss_mb"], peer["peak_rss_mb"], "<= 64 MB")
    row(
        f"{label}: idle CPU over {idle} s (% of a core)",
        ours["idle_cpu_pct"],
        peer["idle_cpu_pct"],
        "<= 0.1 %",
    )
    row(f"{label}: database size (MB)", prep["db_mb"], None, "-")


def bench_cross(q: bool) -> None:
    n = 40 if q else 200
    d = fresh()
    url = f"sqlite:///{d / 'remindkit.db'}"
    out = d / "engine.json"
    side("remindkit_side.py", "init", d, url)  # create the store
    engine = subprocess.Popen(
        [PY, str(HERE / "remindkit_side.py"), "cross_engine", str(d), url, str(n), str(out)],
        stdout=subprocess.DEVNULL,
    )
    while not (d / "engine-ready").exists():
        time.sleep(0.05)
    time.sleep(1.0)
    side("remindkit_side.py", "cross_creator", d, url, n, 200)
    engine.wait(120)
    ours = json.loads(out.read_text())
    peer = side("apscheduler_side.py", "cross", fresh(), min(n, 10), 200)
    row(
        "made by another process 200 ms before due: lateness p99 (ms)",
        ours["p99_ms"],
        peer["p99_ms"],
        "<= 5 ms",
    )
    row(
        "made by another process 200 ms before due: fired",
        f"{ours['delivered']}/{n}",
        f"{peer['ran_within_5s']}/{peer['n']}",
        "all",
        "none",
    )


def _deadlocks(conn) -> int:  # type: ignore[no-untyped-def]
    """Deadlocks the server has detected in this database (all sessions)."""
    return int(
        conn.execute(
            "SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()"
        ).fetchone()[0]
    )


def bench_pg(q: bool) -> None:
    import psycopg
    from sqlalchemy.engine import make_url

    n = 2_000 if q else 10_000
    schema = f"rk_bench_{uuid.uuid4().hex[:8]}"
    raw = make_url(PG).set(drivername="postgresql").render_as_string(hide_password=False)
    with psycopg.connect(raw, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
        deadlocks_before = _deadlocks(conn)
    url = (
        make_url(PG)
        .update_query_dict({"options": f"-csearch_path={schema}"})
        .render_as_string(hide_password=False)
    )
    try:
        d = fresh()
        side("remindkit_side.py", "init", d, url)  # migrate once
        outs = [d / f"engine{i}.json" for i in range(4)]
        procs = [
            subprocess.Popen(
                [
                    PY,
                    str(HERE / "remindkit_side.py"),
                    "pg_engine",
                    str(d),
                    url,
                    str(o),
                    str(n),
                    "25",
                ],
                stdout=subprocess.DEVNULL,
            )
            for o in outs
        ]
        while not all(o.with_suffix(".ready").exists() for o in outs):
            time.sleep(0.05)
        due = time.time() + 6
        side("remindkit_side.py", "pg_load", d, url, n, due, 200)
        for p in procs:
            p.wait(120)
        keys: list[str] = []
        last = 0
        per_engine = []
        for o in outs:
            data = json.loads(o.read_text())
            keys += data["keys"]
            last = max(last, data["last_us"])
            per_engine.append(len(data["keys"]))
        unique = set(keys)
        row(
            f"PostgreSQL, 4 engines, {n:,} due at once: duplicates",
            len(keys) - len(unique),
            None,
            "0",
        )
        row(f"PostgreSQL, 4 engines, {n:,} due at once: lost", n - len(unique), None, "0")
        row(
            f"PostgreSQL, 4 engines, {n:,} due at once: drained after (s)",
            last / 1e6 - due,
            None,
            "<= 2 s",
        )
        row(
            f"PostgreSQL, 4 engines, {n:,} due at once: per engine",
            "/".join(map(str, per_engine)),
            None,
            "-",
            "none",
        )
        with psycopg.connect(raw, autocommit=True) as conn:
            row(
                f"PostgreSQL, 4 engines, {n:,} due at once: deadlocks (pg_stat_database)",
                _deadlocks(conn) - deadlocks_before,
                None,
                "0",
            )
    finally:
        with psycopg.connect(raw, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


BENCHES = {
    "spread": bench_spread,
    "create": bench_create,
    "burst": bench_burst,
    "big": bench_big,
    "cross": bench_cross,
    "pg": bench_pg,
}


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--only", default=",".join(BENCHES))
    args = ap.parse_args()
    import apscheduler
    import sqlalchemy

    import remindkit

    info = (
        f"{platform.node()} {platform.machine()} {os.cpu_count()} cores, Python {platform.python_version()}, "
        f"SQLite {sqlite3.sqlite_version}, SQLAlchemy {sqlalchemy.__version__}, "
        f"remindkit {remindkit.__version__}, APScheduler {apscheduler.__version__}"
    )
    print(info, flush=True)
    for name in args.only.split(","):
        print(f"[{name}]", flush=True)
        BENCHES[name](args.quick)
    print()
    print("| metric | remindkit | APScheduler 3.11 | ratio | target |")
    print("|---|---|---|---|---|")
    for metric, ours, peer, target, better in ROWS:
        print(f"| {metric} | {fmt(ours)} | {fmt(peer)} | {ratio(ours, peer, better)} | {target} |")
    out = HERE / "results"
    out.mkdir(exist_ok=True)
    (out / f"{time.strftime('%Y%m%d-%H%M%S')}.json").write_text(
        json.dumps({"info": info, "rows": ROWS}, indent=1, default=str)
    )


if __name__ == "__main__":
    main()
