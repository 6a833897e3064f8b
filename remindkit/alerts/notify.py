"""Desktop notifications: one per fire, with Snooze and Dismiss where supported.

On Linux and the BSDs this speaks the freedesktop notification protocol over
the D-Bus session bus with jeepney (pure Python, the ``notify`` extra):
``Notify`` with the reminder's urgency (critical ones do not expire), and the
``snooze`` / ``dismiss`` actions when the server lists the ``actions``
capability. A listener thread on a second connection turns ``ActionInvoked``
signals into calls of ``on_action(reminder_id, key, action)``.

Without a session bus (a headless server), without jeepney, or on macOS and
Windows, a ``fallback(summary, body)`` callable is used when one is given (the
tray passes pystray's ``notify``; on macOS ``osascript`` is the default), else
the notification is only logged. Nothing here raises; every call is bounded by
a timeout.
"""

from __future__ import annotations

import contextlib
import html
import logging
import re
import shutil
import subprocess
import sys
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..models import Fire

log = logging.getLogger(__name__)

BUS_NAME = "org.freedesktop.Notifications"
PATH = "/org/freedesktop/Notifications"
IFACE = "org.freedesktop.Notifications"
APP_NAME = "remindkit"
ICON = "appointment-soon"
URGENCY = {"low": 0, "normal": 1, "critical": 2}

ActionHandler = Callable[[str, str, str], None]  # (reminder_id, occurrence key, action)


@dataclass(frozen=True)
class NotifyResult:
    ok: bool
    how: str | None = None  # "dbus", "fallback", or None
    id: int | None = None
    error: str | None = None


def summary_and_body(fire: Fire) -> tuple[str, str]:
    """What the notification says: the label (or the start of the text) and the text."""
    title = fire.label or (fire.text.splitlines()[0] if fire.text.strip() else fire.reminder_id)
    if len(title) > 60:
        title = title[:59] + "…"
    body = fire.announce or fire.text
    if len(body) > 400:
        body = body[:399] + "…"
    return f"Reminder: {title}", body


class Notifier:
    def __init__(
        self,
        *,
        snooze_label: str = "Snooze 10m",
        timeout_s: float = 3.0,
        on_action: ActionHandler | None = None,
        fallback: Callable[[str, str], Any] | None = None,
    ) -> None:
        self.snooze_label = snooze_label
        self.timeout_s = timeout_s
        self.on_action = on_action
        self.fallback = fallback if fallback is not None else _default_fallback()
        self._lock = threading.Lock()
        self._conn: Any = None
        self._caps: frozenset[str] | None = None
        self._sent: OrderedDict[int, tuple[str, str]] = (
            OrderedDict()
        )  # notification id -> (reminder, key)
        self._listener: threading.Thread | None = None
        self._closing = threading.Event()
        self._listening = threading.Event()
        self.unavailable: str | None = None

    # -- showing -------------------------------------------------------------------------

    def notify(self, fire: Fire) -> NotifyResult:
        """Show the notification for ``fire``; never raises."""
        summary, body = summary_and_body(fire)
        try:
            nid = self._notify_dbus(fire, summary, body)
            return NotifyResult(True, "dbus", nid)
        except Exception as exc:
            reason = f"{type(exc).__name__}: {exc}"
            if self.unavailable != reason:
                log.info("desktop notifications over D-Bus unavailable (%s)", reason)
            self.unavailable = reason
        if self.fallback is not None:
            try:
                self.fallback(summary, body)
                return NotifyResult(True, "fallback")
            except Exception as exc:
                return NotifyResult(False, error=f"fallback failed: {type(exc).__name__}: {exc}")
        log.info("notification (no desktop to show it): %s: %s", summary, body)
        return NotifyResult(False, error=self.unavailable)

    @property
    def capabilities(self) -> frozenset[str]:
        with self._lock:
            self._connect()
            return self._caps or frozenset()

    def _notify_dbus(self, fire: Fire, summary: str, body: str) -> int:
        from jeepney import DBusAddress, new_method_call

        if self.on_action is not None and "actions" in self.capabilities:
            self._ensure_listener()  # subscribed before the notification can be clicked
        with self._lock:
            conn = self._connect()
            caps = self._caps or frozenset()
            actions: list[str] = []
            if "actions" in caps:
                actions = ["snooze", self.snooze_label, "dismiss", "Dismiss"]
            if "body-markup" in caps:
                body = html.escape(body, quote=False)
            hints: dict[str, tuple[str, Any]] = {
                "urgency": ("y", URGENCY.get(fire.urgency, 1)),
                "category": ("s", "x-remindkit.reminder"),
                "desktop-entry": ("s", "remindkit"),
                "suppress-sound": ("b", True),  # we play our own alarm
            }
            expire = 0 if fire.urgency == "critical" else -1
            addr = DBusAddress(PATH, bus_name=BUS_NAME, interface=IFACE)
            msg = new_method_call(
                addr,
                "Notify",
                "susssasa{sv}i",
                (APP_NAME, 0, ICON, summary, body, actions, hints, expire),
            )
            try:
                reply = conn.send_and_get_reply(msg, timeout=self.timeout_s)
            except Exception:
                self._drop()
                raise
            _check(reply)
            nid = int(reply.body[0])
            self._sent[nid] = (fire.reminder_id, fire.key)
            while len(self._sent) > 200:
                self._sent.popitem(last=False)
        return nid

    def close(self) -> None:
        self._closing.set()
        with self._lock:
            self._drop()
        if self._listener is not None:
            self._listener.join(2)

    # -- connection ----------------------------------------------------------------------

    def _connect(self) -> Any:
        if self._conn is not None:
            return self._conn
        from jeepney import DBusAddress, new_method_call
        from jeepney.io.blocking import open_dbus_connection

        conn = open_dbus_connection(bus="SESSION")
        try:
            addr = DBusAddress(PATH, bus_name=BUS_NAME, interface=IFACE)
            reply = conn.send_and_get_reply(
                new_method_call(addr, "GetCapabilities"), timeout=self.timeout_s
            )
            _check(reply)
            self._caps = frozenset(str(c) for c in reply.body[0])
        except Exception:
            conn.close()
            raise
        self._conn = conn
        self.unavailable = None
        return conn

    def _drop(self) -> None:
        if self._conn is not None:
            with contextlib.suppress(Exception):
                self._conn.close()
        self._conn = None
        self._caps = None

    # -- actions -------------------------------------------------------------------------

    def _ensure_listener(self) -> None:
        with self._lock:
            if self._listener is not None and self._listener.is_alive():
                return
            self._listening.clear()
            self._listener = threading.Thread(
                target=self._listen, name="remindkit-notify-actions", daemon=True
            )
            self._listener.start()
        self._listening.wait(self.timeout_s)

    def _listen(self) -> None:
        from jeepney import MatchRule, message_bus
        from jeepney.io.blocking import open_dbus_connection

        try:
            conn = open_dbus_connection(bus="SESSION")
        except Exception as exc:
            log.info("cannot listen for notification actions: %s", exc)
            return
        rule = MatchRule(type="signal", interface=IFACE, path=PATH)
        try:
            _check(conn.send_and_get_reply(message_bus.AddMatch(rule), timeout=self.timeout_s))
            with conn.filter(rule) as queue:
                self._listening.set()
                while not self._closing.is_set():
                    try:
                        msg = conn.recv_until_filtered(queue, timeout=0.5)
                    except TimeoutError:
                        continue
                    self._on_signal(msg)
        except Exception as exc:
            if not self._closing.is_set():
                log.warning("notification action listener stopped: %s", exc)
        finally:
            self._listening.set()
            conn.close()

    def _on_signal(self, msg: Any) -> None:
        from jeepney import HeaderFields

        member = msg.header.fields.get(HeaderFields.member)
        if member != "ActionInvoked":
            return
        nid, action = int(msg.body[0]), str(msg.body[1])
        with self._lock:
            target = self._sent.get(nid)
        if target is None or self.on_action is None:
            return
        try:
            self.on_action(target[0], target[1], action)
        except Exception:
            log.exception("notification action %r failed", action)


def _check(reply: Any) -> None:
    from jeepney import MessageType

    if reply.header.message_type == MessageType.error:
        raise RuntimeError(f"D-Bus error: {reply.body[0] if reply.body else reply.header}")


MARKUP_BACKENDS = frozenset(
    {"gtk", "appindicator"}
)  # pystray backends whose notifications parse body markup
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029]")


def pystray_fallback(icon: Any, backend: str) -> Callable[[str, str], Any]:
    """``fallback(summary, body)`` through pystray's ``icon.notify(message, title)``,
    with reminder text made inert: control characters escaped, and for backends whose
    notifications parse markup (``<b>``, ``<a href>``, ``<img src>``) the body escaped."""
    escape = backend in MARKUP_BACKENDS

    def show(summary: str, body: str) -> Any:
        summary, body = inert_text(summary), inert_text(body)
        if escape:
            body = html.escape(body, quote=False)
        return icon.notify(body, summary)

    return show


def inert_text(text: str) -> str:
    return _CONTROL.sub(lambda m: repr(m.group(0))[1:-1], text)


def _default_fallback() -> Callable[[str, str], Any] | None:
    if sys.platform == "darwin" and shutil.which("osascript"):

        def osascript(summary: str, body: str) -> None:
            script = f"display notification {_applescript(body)} with title {_applescript(summary)}"
            subprocess.run(["osascript", "-e", script], timeout=5, check=True, capture_output=True)

        return osascript
    return None


def _applescript(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
