"""The alerter of a desktop machine: notification, alarm, then speech.

:class:`LocalAlerter` is what ``remindkit serve`` and the tray hand to their
engine (:func:`default_alerter`). For a fire whose reminder asks for an alarm or
an announcement, the engine's dispatcher calls :meth:`LocalAlerter.alert` after
publishing the fired event and before delivery, once per occurrence (it wins a
compare-and-set on the occurrence's ``alert`` column first). In order:

1. the desktop notification (always, also when muted or in quiet hours);
2. unless muted or in quiet hours: the alarm WAV, to its end;
3. then the ``announce`` text, spoken by a fresh worker process.

Every step has its own timeout and failures are logged, never raised, so the
delivery that follows is never blocked for long and never lost. The result is
``done``, ``muted`` (silenced by the switches) or ``failed`` (a wanted sound
did not play, e.g. no audio device), which the dispatcher records.

:meth:`LocalAlerter.attach` connects it to an engine (the graph's
:meth:`~remindkit.wiring.Graph.engine` does): it learns the store (mute, quiet
hours, voice and rate flags) and the reminders API (Snooze from a notification), and it
shows notifications for the engine's fires that have no alarm or announcement
(those never reach :meth:`alert`), so every fire gets one notification, from the
engine that fired it.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from .. import events as ev
from ..clock import Clock, SystemClock
from ..models import AlertState, Fire
from .alarm import AlarmPlayer, PlayResult
from .config import AlertConfig
from .notify import Notifier, NotifyResult
from .quiet import Silence, Switches
from .speech import Speaker, SpeechResult

if TYPE_CHECKING:
    from ..reminders import Reminders

log = logging.getLogger(__name__)
DONE, MUTED, FAILED = AlertState.DONE, AlertState.MUTED, AlertState.FAILED


@dataclass(frozen=True)
class AlertRecord:
    """What one alert did, with the instants of each step (for the tray and tests)."""

    key: str
    reminder_id: str
    label: str | None
    state: AlertState
    silence: Silence
    notify: NotifyResult | None = None
    alarm: PlayResult | None = None
    speech: SpeechResult | None = None
    marks: tuple[tuple[str, datetime], ...] = field(default=())

    def at(self, mark: str) -> datetime | None:
        return next((t for name, t in self.marks if name == mark), None)

    @property
    def problems(self) -> list[str]:
        out = []
        if self.alarm is not None and not self.alarm.ok:
            out.append(f"alarm: {self.alarm.error}")
        if self.speech is not None and not self.speech.ok:
            out.append(f"speech: {self.speech.error}")
        return out


class LocalAlerter:
    def __init__(
        self,
        config: AlertConfig | None = None,
        *,
        player: AlarmPlayer | None = None,
        speaker: Speaker | None = None,
        notifier: Notifier | None = None,
        switches: Switches | None = None,
        clock: Clock | None = None,
        keep: int = 50,
    ) -> None:
        self.config = config or AlertConfig.from_env()
        cfg = self.config
        self.player = player or AlarmPlayer(cfg.players, timeout_s=cfg.alarm_timeout_s)
        self.speaker = speaker or Speaker(self.player, timeout_s=cfg.speech_timeout_s)
        self.notifier = (
            notifier
            if notifier is not None
            else (
                Notifier(snooze_label=f"Snooze {cfg.snooze}", timeout_s=cfg.notify_timeout_s)
                if cfg.notify
                else None
            )
        )
        if self.notifier is not None and self.notifier.on_action is None:
            self.notifier.on_action = self.on_action
        self.switches = switches or Switches()
        self.clock: Clock = clock or SystemClock()
        self.store: Any = None
        self.api: Reminders | None = None
        self.tz: str | None = None
        self.records: deque[AlertRecord] = deque(maxlen=keep)
        self._halt = threading.Event()
        self._plain: ThreadPoolExecutor | None = None
        self._unsubscribe: list[Any] = []

    # -- wiring --------------------------------------------------------------------------

    def attach(self, engine: Any, api: Reminders) -> LocalAlerter:
        """Use ``engine``'s store and clock; notify its fires that carry no alarm or
        speech; snooze from a notification through ``api``
        (:meth:`remindkit.wiring.Graph.engine` attaches it so)."""
        self.store = engine.store
        self.api = api
        self.clock = engine.clock
        self.tz = getattr(engine.settings, "tz", None)
        self.switches = Switches(engine.store.coordination, env=self.switches.env)
        if self.notifier is not None and self._plain is None:
            self._plain = ThreadPoolExecutor(1, thread_name_prefix="remindkit-notify")
            self._unsubscribe.append(engine.events.subscribe(ev.Fired, self._on_fired))
        return self

    def _on_fired(self, event: ev.Fired) -> None:
        fire = event.fire
        if fire.alert is None and self._plain is not None and self.notifier is not None:
            self._plain.submit(self.notifier.notify, fire)

    # -- the alert -----------------------------------------------------------------------

    def alert(self, fire: Fire) -> AlertState:
        """Notify, then alarm and speech unless silenced; ``done``/``muted``/``failed``."""
        self._halt.clear()
        marks: list[tuple[str, datetime]] = [("start", self.clock.now())]
        cfg = self._config()
        silence = self._silence()
        note = None
        if self.notifier is not None:
            note = self.notifier.notify(fire)
            marks.append(("notify", self.clock.now()))
        if silence.silent:
            log.info("alert for %s silenced (%s); notification only", fire.key, silence.reason)
            return self._record(fire, MUTED, silence, note, None, None, marks)
        alarm = speech = None
        if fire.alarm:
            marks.append(("alarm.start", self.clock.now()))
            alarm = self.player.play(cfg.alarm_path, timeout_s=cfg.alarm_timeout_s)
            marks.append(("alarm.end", self.clock.now()))
            if not alarm.ok:
                self._sound_failed("alarm for %s did not play: %s", fire.key, alarm.error)
        if fire.announce and not self._halt.is_set():
            marks.append(("speech.start", self.clock.now()))
            speech = self.speaker.say(
                fire.announce, voice=cfg.voice, rate=cfg.rate, timeout_s=cfg.speech_timeout_s
            )
            marks.append(("speech.end", self.clock.now()))
            if not speech.ok:
                self._sound_failed("announcement for %s was not spoken: %s", fire.key, speech.error)
        failed = (alarm is not None and not alarm.ok) or (
            speech is not None and not speech.ok and not speech.stopped
        )
        return self._record(fire, FAILED if failed else DONE, silence, note, alarm, speech, marks)

    no_audio = False  # no player could open a sound device (said once in the log)

    def _sound_failed(self, what: str, key: str, error: str | None) -> None:
        if error and "audio unavailable" in error:
            if not self.no_audio:
                self.no_audio = True
                log.warning("no audio device: alarms and speech are not heard here (%s)", error)
            else:
                log.debug(what, key, error)
            return
        log.warning(what, key, error)

    def stop_sound(self) -> None:
        """End the alarm or speech playing now, and skip what remains of this alert."""
        self._halt.set()
        self.player.stop()
        self.speaker.stop()

    @property
    def sounding(self) -> bool:
        return self.player.playing

    def on_action(self, reminder_id: str, key: str, action: str) -> None:
        """A notification button: ``snooze`` (fire again after the snooze) or ``dismiss``."""
        self.stop_sound()
        if action != "snooze":
            return
        if self.api is None:
            log.warning("cannot snooze %s: this alerter is attached to no engine", reminder_id)
            return
        rem = self.api.snooze(reminder_id, self.config.snooze)
        log.info(
            "snoozed %s (%s) from its notification; next at %s", reminder_id, key, rem.next_fire_at
        )

    def close(self) -> None:
        for unsubscribe in self._unsubscribe:
            unsubscribe()
        if self._plain is not None:
            self._plain.shutdown(wait=False, cancel_futures=True)
        if self.notifier is not None:
            self.notifier.close()

    # -- helpers -------------------------------------------------------------------------

    def _config(self) -> AlertConfig:
        try:
            return self.config.with_store(self.store)
        except Exception as exc:
            log.warning("cannot read voice settings from the store (%s); using defaults", exc)
            return self.config

    def _silence(self) -> Silence:
        try:
            return self.switches.silence(self.clock.now(), tz=self.tz)
        except Exception as exc:  # the store is down: an alarm is better than none
            log.warning("cannot read mute / quiet hours (%s); alerting", exc)
            return Silence(False)

    def _record(
        self,
        fire: Fire,
        state: AlertState,
        silence: Silence,
        note: NotifyResult | None,
        alarm: PlayResult | None,
        speech: SpeechResult | None,
        marks: list[tuple[str, datetime]],
    ) -> AlertState:
        marks.append(("end", self.clock.now()))
        rec = AlertRecord(
            fire.key,
            fire.reminder_id,
            fire.label,
            state,
            silence,
            note,
            alarm,
            speech,
            tuple(marks),
        )
        self.records.append(rec)
        log.info(
            "alert for %s: %s%s",
            fire.key,
            state,
            f" ({'; '.join(rec.problems)})" if rec.problems else "",
        )
        return state


def default_alerter() -> LocalAlerter:
    """The alerter ``remindkit serve`` and the tray use: settings from the environment."""
    return LocalAlerter(AlertConfig.from_env())
