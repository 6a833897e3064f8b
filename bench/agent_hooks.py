"""The hooks of Codex CLI, Gemini CLI and opencode, timed as each host runs them: the
command line its installer writes (``remindkit session busy --hook`` / ``session idle
--hook``), one process per hook, the host's own hook JSON on stdin, beside the floor of
``python -c pass`` in the same run.

    PYTHONPATH=. python bench/agent_hooks.py [ROUNDS]

Codex and Gemini run a hook's command through a shell (``sh -c LINE``); the opencode
plugin spawns the command's argv from its own process (here: ``node``, as the plugin's
``child_process.spawn``). The conversation's MCP server runs (``remindkit mcp``, as the
host starts it), so each hook is handed to its engine over the store's hand-off socket.
Each round is one turn of each host: its prompt hook, then its stop hook (with a fire
due: the stop hook hands it in, as ``decision: block``, every third round). Medians and
p90 in ms, per host.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# each host's hook input, as its sources build it (the keys remindkit reads are the same)
INPUTS = {
    "codex": {
        "sid": "019a0000-0000-7000-8000-00000000c0de",
        "prompt": lambda sid, cwd: {
            "session_id": sid,
            "turn_id": "1",
            "transcript_path": None,
            "cwd": cwd,
            "hook_event_name": "UserPromptSubmit",
            "model": "gpt-5",
            "permission_mode": "default",
            "prompt": "hi",
        },
        "stop": lambda sid, cwd: {
            "session_id": sid,
            "turn_id": "1",
            "transcript_path": None,
            "cwd": cwd,
            "hook_event_name": "Stop",
            "model": "gpt-5",
            "permission_mode": "default",
            "stop_hook_active": False,
            "last_assistant_message": "done",
        },
    },
    "gemini": {
        "sid": "4f7c1a2e-0000-4000-8000-00000000ae01",
        "prompt": lambda sid, cwd: {
            "session_id": sid,
            "transcript_path": "",
            "cwd": cwd,
            "hook_event_name": "BeforeAgent",
            "timestamp": "2026-01-01T00:00:00Z",
            "prompt": "hi",
        },
        "stop": lambda sid, cwd: {
            "session_id": sid,
            "transcript_path": "",
            "cwd": cwd,
            "hook_event_name": "AfterAgent",
            "timestamp": "2026-01-01T00:00:00Z",
            "prompt": "hi",
            "prompt_response": "done",
            "stop_hook_active": False,
        },
    },
    "opencode": {
        "sid": "ses_0000000000001benchAgentHk",
        "prompt": lambda sid, cwd: {
            "session_id": sid,
            "cwd": cwd,
            "hook_event_name": "UserPromptSubmit",
        },
        "stop": lambda sid, cwd: {"session_id": sid, "cwd": cwd, "hook_event_name": "Stop"},
    },
}

# the opencode plugin's way of running a hook: spawn the argv, JSON on stdin, read stdout
NODE_SPAWN = """
const { spawn } = require("node:child_process")
const [argv, input] = JSON.parse(process.argv[1])
const t = process.hrtime.bigint()
const child = spawn(argv[0], argv.slice(1), { stdio: ["pipe", "pipe", "pipe"] })
let out = "", err = ""
child.stdout.on("data", (d) => (out += d))
child.stderr.on("data", (d) => (err += d))
child.on("close", (code) => {
  const ms = Number(process.hrtime.bigint() - t) / 1e6
  process.stdout.write(JSON.stringify({ ms, code, out, err }))
})
child.stdin.end(input)
"""


def run_hook(host: str, argv: list[str], data: dict, env: dict[str, str]) -> tuple[float, str]:
    payload = json.dumps(data)
    if host == "opencode":
        proc = subprocess.run(
            ["node", "-e", NODE_SPAWN, json.dumps([argv, payload])],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
        )
        got = json.loads(proc.stdout)
        ms, out, err, code = got["ms"], got["out"], got["err"], got["code"]
    else:
        t = time.perf_counter()
        proc = subprocess.run(
            ["sh", "-c", shlex.join(argv)],
            input=payload,
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
        )
        ms = (time.perf_counter() - t) * 1000
        out, err, code = proc.stdout, proc.stderr, proc.returncode
    if code != 0 or "remindkit mcp hook" in err:
        raise SystemExit(f"{host} {argv}: exit {code}: {err[-500:]}")
    return ms, out


def row(name: str, ms: list[float]) -> str:
    ms = sorted(ms)
    p90 = ms[int(0.9 * (len(ms) - 1))]
    return f"{name:<46} median {statistics.median(ms):7.1f} ms   p90 {p90:7.1f} ms   (n={len(ms)})"


def serve_mcp(rk: list[str], sid: str, client: str, env: dict[str, str]) -> subprocess.Popen[str]:
    server = subprocess.Popen(
        [*rk, "mcp", "--no-channel", "--session", sid],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=env,
        text=True,
    )
    assert server.stdin is not None and server.stdout is not None
    hello = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": client},
        },
    }
    server.stdin.write(json.dumps(hello) + "\n")
    server.stdin.flush()
    server.stdout.readline()
    return server


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 15
    hosts = [h for h in INPUTS if h != "opencode" or shutil.which("node")]
    exe = Path(sys.executable).parent / "remindkit"
    rk = [str(exe)] if exe.exists() else [sys.executable, "-m", "remindkit"]
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp) / "rk"
        home.mkdir()
        env = {**os.environ, "REMINDKIT_HOME": str(home), "PYTHONPATH": str(ROOT)}
        env.pop("REMINDKIT_SESSION", None)
        from remindkit.mcp.hosts import HOSTS

        # each server as its host starts it (the host's clientInfo name: its hooks hand in)
        servers = [serve_mcp(rk, INPUTS[h]["sid"], HOSTS[h].MCP_CLIENT, env) for h in hosts]  # type: ignore[arg-type]
        time.sleep(1.5)  # their hand-off socket is up
        from remindkit import build
        from remindkit.settings import Settings

        settings = Settings.from_env({"REMINDKIT_HOME": str(home)})
        api = build(settings).api
        floor: list[float] = []
        times: dict[str, list[float]] = {h: [] for h in hosts}
        handed = dict.fromkeys(hosts, 0)
        try:
            for i in range(rounds):
                t = time.perf_counter()
                subprocess.run([sys.executable, "-c", "pass"], env=env, check=True)
                floor.append((time.perf_counter() - t) * 1000)
                for host in hosts:
                    spec = INPUTS[host]
                    sid = str(spec["sid"])
                    ms, _ = run_hook(
                        host, [*rk, "session", "busy", "--hook"], spec["prompt"](sid, tmp), env
                    )  # type: ignore[operator]
                    times[host].append(ms)
                    if i % 3 == 2:  # a fire comes due during this turn
                        api.create(f"bench {i}", session=sid, in_="1s")
                        deadline = time.monotonic() + 10
                        while time.monotonic() < deadline:
                            if any(o.state == "waiting" for o in api.history(session=sid)):
                                break
                            time.sleep(0.05)
                    ms, out = run_hook(
                        host, [*rk, "session", "idle", "--hook"], spec["stop"](sid, tmp), env
                    )  # type: ignore[operator]
                    times[host].append(ms)
                    handed[host] += '"decision": "block"' in out
        finally:
            for server in servers:
                assert server.stdin is not None
                server.stdin.close()
            for server in servers:
                server.wait(30)
        print(
            f"bench/agent_hooks.py on {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}"
        )
        print(row("python -c pass (the floor)", floor))
        for host in hosts:
            via = "node spawn" if host == "opencode" else "sh -c"
            print(row(f"{host} hook ({via}, handed to its MCP server)", times[host]))
            print(f"    stop hooks that handed a fire in: {handed[host]} of {rounds // 3} due")


if __name__ == "__main__":
    main()
