"""``remindkit service install|uninstall|status``: keep an engine running.

``install`` writes a systemd user unit that runs ``remindkit serve`` (with this
Python interpreter, the store named by ``--db`` or ``REMINDKIT_DB`` and the
remindkit home of ``REMINDKIT_HOME`` when one is set) and, on
a desktop, an XDG autostart entry for the tray. When a user systemd instance is
reachable it enables and starts the unit at once; otherwise it says what it
wrote and how to start it. A second ``install`` with the same settings changes
nothing. ``uninstall`` stops and removes what ``install`` wrote (only files that
carry its mark). ``status`` reports both files and the unit's state.

Paths follow ``XDG_CONFIG_HOME`` (default ``~/.config``):
``systemd/user/remindkit.service`` and ``autostart/remindkit-tray.desktop``. A store
URL with a password never goes into them (nor into a command line, which every
local user can read in ``ps``): it goes into ``remindkit/service.env`` (0600, as
``REMINDKIT_DB``), which the unit names as its ``EnvironmentFile`` and the tray's
entry reads with ``sh``. Every file is written 0600.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from ..errors import Conflict, InvalidInput

UNIT_NAME = "remindkit.service"
DESKTOP_NAME = "remindkit-tray.desktop"
ENV_NAME = "service.env"
MARK = "Written by `remindkit service install`"
SYSTEMCTL_TIMEOUT = 20.0  # seconds for one systemctl call
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def add_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    sv = sub.add_parser(
        "service",
        parents=[common],
        help="keep an engine running: a systemd user unit for `serve` (and the tray on a desktop)",
    )
    sv.add_argument("action", choices=["install", "uninstall", "status"])
    tray = sv.add_mutually_exclusive_group()
    tray.add_argument(
        "--tray",
        dest="tray",
        action="store_true",
        default=None,
        help="also write the tray's autostart entry (default: when a desktop is detected)",
    )
    tray.add_argument(
        "--no-tray", dest="tray", action="store_false", help="no tray autostart entry"
    )
    sv.set_defaults(func=lambda cx: _refused_in_scope_then(run, cx))


@dataclass(frozen=True)
class Paths:
    unit: Path
    desktop: Path
    env_file: Path  # REMINDKIT_DB when the store URL has a password

    @classmethod
    def from_env(cls, env: dict[str, str] | None = None) -> Paths:
        env = dict(os.environ) if env is None else env
        base = Path(env.get("XDG_CONFIG_HOME") or Path.home() / ".config")
        return cls(
            unit=base / "systemd" / "user" / UNIT_NAME,
            desktop=base / "autostart" / DESKTOP_NAME,
            env_file=base / "remindkit" / ENV_NAME,
        )


def has_password(db: str | None) -> bool:
    from ..statusfile import without_password

    return bool(db) and without_password(db or "") != db


def serve_argv(db: str | None) -> list[str]:
    """The command the unit runs: this interpreter, ``-m remindkit serve`` (``--db`` only
    for a URL without a password: the environment file carries one with a password)."""
    argv = [sys.executable, "-m", "remindkit", "serve"]
    return argv + (["--db", db] if db and not has_password(db) else [])


def env_text(db: str) -> str:
    """The environment file: ``REMINDKIT_DB='…'``, read alike by systemd and ``sh``."""
    if "'" in _check_arg(db):
        raise InvalidInput(
            "a store URL for the service cannot contain ' (percent-encode it: %27)",
            code="invalid_argument",
        )
    return f"# {MARK}; `remindkit service uninstall` removes it.\nREMINDKIT_DB='{db}'\n"


def _check_arg(value: str) -> str:
    if _CONTROL.search(value):
        raise InvalidInput(
            "a store URL or path for the service cannot contain control characters",
            code="invalid_argument",
        )
    return value


def systemd_quote(arg: str) -> str:
    """One ExecStart/Environment word: ``%`` and ``$`` escaped (specifiers and
    variables), double-quoted when it holds spaces, quotes or backslashes."""
    arg = _check_arg(arg).replace("%", "%%").replace("$", "$$")
    if arg and not re.search(r'[\s"\'\\;]', arg):
        return arg
    return '"' + arg.replace("\\", "\\\\").replace('"', '\\"') + '"'


def desktop_quote(arg: str) -> str:
    """One word of a desktop entry's Exec key (the Desktop Entry Specification)."""
    arg = _check_arg(arg)
    if arg and not re.search(r'[\s"\'\\><~|&;$*?#()`=%]', arg):
        return arg
    return '"' + re.sub(r'(["`$\\])', r"\\\1", arg).replace("%", "%%") + '"'


def _pythonpath() -> str | None:
    """PYTHONPATH when remindkit is imported through it (a source checkout), so
    that the unit's interpreter finds the same code; None when it is installed."""
    here = str(Path(__file__).resolve().parents[2])
    parts = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    if any(Path(p).resolve() == Path(here) for p in parts):
        return os.pathsep.join(str(Path(p).resolve()) for p in parts)
    return None


def _home_env(home: str | None) -> list[str]:
    """``REMINDKIT_HOME=…`` for the unit when one is set where it is installed: without
    it the unit's engine would open the default home's store while ``remind`` writes
    this one's (and keep its status file and credential elsewhere)."""
    return [f"REMINDKIT_HOME={Path(home).expanduser().resolve()}"] if home else []


def unit_text(db: str | None, env_file: Path | None = None, home: str | None = None) -> str:
    """The unit; with ``env_file``, the store URL is read from there (it has a password)."""
    lines = [
        f"# {MARK}; `remindkit service uninstall` removes it.",
        "[Unit]",
        "Description=remindkit engine: fires reminders and hands them to their sessions",
        "",
        "[Service]",
        "Type=simple",
        "ExecStart=" + " ".join(systemd_quote(a) for a in serve_argv(db)),
        "Restart=on-failure",
        "RestartSec=5",
        "Environment=PYTHONUNBUFFERED=1",
    ]
    lines += ["Environment=" + systemd_quote(v) for v in _home_env(home)]
    if env_file is not None:
        lines.append("EnvironmentFile=" + systemd_quote(str(env_file)))
    path = _pythonpath()
    if path:
        lines.append("Environment=" + systemd_quote(f"PYTHONPATH={path}"))
    lines += ["", "[Install]", "WantedBy=default.target", ""]
    return "\n".join(lines)


def desktop_text(db: str | None, env_file: Path | None = None, home: str | None = None) -> str:
    """The tray's autostart entry; with ``env_file``, ``sh`` reads the store URL from it."""
    argv = [sys.executable, "-m", "remindkit", "tray"]
    if env_file is not None:
        import shlex

        script = f"set -a; . {shlex.quote(str(env_file))}; exec {shlex.join(argv)}"
        argv = ["/bin/sh", "-c", script]
    elif db:
        argv += ["--db", db]
    if home:
        argv = ["env", *_home_env(home), *argv]
    return "\n".join(
        [
            f"# {MARK}; `remindkit service uninstall` removes it.",
            "[Desktop Entry]",
            "Type=Application",
            "Name=remindkit tray",
            "Comment=Reminders: alarm, speech and a menu in the system tray",
            "Exec=" + " ".join(desktop_quote(a) for a in argv),
            "Terminal=false",
            "NoDisplay=true",
            "X-GNOME-Autostart-enabled=true",
            "",
        ]
    )


def on_desktop(env: dict[str, str] | None = None) -> bool:
    env = dict(os.environ) if env is None else env
    return bool(env.get("DISPLAY") or env.get("WAYLAND_DISPLAY") or env.get("XDG_CURRENT_DESKTOP"))


# -- systemctl ---------------------------------------------------------------------------------


def _systemctl(*args: str) -> tuple[int, str]:
    exe = shutil.which("systemctl")
    if exe is None:
        return 127, "systemctl is not installed"
    try:
        proc = subprocess.run(
            [exe, "--user", *args], capture_output=True, text=True, timeout=SYSTEMCTL_TIMEOUT
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return 1, str(exc)
    return proc.returncode, (proc.stdout.strip() or proc.stderr.strip())


def systemd_reachable() -> bool:
    """A user systemd instance answers (a login session; not a container or CI box)."""
    code, _ = _systemctl("show-environment")
    return code == 0


def unit_state() -> dict[str, str]:
    _, enabled = _systemctl("is-enabled", UNIT_NAME)
    _, active = _systemctl("is-active", UNIT_NAME)
    return {"enabled": enabled or "unknown", "active": active or "unknown"}


# -- the commands ------------------------------------------------------------------------------


def _write(path: Path, text: str) -> bool:
    """Write ``text`` (0600) unless the file already holds it; True when it changed."""
    try:
        if path.read_text(encoding="utf-8") == text and path.stat().st_mode & 0o077 == 0:
            return False
    except FileNotFoundError:
        pass
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    with contextlib.suppress(FileNotFoundError):
        tmp.unlink()
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(text)
    os.replace(tmp, path)
    return True


def _ours(path: Path) -> bool:
    try:
        return MARK in path.read_text(encoding="utf-8")
    except (FileNotFoundError, UnicodeDecodeError, IsADirectoryError):
        return False


def run(args: argparse.Namespace, out: TextIO) -> int:
    paths = Paths.from_env()
    db = args.db or os.environ.get("REMINDKIT_DB") or None
    home = os.environ.get("REMINDKIT_HOME") or None
    if args.action == "install":
        tray = on_desktop() if args.tray is None else args.tray
        report = install(paths, db, tray=tray, home=home)
    elif args.action == "uninstall":
        report = uninstall(paths)
    else:
        report = status(paths)
    if args.json:
        out.write(json.dumps(report) + "\n")
    else:
        for line in report["messages"]:
            out.write(line + "\n")
    return 0


def install(paths: Paths, db: str | None, *, tray: bool, home: str | None = None) -> dict[str, Any]:
    for path in (paths.unit, paths.desktop, paths.env_file):
        if path.exists() and not _ours(path):
            raise Conflict(
                f"{path} exists and was not written by remindkit; move it away first",
                code="already_exists",
            )
    messages: list[str] = []
    env_file = paths.env_file if db and has_password(db) else None
    env_changed = False
    if env_file is not None and db:
        env_changed = _write(env_file, env_text(db))
        messages.append(
            f"{'wrote' if env_changed else 'unchanged'}: {env_file} (the store URL, 0600)"
        )
    elif paths.env_file.exists():
        paths.env_file.unlink()  # ours (checked above); the URL has no password now
        env_changed = True
    unit_changed = _write(paths.unit, unit_text(db, env_file, home)) or env_changed
    desktop_changed = False
    if tray:
        desktop_changed = _write(paths.desktop, desktop_text(db, env_file, home))
    messages.append(f"{'wrote' if unit_changed else 'unchanged'}: {paths.unit}")
    if tray:
        messages.append(
            f"{'wrote' if desktop_changed else 'unchanged'}: {paths.desktop} (the tray starts at login)"
        )
    started = False
    reachable = systemd_reachable()
    if reachable:
        state = unit_state()
        if unit_changed:
            _systemctl("daemon-reload")
        if unit_changed or state["enabled"] != "enabled" or state["active"] != "active":
            code, said = _systemctl("enable", "--now", UNIT_NAME)
            if code == 0 and unit_changed:
                code, said = _systemctl("restart", UNIT_NAME)  # pick up a changed unit
            if code != 0:
                messages.append(f"systemctl --user enable --now {UNIT_NAME} failed: {said}")
            else:
                started = True
                messages.append(f"enabled and started {UNIT_NAME} (systemctl --user)")
        else:
            messages.append(f"{UNIT_NAME} is already enabled and running")
    else:
        messages.append(
            "no user systemd instance is reachable here; to start the engine now run "
            f"`systemctl --user daemon-reload && systemctl --user enable --now {UNIT_NAME}` "
            "in a login session, or `remindkit serve`"
        )
    changed = unit_changed or desktop_changed or started
    if not changed:
        messages.insert(0, "already installed; nothing changed")
    return {
        "action": "install",
        "changed": changed,
        "unit": str(paths.unit),
        "desktop": str(paths.desktop) if tray else None,
        "systemd": reachable,
        "started": started,
        "messages": messages,
    }


def uninstall(paths: Paths) -> dict[str, Any]:
    messages: list[str] = []
    reachable = systemd_reachable()
    removed: list[str] = []
    if reachable and paths.unit.exists() and _ours(paths.unit):
        code, said = _systemctl("disable", "--now", UNIT_NAME)
        messages.append(
            f"stopped and disabled {UNIT_NAME}"
            if code == 0
            else f"systemctl disable failed: {said}"
        )
    for path in (paths.unit, paths.desktop, paths.env_file):
        if not path.exists():
            continue
        if not _ours(path):
            messages.append(f"left {path}: it was not written by remindkit")
            continue
        path.unlink()
        removed.append(str(path))
        messages.append(f"removed: {path}")
    if reachable and removed:
        _systemctl("daemon-reload")
    if not removed:
        messages.insert(0, "not installed; nothing to remove")
    return {
        "action": "uninstall",
        "changed": bool(removed),
        "removed": removed,
        "systemd": reachable,
        "messages": messages,
    }


def status(paths: Paths) -> dict[str, Any]:
    reachable = systemd_reachable()
    unit = paths.unit.exists() and _ours(paths.unit)
    desktop = paths.desktop.exists() and _ours(paths.desktop)
    state = unit_state() if reachable and unit else None
    messages = [f"unit:      {paths.unit if unit else 'not installed'}"]
    if state is not None:
        messages.append(f"state:     {state['enabled']}, {state['active']}")
    elif unit:
        messages.append("state:     unknown (no user systemd instance is reachable here)")
    messages.append(f"autostart: {paths.desktop if desktop else 'none'}")
    return {
        "action": "status",
        "installed": unit,
        "unit": str(paths.unit),
        "desktop": desktop,
        "systemd": reachable,
        "state": state,
        "messages": messages,
    }


__all__ = [
    "Paths",
    "desktop_text",
    "install",
    "serve_argv",
    "status",
    "systemd_quote",
    "uninstall",
    "unit_text",
]


def _refused_in_scope_then(fn: Any, cx: Any) -> int:
    """Installing a service is the local user's, never a session's (files and systemd;
    the store is only named)."""
    from .scope import refuse_in_scope

    refuse_in_scope("service")
    return int(fn(cx.args, cx.out))
