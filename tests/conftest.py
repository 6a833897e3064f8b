"""Shared fixtures: a fake clock, and stores on every backend.

The store contract runs over SQLite (a real file) and PostgreSQL (the server at
REMINDKIT_TEST_PG, default postgresql+psycopg://postgres@127.0.0.1:5432/test),
each test in a schema of its own. Without a reachable server the PostgreSQL
cases skip with the reason, unless REMINDKIT_REQUIRE_PG=1 (as in CI), where
they fail.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from remindkit.clock import FakeClock
from remindkit.settings import Settings
from remindkit.store import SqlStore, open_store

PG_URL = os.environ.get("REMINDKIT_TEST_PG", "postgresql+psycopg://postgres@127.0.0.1:5432/test")
REQUIRE_PG = os.environ.get("REMINDKIT_REQUIRE_PG") == "1"


def second_user_or_skip(*commands: str) -> None:
    """For a test whose attack is made by another Unix user (made with ``useradd``): it
    needs root and ``commands``. Without them it skips with the reason, unless
    ``REMINDKIT_REQUIRE_USERS=1`` (scripts/test sets it), where it fails: the suite's
    attack table must not lose its rows quietly."""
    import shutil

    why = None
    if os.geteuid() != 0:
        why = "needs root: the attack is made by a second Unix user, created with useradd"
    else:
        missing = [c for c in commands if shutil.which(c) is None]
        if missing:
            why = f"{'/'.join(missing)} not installed"
    if why is not None:
        cannot_run(why, "REMINDKIT_REQUIRE_USERS")


def cannot_run(why: str, variable: str) -> None:
    """Skip with ``why``, or fail when the environment's ``variable`` is 1."""
    if os.environ.get(variable) == "1":
        pytest.fail(f"{variable}=1 but the test cannot run: {why}")
    pytest.skip(why)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--soak", action="store_true", help="run the long soak tests")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if config.getoption("--soak"):
        return
    skip = pytest.mark.skip(reason="long soak: run with --soak")
    for item in items:
        if "soak" in item.keywords:
            item.add_marker(skip)


def _pg_reachable() -> str | None:
    try:
        import psycopg
        from sqlalchemy.engine import make_url

        url = make_url(PG_URL).set(drivername="postgresql")
        with psycopg.connect(url.render_as_string(hide_password=False), connect_timeout=3):
            return None
    except Exception as exc:  # pragma: no cover - depends on the machine
        return f"PostgreSQL at {PG_URL} is not reachable: {exc}"


_PG_PROBLEM: str | None | bool = False


def pg_problem() -> str | None:
    global _PG_PROBLEM
    if _PG_PROBLEM is False:
        _PG_PROBLEM = _pg_reachable()
    return _PG_PROBLEM  # type: ignore[return-value]


def need_pg() -> None:
    problem = pg_problem()
    if problem:
        if REQUIRE_PG:
            pytest.fail(problem)
        pytest.skip(problem)


@pytest.fixture
def pg_schema_url() -> Iterator[str]:
    """A PostgreSQL URL whose search_path is a fresh schema (dropped afterwards)."""
    need_pg()
    import psycopg
    from sqlalchemy.engine import make_url

    schema = f"rk_{uuid.uuid4().hex[:12]}"
    raw = make_url(PG_URL).set(drivername="postgresql").render_as_string(hide_password=False)
    with psycopg.connect(raw, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
    url = make_url(PG_URL).update_query_dict({"options": f"-csearch_path={schema}"})
    try:
        yield url.render_as_string(hide_password=False)
    finally:
        with psycopg.connect(raw, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock("2026-01-05T09:00:00Z")


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings.from_env(env={}, home=tmp_path / "home", tz="UTC")


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'store.db'}"


@pytest.fixture(params=["sqlite", "postgres"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'store.db'}"
    return request.getfixturevalue("pg_schema_url")


@pytest.fixture
def store(store_url: str, settings: Settings) -> Iterator[SqlStore]:
    s = open_store(store_url, settings=settings)
    try:
        yield s
    finally:
        s.close()


@pytest.fixture
def sqlite_store(sqlite_url: str, settings: Settings) -> Iterator[SqlStore]:
    s = open_store(sqlite_url, settings=settings)
    try:
        yield s
    finally:
        s.close()


# -- the reliability report ------------------------------------------------------------------

RELIABILITY_REPORT = Path(
    os.environ.get("RK_RELIABILITY_REPORT", "test-artifacts/reliability.jsonl")
)


def pytest_sessionstart(session: pytest.Session) -> None:
    if RELIABILITY_REPORT.exists():
        RELIABILITY_REPORT.unlink()


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:  # type: ignore[no-untyped-def]
    """Print the table of fault scenarios run: occurrences, lost, duplicates, lateness,
    and PostgreSQL's deadlocks where a scenario counted them."""
    if not RELIABILITY_REPORT.exists():
        return
    import json

    rows = [
        json.loads(line) for line in RELIABILITY_REPORT.read_text().splitlines() if line.strip()
    ]
    attacks = [r for r in rows if "attack" in r]
    rows = [r for r in rows if "scenario" in r]
    tr = terminalreporter
    if rows:
        tr.section("reliability report")
        width = max(len(r["scenario"]) for r in rows)
        tr.write_line(
            f"{'scenario'.ljust(width)}  occurrences   lost  duplicates  max lateness (ms)  deadlocks"
        )
        for r in rows:
            dl = r.get("deadlocks")
            tr.write_line(
                f"{r['scenario'].ljust(width)}  {r['occurrences']:>11}  {r['lost']:>5}  {r['duplicates']:>10}"
                f"  {r['max_late_ms']:>17.1f}  {'-' if dl is None else dl:>9}"
            )
        tr.write_line(
            "duplicates: repeats of a turn cut short by SIGKILL/SIGSTOP (at-least-once), each under its own key"
        )
    if attacks:
        tr.section("attacks")
        tr.write_line("| attack | before | after |")
        tr.write_line("|---|---|---|")
        for r in attacks:
            tr.write_line(f"| {r['attack']} | {r['before']} | {r['after']} |")
