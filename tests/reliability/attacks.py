"""Rows of the attack table in the reliability report: what an attack did before
remindkit guarded against it, and what it does now (recorded by the test that
tries it, when that test passes)."""

from __future__ import annotations

import json

from .ledger import REPORT


def record(attack: str, before: str, after: str) -> None:
    REPORT.parent.mkdir(parents=True, exist_ok=True)
    with REPORT.open("a") as fh:
        fh.write(json.dumps({"attack": attack, "before": before, "after": after}) + "\n")
