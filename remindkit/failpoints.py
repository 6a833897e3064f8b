"""Failpoints: kill or stall this process at a named point, for fault tests.

Off unless ``REMINDKIT_FAILPOINTS`` is set, e.g.::

    REMINDKIT_FAILPOINTS="after_claim_commit=kill@3,during_delivery=sleep:5"

``name=kill`` sends SIGKILL to this process the first time the point is
reached (``kill@N``: the N-th time); ``sleep:S`` stalls the thread S seconds.
Points: ``after_claim_commit``, ``in_claim_txn`` (inside the transaction that
claims and advances reminders, before it commits), ``during_alert``,
``during_delivery``, ``after_delivery_before_ack``, ``before_flush``.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time

_SPEC = os.environ.get("REMINDKIT_FAILPOINTS", "")
_POINTS: dict[str, tuple[str, float, int]] = {}
_HITS: dict[str, int] = {}
_LOCK = threading.Lock()

for _item in filter(None, (p.strip() for p in _SPEC.split(","))):
    _name, _, _action = _item.partition("=")
    _count = 1
    if "@" in _action:
        _action, _, _n = _action.partition("@")
        _count = int(_n)
    _kind, _, _arg = _action.partition(":")
    _POINTS[_name] = (_kind or "kill", float(_arg or 0), _count)


def hit(name: str) -> None:
    """Reached a failpoint: do what REMINDKIT_FAILPOINTS says (usually nothing)."""
    if not _POINTS:
        return
    spec = _POINTS.get(name)
    if spec is None:
        return
    kind, arg, count = spec
    with _LOCK:
        _HITS[name] = _HITS.get(name, 0) + 1
        reached = _HITS[name] == count
    if not reached:
        return
    sys.stderr.write(f"remindkit failpoint {name}: {kind}\n")
    sys.stderr.flush()
    if kind == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    elif kind == "sleep":
        time.sleep(arg)
