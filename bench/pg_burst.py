"""PostgreSQL with several engines and N reminders due at one instant: each engine in a
process of its own (``remindkit_side.py pg_engine``) on a schema of its own, the N
loaded in one import once they all run; then who fired what. Used by ``bench/run.py``
(10,000) and ``bench/scale.py`` (100,000)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
PG = os.environ.get("REMINDKIT_BENCH_PG", "postgresql+psycopg://postgres@127.0.0.1:5432/test")


def _deadlocks(conn: Any) -> int:
    """Deadlocks the server has detected in this database (all sessions)."""
    return int(
        conn.execute(
            "SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()"
        ).fetchone()[0]
    )


def pg_schema() -> tuple[str, str, str]:
    """A new schema: (its name, the psycopg URL, the store URL that uses it)."""
    import psycopg
    from sqlalchemy.engine import make_url

    schema = f"rk_bench_{uuid.uuid4().hex[:8]}"
    raw = make_url(PG).set(drivername="postgresql").render_as_string(hide_password=False)
    with psycopg.connect(raw, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
    url = (
        make_url(PG)
        .update_query_dict({"options": f"-csearch_path={schema}"})
        .render_as_string(hide_password=False)
    )
    return schema, raw, url


def drop_schema(raw: str, schema: str) -> None:
    import psycopg

    with psycopg.connect(raw, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def pg_burst(
    n: int, engines: int = 4, env: dict[str, str] | None = None, lead: float | None = None
) -> dict[str, Any]:
    """``n`` due at once on ``engines`` engines: duplicates, lost, drain time, per
    engine, and the deadlocks PostgreSQL counted meanwhile. ``lead``: seconds from
    the start of the import to the due time (by default 6 + n / 8,000; a busy machine
    needs more: ``loaded_before_due`` says whether it was enough)."""
    import psycopg

    py = sys.executable
    schema, raw, url = pg_schema()
    with psycopg.connect(raw, autocommit=True) as conn:
        before = _deadlocks(conn)
    if lead is None:
        lead = 6 + n / 8_000  # the import of n lines must be done before they are due
    run_s = lead + 25 + n / 5_000
    try:
        d = Path(tempfile.mkdtemp(prefix="rk-bench-pg-"))
        side = [py, str(HERE / "remindkit_side.py")]
        subprocess.run([*side, "init", str(d), url], check=True, env=env, capture_output=True)
        outs = [d / f"engine{i}.json" for i in range(engines)]
        procs = [
            subprocess.Popen(
                [*side, "pg_engine", str(d), url, str(o), str(n), str(run_s)],
                stdout=subprocess.DEVNULL,
                env=env,
            )
            for o in outs
        ]
        while not all(o.with_suffix(".ready").exists() for o in outs):
            time.sleep(0.05)
        due = time.time() + lead
        subprocess.run(
            [*side, "pg_load", str(d), url, str(n), str(due), "200"],
            check=True,
            env=env,
            capture_output=True,
        )
        loaded_before_due = time.time() < due
        for p in procs:
            p.wait(run_s + 120)
        keys: list[str] = []
        last = 0
        per_engine = []
        for o in outs:
            data = json.loads(o.read_text())
            keys += data["keys"]
            last = max(last, data["last_us"])
            per_engine.append(len(data["keys"]))
        with psycopg.connect(raw, autocommit=True) as conn:
            deadlocks = _deadlocks(conn) - before
        unique = set(keys)
        return {
            "n": n,
            "duplicates": len(keys) - len(unique),
            "lost": n - len(unique),
            "drain_s": last / 1e6 - due,
            "per_engine": per_engine,
            "deadlocks": deadlocks,
            "loaded_before_due": loaded_before_due,
        }
    finally:
        drop_schema(raw, schema)


def main() -> None:
    import argparse

    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("n", type=int, nargs="?", default=100_000, help="reminders due at once")
    ap.add_argument("--engines", type=int, default=4)
    ap.add_argument("--lead", type=float, help="seconds from the import's start to the due time")
    args = ap.parse_args()
    print(json.dumps(pg_burst(args.n, args.engines, lead=args.lead)))


if __name__ == "__main__":
    main()
