"""Alerts on fire: alarm sound, spoken announcement, desktop notification.

The engine calls :meth:`Alerter.alert` for a fire whose reminder asks for an
alarm or an announcement, after publishing the fired event and before delivery.
An alerter never raises and never blocks longer than its own timeouts; a failure
is logged and recorded, and delivery goes on.
"""

from __future__ import annotations

import logging
from typing import Protocol

from ..models import AlertState, Fire

log = logging.getLogger(__name__)


class Alerter(Protocol):
    def alert(self, fire: Fire) -> AlertState:
        """Play the alerts for ``fire``; return ``done``, ``muted`` or ``failed``."""
        ...


class NullAlerter:
    """Logs instead of playing (tests; ``result``: what it records). An engine with no
    alerter at all (``serve --no-alerts``, a headless server) records ``muted``:
    nothing was heard, so a fire for the person alone is not taken as alerted."""

    def __init__(self, result: AlertState = AlertState.DONE) -> None:
        self.played: list[str] = []
        self.result = result

    def alert(self, fire: Fire) -> AlertState:
        log.info(
            "alert for %s (alarm=%s announce=%r): no alert devices here",
            fire.key,
            fire.alarm,
            fire.announce,
        )
        self.played.append(fire.key)
        return self.result
