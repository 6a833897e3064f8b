"""A reminder made through the driver alone (`remind` with no engine to hand it to:
remindkit.store.lite opened for writing) fires from a real `remindkit serve`: one made
before the engine starts, and one made while it sleeps (the wake-up hint reaches it)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import datetime, timedelta, timezone

import pytest

from remindkit.audit import Surface
from remindkit.clock import SystemClock, to_us
from remindkit.reminders import Reminders
from remindkit.store import open_store
from remindkit.store.lite import open_lite

from .conftest import ROOT, add_ledger_sessions, read_ledger, wait_for

pytestmark = pytest.mark.processes


def test_a_reminder_made_through_the_driver_alone_fires(settings, serves, tmp_path):
    ledger = tmp_path / "ledger"
    url = f"sqlite:///{tmp_path / 'shared.db'}"
    store = open_store(url, settings=settings)
    add_ledger_sessions(store, ["s1"], ledger, to_us(datetime.now(timezone.utc)))
    # made by the command line with no engine running: through the driver alone
    env = {k: v for k, v in os.environ.items() if not k.startswith("REMINDKIT_")}
    env.update(REMINDKIT_HOME=str(tmp_path), REMINDKIT_DB=url, PYTHONPATH=str(ROOT))
    code = (
        "import io, json, sys\n"
        "from remindkit.cli.main import main\n"
        "out = io.StringIO()\n"
        "assert main(['remind', 'before the engine', '--session', 's1', '--in', '1s', '--json'],\n"
        "            stdout=out, stderr=io.StringIO()) == 0\n"
        "print(json.dumps({'rem': json.loads(out.getvalue()),\n"
        "                  'sqlalchemy': 'sqlalchemy' in sys.modules}))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    made = json.loads(proc.stdout)
    assert made["sqlalchemy"] is False
    first = f"{made['rem']['id']}@{made['rem']['next_fire_at']}"

    serves(url, 1, env={"REMINDKIT_WAIT_CAP": "30"})
    assert wait_for(lambda: [k for _p, k in read_ledger(ledger) if k == first], 20), (
        "the reminder made before the engine started did not fire"
    )

    # made while the engine sleeps (its cap: 30 s), 300 ms before it is due: on time
    lite = open_lite(url, settings=settings, write=True)
    assert lite is not None
    try:
        api = Reminders(lite, clock=SystemClock(), settings=settings, surface=Surface.CLI)  # type: ignore[arg-type]
        due = datetime.now(timezone.utc) + timedelta(milliseconds=300)
        created = api.add("while it sleeps", session="s1", at=due.isoformat())
        assert created.armed is True  # the running engine's heartbeat, read in the create
        r = created.reminder
        key = f"{r.id}@{r.to_dict()['next_fire_at']}"
        assert wait_for(lambda: [k for _p, k in read_ledger(ledger) if k == key], 10, step=0.005)
    finally:
        lite.close()
    (occ,) = wait_for(
        lambda: [o for o in store.reminders.history(reminder_id=r.id) if o.state == "delivered"],
        5,
    )
    assert occ.late_ms < 1000, f"fired {occ.late_ms} ms late: the hint did not wake the engine"
    store.close()
