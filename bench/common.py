"""Helpers shared by the benchmarks: percentiles, CPU time, and the table every bench
prints, each row as remindkit / peer / the machine's floor, measured in the same run,
with the ratio to the floor and whether the target (itself a ratio) is met."""

from __future__ import annotations

import os
import resource
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any


def percentiles(values: Sequence[float]) -> dict:
    if not values:
        return {"p50_ms": None, "p99_ms": None, "max_ms": None}
    v = sorted(values)

    def q(p: float) -> float:
        return v[min(len(v) - 1, int(p * len(v)))]

    return {"p50_ms": q(0.50), "p99_ms": q(0.99), "max_ms": v[-1]}


def cpu_s() -> float:
    """This process's CPU time so far (user + system), in seconds (``getrusage``: to the
    microsecond, where ``os.times`` counts 10 ms ticks)."""
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def proc_cpu_s(pid: int) -> float:
    """Another process's CPU time so far (user + system, Linux ``/proc``), in seconds."""
    with open(f"/proc/{pid}/stat", encoding="ascii") as fh:
        fields = fh.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def load() -> float:
    """The machine's 1-minute load average (a shared VM: how busy it was)."""
    return os.getloadavg()[0]


def machine() -> str:
    return f"{os.cpu_count()} cores, load average {' / '.join(f'{x:.1f}' for x in os.getloadavg())}"


# -- targets ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Check:
    """One target of a row and whether this run met it (None: could not tell)."""

    what: str
    met: bool | None


def _num(v: object) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def within_floor(ours: object, floor: object, factor: float) -> Check:
    """Lower is better: ``ours`` at most ``factor`` times the floor."""
    o, f = _num(ours), _num(floor)
    return Check(f"≤ {factor:g}× floor", None if o is None or f is None else o <= factor * f)


def share_of_floor(ours: object, floor: object, share: float) -> Check:
    """Higher is better (a rate): ``ours`` at least ``share`` of the floor's."""
    o, f = _num(ours), _num(floor)
    return Check(f"≥ {share:.0%} of floor", None if o is None or f is None else o >= share * f)


def not_behind(ours: object, peer: object, better: str = "lower") -> Check:
    """Never behind the peer (APScheduler) in this row."""
    o, p = _num(ours), _num(peer)
    if o is None or p is None:
        return Check("not behind APScheduler", None)
    return Check("not behind APScheduler", o <= p if better == "lower" else o >= p)


def equals(ours: object, value: object) -> Check:
    return Check(f"= {value}", ours == value)


def at_most(ours: object, bound: float, unit: str = "") -> Check:
    o = _num(ours)
    return Check(f"≤ {bound:g}{unit}", None if o is None else o <= bound)


# -- the table --------------------------------------------------------------------------------


@dataclass
class Row:
    metric: str
    ours: Any
    peer: Any = None
    floor: Any = None
    better: str = "lower"  # or "higher" (a rate); the ratio to the floor is ours / floor
    checks: list[Check] = field(default_factory=list)
    cpu: str = ""  # CPU time beside the wall time, where the machine is noisy
    load: float | None = None

    def ratio(self) -> str:
        o, f = _num(self.ours), _num(self.floor)
        if o is None or f is None or f == 0:
            return "-"
        return f"{o / f:.2f}×"

    def met(self) -> str:
        if not self.checks:
            return "-"
        if any(c.met is None for c in self.checks):
            return "?"
        missed = [c.what for c in self.checks if not c.met]
        return "yes" if not missed else "no (" + "; ".join(missed) + ")"


def fmt(v: object) -> str:
    if v is None:
        return "-"
    if isinstance(v, bool):
        return str(v)
    if isinstance(v, float):
        if abs(v) >= 100:
            return f"{v:,.0f}"
        return f"{v:,.2f}" if abs(v) >= 1 else f"{v:.3f}"
    if isinstance(v, int):
        return f"{v:,}"
    return str(v)


class Table:
    """The rows of one bench, printed as they come and as one table at the end."""

    def __init__(self, peer: str = "APScheduler 3.11") -> None:
        self.peer = peer
        self.rows: list[Row] = []

    def add(self, row: Row) -> Row:
        if row.load is None:
            row.load = load()
        self.rows.append(row)
        print(
            f"  {row.metric}: remindkit={fmt(row.ours)} peer={fmt(row.peer)} floor={fmt(row.floor)}"
            f" ratio={row.ratio()} met={row.met()} {row.cpu}",
            flush=True,
        )
        return row

    def markdown(self) -> str:
        head = (
            f"| metric | remindkit | {self.peer} | floor | ÷ floor | target | met | CPU | load |\n"
            "|---|---|---|---|---|---|---|---|---|"
        )
        lines = [head]
        for r in self.rows:
            target = ", ".join(c.what for c in r.checks) or "-"
            lines.append(
                f"| {r.metric} | {fmt(r.ours)} | {fmt(r.peer)} | {fmt(r.floor)} | {r.ratio()} "
                f"| {target} | {r.met()} | {r.cpu or '-'} | {fmt(r.load)} |"
            )
        return "\n".join(lines)

    def as_json(self) -> list[dict[str, Any]]:
        return [
            {
                "metric": r.metric,
                "remindkit": r.ours,
                "peer": r.peer,
                "floor": r.floor,
                "ratio": r.ratio(),
                "checks": [(c.what, c.met) for c in r.checks],
                "met": r.met(),
                "cpu": r.cpu,
                "load": r.load,
            }
            for r in self.rows
        ]


def stamp() -> str:
    return time.strftime("%Y%m%d-%H%M%S")
