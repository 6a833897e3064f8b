"""``import`` holds every row to what ``remind`` accepts, and the engine guards
itself against rows that got into the store some other way: rows it cannot
survive are refused (``invalid_import`` with the line, nothing written) or
quarantined, and catch-up after a long outage takes a bounded number of steps."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from remindkit.clock import SystemClock, format_utc, to_us
from remindkit.engine.plan import plan_fire
from remindkit.models import Reminder
from remindkit.reminders import Reminders
from remindkit.schedules.spec import Schedule
from remindkit.settings import Settings
from remindkit.store import open_store
from tests.processes.conftest import Serve, wait_for

from .attacks import record
from .bounded import time_limit

pytestmark = pytest.mark.reliability
ROOT = Path(__file__).resolve().parents[2]
NOW = SystemClock().now()
SOON = format_utc(NOW + timedelta(minutes=5))
T0 = format_utc(NOW - timedelta(days=1))


def reminder(i: int = 0, **change: Any) -> dict[str, Any]:
    row: dict[str, Any] = {
        "type": "reminder",
        "id": f"rem_imp{i:06d}",
        "session": "s1",
        "text": "hello",
        "schedule": {"v": 1, "kind": "at", "tz": "UTC", "first_at": SOON, "repeat": 1},
        "state": "active",
        "next_fire_at": SOON,
        "created_at": T0,
    }
    for key, value in change.items():
        if key == "schedule":
            row["schedule"] = {**row["schedule"], **value}
        elif value is None:
            row.pop(key, None)
        else:
            row[key] = value
    return row


def every(every_s: Any, **more: Any) -> dict[str, Any]:
    return {"kind": "every", "every_s": every_s, "repeat": None, **more}


BAD = [
    ("negative every_s", [reminder(schedule=every(-5))], "every_s"),
    ("1 s interval", [reminder(schedule=every(1))], "interval_too_short"),
    ("1 ms interval", [reminder(schedule=every(0.001), misfire="all")], "every_s"),
    (
        "huge catch-up cap",
        [reminder(schedule=every(60), catchup_cap=10_000_000, misfire="all")],
        "catchup_cap",
    ),
    ("oversized fired_count", [reminder(fired_count=10**30)], "fired_count"),
    ("oversized repeat", [reminder(schedule=every(60, repeat=2**70))], "repeat"),
    ("bool as integer", [reminder(fired_count=True)], "fired_count"),
    ("unknown zone", [reminder(schedule={"tz": "Mars/Olympus"})], "unknown_time_zone"),
    (
        "bad cron",
        [
            reminder(
                schedule={"kind": "cron", "cron": "61 * * * *", "repeat": None, "first_at": None}
            )
        ],
        "invalid_cron",
    ),
    (
        "cron every second",
        [
            reminder(
                schedule={"kind": "cron", "cron": "* * * * * *", "repeat": None, "first_at": None}
            )
        ],
        "interval_too_short",
    ),
    (
        "past the horizon",
        [reminder(next_fire_at=format_utc(NOW + timedelta(days=4000)))],
        "horizon_exceeded",
    ),
    ("no created_at", [reminder(created_at=None)], "created_at"),
    (
        "session without created_at",
        [{"type": "session", "id": "s9", "adapter": None}],
        "created_at",
    ),
    ("repeat 0", [reminder(schedule=every(60, repeat=0))], "repeat"),
    ("slot out of range", [reminder(slot=99)], "slot"),
    ("text too long", [reminder(text="x" * 9_000)], "text_too_long"),
    ("21 in one session", [reminder(i) for i in range(21)], "more than 20"),
    (
        "1000 rows past the total limit",
        [reminder(i, session=f"s{i}") for i in range(1000)],
        "more than 200",
    ),
]


def cli(
    env: dict[str, str], *args: str, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "remindkit", *args],
        env=env,
        text=True,
        capture_output=True,
        timeout=120,
        cwd=ROOT,
        input=stdin,
    )


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    import os

    e = {k: v for k, v in os.environ.items() if not k.startswith("REMINDKIT_")}
    e.update(
        REMINDKIT_HOME=str(tmp_path),
        REMINDKIT_DB=f"sqlite:///{tmp_path / 'store.db'}",
        REMINDKIT_TZ="UTC",
    )
    return e


@pytest.mark.parametrize("rows, why", [(b[1], b[2]) for b in BAD], ids=[b[0] for b in BAD])
def test_import_refuses_rows_remind_would_refuse(
    env: dict[str, str], rows: list[dict[str, Any]], why: str
) -> None:
    header = json.dumps({"remindkit_export": 1})
    body = "\n".join([header, *(json.dumps(r) for r in rows)]) + "\n"
    done = cli(env, "import", "-", stdin=body)
    assert done.returncode == 1, done.stdout
    assert done.stderr.startswith("error: invalid_import: line ") and why in done.stderr, (
        done.stderr
    )
    assert "Traceback" not in done.stderr
    assert json.loads(cli(env, "ls", "--all", "--json").stdout) == []  # nothing written
    assert json.loads(cli(env, "session", "ls", "--json").stdout) == []


def test_the_refusals_name_the_line(env: dict[str, str]) -> None:
    rows = [json.dumps(reminder(i)) for i in range(3)] + [
        json.dumps(reminder(3, schedule=every(-1)))
    ]
    done = cli(env, "import", "-", stdin="\n".join(rows) + "\n")
    assert done.returncode == 1 and "line 4:" in done.stderr, done.stderr
    record(
        "import of rows `remind` refuses: every_s -5, 1 s, 1 ms, catch-up cap 10^7, 10^30 integers, "
        "1,000 rows past the limit of 200, a session without created_at",
        "engine at 70-100 % CPU, 259,207 occurrences at once, MemoryError, limits passed, tracebacks",
        "`invalid_import` with the line number, nothing written",
    )


def minutely_since_2016(**change: Any) -> Reminder:
    start = datetime(2016, 1, 1, tzinfo=UTC)
    sched = Schedule("cron", "UTC", cron="* * * * *", repeat=None)
    rem = Reminder(
        id="rem_old",
        session="s1",
        label=None,
        text="x",
        schedule=sched,
        state="active",
        next_fire_at=start,
        misfire="all",
        catchup_cap=10,
        created_at=start,
        updated_at=start,
    )
    return dataclasses.replace(rem, **change)


def test_catch_up_walks_back_in_bounded_steps() -> None:
    now = datetime(2026, 12, 1, 10, 30, 30, tzinfo=UTC)
    with time_limit(20, "planning ten years of a minutely rule"):
        started = time.monotonic()
        plan = plan_fire(minutely_since_2016(), now)
        took = time.monotonic() - started
    assert [f.due_us for f in plan.fires] == [
        to_us(datetime(2026, 12, 1, 10, 21 + i, tzinfo=UTC)) for i in range(10)
    ]
    assert plan.fires[0].missed >= 390  # counted up to a bound: "at least"
    assert plan.next_fire_us == to_us(datetime(2026, 12, 1, 10, 31, tzinfo=UTC))
    assert took < 5, took


def test_engine_is_not_held_by_a_decade_of_catch_up(env: dict[str, str], tmp_path: Path) -> None:
    """The row in the store (written by an old import): a real engine claims it while
    the command line keeps writing."""
    settings = Settings.from_env(env={}, home=tmp_path, tz="UTC")
    store = open_store(env["REMINDKIT_DB"], settings=settings)
    try:
        store.reminders.import_rows([minutely_since_2016()], [], replace_existing=False)
    finally:
        store.close()
    before = datetime.now(UTC).replace(second=0, microsecond=0)
    engine = Serve(
        env["REMINDKIT_DB"], tmp_path, name="decade", env={"REMINDKIT_BUSY_TIMEOUT_MS": "5000"}
    )
    try:
        engine.wait_ready()

        def rem_old_fires() -> list[dict[str, Any]] | None:
            rows = json.loads(cli(env, "history", "--json", "--limit", "1000").stdout)
            mine = [o for o in rows if o["reminder_id"] == "rem_old"]
            return mine if len(mine) >= 10 else None

        fired = wait_for(rem_old_fires, 60, 0.3)
        checked = datetime.now(UTC)
        # The catch-up is the 10 latest minutes before the claim; a minute that turns
        # between the engine's start and this check fires on its own, once.
        dues = sorted(datetime.fromisoformat(o["due_at"]) for o in fired)
        assert all(b - a == timedelta(minutes=1) for a, b in zip(dues, dues[1:], strict=False)), (
            dues
        )
        assert dues[0] >= before - timedelta(minutes=9), (dues[0], before)
        assert dues[-1] <= checked, (dues[-1], checked)
        turned = int((checked - before).total_seconds() // 60)
        assert 10 <= len(dues) <= 10 + turned, (len(dues), turned)
        started = time.monotonic()
        wrote = cli(env, "remind", "still writable", "--in", "5m", "--session", "s2")
        assert wrote.returncode == 0, wrote.stderr
        assert time.monotonic() - started < 30
    finally:
        engine.stop()
    record(
        "`* * * * *`, misfire all, next fire in 2016 (real engine)",
        "claim held the write lock 160 s; CLI writes failed with store_unavailable",
        "10 latest fired after a walk back of 10 steps; CLI writes go through",
    )


def test_engine_quarantines_a_row_past_its_catch_up_cap(tmp_path: Path) -> None:
    from remindkit.engine import Engine

    settings = Settings.from_env(env={}, home=tmp_path, tz="UTC", catchup_max=50)
    store = open_store(f"sqlite:///{tmp_path / 'store.db'}", settings=settings)
    try:
        start = datetime(2026, 1, 1, tzinfo=UTC)
        rows = [
            minutely_since_2016(id="rem_bigcap", catchup_cap=10_000),
            Reminder(
                id="rem_negative",
                session="s1",
                label=None,
                text="x",
                created_at=start,
                updated_at=start,
                schedule=Schedule("every", "UTC", first_at=start, every_s=-5, repeat=None),
                state="active",
                next_fire_at=start,
            ),
            minutely_since_2016(id="rem_fine"),
        ]
        store.reminders.import_rows(rows, [], replace_existing=False)
        api = Reminders(store, clock=SystemClock(), settings=settings)
        engine = Engine(store, clock=SystemClock(), settings=settings, can_alert=False)
        try:
            with time_limit(60, "one engine step"):
                engine.tick()
        finally:
            engine.close()
        quarantined = dict(store.reminders.quarantined())
        assert set(quarantined) == {"rem_bigcap", "rem_negative"}, quarantined
        assert all("refused plan" in why for why in quarantined.values())
        assert api.get("rem_fine").state == "active" and len(api.history("rem_fine")) == 10
    finally:
        store.close()
    record(
        "rows written straight into the store: catch-up cap 10,000, every_s -5",
        "engine spun or fired thousands at once",
        "quarantined by the engine's own guard "
        "(REMINDKIT_CATCHUP_MAX), listed in `status`; other rows fire",
    )
