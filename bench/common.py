"""Helpers shared by the benchmark sides."""

from __future__ import annotations

from collections.abc import Sequence


def percentiles(values: Sequence[float]) -> dict:
    if not values:
        return {"p50_ms": None, "p99_ms": None, "max_ms": None}
    v = sorted(values)

    def q(p: float) -> float:
        return v[min(len(v) - 1, int(p * len(v)))]

    return {"p50_ms": q(0.50), "p99_ms": q(0.99), "max_ms": v[-1]}
