"""The floor under ``bench/api_speed.py``'s create over HTTP: FastAPI on uvicorn as
``remindkit api`` runs them (httptools, uvloop when installed, TCP_NODELAY), with one
route that takes the same JSON body into a pydantic model and answers ``201`` with a
small JSON object, and does nothing else. What this process serves per second on one
keep-alive connection is what any create over this stack can reach on this machine,
however little the create itself costs.

    python bench/api_floor.py      # prints "listening on http://127.0.0.1:PORT"
"""

from __future__ import annotations

import sys
from pathlib import Path

import uvicorn
from fastapi import FastAPI
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, ConfigDict, Field

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from remindkit.api.server import bind, http_parser  # noqa: E402

app = FastAPI(title="floor")


class Body(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)
    prompt: str
    in_: str | int | None = Field(None, alias="in")


@app.post("/v1/projects/{project}/sessions/{session:path}/reminders", status_code=201)
async def create(project: str, session: str, body: Body) -> Response:
    return JSONResponse({"prompt": body.prompt, "session": session}, status_code=201)


def main() -> None:
    sock = bind("127.0.0.1", 0)
    print(f"listening on http://127.0.0.1:{sock.getsockname()[1]}", flush=True)
    config = uvicorn.Config(
        app, http=http_parser(), loop="auto", log_level="warning", access_log=False
    )
    uvicorn.Server(config).run(sockets=[sock])


if __name__ == "__main__":
    main()
