"""``remindkit alerts [status]|mute|unmute|quiet HH:MM-HH:MM|off|voice V|rate N|test``.

Mute, quiet hours, voice and rate are kept in the store, so the tray, ``serve``
and notebook kernels sharing it all follow them at their next alert.
"""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING, Any, TextIO

from ..errors import InvalidInput
from .context import Context
from .scope import refuse_in_scope

if TYPE_CHECKING:
    from ..reminders import Reminders


def add_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    a = sub.add_parser(
        "alerts", parents=[common], help="alarm, speech and notification settings (all processes)"
    )
    aa = a.add_subparsers(dest="alerts_command", metavar="ACTION")
    aa.add_parser("status", parents=[common], help="show the settings (the default)")
    aa.add_parser("mute", parents=[common], help="no alarm or speech (notifications still shown)")
    aa.add_parser("unmute", parents=[common], help="alarm and speech again")
    q = aa.add_parser("quiet", parents=[common], help="daily quiet hours, e.g. 22:00-07:00, or off")
    q.add_argument("hours")
    v = aa.add_parser(
        "voice", parents=[common], help="voice for announcements (id, name or language), or default"
    )
    v.add_argument("voice")
    r = aa.add_parser(
        "rate", parents=[common], help="speech rate in words per minute (40-600), or default"
    )
    r.add_argument("rate")
    t = aa.add_parser(
        "test", parents=[common], help="play the alarm and speak a sentence here, now"
    )
    t.add_argument("--text", default="This is a remindkit test.")
    a.set_defaults(func=run_command)


def run_command(cx: Context) -> int:
    action = cx.args.alerts_command or "status"
    if action != "status":  # the settings every engine on the store follows
        refuse_in_scope(f"alerts {action}")
    return run(cx.args, cx.api, cx.out)


def run(args: argparse.Namespace, api: Reminders, out: TextIO) -> int:
    from ..alerts.config import RATE, VOICE, AlertConfig
    from ..alerts.quiet import QuietHours, Switches
    from ..checks import check_printable
    from ..clock import to_us

    store = api.store
    now_us = to_us(api.clock.now())
    switches = Switches(store.coordination)
    action = args.alerts_command or "status"
    if action in ("mute", "unmute"):
        switches.set_muted(action == "mute", now_us=now_us)
    elif action == "quiet":
        switches.set_quiet_hours(QuietHours.parse(args.hours), now_us=now_us)
    elif action == "voice":
        voice = check_printable(args.voice, "the voice", 200)
        store.coordination.set_flag(
            VOICE, "" if voice.lower() == "default" else voice, now_us=now_us
        )
    elif action == "rate":
        value = "" if args.rate.lower() == "default" else args.rate
        if value and not (value.isdigit() and 40 <= int(value) <= 600):
            raise InvalidInput(
                f"rate {args.rate!r} is not 40-600 words per minute or default",
                code="invalid_argument",
            )
        store.coordination.set_flag(RATE, value, now_us=now_us)
    elif action == "test":
        return _test(args, api, out)
    cfg = AlertConfig.from_env().with_store(store)
    quiet = switches.quiet_hours
    data = {
        "muted": switches.muted,
        "quiet_hours": None if quiet is None else str(quiet),
        "silent_now": switches.silence(api.clock.now(), tz=api.settings.tz).reason,
        "voice": cfg.voice,
        "rate": cfg.rate,
        "alarm": str(cfg.alarm_path),
        "players": list(cfg.players),
        "notifications": cfg.notify,
    }
    if args.json:
        out.write(json.dumps(data) + "\n")
    else:
        for key, value in data.items():
            out.write(f"{key:14} {'-' if value is None else value}\n")
    return 0


def _test(args: argparse.Namespace, api: Reminders, out: TextIO) -> int:
    from ..alerts.local import default_alerter
    from ..alerts.quiet import Switches
    from ..models import Fire

    alerter = default_alerter()
    alerter.store = api.store
    alerter.switches = Switches(api.store.coordination)
    now = api.clock.now()
    fire = Fire(
        occurrence_id=0,
        reminder_id="rem_test",
        session=None,
        due_at=now,
        text=args.text,
        label="remindkit test",
        alarm=True,
        announce=args.text,
        fired_at=now,
    )
    try:
        state = alerter.alert(fire)
    finally:
        alerter.close()
    rec = alerter.records[-1]
    result = {
        "state": state,
        "silenced": rec.silence.reason,
        "notification": None if rec.notify is None else (rec.notify.how or rec.notify.error),
        "alarm": None
        if rec.alarm is None
        else (rec.alarm.player if rec.alarm.ok else rec.alarm.error),
        "speech": None
        if rec.speech is None
        else (rec.speech.engine if rec.speech.ok else rec.speech.error),
    }
    if args.json:
        out.write(json.dumps(result) + "\n")
    else:
        for key, value in result.items():
            out.write(f"{key:14} {'-' if value is None else value}\n")
    return 0 if state != "failed" else 1
