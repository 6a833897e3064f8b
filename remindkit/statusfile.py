"""A small status file that running engines keep current, so that a shell prompt or a
tmux status bar can show the reminders every second without opening the store.

The file is JSON, replaced atomically (write, fsync-free rename) in the remindkit home
folder, one per store (``status-<hash of the store URL>.json``)::

    {"v": 1, "written_us": ..., "paused_all": false, "truncated": false,
     "all": {"active": 2, "paused": 0, "next_us": ..., "failed": false},
     "sessions": {"s1": {"active": 2, "paused": 0, "next_us": ..., "failed": false}}}

Engines rewrite it when the set of reminders changes or a fire lands, and at least
every ``HEARTBEAT_S``; a reader treats a file older than ``STALE_S`` (no engine keeps
it) as missing and asks the store. This module imports nothing heavy: it is the
whole cost of ``remindkit status --line``.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, TextIO

VERSION = 1
HEARTBEAT_S = 20.0
STALE_S = 65.0
MAX_SESSIONS = 1_000  # past this the file says "truncated" and readers of a session ask the store

_PASSWORD = re.compile(r"(://[^:/@]*):[^@]*@")


def default_home() -> Path:
    """Where remindkit keeps its files unless ``REMINDKIT_HOME`` says otherwise."""
    try:
        from platformdirs import user_data_dir

        return Path(user_data_dir("remindkit", appauthor=False))
    except Exception:  # pragma: no cover - platformdirs is a core dependency
        return Path.home() / ".local" / "share" / "remindkit"


def home_from_env(env: Mapping[str, str]) -> Path:
    home = env.get("REMINDKIT_HOME")
    return Path(home).expanduser() if home else default_home()


def default_db_url(home: Path) -> str:
    return f"sqlite:///{home / 'remindkit.db'}"


def without_password(url: str) -> str:
    """``url`` with its password shown as ``***`` (as SQLAlchemy's ``hide_password``
    does, without loading SQLAlchemy): what remindkit prints or writes of a store URL."""
    return _PASSWORD.sub(r"\1:***@", url)


def store_key(url: str) -> str:
    """The store URL as engines and the CLI both spell it (a password hidden, the
    driver that ``open_store`` picks for a bare ``postgresql://``)."""
    if url.startswith("postgresql://"):
        url = "postgresql+psycopg://" + url[len("postgresql://") :]
    return without_password(url)


def status_path(home: Path, url: str) -> Path:
    digest = hashlib.sha256(store_key(url).encode("utf-8", "surrogateescape")).hexdigest()[:16]
    return home / f"status-{digest}.json"


def write_status(path: Path, data: dict[str, Any]) -> None:
    """Replace the file atomically; a reader sees the old or the new one, never half."""
    import tempfile  # writers only: the reader (a prompt, every second) does not pay for it

    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    # json.dumps, not json.dump: only the one-shot form uses the C encoder, and the
    # pure-Python one held the GIL for milliseconds on an engine's store thread
    text = json.dumps(data, separators=(",", ":"))
    fd, tmp = tempfile.mkstemp(prefix=".status-", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def read_status(path: Path, now_us: int) -> dict[str, Any] | None:
    """The file's data, or None when it is missing, unreadable, of another version or stale."""
    try:
        if path.stat().st_size > 4_000_000:
            return None
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("v") != VERSION:
        return None
    written = data.get("written_us")
    if not isinstance(written, int) or not -5e6 < now_us - written < STALE_S * 1e6:
        return None
    return data


def summary_for(data: dict[str, Any], session: str | None) -> dict[str, Any] | None:
    """The counts for ``session`` (every session when None); None when the file cannot say."""
    if session is None:
        entry = data.get("all")
    else:
        sessions = data.get("sessions")
        if not isinstance(sessions, dict):
            return None
        entry = sessions.get(session)
        if entry is None:
            return (
                None
                if data.get("truncated")
                else {"active": 0, "paused": 0, "next_us": None, "failed": False}
            )
    return entry if isinstance(entry, dict) else None


def format_line(summary: dict[str, Any], *, now_us: int, paused_all: bool) -> str:
    """``⏰2 4:59`` (count, time to the next), ``⏸`` when everything or all of these are
    paused, ``!`` after a failed delivery; ``⏰0`` when nothing is set."""
    active = int(summary.get("active") or 0)
    paused = int(summary.get("paused") or 0)
    line = f"⏰{active}"
    nxt = summary.get("next_us")
    if active and isinstance(nxt, int) and not paused_all:
        line += " " + _countdown(max(0, nxt - now_us) / 1e6)
    if paused_all or (paused and not active):
        line += " ⏸"
    if summary.get("failed"):
        line += " !"
    return line


def _countdown(seconds: float) -> str:
    s = int(seconds + 0.999)  # 0.2 s left shows 0:01, not 0:00
    if s >= 86_400:
        return f"{s // 86_400}d{s % 86_400 // 3600}h"
    if s >= 3600:
        return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}"
    return f"{s // 60}:{s % 60:02d}"


def quick_line(argv: Sequence[str], env: Mapping[str, str], out: TextIO) -> int | None:
    """``remindkit status --line [--session S] [--json] [--db URL]`` answered from the
    file alone, before the command line is parsed or the settings are read (a prompt
    runs it every second). None: the full command must answer (another argument, a
    session scope, no fresh file, a session the file cannot tell about)."""
    if env.get("REMINDKIT_SESSION"):
        return None  # a session scope: the full command enforces it
    words = list(argv)
    opts: dict[str, str] = {}
    flags: set[str] = set()
    while words:
        word = words.pop(0)
        name, eq, value = word.partition("=")
        if name in ("--session", "--db"):
            if not eq:
                if not words:
                    return None
                value = words.pop(0)
            if name in opts or not value:
                return None
            opts[name] = value
        elif word in ("status", "--line", "--json", "--callbacks") and word not in flags:
            flags.add(word)
        else:
            return None
    if not {"status", "--line"} <= flags:
        return None
    home = home_from_env(env)
    url = opts.get("--db") or env.get("REMINDKIT_DB") or default_db_url(home)
    now_us = time.time_ns() // 1000
    data = read_status(status_path(home, url), now_us)
    if data is None:
        return None
    summary = summary_for(data, opts.get("--session"))
    if summary is None:
        return None
    line = render_line(
        data,
        summary,
        now_us=now_us,
        as_json="--json" in flags,
        callbacks="--callbacks" in flags,
        session=opts.get("--session"),
    )
    out.write(line + "\n")
    out.flush()
    return 0


def callbacks_of(data: dict[str, Any], session: str | None) -> dict[str, Any]:
    """The ``set_callback`` timers of ``session`` (of every session when None): active
    and paused counts and the next fire (µs)."""
    found = data.get("sessions")
    sessions: dict[str, Any] = found if isinstance(found, dict) else {}
    entries = [sessions.get(session)] if session is not None else list(sessions.values())
    out: dict[str, Any] = {"active": 0, "paused": 0, "next_us": None}
    for entry in entries:
        cb = entry.get("callbacks") if isinstance(entry, dict) else None
        if not isinstance(cb, dict):
            continue
        out["active"] += int(cb.get("active") or 0)
        out["paused"] += int(cb.get("paused") or 0)
        nxt = cb.get("next_us")
        if isinstance(nxt, int) and (out["next_us"] is None or nxt < out["next_us"]):
            out["next_us"] = nxt
    return out


def callbacks_block(cb: dict[str, Any], *, now_us: int) -> dict[str, Any]:
    """``{"active_count", "next_fire_ms", "remaining_s"}`` (the next fire in ms since the
    epoch, and the whole seconds until it): what scripts and dashboards read."""
    nxt = cb.get("next_us")
    return {
        "active_count": int(cb.get("active") or 0) + int(cb.get("paused") or 0),
        "next_fire_ms": None if nxt is None else nxt // 1000,
        "remaining_s": None if nxt is None else max(0, -((now_us - nxt) // 1_000_000)),
    }


def callbacks_indicator(cb: dict[str, Any], *, now_us: int) -> str:
    """``[CB:2 2:14]``: the live callbacks and the time to the next one; ``[CB:2 PAUSED]``
    when all of them are paused; ``""`` when there are none."""
    block = callbacks_block(cb, now_us=now_us)
    count = block["active_count"]
    if not count:
        return ""
    left = block["remaining_s"]
    if left is None:
        return f"[CB:{count} PAUSED]"
    return f"[CB:{count} {left // 60}:{left % 60:02d}]"


def render_line(
    data: dict[str, Any],
    summary: dict[str, Any],
    *,
    now_us: int,
    as_json: bool,
    source: str = "file",
    callbacks: bool = False,
    session: str | None = None,
) -> str:
    """What ``status --line`` prints: the line, or with ``--json`` an object with it.
    ``callbacks``: the ``set_callback`` indicator instead (``[CB:2 2:14]``)."""
    paused_all = bool(data.get("paused_all"))
    if callbacks:
        cb = callbacks_of(data, session)
        if paused_all and cb["active"]:
            cb = {"active": 0, "paused": cb["active"] + cb["paused"], "next_us": None}
        shown = callbacks_indicator(cb, now_us=now_us)
        if not as_json:
            return shown
        return json.dumps(
            {"line": shown, **callbacks_block(cb, now_us=now_us), "source": source},
            ensure_ascii=False,
        )
    line = format_line(summary, now_us=now_us, paused_all=paused_all)
    if not as_json:
        return line
    nxt = summary.get("next_us")
    return json.dumps(
        {
            "line": line,
            "active": summary.get("active", 0),
            "paused": summary.get("paused", 0),
            "next_in_s": None if nxt is None else max(0.0, round((nxt - now_us) / 1e6, 3)),
            "paused_all": paused_all,
            "failed": bool(summary.get("failed")),
            "source": source,
        },
        ensure_ascii=False,
    )
