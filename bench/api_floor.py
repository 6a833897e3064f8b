"""The floors under ``bench/api_speed.py``: FastAPI on uvicorn as ``remindkit api`` runs
them (httptools, uvloop when installed, TCP_NODELAY, and the same protocol class: the
connection gate and a response's head sent with its body in one write), doing nothing
else.

* the empty route: ``POST …/reminders`` takes the same JSON body into a pydantic
  model and answers ``201`` with a small JSON object. What this process serves per
  second on one keep-alive connection is what any create over this stack can reach on
  this machine, however little the create itself costs;
* the bare stream: ``GET /v1/events`` streams server-sent events (FastAPI's
  ``format_sse_event`` through Starlette's ``StreamingResponse``, as ``remindkit
  api``'s stream does); a create in the session ``fire`` with ``"in": "2s"`` sets a
  timer on the event loop, and when it runs, one ``fired`` event stamped with that
  moment (``at``) goes to every open stream. Its lateness at the clients is what an
  event's way from a server's loop to 100 sockets costs here, without a store.

    python bench/api_floor.py      # prints "listening on http://127.0.0.1:PORT"
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections.abc import AsyncIterator
from datetime import datetime, timezone
from pathlib import Path

import uvicorn
from fastapi import FastAPI
from fastapi.responses import JSONResponse, Response, StreamingResponse
from fastapi.sse import format_sse_event
from pydantic import BaseModel, ConfigDict, Field

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from remindkit.api.limits import Gate, protocol_class  # noqa: E402
from remindkit.api.server import bind, http_parser  # noqa: E402
from remindkit.clock import format_utc  # noqa: E402

app = FastAPI(title="floor")
STREAMS: set[asyncio.Queue[bytes]] = set()
FIRED = [0]


class Body(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)
    prompt: str
    in_: str | int | None = Field(None, alias="in")


def fire(prompt: str) -> None:
    FIRED[0] += 1
    at = format_utc(datetime.fromtimestamp(time.time(), timezone.utc))
    frame = format_sse_event(
        data_str=json.dumps({"id": FIRED[0], "kind": "fired", "at": at, "text": prompt}),
        event="fired",
        id=str(FIRED[0]),
    )
    for q in STREAMS:
        q.put_nowait(frame)


@app.post("/v1/projects/{project}/sessions/{session:path}/reminders", status_code=201)
async def create(project: str, session: str, body: Body) -> Response:
    if session == "fire" and isinstance(body.in_, str) and body.in_.endswith("s"):
        asyncio.get_running_loop().call_later(float(body.in_[:-1]), fire, body.prompt)
    return JSONResponse({"prompt": body.prompt, "session": session}, status_code=201)


@app.get("/v1/events")
async def events() -> Response:
    async def stream() -> AsyncIterator[bytes]:
        q: asyncio.Queue[bytes] = asyncio.Queue()
        STREAMS.add(q)
        try:
            yield format_sse_event(comment="connected", retry=1000)
            while True:
                yield await q.get()
        finally:
            STREAMS.discard(q)

    return StreamingResponse(
        stream(),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )


def main() -> None:
    sock = bind("127.0.0.1", 0)
    print(f"listening on http://127.0.0.1:{sock.getsockname()[1]}", flush=True)
    config = uvicorn.Config(
        app,
        http=protocol_class(http_parser(), Gate(1_000)),
        loop="auto",
        log_level="warning",
        access_log=False,
    )
    uvicorn.Server(config).run(sockets=[sock])


if __name__ == "__main__":
    main()
