"""Due-to-notification lateness of ``remindkit mcp``: the official MCP client SDK
spawns ``python -m remindkit mcp`` on stdio, sets N one-shots half a second apart,
and times each ``notifications/claude/channel`` event against its due time.
Printed beside the engine's own ``late_ms`` (when it fired), so the difference is
what the MCP push costs. Target: 50 ms.

    PYTHONPATH=. python bench/mcp_push.py [N]
"""

from __future__ import annotations

import os
import re
import sys
import tempfile
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from common import percentiles  # noqa: E402

from tests.mcp.conftest import mcp_client  # noqa: E402

LATE_MS = re.compile(r'late_ms="(\d+)"')


async def run(n: int, folder: Path) -> tuple[list[float], list[float]]:
    home = folder / "home"
    home.mkdir()
    async with mcp_client(f"sqlite:///{folder / 'rk.db'}", home, "--session", "bench") as c:
        await c.call("schedule_list")  # warm the client
        start = datetime.now(timezone.utc) + timedelta(seconds=3)
        for i in range(n):
            at = (start + timedelta(milliseconds=500 * i)).isoformat(timespec="milliseconds")
            res = await c.call(
                "schedule_create", {"prompt": f"bench {i}", "at": at, "label": f"b{i}"}
            )
            assert not res.is_error, res.structured_content
        events = await c.wait_channel(n, 60 + n)
    received = []
    fired = []
    for ev in events:
        due = datetime.fromisoformat(ev.params.meta["due"].replace("Z", "+00:00")).timestamp()
        received.append((ev.at - due) * 1000)
        m = LATE_MS.search(ev.params.content)
        fired.append(float(m.group(1)) if m else float("nan"))
    return received, fired


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    with tempfile.TemporaryDirectory() as tmp:
        received, fired = anyio.run(run, n, Path(tmp))
    r, f = percentiles(received), percentiles(fired)
    print(f"remindkit mcp, {n} one-shots 0.5 s apart, SQLite, stdio, official MCP client SDK")
    print(f"{'':44} {'p50':>8} {'p99':>8} {'max':>8}   target")
    print(
        f"{'engine fired (late_ms in <schedule-fired>)':44} {f['p50_ms']:8.1f} {f['p99_ms']:8.1f} {f['max_ms']:8.1f}"
    )
    print(
        f"{'channel notification received by the client':44} {r['p50_ms']:8.1f} {r['p99_ms']:8.1f} "
        f"{r['max_ms']:8.1f}   <= 50 ms"
    )
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"(load average {load:.2f}, {time.strftime('%Y-%m-%d %H:%M:%S')})")


if __name__ == "__main__":
    main()
