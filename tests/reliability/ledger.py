"""The ledger for fault scenarios.

``LedgerSessions`` is a session adapter that engines load through
``REMINDKIT_ADAPTERS=tests.reliability.ledger:adapter``: every turn it runs
appends one JSON line (pid, time, session, occurrence keys, due times) to the
file in ``RK_LEDGER``. It is at-least-once like any external agent: a turn cut
short by a crash may run again, with the same keys.

``Ledger`` reads the file back and checks a scenario: nothing lost, nothing
delivered twice except turns of a killed engine (and then with the same key),
and the lateness of each first delivery.
"""

from __future__ import annotations

import json
import os
import time
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from remindkit.clock import to_us
from remindkit.models import Fire, Session
from remindkit.sessions.base import TurnResult

REPORT = Path(os.environ.get("RK_RELIABILITY_REPORT", "test-artifacts/reliability.jsonl"))


class LedgerSessions:
    name = "ledger"
    shared = True

    def __init__(self, path: str, delay: float = 0.0) -> None:
        self.path = path
        self.delay = delay

    def can_deliver(self, session: Session) -> bool:
        return True

    def run_turn(self, session: Session, message: str, fires: Sequence[Fire]) -> TurnResult:
        started = time.time()
        if self.delay:
            time.sleep(self.delay)
        line = json.dumps(
            {
                "pid": os.getpid(),
                "t": started,
                "session": session.id,
                "keys": [f.key for f in fires],
                "due_us": [to_us(f.due_at) for f in fires],
            }
        )
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, (line + "\n").encode())
        finally:
            os.close(fd)
        return TurnResult(True)


def adapter(store, *, clock=None, settings=None) -> LedgerSessions:  # type: ignore[no-untyped-def]
    return LedgerSessions(os.environ["RK_LEDGER"], float(os.environ.get("RK_LEDGER_DELAY", "0")))


@dataclass
class Verdict:
    scenario: str
    expected: int
    delivered: int
    lost: int
    duplicates: int
    max_late_ms: float
    repeats_from: set[int] = field(default_factory=set)
    deadlocks: int | None = None  # PostgreSQL's count over the scenario; None: not counted

    def record(self) -> None:
        REPORT.parent.mkdir(parents=True, exist_ok=True)
        with REPORT.open("a") as fh:
            fh.write(
                json.dumps(
                    {
                        "scenario": self.scenario,
                        "occurrences": self.expected,
                        "lost": self.lost,
                        "duplicates": self.duplicates,
                        "max_late_ms": round(self.max_late_ms, 1),
                        "deadlocks": self.deadlocks,
                    }
                )
                + "\n"
            )


class Ledger:
    """Reads the ledger file incrementally (only lines appended since the last read)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._offset = 0
        self._turns: list[dict] = []
        self._keys: Counter = Counter()

    def turns(self) -> list[dict]:
        if self.path.exists():
            with self.path.open("rb") as fh:
                fh.seek(self._offset)
                data = fh.read()
            complete = data[: data.rfind(b"\n") + 1]
            self._offset += len(complete)
            for line in complete.decode().splitlines():
                if line.strip():
                    turn = json.loads(line)
                    self._turns.append(turn)
                    self._keys.update(turn["keys"])
        return self._turns

    def keys(self) -> Counter:
        self.turns()
        return Counter(self._keys)

    def wait_for(self, expected: Iterable[str], timeout: float) -> bool:
        want = set(expected)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.turns()
            if want <= self._keys.keys():
                return True
            time.sleep(0.25)
        self.turns()
        missing = want - self._keys.keys()
        if missing:
            print(
                f"ledger: {len(missing)} of {len(want)} not delivered after {timeout}s, e.g. {sorted(missing)[:3]};"
                f" {len(self._keys)} keys in {len(self._turns)} turns"
            )
        return not missing

    def verdict(
        self,
        scenario: str,
        expected: set[str],
        *,
        killed: Iterable[int] = (),
        deadlocks: int | None = None,
    ) -> Verdict:
        """Check and record: every expected key delivered; a key delivered more than
        once only if one of its deliveries was by a killed (or frozen) engine:
        at-least-once across a crash, and then always under the same key. With
        ``deadlocks`` (PostgreSQL's count over the scenario): none."""
        killed = set(killed)
        first: dict[str, tuple[int, float, int]] = {}
        by: dict[str, set[int]] = {}
        count: Counter = Counter()
        for turn in self.turns():
            for key, due in zip(turn["keys"], turn["due_us"], strict=True):
                count[key] += 1
                by.setdefault(key, set()).add(turn["pid"])
                if key not in first:
                    first[key] = (turn["pid"], turn["t"], due)
        unknown = set(count) - expected
        assert not unknown, (
            f"{scenario}: delivered keys that were never expected: {sorted(unknown)[:5]}"
        )
        lost = expected - set(count)
        repeats = {k for k, n in count.items() if n > 1}
        bad = {
            k for k in repeats if not by[k] & killed
        }  # a repeat needs a crashed (or frozen) engine
        late = [(t - due / 1e6) * 1000 for _pid, t, due in first.values()]
        v = Verdict(
            scenario,
            len(expected),
            len(count),
            len(lost),
            sum(count[k] - 1 for k in repeats),
            max(late) if late else 0.0,
            {first[k][0] for k in repeats},
            deadlocks,
        )
        v.record()
        assert not lost, f"{scenario}: {len(lost)} occurrence(s) lost, e.g. {sorted(lost)[:3]}"
        assert not bad, (
            f"{scenario}: {len(bad)} delivered twice without a crash, e.g. {sorted(bad)[:3]}"
        )
        assert not deadlocks, f"{scenario}: PostgreSQL detected {deadlocks} deadlock(s)"
        return v
