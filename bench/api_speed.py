"""The HTTP API beside the in-process reminders API and the floors of its server stack, in
one run, on SQLite files.

    .venv/bin/python bench/api_speed.py            # 2,000 creates, 100 SSE clients, 20 fires
    .venv/bin/python bench/api_speed.py --quick    # smaller

1. create: one keep-alive connection posting reminders one after another, beside the
   floor under it: the same requests to a FastAPI route on the same uvicorn set-up
   that validates the body and answers, doing nothing else (``bench/api_floor.py``);
   target: at least 60 % of the floor's rate. ``Reminders.create`` in this process
   (on a store of its own) is shown beside it, and each server's CPU time per request;
2. list of 200: ``GET …/reminders`` of a session with 200 live reminders, from the
   request sent to the whole body read, beside ``Reminders.list`` in this process
   (its floor; target: within 2×); the client's ``json.loads`` of the body is shown
   beside it (the client's cost, not the server's).

Both go through the standard library's ``http.client`` on one keep-alive
connection: a request is sent when the one before has been answered, so the
client's own time per request counts in the figure, and httpx's (about as much as
the server's parsing) would be measured more than the server;
3. fire -> event: 100 clients on ``GET /v1/events``; reminders fire one at a time;
   the lateness of each event at each client is its arrival minus the fire time the
   engine recorded (the event's ``at``), beside the bare stream of the same server
   stack (``bench/api_floor.py``: a timer on its event loop sends one event to every
   stream; target: p99 within 2× its p99). The 100 clients share one process: each
   stamps a line as it reads it and parses it after the run, so that its parsing
   does not delay the reading of the sockets after it.
"""

from __future__ import annotations

import argparse
import asyncio
import http.client
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.common import (  # noqa: E402
    Row,
    Table,
    cpu_s,
    load,
    machine,
    percentiles,
    proc_cpu_s,
    share_of_floor,
    within_floor,
)
from remindkit.reminders import Reminders  # noqa: E402
from remindkit.settings import Settings  # noqa: E402
from remindkit.wiring import build  # noqa: E402

UNLIMITED = {
    "REMINDKIT_MAX_PER_SESSION": "none",
    "REMINDKIT_MAX_TOTAL": "none",
    "REMINDKIT_MAX_PER_PROJECT": "none",
}


AUTH: dict[str, str] = {}  # the server's local credential, as the SDKs send it


def start_server(db: str, home: Path) -> tuple[subprocess.Popen[bytes], str]:
    from remindkit.credential import load_credential

    env = dict(os.environ, REMINDKIT_HOME=str(home), PYTHONPATH=str(ROOT), **UNLIMITED)
    argv = [sys.executable, "-m", "remindkit", "api", "--db", db, "--port", "0", "--no-alerts"]
    started = start_listening(argv, home / "api.log", env)
    AUTH["Authorization"] = f"Bearer {load_credential(home)}"
    return started


def start_floor(home: Path) -> tuple[subprocess.Popen[bytes], str]:
    return start_listening(
        [sys.executable, str(ROOT / "bench" / "api_floor.py")], home / "floor.log"
    )


def start_listening(
    argv: list[str], log: Path, env: dict[str, str] | None = None
) -> tuple[subprocess.Popen[bytes], str]:
    """Start ``argv`` and return it with the URL it prints ("listening on URL")."""
    proc = subprocess.Popen(argv, stdout=log.open("w"), stderr=subprocess.STDOUT, env=env)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        m = re.search(r"listening on (http://\S+)", log.read_text())
        if m:
            return proc, m.group(1)
        if proc.poll() is not None:
            raise RuntimeError(log.read_text())
        time.sleep(0.05)
    proc.kill()
    raise RuntimeError(f"{' '.join(argv[1:3])} did not start (see {log})")


CLIENT = "http.client, one keep-alive connection"


class Connection:
    """One keep-alive HTTP/1.1 connection (``http.client``), a request at a time."""

    def __init__(self, url: str) -> None:
        where = urlsplit(url)
        self.conn = http.client.HTTPConnection(where.hostname, where.port, timeout=30)

    def post(self, path: str, body: dict[str, Any]) -> bytes:
        self.conn.request(
            "POST", path, json.dumps(body).encode(), {"Content-Type": "application/json", **AUTH}
        )
        return self._answer(201)

    def get(self, path: str) -> bytes:
        self.conn.request("GET", path, headers=AUTH)
        return self._answer(200)

    def _answer(self, status: int) -> bytes:
        r = self.conn.getresponse()
        data = r.read()
        if r.status != status:
            raise RuntimeError(f"{r.status}: {data[:500]!r}")
        return data

    def __enter__(self) -> Connection:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.conn.close()


def post_rate(url: str, n: int, pid: int) -> tuple[float, float]:
    """Creates per second, one after another on one keep-alive connection, and the
    server's (process ``pid``) CPU ms per request."""
    with Connection(url) as http:
        path = "/v1/projects/default/sessions/bench/reminders"
        http.post(path, {"prompt": "warm", "in": "1h"})
        c0, t0 = proc_cpu_s(pid), time.perf_counter()
        for i in range(n):
            http.post(path, {"prompt": f"reminder {i}", "in": "1h"})
        return n / (time.perf_counter() - t0), (proc_cpu_s(pid) - c0) * 1000 / n


def bench_create(url: str, floor_url: str, pids: tuple[int, int], api: Reminders, n: int) -> dict:
    http_rate, http_cpu = post_rate(url, n, pids[0])
    floor_rate, floor_cpu = post_rate(floor_url, n, pids[1])
    api.create("warm", session="bench", in_="1h")
    c0, t0 = cpu_s(), time.perf_counter()
    for i in range(n):
        api.create(f"reminder {i}", session="bench", in_="1h")
    local_rate = n / (time.perf_counter() - t0)
    return {
        "http_per_s": http_rate,
        "http_cpu_ms": http_cpu,
        "in_process_per_s": local_rate,
        "in_process_cpu_ms": (cpu_s() - c0) * 1000 / n,
        "floor_per_s": floor_rate,
        "floor_cpu_ms": floor_cpu,
    }


def bench_list(url: str, pid: int, api: Reminders, rounds: int) -> dict:
    with Connection(url) as http:
        path = "/v1/projects/default/sessions/list200/reminders"
        for i in range(200):
            http.post(path, {"prompt": f"item {i}", "in": "2h"})
            api.create(f"item {i}", session="list200", in_="2h")
        assert len(json.loads(http.get(path))) == 200
        http_ms = []
        parsed_ms = []
        c0 = proc_cpu_s(pid)
        for _ in range(rounds):
            t0 = time.perf_counter()
            raw = http.get(path)
            t1 = time.perf_counter()
            body = json.loads(raw)
            http_ms.append((t1 - t0) * 1000)
            parsed_ms.append((time.perf_counter() - t0) * 1000)
            assert len(body) == 200
        server_cpu_ms = (proc_cpu_s(pid) - c0) * 1000 / rounds
    local_ms = []
    c0 = cpu_s()
    for _ in range(rounds):
        t0 = time.perf_counter()
        got = api.list(session="list200")
        local_ms.append((time.perf_counter() - t0) * 1000)
        assert len(got) == 200
    return {
        "http_median_ms": statistics.median(http_ms),
        "http_p99_ms": percentiles(http_ms)["p99_ms"],
        "http_cpu_ms": server_cpu_ms,
        "parsed_median_ms": statistics.median(parsed_ms),
        "size": len(raw),
        "in_process_median_ms": statistics.median(local_ms),
        "in_process_cpu_ms": (cpu_s() - c0) * 1000 / rounds,
    }


async def bench_events(url: str, clients: int, fires: int) -> dict:
    """Each client is a bare asyncio connection that reads the stream line by line
    and times an event when its ``data:`` line arrives: with 100 clients in one
    process, a full HTTP/SSE client library would spend longer on its own parsing
    than the server spends sending (what is measured here is the server)."""
    arrived: list[tuple[float, bytes]] = []  # (when read, the data line)
    ready = 0
    done = asyncio.Event()
    where = urlsplit(url)
    path = "/v1/events?project=default&session=fire"

    async def listen(_http: httpx.AsyncClient) -> None:
        nonlocal ready
        reader, writer = await asyncio.open_connection(where.hostname, where.port)
        writer.write(
            f"GET {path} HTTP/1.1\r\nHost: {where.netloc}\r\nAccept: text/event-stream\r\n"
            f"Authorization: {AUTH.get('Authorization', '')}\r\n\r\n".encode()
        )
        status = await reader.readline()
        assert b" 200 " in status, status
        while (await reader.readline()) not in (b"\r\n", b""):
            pass  # the headers
        ready += 1
        event = b""
        try:
            while line := await reader.readline():
                if line.startswith(b"event:"):
                    event = line[6:].strip()
                elif line.startswith(b"data:") and event == b"fired":
                    # Stamped now, parsed after the run: 100 clients share this one
                    # process, and each client's parsing would delay the reading of
                    # the sockets after it (a separate client would not wait for it).
                    arrived.append((time.time(), line))
                    if len(arrived) >= clients * fires:
                        done.set()
        finally:
            writer.close()

    limits = httpx.Limits(max_connections=clients + 10)
    async with httpx.AsyncClient(
        base_url=url, timeout=httpx.Timeout(30, read=120), limits=limits, headers=AUTH
    ) as http:
        tasks = [asyncio.create_task(listen(http)) for _ in range(clients)]
        while ready < clients:
            await asyncio.sleep(0.05)
        for i in range(fires):  # one at a time, half a second apart
            r = await http.post(
                "/v1/projects/default/sessions/fire/reminders",
                json={"prompt": f"fire {i}", "in": "2s"},
            )
            r.raise_for_status()
            await asyncio.sleep(0.5)
        try:
            await asyncio.wait_for(done.wait(), timeout=60)
        except TimeoutError:
            pass
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    lateness: list[float] = []
    for now, line in arrived:
        item = json.loads(line[5:])
        at = datetime.fromisoformat(item["at"].replace("Z", "+00:00")).timestamp()
        lateness.append((now - at) * 1000)
    stats = percentiles(lateness)
    return {
        "samples": len(lateness),
        "expected": clients * fires,
        "p50_ms": stats["p50_ms"],
        "p99_ms": stats["p99_ms"],
        "max_ms": stats["max_ms"],
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument(
        "--sync",
        default="FULL",
        choices=["FULL", "NORMAL"],
        help="SQLite synchronous on both sides (FULL: an fsync per commit, the default)",
    )
    args = parser.parse_args()
    UNLIMITED["REMINDKIT_SQLITE_SYNC"] = args.sync
    n, rounds, clients, fires = (300, 20, 20, 5) if args.quick else (2000, 50, 100, 20)
    print(f"at the start: {machine()}", flush=True)
    table = Table(peer="peer")
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        proc, url = start_server(f"sqlite:///{home / 'api.db'}", home)
        try:
            floor, floor_url = start_floor(home)
        except BaseException:
            proc.terminate()
            raise
        settings = Settings.from_env(env=UNLIMITED, home=home / "local")
        graph = build(settings, db=f"sqlite:///{home / 'local.db'}")
        store, api = graph.store, graph.api
        try:
            at = load()
            create = bench_create(url, floor_url, (proc.pid, floor.pid), api, n)
            table.add(
                Row(
                    "HTTP create, one keep-alive connection (per s; floor: the empty route)",
                    create["http_per_s"],
                    None,
                    create["floor_per_s"],
                    better="higher",
                    checks=[share_of_floor(create["http_per_s"], create["floor_per_s"], 0.60)],
                    cpu=f"{create['http_cpu_ms']:.2f} / - / {create['floor_cpu_ms']:.2f} ms server CPU a request",
                    load=at,
                )
            )
            table.add(
                Row(
                    "in-process create, Reminders.create (per s)",
                    create["in_process_per_s"],
                    cpu=f"{create['in_process_cpu_ms']:.2f} ms CPU each",
                    load=at,
                )
            )
            at = load()
            listing = bench_list(url, proc.pid, api, rounds)
            table.add(
                Row(
                    "a session's list of 200 over HTTP, median (ms; floor: Reminders.list in process)",
                    listing["http_median_ms"],
                    None,
                    listing["in_process_median_ms"],
                    checks=[
                        within_floor(
                            listing["http_median_ms"], listing["in_process_median_ms"], 2.0
                        )
                    ],
                    cpu=f"{listing['http_cpu_ms']:.2f} / - / {listing['in_process_cpu_ms']:.2f} ms CPU a list",
                    load=at,
                )
            )
            at = load()
            events = asyncio.run(bench_events(url, clients, fires))
            bare = asyncio.run(bench_events(floor_url, clients, fires))
            for q in ("p50", "p99"):
                table.add(
                    Row(
                        f"fire -> SSE event at {clients} clients, {q} (ms; floor: the bare stream)",
                        events[f"{q}_ms"],
                        None,
                        bare[f"{q}_ms"],
                        checks=[within_floor(events["p99_ms"], bare["p99_ms"], 2.0)]
                        if q == "p99"
                        else [],
                        cpu=f"{events['samples']}/{events['expected']} and "
                        f"{bare['samples']}/{bare['expected']} events",
                        load=at,
                    )
                )
        finally:
            store.close()
            for p in (proc, floor):
                p.terminate()
                p.wait(30)
    print(f"at the end: {machine()}")
    print(
        f"HTTP client for create and list: {CLIENT}; list body {listing['size'] // 1000} kB, "
        f"{listing['parsed_median_ms']:.2f} ms with the client's json.loads (HTTP p99 "
        f"{listing['http_p99_ms']:.2f} ms)"
    )
    print()
    print(table.markdown())


if __name__ == "__main__":
    main()
