"""Claude Code's hooks, timed as Claude Code runs them: one process per hook, the hook's
JSON on stdin (``remindkit mcp hook start``, ``prompt`` and ``stop``: SessionStart,
UserPromptSubmit and Stop), beside the floor of ``python -c pass`` measured in the same
rounds.

    PYTHONPATH=. python bench/hooks.py [ROUNDS]

The ways a hook runs: handed to a running engine (the MCP server of the conversation
serves the store's hand-off socket; the hook loads no store), as ``install-claude-code``
writes it (``remindkit mcp hook …``) and as the plugin's hooks run it (``sh -c 'sh
"${CLAUDE_PLUGIN_ROOT}/bin/remindkit-launch" mcp hook …'``: a shell, the launcher
script, then ``python -m remindkit``; its floor is ``sh -c 'python -c pass'``); and in
its own process (``REMINDKIT_HANDOFF=0``: SQLAlchemy and the store opened per hook).
Each round is a start, a prompt and a stop of one conversation, each way in turn;
medians and p90 in ms, and the median CPU time of the hook's processes (what a busy
machine does not stretch). The aim: a hook handed to the running server, median ≤ 100 ms.
"""

from __future__ import annotations

import json
import os
import resource
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SID = "0b9c2c1e-6a9f-4d6e-8f00-000000000001"


CPU: dict[int, list[float]] = {}  # id of a list of wall times -> the CPU times of its runs


def timed(argv: list[str], env: dict[str, str], stdin: str = "") -> tuple[float, float]:
    """(wall ms, CPU ms of the process and its children) of one run."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    proc = subprocess.run(argv, input=stdin, text=True, capture_output=True, env=env, timeout=120)
    took = (time.perf_counter() - t) * 1000
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0 or "remindkit mcp hook" in proc.stderr:
        raise SystemExit(f"{argv}: {proc.returncode} {proc.stderr[-500:]}")
    cpu = (after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime) * 1000
    return took, cpu


def add(times: list[float], run: tuple[float, float]) -> None:
    times.append(run[0])
    CPU.setdefault(id(times), []).append(run[1])


def row(name: str, ms: list[float], floor: list[float] | None = None) -> str:
    cpu = statistics.median(CPU[id(ms)])
    ms = sorted(ms)
    p90 = ms[int(0.9 * (len(ms) - 1))]
    median = statistics.median(ms)
    above = "" if floor is None else f"   floor +{median - statistics.median(floor):6.1f} ms"
    return (
        f"{name:<50} median {median:6.1f} ms  p90 {p90:6.1f} ms{above}  "
        f"CPU median {cpu:5.1f} ms  (n={len(ms)})"
    )


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
        hooks = {
            "start": json.dumps(
                {
                    "session_id": SID,
                    "hook_event_name": "SessionStart",
                    "source": "startup",
                    "cwd": tmp,
                }
            ),
            "prompt": json.dumps(
                {"session_id": SID, "hook_event_name": "UserPromptSubmit", "prompt": "hi"}
            ),
            "stop": json.dumps({"session_id": SID, "hook_event_name": "Stop"}),
        }
        plugin = ROOT / "remindkit" / "claude_plugin"
        penv = {**env, "CLAUDE_PLUGIN_ROOT": str(plugin)}
        launch = 'sh "${CLAUDE_PLUGIN_ROOT}/bin/remindkit-launch" mcp hook '
        off = {**env, "REMINDKIT_HANDOFF": "0"}
        floor: list[float] = []
        sh_floor: list[float] = []
        handed: dict[str, list[float]] = {e: [] for e in hooks}
        launched: dict[str, list[float]] = {e: [] for e in hooks}
        local: dict[str, list[float]] = {e: [] for e in hooks}
        try:
            for _ in range(rounds):
                add(floor, timed([sys.executable, "-c", "pass"], env))
                add(sh_floor, timed(["sh", "-c", f"{shlex.quote(sys.executable)} -c pass"], env))
                for event, data in hooks.items():
                    add(handed[event], timed([*rk, "mcp", "hook", event], env, data))
                for event, data in hooks.items():
                    add(launched[event], timed(["sh", "-c", launch + event], penv, data))
                for event, data in hooks.items():
                    add(local[event], timed([*rk, "mcp", "hook", event], off, data))
        finally:
            server.stdin.close()
            server.wait(30)
        print(f"bench/hooks.py on {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}")
        print(row("python -c pass (the floor)", floor))
        print(row("sh -c 'python -c pass' (the plugin's floor)", sh_floor))
        for event in hooks:
            print(row(f"{event}: handed to the MCP server's engine", handed[event], floor))
        for event in hooks:
            print(row(f"{event}: the plugin's launcher, handed", launched[event], sh_floor))
        for event in hooks:
            print(row(f"{event}: in its own process (REMINDKIT_HANDOFF=0)", local[event], floor))


if __name__ == "__main__":
    main()
