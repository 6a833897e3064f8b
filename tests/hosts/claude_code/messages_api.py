"""A scripted stand-in of the Anthropic Messages API on loopback, for the real Claude Code.

It speaks what Claude Code uses: ``POST /v1/messages`` streamed as server-sent events
(``message_start``, ``content_block_start`` / ``_delta`` / ``_stop`` for text and
``tool_use`` blocks, ``message_delta``, ``message_stop``) or as one JSON message,
and ``POST /v1/messages/count_tokens``. Every request is kept with the time it
arrived, so a test asserts on exactly what the model was given.

The model is :class:`ScriptedModel`: it reads the person's latest prompt and answers as
a model would, with tool calls where the prompt asks for reminders. Claude Code sends
MCP tools deferred: the model first calls ``ToolSearch`` (``select:<name>``), whose
result makes Claude Code send the tool's definition in ``tools``; then it calls the
tool. A prompt of the form ``remind me in 3s to stretch``, ``remind me 8 times, 2s
apart, starting in 3s`` or ``remind me in 3s to X, then work slowly for 8s`` is
scripted; a ``<schedule-fired …>`` block anywhere in what is new to the model is
answered ``Reminder received: …``.
"""

from __future__ import annotations

import itertools
import json
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

MAX_BODY = 64 << 20


@dataclass
class ToolUse:
    name: str
    input: dict[str, Any]
    id: str = ""


@dataclass
class Reply:
    blocks: list[str | ToolUse]
    delay_s: float = 0.0  # the model's time before it answers (a slow turn)


@dataclass
class Request:
    at: float  # time.time() when it arrived
    path: str
    body: dict[str, Any]
    headers: dict[str, str] = field(default_factory=dict)
    done: float = 0.0  # time.time() when the answer was sent whole
    reply_text: str = ""  # the text of that answer

    @property
    def main_loop(self) -> bool:
        """A turn of the conversation (it offers tools), not a side query."""
        return "/count_tokens" not in self.path and bool(self.body.get("tools"))

    def tool_names(self) -> list[str]:
        return [str(t.get("name")) for t in self.body.get("tools") or []]

    def trailing(self) -> list[dict[str, Any]]:
        """The messages after the model's last answer: what is new to it in this request."""
        messages = self.body.get("messages") or []
        last = max((i for i, m in enumerate(messages) if m.get("role") == "assistant"), default=-1)
        return messages[last + 1 :]

    def new_text(self) -> str:
        return "\n".join(_texts(self.trailing()))

    def all_text(self) -> str:
        return "\n".join(_texts(self.body.get("messages") or []))

    def tool_results(self) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for m in self.trailing():
            content = m.get("content")
            if isinstance(content, list):
                out.extend(
                    b for b in content if isinstance(b, dict) and b.get("type") == "tool_result"
                )
        return out

    def prompt(self) -> str:
        """The person's latest prompt (its own text, without system reminders)."""
        for m in reversed(self.body.get("messages") or []):
            if m.get("role") != "user":
                continue
            content = m.get("content")
            blocks = (
                [{"type": "text", "text": content}] if isinstance(content, str) else content or []
            )
            if any(isinstance(b, dict) and b.get("type") == "tool_result" for b in blocks):
                continue  # a tool's answer, not the person
            texts = [
                str(b.get("text"))
                for b in blocks
                if isinstance(b, dict)
                and b.get("type") == "text"
                and not str(b.get("text", "")).lstrip().startswith("<system-reminder>")
            ]
            if texts:
                return texts[-1]
        return ""


def _texts(messages: list[dict[str, Any]]) -> list[str]:
    out: list[str] = []
    for m in messages:
        content = m.get("content")
        if isinstance(content, str):
            out.append(content)
            continue
        for b in content or []:
            if not isinstance(b, dict):
                continue
            if b.get("type") == "text":
                out.append(str(b.get("text", "")))
            elif b.get("type") == "tool_result":
                inner = b.get("content")
                if isinstance(inner, str):
                    out.append(inner)
                elif isinstance(inner, list):
                    out.extend(str(x.get("text", "")) for x in inner if isinstance(x, dict))
    return out


FIRED = re.compile(r'<schedule-fired id="(rem_[0-9a-f]+)"')
ONE = re.compile(r"remind me in (\d+)s to (.+?)(?:, then work slowly for (\d+)s)?\s*$", re.I | re.S)
MANY = re.compile(r"remind me (\d+) times, (\d+)s apart, starting in (\d+)s", re.I)
COMMAND = re.compile(r"request of the user: in (\d+)s to ([^\n]+)")  # the plugin's /remind
CREATE = re.compile(r"mcp__[A-Za-z0-9_]*remindkit[A-Za-z0-9_]*__schedule_create")


class ScriptedModel:
    """Answers Claude Code's requests as the prompts above ask."""

    def __init__(self) -> None:
        self._ids = itertools.count(1)

    def __call__(self, req: Request) -> Reply:
        if not req.main_loop:
            return Reply(["ok"])
        new = req.new_text()
        fired = FIRED.findall(new)
        results = req.tool_results()
        prompt = req.prompt()
        plan = self._plan(prompt)
        if fired and not results:
            return Reply([f"Reminder received: {', '.join(dict.fromkeys(fired))}."])
        if results:
            if any(_is_tool(r, "schedule_create", req) for r in results):
                slow = plan[1] if plan else 0.0
                return Reply(["Reminder set. Working on it." if slow else "Reminder set."], slow)
            if plan and self._create_name(req) in req.tool_names():
                return Reply(self._calls(req, plan[0]))
            return Reply(["Done."])
        if plan:
            name = self._create_name(req)
            if name is None or name in req.tool_names():
                return Reply(self._calls(req, plan[0]) if name else ["No reminder tool here."])
            return Reply([ToolUse("ToolSearch", {"query": f"select:{name}"})])
        return Reply(["Nothing to do."])

    def _plan(self, prompt: str) -> tuple[list[dict[str, Any]], float] | None:
        m = MANY.search(prompt)
        if m:
            n, gap, first = (int(x) for x in m.groups())
            return [
                {"prompt": f"reminder {i + 1} of {n}", "after": f"{first + i * gap}s"}
                for i in range(n)
            ], 0.0
        m = COMMAND.search(prompt)
        if m:
            return [{"prompt": m.group(2).strip(), "after": f"{m.group(1)}s"}], 0.0
        m = ONE.search(prompt)
        if m:
            return [{"prompt": m.group(2).strip(), "after": f"{m.group(1)}s"}], float(
                m.group(3) or 0
            )
        return None

    def _create_name(self, req: Request) -> str | None:
        found = CREATE.search(json.dumps(req.body))
        return found.group(0) if found else None

    def _calls(self, req: Request, args: list[dict[str, Any]]) -> list[str | ToolUse]:
        name = self._create_name(req) or "schedule_create"
        return [ToolUse(name, a) for a in args]


def _is_tool(result: dict[str, Any], suffix: str, req: Request) -> bool:
    """Is ``result`` the answer to a call of the tool named ``…suffix``?"""
    wanted = result.get("tool_use_id")
    for m in req.body.get("messages") or []:
        if m.get("role") != "assistant" or not isinstance(m.get("content"), list):
            continue
        for b in m["content"]:
            if isinstance(b, dict) and b.get("type") == "tool_use" and b.get("id") == wanted:
                return str(b.get("name", "")).endswith(suffix)
    return False


class MessagesStandIn:
    """The server: ``url`` for ANTHROPIC_BASE_URL, ``requests`` as they came."""

    def __init__(self, model: Callable[[Request], Reply] | None = None) -> None:
        self.model = model or ScriptedModel()
        self.requests: list[Request] = []
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        stand_in = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *_args: Any) -> None:
                pass

            def do_GET(self) -> None:  # noqa: N802
                self._send(404, b"{}")

            def do_HEAD(self) -> None:  # noqa: N802
                self._send(200, b"")

            def do_POST(self) -> None:  # noqa: N802
                size = int(self.headers.get("content-length") or 0)
                if size > MAX_BODY:
                    self._send(413, b"{}")
                    return
                try:
                    body = json.loads(self.rfile.read(size) or b"{}")
                except ValueError:
                    self._send(400, b"{}")
                    return
                req = Request(time.time(), self.path, body, dict(self.headers))
                with stand_in._lock:
                    stand_in.requests.append(req)
                if "/count_tokens" in self.path:
                    self._send(200, json.dumps({"input_tokens": 1000}).encode())
                    return
                reply = stand_in.model(req)
                req.reply_text = " ".join(b for b in reply.blocks if isinstance(b, str))
                stand_in._answer(self, req, reply)
                req.done = time.time()

            def _send(self, status: int, data: bytes, kind: str = "application/json") -> None:
                self.send_response(status)
                self.send_header("content-type", kind)
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def start(self) -> MessagesStandIn:
        self._thread.start()
        return self

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def turns(self) -> list[Request]:
        with self._lock:
            return [r for r in self.requests if r.main_loop]

    def _answer(self, handler: BaseHTTPRequestHandler, req: Request, reply: Reply) -> None:
        if reply.delay_s:
            time.sleep(reply.delay_s)
        blocks: list[dict[str, Any]] = []
        for b in reply.blocks:
            if isinstance(b, ToolUse):
                blocks.append(
                    {
                        "type": "tool_use",
                        "id": b.id or f"toolu_{next(self._ids):04d}",
                        "name": b.name,
                        "input": b.input,
                    }
                )
            else:
                blocks.append({"type": "text", "text": b})
        stop = "tool_use" if any(b["type"] == "tool_use" for b in blocks) else "end_turn"
        model = req.body.get("model") or "claude-stand-in"
        usage = {
            "input_tokens": 1000,
            "output_tokens": 20,
            "cache_read_input_tokens": 0,
            "cache_creation_input_tokens": 0,
        }
        message = {
            "id": f"msg_{next(self._ids):06d}",
            "type": "message",
            "role": "assistant",
            "model": model,
        }
        if not req.body.get("stream"):
            data = json.dumps(
                {
                    **message,
                    "content": blocks,
                    "stop_reason": stop,
                    "stop_sequence": None,
                    "usage": usage,
                }
            ).encode()
            handler.send_response(200)
            handler.send_header("content-type", "application/json")
            handler.send_header("content-length", str(len(data)))
            handler.end_headers()
            handler.wfile.write(data)
            return
        handler.send_response(200)
        handler.send_header("content-type", "text/event-stream")
        handler.send_header("cache-control", "no-cache")
        handler.send_header("connection", "close")
        handler.end_headers()

        def event(name: str, data: dict[str, Any]) -> None:
            handler.wfile.write(f"event: {name}\ndata: {json.dumps(data)}\n\n".encode())
            handler.wfile.flush()

        event(
            "message_start",
            {
                "type": "message_start",
                "message": {
                    **message,
                    "content": [],
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": {**usage, "output_tokens": 1},
                },
            },
        )
        for i, b in enumerate(blocks):
            if b["type"] == "text":
                event(
                    "content_block_start",
                    {
                        "type": "content_block_start",
                        "index": i,
                        "content_block": {"type": "text", "text": ""},
                    },
                )
                event(
                    "content_block_delta",
                    {
                        "type": "content_block_delta",
                        "index": i,
                        "delta": {"type": "text_delta", "text": b["text"]},
                    },
                )
            else:
                start = {**b, "input": {}}
                event(
                    "content_block_start",
                    {"type": "content_block_start", "index": i, "content_block": start},
                )
                event(
                    "content_block_delta",
                    {
                        "type": "content_block_delta",
                        "index": i,
                        "delta": {
                            "type": "input_json_delta",
                            "partial_json": json.dumps(b["input"]),
                        },
                    },
                )
            event("content_block_stop", {"type": "content_block_stop", "index": i})
        event(
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": stop, "stop_sequence": None},
                "usage": {"output_tokens": 20},
            },
        )
        event("message_stop", {"type": "message_stop"})
        handler.close_connection = True


__all__ = ["MessagesStandIn", "Reply", "Request", "ScriptedModel", "ToolUse"]
