"""The one builder of a process's graph: what it fills in, and what it leaves as given."""

from __future__ import annotations

from pathlib import Path

from remindkit.audit import Surface
from remindkit.clock import FakeClock, SystemClock
from remindkit.reminders import Reminders
from remindkit.settings import Settings
from remindkit.store import SqlStore
from remindkit.wiring import build


def test_given_parts_are_kept_and_the_rest_filled_in(
    sqlite_store: SqlStore, clock: FakeClock
) -> None:
    graph = build(store=sqlite_store, clock=clock)
    assert graph.store is sqlite_store
    assert graph.clock is clock
    assert graph.settings is sqlite_store.settings  # the store's, not the environment's
    assert graph.api.store is sqlite_store and graph.api.clock is clock
    assert graph.api.surface == Surface.API
    assert graph.adapters is None


def test_without_a_store_it_opens_the_one_named(tmp_path: Path, settings: Settings) -> None:
    graph = build(settings, db=f"sqlite:///{tmp_path / 'x.db'}", surface=Surface.CLI)
    try:
        assert str(tmp_path / "x.db") in graph.store.url
        assert graph.settings is settings and graph.store.settings is settings
        assert isinstance(graph.clock, SystemClock)
        assert graph.api.surface == Surface.CLI
    finally:
        graph.close()


def test_engines_share_the_graphs_parts(sqlite_store: SqlStore, clock: FakeClock) -> None:
    graph = build(store=sqlite_store, clock=clock)
    engine = graph.engine(role="tray", alert_priority=10, can_alert=False)
    try:
        assert engine.store is sqlite_store and engine.clock is clock
        assert engine.settings is graph.settings
        assert engine.events is graph.events  # what the surface subscribes to
        assert engine.role == "tray" and engine.alert_priority == 10
        assert engine.can_alert is False
        assert engine.adapters.get("python") is not None  # the default set
    finally:
        engine.close()


def test_another_surface_keeps_the_parts(sqlite_store: SqlStore, settings: Settings) -> None:
    graph = build(store=sqlite_store)
    limited = settings.with_limits(per_project=3)
    api_graph = graph.for_surface("api", settings=limited)
    assert api_graph.store is graph.store and api_graph.clock is graph.clock
    assert api_graph.events is graph.events
    assert api_graph.settings is limited and api_graph.api.settings is limited
    assert api_graph.api.surface == Surface.API
    assert graph.for_surface("tray").api.surface == Surface.TRAY


def test_a_graph_around_an_existing_api(sqlite_store: SqlStore, clock: FakeClock) -> None:
    api = build(store=sqlite_store, clock=clock, surface="notebook").api
    graph = build(api=api)
    assert graph.api is api
    assert graph.store is sqlite_store and graph.clock is clock


def test_an_engine_gets_its_alerter_attached(sqlite_store: SqlStore, clock: FakeClock) -> None:
    graph = build(store=sqlite_store, clock=clock)
    attached: list[tuple[object, object]] = []

    class Recorder:
        def alert(self, fire: object) -> str:
            return "done"

        def attach(self, engine: object, api: object) -> None:
            attached.append((engine, api))

    alerter = Recorder()
    engine = graph.engine(alerter=alerter)
    quiet = graph.engine()
    try:
        [(to, api)] = attached
        assert to is engine and engine.alerter is alerter and engine.can_alert
        assert isinstance(api, Reminders) and api.store is sqlite_store
        assert api.surface == Surface.TRAY  # a notification's Snooze is the person's
        assert quiet.alerter is None and not quiet.can_alert  # it leaves alerts to another
    finally:
        engine.close()
        quiet.close()


def test_agents_act_through_the_graphs_api(sqlite_store: SqlStore, clock: FakeClock) -> None:
    graph = build(store=sqlite_store, clock=clock)
    engine = graph.engine()
    try:
        openai = engine.adapters.unguarded("openai")
        command = engine.adapters.unguarded("command")
        assert getattr(openai, "api", None) is graph.api
        assert getattr(getattr(command, "turns", None), "api", None) is graph.api
    finally:
        engine.close()
