"""The HTTP API against the in-process reminders API, in one run, on SQLite files.

    .venv/bin/python bench/api_speed.py            # 2,000 creates, 100 SSE clients, 20 fires
    .venv/bin/python bench/api_speed.py --quick    # smaller

1. create: one keep-alive connection posting reminders one after another, beside
   ``Reminders.create`` in this process on a store of its own (target >= 1,500/s
   over HTTP), and beside the floor under it: the same requests to a FastAPI route on
   the same uvicorn set-up that validates the body and answers, doing nothing else
   (``bench/api_floor.py``);
2. list of 200: ``GET …/reminders`` of a session with 200 live reminders, from
   the request sent to the whole body read, beside ``Reminders.list`` (target
   <= 5 ms); the client's ``json.loads`` of the body is shown beside it (about
   1.7 ms on a ~115 kB body here: the client's cost, not the server's).

Both go through the standard library's ``http.client`` on one keep-alive
connection: a request is sent when the one before has been answered, so the
client's own time per request counts in the figure, and httpx's (about as much as
the server's parsing) would be measured more than the server;
3. fire -> event: 100 clients on ``GET /v1/events``; reminders fire one at a time;
   the lateness of each event at each client is its arrival minus the fire time the
   engine recorded (the event's ``at``) (target p99 <= 20 ms). The 100 clients share
   one process: each stamps a line as it reads it and parses it after the run, so
   that its parsing does not delay the reading of the sockets after it.
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

from bench.common import percentiles  # noqa: E402
from remindkit.reminders import Reminders  # noqa: E402
from remindkit.settings import Settings  # noqa: E402
from remindkit.store import open_store  # noqa: E402

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


def post_rate(url: str, n: int) -> float:
    """Creates per second, one after another on one keep-alive connection."""
    with Connection(url) as http:
        path = "/v1/projects/default/sessions/bench/reminders"
        http.post(path, {"prompt": "warm", "in": "1h"})
        t0 = time.perf_counter()
        for i in range(n):
            http.post(path, {"prompt": f"reminder {i}", "in": "1h"})
        return n / (time.perf_counter() - t0)


def bench_create(url: str, floor_url: str, api: Reminders, n: int) -> dict:
    http_rate = post_rate(url, n)
    floor_rate = post_rate(floor_url, n)
    api.create("warm", session="bench", in_="1h")
    t0 = time.perf_counter()
    for i in range(n):
        api.create(f"reminder {i}", session="bench", in_="1h")
    local_rate = n / (time.perf_counter() - t0)
    return {"http_per_s": http_rate, "in_process_per_s": local_rate, "floor_per_s": floor_rate}


def bench_list(url: str, api: Reminders, rounds: int) -> dict:
    with Connection(url) as http:
        path = "/v1/projects/default/sessions/list200/reminders"
        for i in range(200):
            http.post(path, {"prompt": f"item {i}", "in": "2h"})
            api.create(f"item {i}", session="list200", in_="2h")
        assert len(json.loads(http.get(path))) == 200
        http_ms = []
        parsed_ms = []
        for _ in range(rounds):
            t0 = time.perf_counter()
            raw = http.get(path)
            t1 = time.perf_counter()
            body = json.loads(raw)
            http_ms.append((t1 - t0) * 1000)
            parsed_ms.append((time.perf_counter() - t0) * 1000)
            assert len(body) == 200
    local_ms = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        got = api.list(session="list200")
        local_ms.append((time.perf_counter() - t0) * 1000)
        assert len(got) == 200
    return {
        "http_median_ms": statistics.median(http_ms),
        "http_p99_ms": percentiles(http_ms)["p99_ms"],
        "parsed_median_ms": statistics.median(parsed_ms),
        "size": len(raw),
        "in_process_median_ms": statistics.median(local_ms),
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
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        proc, url = start_server(f"sqlite:///{home / 'api.db'}", home)
        try:
            floor, floor_url = start_floor(home)
        except BaseException:
            proc.terminate()
            raise
        settings = Settings.from_env(env=UNLIMITED, home=home / "local")
        store = open_store(f"sqlite:///{home / 'local.db'}", settings=settings)
        api = Reminders(store, settings=settings)
        try:
            create = bench_create(url, floor_url, api, n)
            listing = bench_list(url, api, rounds)
            events = asyncio.run(bench_events(url, clients, fires))
        finally:
            store.close()
            for p in (proc, floor):
                p.terminate()
                p.wait(30)
    print(f"HTTP client for create and list: {CLIENT}")
    print(f"{'workload':34} {'HTTP API':>12} {'in-process':>12}  target")
    print(
        f"{'create, one connection (/s)':34} {create['http_per_s']:12.0f} {create['in_process_per_s']:12.0f}  >= 1500/s"
        f" (the stack's floor, an empty FastAPI route: {create['floor_per_s']:.0f}/s)"
    )
    print(
        f"{'list of 200, median (ms)':34} {listing['http_median_ms']:12.2f} {listing['in_process_median_ms']:12.2f}"
        f"  <= 5 ms (HTTP p99 {listing['http_p99_ms']:.2f}; {listing['size'] // 1000} kB,"
        f" {listing['parsed_median_ms']:.2f} ms with json.loads)"
    )
    print(
        f"{'fire -> SSE event, p99 (ms)':34} {events['p99_ms'] or float('nan'):12.1f} {'-':>12}  <= 20 ms"
        f" ({clients} clients; p50 {events['p50_ms'] or float('nan'):.1f}, max {events['max_ms'] or float('nan'):.1f},"
        f" {events['samples']}/{events['expected']} events)"
    )


if __name__ == "__main__":
    main()
