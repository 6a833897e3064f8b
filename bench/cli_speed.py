"""How long the ``remindkit`` command takes, start to exit, on a warm cache, beside the
floor of the same interpreter: ``python -c pass``.

    python bench/cli_speed.py [--runs 30] [--baseline /path/to/other/checkout]

Times ``remind`` (a one-shot ``--in 5m``), ``ls`` (with 20 reminders stored),
``status --line`` and ``status``, first with no engine on the store (each command
opens the store itself), then with one running (the normal state; the reminder
commands are then handed to it, see ``remindkit.cli.handoff``, and ``status --line``
reads the file the engine keeps), and ``import remindkit.cli.main`` alone. Each
command runs ``--runs`` times after two warm-up runs, in turns with the others, the
floor and the baseline's (so that all meet the machine in the same states); the
table gives the median wall
time and, beside it, the median CPU time (user + sys of the child, which a busy machine
inflates less than the wall time), each as a ratio to ``python -c pass``'s. Bytecode
is cached (in a folder of the run, ``PYTHONPYCACHEPREFIX``), as for an installed
package, even where ``PYTHONDONTWRITEBYTECODE`` is set. With ``--baseline`` the same
commands run against another checkout of remindkit (``PYTHONPATH`` pointed at it),
in the peer column.

Targets, with no engine running: ``status --line`` within 4× ``python -c pass``,
``remind`` and ``ls`` within 6×, in wall time and in CPU time.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import Check, Row, Table, load, machine, within_floor  # noqa: E402

# times python -c pass, with no engine running
TARGETS = {"remind (no engine)": 6.0, "ls (no engine)": 6.0, "status --line (no engine)": 4.0}


def run_once(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(
        argv,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        check=False,
        cwd=env["REMINDKIT_HOME"],
    )  # not the checkout: `-m` puts the cwd first on the path
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed: {proc.stderr.decode(errors='replace')[-500:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall * 1000, cpu * 1000


def parallel(side: Side, n: int) -> dict[str, float]:
    """Wall ms of ``n`` ``remind`` commands started at once (as agents in a loop do),
    each in a session of its own (the per-session limit is 20), as a table row."""
    t0 = time.perf_counter()
    procs = [
        subprocess.Popen(
            side.rk("remind", f"p{i}", "--session", f"p{i}", "--label", "p", "--in", "1h"),
            env=side.env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            cwd=side.home,
        )
        for i in range(n)
    ]
    failed = [p for p in procs if p.wait() != 0]
    if failed:
        why = failed[0].stderr.read().decode(errors="replace") if failed[0].stderr else ""
        raise SystemExit(f"{len(failed)} of {n} parallel remind commands failed: {why[-500:]}")
    ms = (time.perf_counter() - t0) * 1000
    return {"median": ms, "p90": ms, "cpu": 0.0}


def measure(jobs: dict[str, list[tuple[list[str], dict[str, str]]]], runs: int) -> dict:
    """Each job's commands (one per side) run in turns: a round runs every command of
    every side once, so that all of them, the floor too, meet the machine in the same
    states; two warm-up rounds first. ``{job: [{median, p90, cpu} per side]}``."""
    walls: dict[str, list[list[float]]] = {k: [[] for _ in v] for k, v in jobs.items()}
    cpus: dict[str, list[list[float]]] = {k: [[] for _ in v] for k, v in jobs.items()}
    for i in range(runs + 2):
        for name, per_side in jobs.items():
            for j, (argv, env) in enumerate(per_side):
                wall, cpu = run_once(argv, env)
                if i >= 2:
                    walls[name][j].append(wall)
                    cpus[name][j].append(cpu)
    out: dict[str, list[dict[str, float]]] = {}
    for name in jobs:
        out[name] = []
        for w, c in zip(walls[name], cpus[name], strict=True):
            w.sort()
            out[name].append(
                {
                    "median": statistics.median(w),
                    "p90": w[min(len(w) - 1, int(0.9 * len(w)))],
                    "cpu": statistics.median(c),
                }
            )
    return out


class Side:
    """One checkout of remindkit, with a home of its own."""

    def __init__(self, name: str, path: Path, home: Path, pycache: Path) -> None:
        self.name = name
        self.env = {
            **os.environ,
            "PYTHONPATH": str(path),
            "PYTHONPYCACHEPREFIX": str(pycache),
            "REMINDKIT_HOME": str(home),
            "REMINDKIT_TZ": "UTC",
            "REMINDKIT_NOTIFY": "0",
            "REMINDKIT_AUDIO": "none",
            "REMINDKIT_MAX_TOTAL": "none",  # the parallel row makes hundreds
        }
        for var in ("REMINDKIT_DB", "REMINDKIT_SESSION", "PYTHONDONTWRITEBYTECODE"):
            self.env.pop(var, None)
        self.home = home
        home.mkdir(parents=True, exist_ok=True)

    def rk(self, *args: str) -> list[str]:
        return [sys.executable, "-m", "remindkit", *args]

    def prepare(self) -> None:
        for i in range(20):
            run_once(
                self.rk("remind", f"bench {i}", "--session", f"s{i % 4}", "--in", f"{10 + i}m"),
                self.env,
            )

    def has_line(self) -> bool:
        return (
            subprocess.run(
                self.rk("status", "--line"), env=self.env, capture_output=True, cwd=self.home
            ).returncode
            == 0
        )

    def serve(self) -> subprocess.Popen[bytes]:
        proc = subprocess.Popen(
            self.rk("serve", "--no-alerts"),
            env=self.env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            cwd=self.home,
        )
        deadline = time.monotonic() + 60
        while not list(self.home.glob("status-*.json")):
            if time.monotonic() > deadline or proc.poll() is not None:
                proc.kill()
                raise SystemExit("the engine wrote no status file within 60 s")
            time.sleep(0.05)
        return proc


def measure_all(sides: list[Side], runs: int, parallel_n: int) -> list[dict[str, Any]]:
    """Per side, each command's figures: with no engine, then with one running."""
    for side in sides:
        side.prepare()
    res: list[dict[str, Any]] = [{} for _ in sides]

    def commands(side: Side) -> dict[str, list[str]]:
        return {
            "remind": side.rk("remind", "x", "--session", "b", "--label", "b", "--in", "5m"),
            "ls": side.rk("ls"),
            "status --line": side.rk("status", "--line"),
            "status": side.rk("status"),
        }

    def run(suffix: str, names: list[str]) -> None:
        jobs = {
            "python -c pass": [([sys.executable, "-c", "pass"], s.env) for s in sides],
            **{f"{n}{suffix}": [(commands(s)[n], s.env) for s in sides] for n in names},
        }
        for name, per_side in measure(jobs, runs).items():
            for j, got in enumerate(per_side):
                res[j].setdefault(name if name != "python -c pass" else name + suffix, got)
        if parallel_n:
            for j, side in enumerate(sides):
                res[j][f"{parallel_n} remind at once, total{suffix}"] = parallel(side, parallel_n)

    # No engine: each command opens the store itself.
    for j, got in enumerate(
        measure(
            {
                "import remindkit.cli.main": [
                    ([sys.executable, "-c", "import remindkit.cli.main"], s.env) for s in sides
                ]
            },
            runs,
        )["import remindkit.cli.main"]
    ):
        res[j]["import remindkit.cli.main"] = got
    run(" (no engine)", ["remind", "ls", "status --line", "status"])
    # With an engine on the store (the normal state: `remindkit service install`),
    # the reminder commands are handed to it (remindkit.cli.handoff).
    engines = [side.serve() for side in sides]
    try:
        run(" (engine running)", ["remind", "ls", "status --line", "status"])
    finally:
        for engine in engines:
            engine.terminate()
            engine.wait(30)
    return res


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, default=30)
    p.add_argument(
        "--parallel",
        type=int,
        default=50,
        help="also time this many remind commands at once (0: no)",
    )
    p.add_argument(
        "--baseline", type=Path, help="another checkout of remindkit to time beside this one"
    )
    opts = p.parse_args()
    print(f"at the start: {machine()}", flush=True)
    at = load()
    with tempfile.TemporaryDirectory(prefix="rk-cli-speed-") as tmp:
        sides = [Side("this", ROOT, Path(tmp) / "this", Path(tmp) / "pycache")]
        if opts.baseline:
            sides.append(
                Side(
                    "baseline",
                    opts.baseline.resolve(),
                    Path(tmp) / "baseline",
                    Path(tmp) / "pycache-baseline",
                )
            )
        got = measure_all(sides, opts.runs, opts.parallel)
        results = {side.name: r for side, r in zip(sides, got, strict=True)}
    print(f"at the end: {machine()}")
    table = Table(peer=f"baseline ({opts.baseline})" if opts.baseline else "peer")
    ours = results["this"]
    base = results.get("baseline")
    for cmd, r in ours.items():
        if cmd.startswith("python -c pass"):
            continue
        b = base.get(cmd) if base else None
        total = "at once" in cmd
        phase = " (engine running)" if cmd.endswith("(engine running)") else " (no engine)"
        floor = ours["python -c pass" + phase]
        cpu = "-"
        if not total:
            cpu = (
                (f"{r['cpu']:.0f} / {b['cpu']:.0f}" if b else f"{r['cpu']:.0f} / -")
                + f" / {floor['cpu']:.0f} ms ({r['cpu'] / floor['cpu']:.1f}× floor"
                + (f"; baseline {b['cpu'] / floor['cpu']:.1f}×)" if b else ")")
            )
        factor = TARGETS.get(cmd)
        checks = []
        if factor:  # met only when the wall time and the CPU time both are
            checks = [
                within_floor(r["median"], floor["median"], factor),
                within_floor(r["cpu"], floor["cpu"], factor),
            ]
            checks[1] = Check(checks[1].what + " (CPU)", checks[1].met)
        table.add(
            Row(
                f"{cmd}, median wall (ms)",
                r["median"],
                None if b is None else b["median"],
                None if total else floor["median"],
                checks=checks,
                cpu=cpu,
                load=at,
            )
        )
    for phase in (" (no engine)", " (engine running)"):
        f = ours["python -c pass" + phase]
        table.rows.insert(
            0 if phase == " (no engine)" else len(table.rows),
            Row(
                f"python -c pass{phase}, median wall (ms)",
                f["median"],
                None,
                f["median"],
                cpu=f"{f['cpu']:.0f} ms",
                load=at,
            ),
        )
    print(
        f"remindkit CLI, {opts.runs} runs each (floor: python -c pass; CPU: remindkit / "
        "baseline / floor, the median of user + sys)"
    )
    print(table.markdown())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
