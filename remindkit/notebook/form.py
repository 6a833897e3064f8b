"""A small form to add a reminder: text, when (in / at / every / cron), zone,
repeat, alarm, announce.

It goes through the reminders API like every other way in, so the same limits
and error codes apply: a refusal shows as ``interval_too_short: …`` under the
form and writes nothing. The pills show the new reminder with the next refresh.
"""

from __future__ import annotations

import html
from typing import Any

import ipywidgets as widgets

from ..errors import RemindkitError
from ..models import Reminder, ReminderSpec, Source
from ..reminders import Reminders
from ..schedules.zones import get_zone
from .hub import Hub

WHEN = ("in", "at", "every", "cron")
PLACEHOLDERS = {
    "in": "5m, 90s, 1h30m",
    "at": "09:00, 2026-12-01T09:00",
    "every": "30s, 2m, 1h",
    "cron": "0 9 * * 1-5",
}
ARGUMENT = {"in": "in_", "at": "at", "every": "every", "cron": "cron"}


class ReminderForm(widgets.VBox):
    def __init__(
        self, api: Reminders, hub: Hub, *, session: str | None = None, **kwargs: Any
    ) -> None:
        self.api = api
        self.hub = hub
        self.session = session
        self.text = widgets.Text(placeholder="Remind me to…", layout=widgets.Layout(width="260px"))
        self.label = widgets.Text(
            placeholder="label (optional)", layout=widgets.Layout(width="140px")
        )
        self.when = widgets.Dropdown(
            options=list(WHEN), value="in", layout=widgets.Layout(width="80px")
        )
        self.value = widgets.Text(
            placeholder=PLACEHOLDERS["in"], layout=widgets.Layout(width="160px")
        )
        self.zone = widgets.Text(
            value=api.default_tz, placeholder="zone", layout=widgets.Layout(width="140px")
        )
        self.repeat = widgets.Text(
            placeholder="repeat: N or forever", disabled=True, layout=widgets.Layout(width="150px")
        )
        self.alarm = widgets.Checkbox(
            value=False, description="alarm", indent=False, layout=widgets.Layout(width="70px")
        )
        self.announce = widgets.Text(
            placeholder="announce (spoken)", layout=widgets.Layout(width="200px")
        )
        self.add = widgets.Button(description="Add reminder", button_style="primary", icon="plus")
        self.status = widgets.HTML("")
        self.when.observe(self._when_changed, names="value")
        self.add.on_click(lambda _b: self.submit())
        super().__init__(
            [
                widgets.HBox([self.text, self.label, self.when, self.value]),
                widgets.HBox([self.zone, self.repeat, self.alarm, self.announce, self.add]),
                self.status,
            ],
            **kwargs,
        )
        self.add_class("rk-form")

    def _when_changed(self, change: dict[str, Any]) -> None:
        self.value.placeholder = PLACEHOLDERS.get(change["new"], "")
        self.repeat.disabled = change["new"] not in ("every", "cron")

    def spec(self) -> ReminderSpec:
        """The reminder the form describes, as the request the reminders API takes."""
        when = self.when.value
        fields: dict[str, Any] = {ARGUMENT[when]: self.value.value.strip() or None}
        if when in ("every", "cron") and self.repeat.value.strip():
            fields["repeat"] = self.repeat.value.strip()
        return ReminderSpec(
            self.text.value,
            session=self.session,
            label=self.label.value or None,
            tz=self.zone.value.strip() or None,
            alarm=bool(self.alarm.value),
            announce=self.announce.value or None,
            source=Source.NOTEBOOK,
            **fields,
        )

    def submit(self) -> Reminder | None:
        """Create the reminder the form describes; show what happened under it."""
        try:
            rem = self.api.add(self.spec()).reminder
        except RemindkitError as exc:
            message = f"<span style='color:#c62828'>{html.escape(exc.code)}: {html.escape(exc.message)}</span>"
            self.hub.post(lambda: setattr(self.status, "value", message))
            return None
        when_text = (
            ""
            if rem.next_fire_at is None
            else rem.next_fire_at.astimezone(get_zone(rem.schedule.tz)).strftime(
                "%Y-%m-%d %H:%M:%S %Z"
            )
        )
        done = f"✓ {html.escape(rem.label or rem.text)}: {html.escape(rem.schedule.describe())}, next {when_text}"

        def show() -> None:
            self.status.value = done
            for field in (self.text, self.label, self.value, self.announce, self.repeat):
                field.value = ""

        self.hub.post(show)
        self.hub.refresh()
        return rem


__all__ = ["ReminderForm"]
