"""Next-fire speed of cron rules: remindkit beside cronsim and croniter.

    python bench/cron_speed.py [--quick]

The same expressions, zones and start instants for all three. Two measures, in µs
per next fire, in process CPU time (the best of a few rounds, so a busy machine
disturbs it less):

* ``first``: the next fire from a given instant, as a scheduler asks it when a
  reminder is made or an engine wakes: the peers build their iterator from the
  expression and the start each time; remindkit calls ``next_cron_time``
  (its compiled rules are cached by expression, as the peers' are not; the
  ``first, cold`` line clears those caches before every call, so it parses too);
* ``run``: successive fires, each from the one before (an iterator for the peers).

It also counts, in UTC (where no DST rule differs), how often remindkit's next fire
equals cronsim's: both follow cronie's reading of the fields.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from importlib.metadata import version
from pathlib import Path
from zoneinfo import ZoneInfo

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import croniter  # noqa: E402
import cronsim  # noqa: E402

from remindkit.schedules import cron as cron_module  # noqa: E402
from remindkit.schedules.cron import compile_cron, next_cron_time  # noqa: E402

UTC = timezone.utc
EXPRS = [
    "* * * * *",
    "*/5 * * * *",
    "0 * * * *",
    "30 2 * * *",
    "0 9 * * 1-5",
    "15 10 * * sat,sun",
    "0 0 1 * *",
    "0 0 1 * 1",
    "0 12 13 * 5",
    "0 0 29 2 *",
    "0 */3 * * *",
    "5,35 8-18 * * mon-fri",
    "0 0 1 1 *",
    "0 6 1-7 * 1",
    "45 23 * * 0",
    "0 0 */2 * *",
    "0 0 L * *",
    "0 9 * * 5#2",
    "0 9 * * 5L",
    "0 22 * 1-3,10-12 *",
]
ZONES = ["UTC", "Europe/Berlin", "America/New_York", "Australia/Lord_Howe"]


def starts(n: int) -> list[datetime]:
    rng = random.Random(12)
    base = datetime(2025, 1, 1, tzinfo=UTC)
    return [base + timedelta(seconds=rng.randrange(365 * 86_400)) for _ in range(n)]


def peers_accept(expr: str) -> bool:
    """croniter reads ``5L`` differently (it wants ``L5``); leave it out for croniter only."""
    return not expr.endswith("5L")


def best_of(rounds: int, fn: Callable[[], int]) -> float:
    """CPU µs per call: the best of ``rounds`` runs of ``fn``, which returns how many calls it
    made (process CPU time, so other processes on a shared machine count less)."""
    best = float("inf")
    for _ in range(rounds):
        t0 = time.process_time()
        calls = fn()
        best = min(best, (time.process_time() - t0) / calls * 1e6)
    return best


def first_remindkit(cases: list[tuple[str, ZoneInfo, datetime]], cold: bool = False) -> int:
    for expr, zone, t in cases:
        if cold:  # forget every parsed rule and field
            compile_cron.cache_clear()
            for table in ("_shapes", "_successors"):
                getattr(getattr(cron_module, table, None), "cache_clear", lambda: None)()
        next_cron_time(expr, zone, t)
    return len(cases)


def first_cronsim(cases: list[tuple[str, ZoneInfo, datetime]]) -> int:
    for expr, zone, t in cases:
        next(cronsim.CronSim(expr, t.astimezone(zone)))
    return len(cases)


def first_croniter(cases: list[tuple[str, ZoneInfo, datetime]]) -> int:
    n = 0
    for expr, zone, t in cases:
        if peers_accept(expr):
            croniter.croniter(expr, t.astimezone(zone)).get_next(datetime)
            n += 1
    return n


def run_remindkit(rules: list[tuple[str, ZoneInfo, datetime]], k: int) -> int:
    for expr, zone, t in rules:
        for _ in range(k):
            nxt = next_cron_time(expr, zone, t)
            assert nxt is not None
            t = nxt
    return len(rules) * k


def run_cronsim(rules: list[tuple[str, ZoneInfo, datetime]], k: int) -> int:
    for expr, zone, t in rules:
        it = cronsim.CronSim(expr, t.astimezone(zone))
        for _ in range(k):
            next(it)
    return len(rules) * k


def run_croniter(rules: list[tuple[str, ZoneInfo, datetime]], k: int) -> int:
    n = 0
    for expr, zone, t in rules:
        if not peers_accept(expr):
            continue
        it = croniter.croniter(expr, t.astimezone(zone))
        for _ in range(k):
            it.get_next(datetime)
        n += k
    return n


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer start instants and rounds")
    args = parser.parse_args()
    n_starts, rounds, k = (10, 2, 20) if args.quick else (40, 5, 100)
    zones = [ZoneInfo(z) for z in ZONES]
    cases = [(e, z, t) for e in EXPRS for z in zones for t in starts(n_starts)]
    rules = [(e, z, starts(1)[0]) for e in EXPRS for z in zones]
    for expr in EXPRS:
        compile_cron(expr)

    rows = [
        (
            "first",
            best_of(rounds, lambda: first_remindkit(cases)),
            best_of(rounds, lambda: first_cronsim(cases)),
            best_of(max(1, rounds // 2), lambda: first_croniter(cases)),
        ),
        ("first, cold", best_of(rounds, lambda: first_remindkit(cases, cold=True)), None, None),
        (
            "run",
            best_of(rounds, lambda: run_remindkit(rules, k)),
            best_of(rounds, lambda: run_cronsim(rules, k)),
            best_of(max(1, rounds // 2), lambda: run_croniter(rules, k)),
        ),
    ]
    for expr in EXPRS:
        compile_cron(expr)

    utc_cases = [(e, t) for e, z, t in cases if str(z) == "UTC"]
    agree = sum(next_cron_time(e, UTC, t) == next(cronsim.CronSim(e, t)) for e, t in utc_cases)

    print(
        f"cron next fire, µs per fire: {len(EXPRS)} expressions x {len(ZONES)} zones "
        f"({', '.join(ZONES)}), {n_starts} starts each; best of {rounds} rounds"
    )
    print(f"cronsim {version('cronsim')}, croniter {version('croniter')}")
    print(f"{'measure':<14}{'remindkit':>11}{'cronsim':>11}{'croniter':>11}{'vs cronsim':>12}")
    for name, ours, sim, cit in rows:
        show = lambda v: f"{v:11.1f}" if v is not None else f"{'-':>11}"  # noqa: E731
        ratio = f"{sim / ours:11.2f}x" if sim else f"{'':>12}"
        print(f"{name:<14}{show(ours)}{show(sim)}{show(cit)}{ratio}")
    print(f"same next fire as cronsim in UTC: {agree}/{len(utc_cases)}")


if __name__ == "__main__":
    main()
