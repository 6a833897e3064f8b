"""Claude Code's hooks, timed as Claude Code runs them: one process per hook, the hook's
JSON on stdin (``remindkit mcp hook prompt`` and ``stop``), beside the floor of
``python -c pass``.

    PYTHONPATH=. python bench/hooks.py [ROUNDS]

Three ways: handed to a running engine (the MCP server of the conversation serves the
store's hand-off socket; the hook loads no store), run in its own process
(``REMINDKIT_HANDOFF=0``: SQLAlchemy and the store opened per hook), and the floor.
Each round is a prompt then a stop of one conversation; medians and p90 in ms.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SID = "0b9c2c1e-6a9f-4d6e-8f00-000000000001"


def timed(argv: list[str], env: dict[str, str], stdin: str = "") -> float:
    t = time.perf_counter()
    proc = subprocess.run(argv, input=stdin, text=True, capture_output=True, env=env, timeout=120)
    took = (time.perf_counter() - t) * 1000
    if proc.returncode != 0 or "remindkit mcp hook" in proc.stderr:
        raise SystemExit(f"{argv}: {proc.returncode} {proc.stderr[-500:]}")
    return took


def row(name: str, ms: list[float]) -> str:
    ms = sorted(ms)
    p90 = ms[int(0.9 * (len(ms) - 1))]
    return f"{name:<44} median {statistics.median(ms):7.1f} ms   p90 {p90:7.1f} ms   (n={len(ms)})"


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 15
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp) / "rk"
        home.mkdir()
        env = {
            **os.environ,
            "REMINDKIT_HOME": str(home),
            "PYTHONPATH": str(ROOT),
            "CLAUDE_PROJECT_DIR": tmp,
        }
        env.pop("REMINDKIT_SESSION", None)
        rk = [sys.executable, "-m", "remindkit"]
        exe = Path(sys.executable).parent / "remindkit"
        if exe.exists():
            rk = [str(exe)]
        server = subprocess.Popen(
            [*rk, "mcp", "--session", SID],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
            text=True,
        )
        assert server.stdin is not None and server.stdout is not None
        server.stdin.write(
            json.dumps(
                {
                    "jsonrpc": "2.0",
                    "id": 1,
                    "method": "initialize",
                    "params": {
                        "protocolVersion": "2025-11-25",
                        "capabilities": {},
                        "clientInfo": {"name": "bench"},
                    },
                }
            )
            + "\n"
        )
        server.stdin.flush()
        server.stdout.readline()
        time.sleep(1.5)  # its hand-off socket is up
        prompt = json.dumps(
            {"session_id": SID, "hook_event_name": "UserPromptSubmit", "prompt": "hi"}
        )
        stop = json.dumps({"session_id": SID, "hook_event_name": "Stop"})
        floor, handed, local = [], [], []
        off = {**env, "REMINDKIT_HANDOFF": "0"}
        try:
            for _ in range(rounds):
                floor.append(timed([sys.executable, "-c", "pass"], env))
                handed.append(timed([*rk, "mcp", "hook", "prompt"], env, prompt))
                handed.append(timed([*rk, "mcp", "hook", "stop"], env, stop))
                local.append(timed([*rk, "mcp", "hook", "prompt"], off, prompt))
                local.append(timed([*rk, "mcp", "hook", "stop"], off, stop))
        finally:
            server.stdin.close()
            server.wait(30)
        print(f"bench/hooks.py on {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}")
        print(row("python -c pass (the floor)", floor))
        print(row("hook handed to the MCP server's engine", handed))
        print(row("hook in its own process (REMINDKIT_HANDOFF=0)", local))


if __name__ == "__main__":
    main()
