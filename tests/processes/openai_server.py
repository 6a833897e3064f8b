"""A loopback HTTP server that speaks the OpenAI Chat Completions protocol and
answers from a script: the model's replies (text with tags, tool calls) are
chosen by a function of the request. Every request body is kept. A request with
``"stream": true`` is answered as OpenAI streams: ``chat.completion.chunk``
server-sent events, the text in pieces of ``piece`` characters every
``piece_delay`` seconds, the tool calls by index, then ``data: [DONE]``."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Reply = dict[str, Any]  # an assistant message: {"content": ...} or {"tool_calls": [...]}


def text(content: str) -> Reply:
    return {"role": "assistant", "content": content}


def tool(name: str, args: dict[str, Any], call_id: str = "call_1") -> Reply:
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": call_id,
                "type": "function",
                "function": {"name": name, "arguments": json.dumps(args)},
            }
        ],
    }


class ScriptedOpenAI:
    def __init__(
        self, respond: Callable[[dict[str, Any]], Reply | tuple[int, str]], port: int = 0
    ) -> None:
        self.respond = respond
        self.piece = 4
        self.piece_delay = 0.0
        self.streamed: list[float] = []  # when each streamed request's last piece went out
        self.requests: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with owner.lock:
                    owner.requests.append(
                        {"path": self.path, "auth": self.headers.get("Authorization"), **body}
                    )
                out = owner.respond(body)
                if body.get("stream") and not isinstance(out, tuple):
                    self._stream(body, out)
                    return
                if isinstance(out, tuple):
                    status, payload = out
                    data = payload.encode()
                else:
                    status = 200
                    data = json.dumps(
                        {
                            "id": "chatcmpl-test",
                            "object": "chat.completion",
                            "model": body["model"],
                            "choices": [
                                {
                                    "index": 0,
                                    "message": out,
                                    "finish_reason": "tool_calls"
                                    if out.get("tool_calls")
                                    else "stop",
                                }
                            ],
                        }
                    ).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _stream(self, body: dict[str, Any], out: Reply) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.end_headers()  # no length: the body ends when the connection closes
                self.close_connection = True

                def chunk(delta: dict[str, Any], finish: str | None = None) -> None:
                    event = {
                        "id": "chatcmpl-test",
                        "object": "chat.completion.chunk",
                        "model": body["model"],
                        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
                    }
                    self.wfile.write(f"data: {json.dumps(event)}\n\n".encode())
                    self.wfile.flush()

                chunk({"role": "assistant", "content": ""})
                content = out.get("content") or ""
                for i in range(0, len(content), owner.piece):
                    if owner.piece_delay:
                        time.sleep(owner.piece_delay)
                    chunk({"content": content[i : i + owner.piece]})
                for n, call in enumerate(out.get("tool_calls") or []):
                    fn = call["function"]
                    head = {"index": n, "id": call["id"], "type": "function"}
                    chunk(
                        {
                            "tool_calls": [
                                {**head, "function": {"name": fn["name"], "arguments": ""}}
                            ]
                        }
                    )
                    args = fn["arguments"]
                    for i in range(0, len(args), 8):
                        chunk(
                            {
                                "tool_calls": [
                                    {"index": n, "function": {"arguments": args[i : i + 8]}}
                                ]
                            }
                        )
                chunk({}, "tool_calls" if out.get("tool_calls") else "stop")
                self.wfile.write(b"data: [DONE]\n\n")
                self.wfile.flush()
                with owner.lock:
                    owner.streamed.append(time.monotonic())

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def __enter__(self) -> ScriptedOpenAI:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()

    def fired_keys(self) -> list[str]:
        """The occurrence keys handed over as new content, request by request."""
        keys: list[str] = []
        with self.lock:
            requests = list(self.requests)
        for body in requests:
            users = [m for m in body["messages"] if m["role"] == "user"]
            if not users or body["messages"][-1]["role"] != "user":
                continue  # a follow-up round after tool results: nothing new
            for part in users[-1]["content"].split("<schedule-fired ")[1:]:
                head = part.split(">", 1)[0]
                rid, due = (
                    head.split('id="', 1)[1].split('"')[0],
                    head.split('due="', 1)[1].split('"')[0],
                )
                keys.append(f"{rid}@{due}")  # the occurrence key is id@due
        return keys


def last_user(body: dict[str, Any]) -> str:
    users = [m for m in body["messages"] if m["role"] == "user"]
    return users[-1]["content"] if users else ""
