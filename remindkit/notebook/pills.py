"""Pills: one per live reminder, with a countdown that runs in the browser.

:class:`PillsWidget` (anywidget) syncs the pills (:mod:`.state`) with their due
times; ``static/pills.js`` counts them down every second with the browser's
clock, so the countdown keeps going while a cell blocks the kernel. Each pill has
pause / resume, snooze and a ×. A click is hidden (or shown as paused) in the
browser at once; :meth:`act` then changes the store through the reminders API
when the kernel takes the message (while a cell blocks, JupyterLab 4.6 with
ipykernel 7 runs widget messages on a subshell thread; other front-ends wait
until the kernel is idle). The same widget shows alert banners and plays the
alarm and ``announce`` (see :mod:`.alerts`).

State is written only from the hub thread (:mod:`.hub`); click handlers run on
whichever thread the kernel gives them and only post to it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anywidget
import traitlets

from ..errors import InvalidInput, RemindkitError
from ..reminders import Reminders
from .alerts import default_alarm_uri
from .hub import Hub
from .state import pills as pill_states

STATIC = Path(__file__).with_name("static")
ACTIONS = ("cancel", "pause", "resume", "snooze")


class PillsWidget(anywidget.AnyWidget):
    _esm = (STATIC / "pills.js").read_text(encoding="utf-8")
    _css = (STATIC / "panel.css").read_text(encoding="utf-8")

    pills = traitlets.List(traitlets.Dict()).tag(sync=True)
    alerts = traitlets.Unicode("").tag(
        sync=True
    )  # who plays alarms: "this browser", "the tray", ...
    notice = traitlets.Unicode("").tag(
        sync=True
    )  # the last refusal, e.g. "cancel: not_active: ..."
    snooze = traitlets.Unicode("5m").tag(sync=True)
    show_session = traitlets.Bool(False).tag(sync=True)
    alarm_src = traitlets.Unicode("").tag(sync=True)

    def __init__(
        self,
        api: Reminders,
        hub: Hub,
        *,
        session: Any = Any,
        snooze: str = "5m",
        alerts_where: Any = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(
            snooze=snooze, show_session=session is Any, alarm_src=default_alarm_uri(), **kwargs
        )
        self.api = api
        self.hub = hub
        self.session = session  # a session id, or Any for every session
        self._alerts_where = alerts_where
        self.on_msg(self._on_msg)

    # -- hub thread ----------------------------------------------------------------------

    def refresh(self) -> None:
        """Read the live reminders in scope and sync them if they changed."""
        state = [p.to_json() for p in pill_states(self.api.list(session=self.session))]
        where = _describe(self._alerts_where()) if self._alerts_where is not None else ""
        with self.hold_sync():
            if state != self.pills:
                self.pills = state
            if where != self.alerts:
                self.alerts = where

    def show_alert(self, payload: dict[str, Any]) -> None:
        """Play an alert in the browser (from the engine's alert thread)."""
        self.hub.post(lambda: self.send(dict(payload)))

    # -- clicks (kernel main thread) -----------------------------------------------------

    def _on_msg(self, _widget: Any, content: Any, _buffers: Any) -> None:
        if isinstance(content, dict) and content.get("action") in ACTIONS:
            self.act(str(content["action"]), str(content.get("id", "")))

    def act(self, action: str, reminder_id: str, *, duration: str | None = None) -> str:
        """Cancel, pause, resume or snooze a reminder; returns the notice shown
        (empty when it worked). Only reminders in this widget's scope."""
        notice = ""
        try:
            if action == "cancel":
                self.api.cancel([reminder_id], session=self.session)
            elif action == "pause":
                self.api.pause([reminder_id], session=self.session)
            elif action == "resume":
                self.api.resume([reminder_id], session=self.session)
            elif action == "snooze":
                self.api.snooze(reminder_id, duration or self.snooze, session=self.session)
            else:
                raise InvalidInput(f"unknown action {action!r}", code="invalid_argument")
        except RemindkitError as exc:
            notice = f"{action}: {exc.code}: {exc.message}"
        self.hub.post(lambda: setattr(self, "notice", notice))
        self.hub.refresh()
        return notice


def _describe(where: str) -> str:
    return {"browser": "this browser", "tray": "the tray"}.get(where, where)


__all__ = ["PillsWidget"]
