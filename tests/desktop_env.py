"""A desktop made for a test: a D-Bus session with a mock notification server,
an X display (Xvfb), and a system tray (trayer).

* :class:`NotificationBus` runs ``dbus-run-session`` with python-dbusmock's
  ``notification_daemon`` template inside it (``actions`` among its
  capabilities). The mock writes every ``Notify`` to its log file; tests read
  the calls back with the mock's ``GetCalls`` and make it send signals
  (``ActionInvoked``) with ``EmitSignal``.
* :class:`XDesktop` runs ``Xvfb`` on a free display number and ``trayer`` as
  the XEmbed tray host, and takes screenshots with Pillow.

Each helper starts its own processes and ends exactly those.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

MOCK_IFACE = "org.freedesktop.DBus.Mock"
NOTIFY_NAME = "org.freedesktop.Notifications"
NOTIFY_PATH = "/org/freedesktop/Notifications"


def _stop(proc: subprocess.Popen[Any] | None, timeout: float = 5.0) -> None:
    if proc is None or proc.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout)


def _spawn(argv: list[str], log: Path, **kwargs: Any) -> subprocess.Popen[bytes]:
    """Start a helper in its own process group, its output going to ``log``."""
    with log.open("wb") as fh:
        return subprocess.Popen(
            argv, stdout=subprocess.DEVNULL, stderr=fh, start_new_session=True, **kwargs
        )


def _wait_for(predicate: Any, timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise TimeoutError(f"timed out waiting for {what}")


class NotificationBus:
    """``dbus-run-session`` + dbusmock ``notification_daemon`` (with ``actions``)."""

    def __init__(self, folder: Path, capabilities: str = "body actions") -> None:
        self.folder = folder
        self.log = folder / "notifications.log"
        self.capabilities = capabilities
        self.address = ""
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> NotificationBus:
        addr_file = self.folder / "bus-address"
        params = json.dumps({"capabilities": self.capabilities})
        script = (
            f'printf %s "$DBUS_SESSION_BUS_ADDRESS" > "{addr_file}.tmp" && mv "{addr_file}.tmp" "{addr_file}" && '
            f'exec "{sys.executable}" -m dbusmock --template notification_daemon -l "{self.log}" -p \'{params}\''
        )
        self.proc = _spawn(["dbus-run-session", "--", "sh", "-c", script], self.folder / "dbus.err")
        self.address = _wait_for(
            lambda: addr_file.exists() and addr_file.read_text(), 10, "dbus-run-session"
        )
        _wait_for(self._serving, 10, "the mock notification daemon")
        return self

    def _serving(self) -> bool:
        try:
            self.call(NOTIFY_PATH, NOTIFY_NAME, "GetCapabilities")
            return True
        except Exception:
            return False

    def stop(self) -> None:
        _stop(self.proc)

    @property
    def env(self) -> dict[str, str]:
        return {"DBUS_SESSION_BUS_ADDRESS": self.address}

    def call(
        self, path: str, iface: str, method: str, signature: str | None = None, body: tuple = ()
    ) -> Any:
        from jeepney import DBusAddress, MessageType, new_method_call
        from jeepney.io.blocking import open_dbus_connection

        with open_dbus_connection(bus=self.address) as conn:
            msg = new_method_call(
                DBusAddress(path, bus_name=NOTIFY_NAME, interface=iface), method, signature, body
            )
            reply = conn.send_and_get_reply(msg, timeout=5)
            if reply.header.message_type == MessageType.error:
                raise RuntimeError(f"{method}: {reply.body}")
            return reply.body

    def notifications(self) -> list[dict[str, Any]]:
        """The ``Notify`` calls the server received, oldest first."""
        calls = self.call(NOTIFY_PATH, MOCK_IFACE, "GetCalls")[0]
        out = []
        for stamp, method, args in calls:
            if method != "Notify":
                continue
            values = [
                a[1] if isinstance(a, tuple) and len(a) == 2 and isinstance(a[0], str) else a
                for a in args
            ]
            app, _replaces, icon, summary, body, actions, hints, expire = values
            out.append(
                {
                    "time": stamp,
                    "app": app,
                    "icon": icon,
                    "summary": summary,
                    "body": body,
                    "actions": list(actions),
                    "hints": {k: v[1] for k, v in hints.items()},
                    "expire": expire,
                }
            )
        return out

    def wait_notifications(self, n: int, timeout: float = 10) -> list[dict[str, Any]]:
        return _wait_for(
            lambda: (lambda got: got if len(got) >= n else None)(self.notifications()),
            timeout,
            f"{n} notification(s)",
        )

    def logged_notify_lines(self) -> list[str]:
        text = self.log.read_text(errors="replace") if self.log.exists() else ""
        return [line for line in text.splitlines() if re.search(r"\bNotify\b", line)]

    def invoke_action(self, notification_id: int, action: str) -> None:
        """Make the server send ``ActionInvoked`` as if the person clicked a button."""
        self.call(
            NOTIFY_PATH,
            MOCK_IFACE,
            "EmitSignal",
            "sssav",
            (NOTIFY_NAME, "ActionInvoked", "us", [("u", notification_id), ("s", action)]),
        )

    def __enter__(self) -> NotificationBus:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class XDesktop:
    """Xvfb on a free display, with ``trayer`` as the system tray."""

    def __init__(self, folder: Path, size: str = "1024x768x24") -> None:
        self.folder = folder
        self.size = size
        self.display = ""
        self.xvfb: subprocess.Popen[bytes] | None = None
        self.trayer: subprocess.Popen[bytes] | None = None

    def start(self, *, tray: bool = True) -> XDesktop:
        r, w = os.pipe()
        self.xvfb = _spawn(
            ["Xvfb", "-displayfd", str(w), "-screen", "0", self.size, "-nolisten", "tcp"],
            self.folder / "xvfb.err",
            pass_fds=(w,),
        )
        os.close(w)
        with os.fdopen(r) as fh:
            number = fh.readline().strip()
        if not number:
            raise RuntimeError("Xvfb did not start: " + (self.folder / "xvfb.err").read_text())
        self.display = f":{number}"
        _wait_for(self._connectable, 10, f"X display {self.display}")
        if tray:
            for attempt in range(3):  # trayer now and then fails to connect to a fresh server
                self.trayer = _spawn(
                    [
                        "trayer",
                        "--edge",
                        "top",
                        "--align",
                        "right",
                        "--widthtype",
                        "request",
                        "--height",
                        "32",
                        "--SetDockType",
                        "true",
                        "--transparent",
                        "false",
                        "--tint",
                        "0x304050",
                    ],
                    self.folder / f"trayer{attempt}.err",
                    env={**os.environ, "DISPLAY": self.display},
                )
                try:
                    _wait_for(
                        lambda: self.trayer.poll() is not None or self.find_windows("^panel$"),
                        10,
                        "trayer's panel",
                    )
                except TimeoutError:
                    pass
                if self.trayer.poll() is None and self.find_windows("^panel$"):
                    break
                _stop(self.trayer)
            else:
                raise RuntimeError(
                    "trayer did not start: " + (self.folder / "trayer2.err").read_text()
                )
        return self

    def _connectable(self) -> bool:
        done = subprocess.run(
            ["xdotool", "getdisplaygeometry"],
            env={**os.environ, **self.env},
            capture_output=True,
            timeout=10,
        )
        return done.returncode == 0

    def stop(self) -> None:
        _stop(self.trayer)
        _stop(self.xvfb)

    @property
    def env(self) -> dict[str, str]:
        return {"DISPLAY": self.display}

    def xdotool(self, *args: str) -> str:
        done = subprocess.run(
            ["xdotool", *args],
            env={**os.environ, **self.env},
            capture_output=True,
            text=True,
            encoding="utf-8",
            errors="replace",
            timeout=10,
        )
        return done.stdout.strip()

    def find_windows(self, name_regex: str) -> list[int]:
        out = self.xdotool("search", "--name", name_regex)
        return [int(x) for x in out.split()] if out else []

    def window_name(self, wid: int) -> str:
        return self.xdotool("getwindowname", str(wid))

    def geometry(self, wid: int) -> tuple[int, int, int, int]:
        """(x, y, width, height) of a window on the screen."""
        out = self.xdotool("getwindowgeometry", "--shell", str(wid))
        vals = dict(line.split("=", 1) for line in out.splitlines() if "=" in line)
        return int(vals["X"]), int(vals["Y"]), int(vals["WIDTH"]), int(vals["HEIGHT"])

    def top_windows(self) -> list[tuple[int, str, tuple[int, int, int, int]]]:
        """Mapped children of the root window: (id, name, (x, y, w, h))."""
        done = subprocess.run(
            ["xwininfo", "-root", "-children"],
            env={**os.environ, **self.env},
            capture_output=True,
            text=True,
            encoding="utf-8",
            errors="replace",
            timeout=10,
        )
        out = []
        for line in done.stdout.splitlines():
            m = re.match(
                r'\s+(0x[0-9a-f]+) (?:"(.*)"|\(has no name\)).*?(\d+)x(\d+)\+(-?\d+)\+(-?\d+)', line
            )
            if m:
                out.append(
                    (
                        int(m.group(1), 16),
                        m.group(2) or "",
                        (int(m.group(5)), int(m.group(6)), int(m.group(3)), int(m.group(4))),
                    )
                )
        return out

    def screenshot(self, path: Path) -> Path:
        from PIL import ImageGrab

        ImageGrab.grab(xdisplay=self.display).save(path)
        return path

    def __enter__(self) -> XDesktop:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
