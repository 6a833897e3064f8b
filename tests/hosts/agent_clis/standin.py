"""Scripted stand-ins, on loopback, of the model APIs the agent CLIs speak.

One HTTP server answers three protocols, each as the real service streams it:

* the OpenAI Responses API (``POST …/responses``, server-sent events), for Codex CLI;
* the Gemini API (``POST …/models/<model>:streamGenerateContent?alt=sse``), for Gemini CLI;
* OpenAI Chat Completions (``POST …/chat/completions``, ``stream: true``), for opencode's
  OpenAI-compatible provider.

Every request is recorded (path, body) and normalised to a :class:`Turn`: the
conversation's text, in order, and the tools offered. A script (a function of the turn)
says what the model answers: text, or one tool call. The tests assert on what the CLIs
sent: which tools they listed, whether a fired reminder reached the model, and whether a
resumed conversation carried its earlier turns.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

MAX_BODY = 32 << 20
NS_SEP = "__"  # a Responses tool namespace's name and its tool's, as Codex joins them


@dataclass(frozen=True)
class Call:
    """The model calls a tool (``name`` is the name as the CLI offered it)."""

    name: str
    arguments: dict[str, Any]


@dataclass(frozen=True)
class Say:
    text: str


Reply = Call | Say


@dataclass
class Turn:
    """One model request, normalised."""

    api: str  # responses | gemini | chat
    path: str
    body: dict[str, Any]
    texts: list[tuple[str, str]]  # (role, text) in order: user, assistant, tool, system
    tools: list[str]
    at: float = field(default_factory=time.time)
    schemas: dict[str, Any] = field(default_factory=dict)  # tool name -> its input schema

    @property
    def user_texts(self) -> list[str]:
        return [t for r, t in self.texts if r == "user"]

    @property
    def last_user(self) -> str:
        users = self.user_texts
        return users[-1] if users else ""

    @property
    def after_last_user(self) -> list[tuple[str, str]]:
        """What followed the latest user message (tool calls and results of this turn)."""
        idx = max((i for i, (r, _) in enumerate(self.texts) if r == "user"), default=-1)
        return self.texts[idx + 1 :]

    def tool(self, suffix: str) -> str | None:
        """The offered tool whose name ends with ``suffix`` (CLIs prefix MCP tools)."""
        found = [t for t in self.tools if t.endswith(suffix)]
        return found[0] if found else None

    def all_text(self) -> str:
        return "\n".join(t for _, t in self.texts)

    def call(self, suffix: str, **args: Any) -> Call:
        """A call of the offered tool ending with ``suffix``, shaped as a model held to
        the schema the CLI sent shapes it: every required property, ``null`` for what it
        does not mean to give (the CLIs check the arguments against the schema)."""
        name = self.tool(suffix)
        assert name, f"{suffix} is not among the tools: {self.tools}"
        schema = self.schemas.get(name) or {}
        props = schema.get("properties") or {}
        for key in schema.get("required") or []:
            if key not in args:
                prop = props.get(key) or {}
                kind = prop.get("type")
                nullable = prop.get("nullable") is True  # Gemini's OpenAPI-style schema
                assert nullable or kind == "null" or (isinstance(kind, list) and "null" in kind), (
                    f"{name}: {key} is required and takes no null"
                )
                args[key] = None
        return Call(name, args)


Script = Callable[[Turn], Reply]


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        out = []
        for part in content:
            if isinstance(part, dict):
                for key in ("text", "output", "content"):
                    if isinstance(part.get(key), str):
                        out.append(part[key])
                        break
            elif isinstance(part, str):
                out.append(part)
        return "\n".join(out)
    return "" if content is None else json.dumps(content)


def normalise_responses(body: dict[str, Any]) -> tuple[list[tuple[str, str]], dict[str, Any]]:
    texts: list[tuple[str, str]] = []
    if isinstance(body.get("instructions"), str):
        texts.append(("system", body["instructions"]))
    for item in body.get("input") or []:
        kind = item.get("type", "message")
        if kind == "message":
            role = item.get("role", "user")
            texts.append(
                ("assistant" if role == "assistant" else role, _text_of(item.get("content")))
            )
        elif kind == "function_call":
            texts.append(("call", f"{item.get('name')} {item.get('arguments')}"))
        elif kind == "function_call_output":
            texts.append(("tool", _text_of(item.get("output"))))
    tools = {}
    for t in body.get("tools") or []:
        if t.get("type") == "namespace":
            for sub in t.get("tools") or []:
                tools[f"{t.get('name')}{NS_SEP}{sub.get('name')}"] = sub.get("parameters")
        elif t.get("name"):
            tools[t["name"]] = t.get("parameters")
    return texts, tools


def normalise_gemini(body: dict[str, Any]) -> tuple[list[tuple[str, str]], dict[str, Any]]:
    texts: list[tuple[str, str]] = []
    sys_inst = body.get("systemInstruction") or body.get("system_instruction")
    if isinstance(sys_inst, dict):
        texts.append(("system", _text_of(sys_inst.get("parts"))))
    for content in body.get("contents") or []:
        role = "assistant" if content.get("role") == "model" else "user"
        for part in content.get("parts") or []:
            if "text" in part:
                if part.get("thought"):
                    continue
                texts.append((role, part["text"]))
            elif "functionCall" in part:
                fc = part["functionCall"]
                texts.append(("call", f"{fc.get('name')} {json.dumps(fc.get('args'))}"))
            elif "functionResponse" in part:
                texts.append(("tool", json.dumps(part["functionResponse"].get("response"))))
    tools = {}
    for t in body.get("tools") or []:
        for decl in t.get("functionDeclarations") or t.get("function_declarations") or []:
            tools[decl.get("name", "")] = decl.get("parametersJsonSchema") or decl.get("parameters")
    return texts, tools


def normalise_chat(body: dict[str, Any]) -> tuple[list[tuple[str, str]], dict[str, Any]]:
    texts: list[tuple[str, str]] = []
    for m in body.get("messages") or []:
        role = m.get("role", "user")
        if role == "tool":
            texts.append(("tool", _text_of(m.get("content"))))
            continue
        text = _text_of(m.get("content"))
        if text:
            texts.append(("system" if role in ("system", "developer") else role, text))
        for tc in m.get("tool_calls") or []:
            fn = tc.get("function") or {}
            texts.append(("call", f"{fn.get('name')} {fn.get('arguments')}"))
    tools = {
        (t.get("function") or {}).get("name", ""): (t.get("function") or {}).get("parameters")
        for t in body.get("tools") or []
        if isinstance(t, dict)
    }
    return texts, tools


class ModelStandin:
    """The HTTP server; ``script`` decides each answer, ``turns`` records the requests."""

    def __init__(self, script: Script) -> None:
        self.script = script
        self.turns: list[Turn] = []
        self.other: list[tuple[str, str]] = []  # requests that were not model calls
        self.lock = threading.Lock()
        standin = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                with standin.lock:
                    standin.other.append(("GET", self.path))
                if self.path.rstrip("/").endswith("/models"):
                    self._json(
                        200,
                        {"object": "list", "data": [{"id": "standin-model", "object": "model"}]},
                    )
                else:
                    self._json(404, {"error": {"message": f"no {self.path} here"}})

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                if length > MAX_BODY:
                    self._json(413, {"error": {"message": "too large"}})
                    return
                raw = self.rfile.read(length) if length else b""
                try:
                    body = json.loads(raw or b"{}")
                except ValueError:
                    body = {}
                path = self.path.split("?")[0]
                if path.endswith("/responses"):
                    texts, tools = normalise_responses(body)
                    api = "responses"
                elif ":streamGenerateContent" in path or ":generateContent" in path:
                    texts, tools = normalise_gemini(body)
                    api = "gemini"
                elif path.endswith("/chat/completions"):
                    texts, tools = normalise_chat(body)
                    api = "chat"
                elif ":countTokens" in path:
                    self._json(200, {"totalTokens": 10})
                    return
                else:
                    with standin.lock:
                        standin.other.append(("POST", self.path))
                    self._json(404, {"error": {"message": f"no {self.path} here"}})
                    return
                turn = Turn(api, self.path, body, texts, list(tools), schemas=tools)
                with standin.lock:
                    standin.turns.append(turn)
                try:
                    reply = standin.script(turn)
                except Exception as exc:  # the script's failure is the test's, not the CLI's
                    reply = Say(f"stand-in script failed: {exc!r}")
                if api == "responses":
                    self._sse(_responses_events(reply, body))
                elif api == "gemini":
                    if ":streamGenerateContent" in path:
                        self._sse([_gemini_chunk(reply)])
                    else:
                        self._json(200, _gemini_chunk(reply))
                else:
                    self._sse(_chat_events(reply, body), done=True)

            def _json(self, status: int, data: Any) -> None:
                raw = json.dumps(data).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            def _sse(self, events: list[Any], done: bool = False) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Cache-Control", "no-cache")
                self.send_header("Connection", "close")
                self.end_headers()
                for ev in events:
                    if isinstance(ev, tuple):
                        name, data = ev
                        self.wfile.write(f"event: {name}\ndata: {json.dumps(data)}\n\n".encode())
                    else:
                        self.wfile.write(f"data: {json.dumps(ev)}\n\n".encode())
                    self.wfile.flush()
                if done:
                    self.wfile.write(b"data: [DONE]\n\n")
                self.wfile.flush()
                self.close_connection = True

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> ModelStandin:
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.server.shutdown()
        self.server.server_close()

    def seen(self) -> list[Turn]:
        with self.lock:
            return list(self.turns)


def _usage() -> dict[str, int]:
    return {"input_tokens": 10, "output_tokens": 5, "total_tokens": 15}


def _responses_events(reply: Reply, body: dict[str, Any]) -> list[tuple[str, Any]]:
    rid = f"resp_{uuid.uuid4().hex[:16]}"
    created = {"id": rid, "object": "response", "status": "in_progress", "model": body.get("model")}
    events: list[tuple[str, Any]] = [
        ("response.created", {"type": "response.created", "response": created})
    ]
    if isinstance(reply, Say):
        item = {
            "type": "message",
            "id": f"msg_{uuid.uuid4().hex[:12]}",
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": reply.text, "annotations": []}],
        }
        events.append(
            (
                "response.output_item.added",
                {
                    "type": "response.output_item.added",
                    "output_index": 0,
                    "item": {**item, "content": [], "status": "in_progress"},
                },
            )
        )
        events.append(
            (
                "response.output_text.delta",
                {
                    "type": "response.output_text.delta",
                    "item_id": item["id"],
                    "output_index": 0,
                    "content_index": 0,
                    "delta": reply.text,
                },
            )
        )
    else:
        item = {
            "type": "function_call",
            "id": f"fc_{uuid.uuid4().hex[:12]}",
            "call_id": f"call_{uuid.uuid4().hex[:12]}",
            "name": reply.name,
            "arguments": json.dumps(reply.arguments),
            "status": "completed",
        }
        namespace, _, short = reply.name.rpartition(NS_SEP)
        if namespace and _namespaced(body, namespace):
            item["namespace"] = namespace
            item["name"] = short
    events.append(
        (
            "response.output_item.done",
            {"type": "response.output_item.done", "output_index": 0, "item": item},
        )
    )
    done = {**created, "status": "completed", "output": [item], "usage": _usage()}
    events.append(("response.completed", {"type": "response.completed", "response": done}))
    return events


def _namespaced(body: dict[str, Any], namespace: str) -> bool:
    return any(
        t.get("type") == "namespace" and t.get("name") == namespace for t in body.get("tools") or []
    )


def _gemini_chunk(reply: Reply) -> dict[str, Any]:
    if isinstance(reply, Say):
        parts: list[dict[str, Any]] = [{"text": reply.text}]
    else:
        parts = [{"functionCall": {"name": reply.name, "args": reply.arguments}}]
    return {
        "candidates": [
            {"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}
        ],
        "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 5, "totalTokenCount": 15},
        "modelVersion": "standin-model",
    }


def _chat_events(reply: Reply, body: dict[str, Any]) -> list[Any]:
    cid = f"chatcmpl-{uuid.uuid4().hex[:12]}"
    base = {
        "id": cid,
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": body.get("model", "m"),
    }
    if isinstance(reply, Say):
        return [
            {
                **base,
                "choices": [
                    {
                        "index": 0,
                        "delta": {"role": "assistant", "content": reply.text},
                        "finish_reason": None,
                    }
                ],
            },
            {
                **base,
                "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
            },
        ]
    call = {
        "index": 0,
        "id": f"call_{uuid.uuid4().hex[:12]}",
        "type": "function",
        "function": {"name": reply.name, "arguments": json.dumps(reply.arguments)},
    }
    return [
        {
            **base,
            "choices": [
                {
                    "index": 0,
                    "delta": {"role": "assistant", "content": None, "tool_calls": [call]},
                    "finish_reason": None,
                }
            ],
        },
        {
            **base,
            "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
        },
    ]
