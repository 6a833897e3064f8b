"""``rk.panel(chat)``: pills, a form and the chat, in one widget.

:class:`Panel` puts together the pills of a session's live reminders (or of
every session), the form to add one, and, for a chat, the chat view. It
registers with this kernel's runtime (:mod:`.runtime`): the hub refreshes it
when the store changes in any process (within a second) and after every turn,
and the engine's browser alerter plays alarms through it while no tray holds
the alerter lease.

>>> chat = rk.chat(model=my_agent)      # doctest: +SKIP
>>> rk.panel(chat)                      # doctest: +SKIP
"""

from __future__ import annotations

import html
from typing import Any

import ipywidgets as widgets

from ..chats.session import ChatSession
from ..clock import to_us
from ..schedules import local_zone_name
from ..schedules.zones import get_zone
from ..settings import Settings
from ..store import SqlStore
from ..store.reports import stats_text
from .chatview import ChatView
from .form import ReminderForm
from .pills import PillsWidget
from .runtime import KernelRuntime, runtime_for


class Panel(widgets.VBox):
    def __init__(
        self,
        runtime: KernelRuntime,
        *,
        chat: ChatSession | None = None,
        session: Any = Any,
        snooze: str = "5m",
        form: bool = True,
        title: str | None = None,
    ) -> None:
        self.runtime = runtime
        self.chat = chat
        self.session = chat.id if chat is not None else session
        settings = chat.settings if chat is not None else runtime.settings
        self.api = runtime.graph.for_surface("notebook", settings=settings).api
        zone = get_zone(settings.tz or local_zone_name())
        hub = runtime.hub
        self.pills = PillsWidget(
            self.api, hub, session=self.session, snooze=snooze, alerts_where=runtime.alerts_where
        )
        self.form = (
            ReminderForm(self.api, hub, session=self.session if self.session is not Any else None)
            if form
            else None
        )
        self.chat_view = ChatView(chat, hub, zone=zone) if chat is not None else None
        scope = "every session" if self.session is Any else f"session {self.session}"
        heading = widgets.HTML(
            f"<span class='rk-panel-title'>{html.escape(title or 'remindkit')}</span>"
            f" <span style='color:#888'>· {html.escape(scope)}</span>"
        )
        self.stats = widgets.HTML("", layout=widgets.Layout(margin="0 0 0 4px"))
        self.stats.add_class("rk-stats")
        parts: list[Any] = [heading, self.pills, self.stats]
        if self.form is not None:
            parts.append(self.form)
        if self.chat_view is not None:
            parts.append(self.chat_view)
        super().__init__(parts)
        self.add_class("rk-panel")
        hub.add(self)
        runtime.alerter.add(self)

    def refresh(self) -> None:
        """Read the store into the widgets (on the hub thread)."""
        self.pills.refresh()
        self.stats.value = html.escape(self.stats_text())
        if self.chat_view is not None:
            self.chat_view.refresh()

    def stats_text(self) -> str:
        """The last day's fires of this panel's session(s): the counts of ``remindkit stats``."""
        now_us = to_us(self.api.clock.now())
        data = self.api.store.reports.fire_stats(
            since_us=now_us - 86_400_000_000, session=None if self.session is Any else self.session
        )
        return stats_text(data["all"])

    def sync(self, timeout: float = 10.0) -> bool:
        """Refresh now and wait for it: a cell that reads the widgets' state
        right after changing the store calls this first."""
        return self.runtime.hub.sync(timeout)

    def show_alert(self, payload: dict[str, Any]) -> None:
        self.pills.show_alert(payload)

    @property
    def labels(self) -> list[str]:
        """The labels of the pills shown, in order (for cells and tests)."""
        return [str(p["label"]) for p in self.pills.pills]

    def close(self) -> None:
        self.runtime.alerter.discard(self)
        self.runtime.hub.remove(self)
        for child in (self.pills, self.form, self.chat_view):
            if child is not None:
                child.close()
        super().close()


def panel(
    chat: ChatSession | None = None,
    *,
    store: SqlStore | None = None,
    db: str | None = None,
    settings: Settings | None = None,
    session: str | None = None,
    snooze: str = "5m",
    form: bool = True,
    title: str | None = None,
) -> Panel:
    """The widget panel for ``chat`` (its pills, a form, the chat view), or,
    without a chat, the pills of ``session`` or of every session of the store."""
    if chat is not None:
        rt = runtime_for(chat.store)
    else:
        rt = runtime_for(store, db=db, settings=settings)
    scope: Any = session if session is not None else Any
    return Panel(rt, chat=chat, session=scope, snooze=snooze, form=form, title=title)


__all__ = ["Panel", "panel"]
