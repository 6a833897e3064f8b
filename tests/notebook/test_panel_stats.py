"""The panel shows the last day's fires with the same counts as ``remindkit stats``."""

from __future__ import annotations

from typing import Any

from remindkit.chats import ChatSession
from remindkit.clock import FakeClock, to_us
from remindkit.notebook import Panel, ScriptedAssistant
from remindkit.store.reports import stats_text


def test_panel_shows_the_stats_counts(runtime: Any, clock: FakeClock) -> None:
    chat = ChatSession(
        runtime.store,
        session="c1",
        model=ScriptedAssistant(),
        engine=runtime.engine,
        settings=runtime.settings,
    )
    panel = Panel(runtime, chat=chat)
    panel.sync()
    assert panel.stats.value.startswith("last 24h: 0 fires · 0 delivered")
    chat.send("Remind me in 5 seconds to stretch")
    clock.advance(5)
    runtime.engine.tick()
    panel.sync()
    data = runtime.store.reports.fire_stats(
        since_us=to_us(clock.now()) - 86_400_000_000, session="c1"
    )
    assert data["all"]["fires"] == 1 and data["all"]["delivered"] == 1
    assert panel.stats.value == stats_text(data["all"]).replace("&", "&amp;")
    assert "1 fires · 1 delivered · 0 failed" in panel.stats.value
