"""``remindkit status`` (engines, alerter, counts, next), ``status --line`` (one short
line for a shell prompt or a tmux status bar, read from the status file the engines
keep, so it costs no store access) and ``remindkit stats`` (fires and lateness)."""

from __future__ import annotations

import argparse
import time
from typing import Any

from .context import Context
from .output import printable, when
from .scope import scope


def add_parsers(sub: Any, common: argparse.ArgumentParser) -> None:
    st = sub.add_parser("status", parents=[common], help="engines, alerter, pause state, counts")
    st.add_argument("--session", help="this session's counts and next reminder only")
    st.add_argument(
        "--line",
        action="store_true",
        help="one short line for a prompt or tmux: ⏰COUNT M:SS to the next, ⏸ paused, ! a failed delivery",
    )
    st.add_argument(
        "--callbacks",
        action="store_true",
        help="with --line: the set_callback indicator, [CB:COUNT M:SS] to the next (empty when none)",
    )
    st.set_defaults(func=status)
    sa = sub.add_parser("stats", parents=[common], help="fires, outcomes and lateness per session")
    sa.add_argument("--session", help="this session only")
    sa.add_argument("--since", default="24h", metavar="DURATION", help="how far back (default 24h)")
    sa.set_defaults(func=stats)


def status(cx: Context) -> int:
    if cx.args.line:
        return status_line(cx)
    api = cx.api
    store = api.store
    within = scope(cx.args)
    now = api.clock.now()
    from ..clock import to_us

    engines = api.engines()
    holder = store.coordination.lease_holder("alerter", now_us=to_us(now))
    quarantined = store.reminders.quarantined() if within is Any else []
    data = {
        "store": store.url,
        "paused_all": api.paused_all,
        "active": store.reminders.count_reminders(session=within, states=["active"]),
        "paused": store.reminders.count_reminders(session=within, states=["paused"]),
        "engines": [
            {"id": e["id"], "role": e["role"], "pid": e["pid"], "host": e["host"]} for e in engines
        ],
        "alerter": holder[0] if holder else None,
        "quarantined": [{"id": rid, "reason": why} for rid, why in quarantined],
        "armed": bool(engines),
    }
    if within is not Any:
        data["session"] = within
    nxt = api.list(session=within, states=["active"], order="next")
    data["next"] = nxt[0].to_dict() if nxt else None
    if cx.args.json:
        cx.json(data)
        return 0
    out = cx.out
    out.write(f"store:    {data['store']}\n")
    out.write(
        f"active:   {data['active']}   paused: {data['paused']}"
        + ("   (everything paused)" if data["paused_all"] else "")
        + "\n"
    )
    out.write(
        f"engines:  {len(engines)}"
        + "".join(f"\n  {e['id']} ({e['role']})" for e in engines)
        + "\n"
    )
    out.write(f"alerter:  {data['alerter'] or '-'}\n")
    if not data["armed"]:
        from .reminders import not_armed_hint

        out.write(f"armed:    no: {not_armed_hint(cx.args.db)}\n")
    for rid, why in quarantined:
        out.write(f"quarantined: {rid}: {printable(why)}\n")
    if nxt:
        out.write(f"next:     {printable(nxt[0].label or nxt[0].id)} {when(nxt[0], now)}\n")
    return 0


def status_line(cx: Context) -> int:
    """From the status file while an engine keeps it; otherwise from the store."""
    from .. import statusfile

    within = scope(cx.args)
    session = None if within is Any else within
    now_us = time.time_ns() // 1000
    data = statusfile.read_status(statusfile.status_path(cx.settings.home, cx.url), now_us)
    summary = None if data is None else statusfile.summary_for(data, session)
    source = "file"
    if data is None or summary is None:
        source = "store"
        data = cx.read_store.reports.status_summary(now_us=now_us)
        summary = statusfile.summary_for(data, session)
        assert summary is not None  # an untruncated summary always answers
    cx.out.write(
        statusfile.render_line(
            data,
            summary,
            now_us=now_us,
            as_json=cx.args.json,
            source=source,
            callbacks=cx.args.callbacks,
            session=session,
        )
        + "\n"
    )
    return 0


def stats(cx: Context) -> int:
    from ..clock import to_us
    from ..errors import InvalidInput
    from ..schedules import parse_duration

    args = cx.args
    within = scope(args)
    seconds = parse_duration(args.since)
    if seconds <= 0:
        raise InvalidInput(
            f"--since {args.since!r} is not a positive duration", code="invalid_duration"
        )
    api = cx.api
    now_us = to_us(api.clock.now())
    data = api.store.reports.fire_stats(
        since_us=now_us - seconds * 1_000_000, session=None if within is Any else within
    )
    data["since_s"] = seconds
    data["callbacks"] = callbacks_now(api, None if within is Any else within)
    if args.json:
        cx.json(data)
        return 0
    rows = [
        ("SESSION", "FIRES", "DELIVERED", "FAILED", "WAITING", "SKIPPED", "LATE P50", "P99", "MAX")
    ]

    def ms(v: int | None) -> str:
        return "-" if v is None else f"{v}ms"

    for name, e in [*data["sessions"].items(), ("all", data["all"])]:
        rows.append(
            (
                printable(name),
                str(e["fires"]),
                str(e["delivered"]),
                str(e["failed"]),
                str(e["waiting"]),
                str(e["skipped"]),
                ms(e["late_p50_ms"]),
                ms(e["late_p99_ms"]),
                ms(e["late_max_ms"]),
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    cx.out.write(f"fires in the last {args.since}\n")
    for r in rows:
        cx.out.write("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() + "\n")
    return 0


def callbacks_now(api: Any, session: str | None) -> dict[str, Any]:
    """The ``callbacks`` block of ``stats --json``: the session's ``set_callback``
    timers now (every session's without one)."""
    from .. import statusfile
    from ..clock import to_us

    now_us = to_us(api.clock.now())
    live = api.callbacks(session=Any if session is None else session)
    nxt = [to_us(r.next_fire_at) for r in live if r.state == "active" and r.next_fire_at]
    cb = {
        "active": sum(r.state == "active" for r in live),
        "paused": sum(r.state == "paused" for r in live),
        "next_us": min(nxt) if nxt else None,
    }
    return statusfile.callbacks_block(cb, now_us=now_us)
