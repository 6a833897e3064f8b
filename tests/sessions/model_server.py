"""A loopback HTTP server that speaks the OpenAI Chat Completions protocol and
checks each request body the way a real server people run does, answering a
refused body with that server's status and message.

What each accepts and refuses (from their documentation and source):

* ``openai`` (API reference, Chat Completions): an assistant message's
  ``content`` is "required unless ``tool_calls`` is specified" (string, array
  of parts, or null); system, user and tool messages need a string or an array;
  a tool message needs ``tool_call_id`` and must answer a preceding assistant
  ``tool_calls`` entry, and every call must be answered before the next
  message (400 ``invalid_request_error``). ``max_tokens`` is a positive integer.
* ``vllm``: validates ``messages`` with OpenAI's own ``ChatCompletionMessageParam``
  types (pydantic), so the content rules are OpenAI's; it does not check that
  tool calls are answered (the chat template decides). 400 on a bad body.
* ``llama.cpp`` (``server``, ``common_chat_msgs_parse_oaicompat`` in
  ``common/chat.cpp``): ``content`` may be a string, an array of text parts or
  null; an assistant message must have ``content`` or ``tool_calls``
  ("Expected 'content' or 'tool_calls'"); a tool call needs ``function.name``.
  A refused body is HTTP 500 "Failed to parse messages: ...".
* ``llama-cpp-python`` (``llama_cpp.server``, pydantic over
  ``llama_types.ChatCompletionRequestMessage``): ``content`` must be a string
  ("Input should be a valid string" for null, HTTP 500, as measured against
  the real server), and an assistant message without ``content`` is refused too.
* ``ollama`` (``openai/openai.go``, ``fromChatRequest``): ``content`` must be a
  string or an array of parts; anything else, null included, is 400
  "invalid message content type: <nil>".

Besides checking, the server answers from a script (``respond(body)``) and can
misbehave as a hostile or failing server does (see :class:`Behaviour`). Every
request is kept with the status it got.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

FLAVOURS = ("openai", "vllm", "llama.cpp", "llama-cpp-python", "ollama")
ROLES = ("system", "user", "assistant", "tool")


def validate(flavour: str, body: Any) -> tuple[int, str] | None:
    """(status, message) when ``flavour`` refuses ``body``, else None."""
    if not isinstance(body, dict) or not isinstance(body.get("model"), str):
        return 400, "model is required"
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return 400, "messages must be a non-empty array"
    mt = body.get("max_tokens")
    if mt is not None and (not isinstance(mt, int) or isinstance(mt, bool) or mt < 1):
        return 400, "max_tokens must be a positive integer"
    pending: set[str] = set()
    for i, m in enumerate(messages):
        if not isinstance(m, dict) or m.get("role") not in ROLES:
            return 400, f"messages[{i}]: invalid role"
        role = m["role"]
        calls = m.get("tool_calls")
        has_content = "content" in m
        content = m.get("content")
        if flavour == "llama-cpp-python":
            if not has_content:
                return 500, f"messages[{i}].content: Field required"
            if not isinstance(content, str):
                return 500, f"messages[{i}].content: Input should be a valid string"
        elif flavour == "ollama":
            if not isinstance(content, (str, list)):
                return (
                    400,
                    f"invalid message content type: {'<nil>' if content is None else type(content).__name__}",
                )
        elif flavour == "llama.cpp":
            if has_content and content is not None and not isinstance(content, (str, list)):
                return 500, "Failed to parse messages: Invalid 'content' type"
            if not (has_content or calls):
                return 500, "Failed to parse messages: Expected 'content' or 'tool_calls'"
        else:  # openai, vllm
            if role == "assistant":
                if content is None and not calls:
                    return 400, f"messages[{i}]: content is required unless tool_calls is specified"
            elif not isinstance(content, (str, list)):
                return 400, f"messages[{i}].content: expected a string or an array"
        if calls is not None:
            if role != "assistant" or not isinstance(calls, list):
                return (
                    400,
                    f"messages[{i}].tool_calls: only an assistant message has a list of tool calls",
                )
            for c in calls:
                fn = c.get("function") if isinstance(c, dict) else None
                if not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
                    return (
                        500 if flavour.startswith("llama") else 400
                    ), f"messages[{i}]: Missing tool call name"
                if not isinstance(fn.get("arguments"), str) and flavour in ("openai", "vllm"):
                    return 400, f"messages[{i}]: tool call arguments must be a string"
        if flavour == "openai":
            if role == "tool":
                if m.get("tool_call_id") not in pending:
                    return 400, (
                        "Invalid parameter: messages with role 'tool' must be a response to a preceeding "
                        "message with 'tool_calls'."
                    )
                pending.discard(m["tool_call_id"])
            elif pending:
                return 400, (
                    "An assistant message with 'tool_calls' must be followed by tool messages responding "
                    "to each 'tool_call_id'."
                )
            if calls:
                pending = {c.get("id") for c in calls}
        elif role == "tool" and not isinstance(m.get("tool_call_id"), str) and flavour in ("vllm",):
            return 400, f"messages[{i}].tool_call_id: Field required"
    if pending and flavour == "openai":
        return 400, "An assistant message with 'tool_calls' must be followed by tool messages."
    return None


Reply = dict[str, Any]


def text(content: str) -> Reply:
    return {"role": "assistant", "content": content}


def tool_calls(*calls: tuple[str, dict[str, Any]], prefix: str = "call") -> Reply:
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": f"{prefix}_{i}",
                "type": "function",
                "function": {"name": name, "arguments": json.dumps(args)},
            }
            for i, (name, args) in enumerate(calls)
        ],
    }


@dataclass
class Behaviour:
    """How the server misbehaves (all off by default)."""

    status: int | None = None  # answer every completion with this status ...
    status_times: int = 0  # ... this many times (0: always)
    retry_after: str | None = None  # a Retry-After header with that status
    error_body: str = '{"error": {"message": "server error"}}'
    drip_every: float | None = None  # send the answer one byte every N seconds
    huge_bytes: int = 0  # answer with a body this large
    context: int | None = None  # refuse a request whose estimated prompt + max_tokens exceed this
    overflow_style: str = (
        "llama-cpp-python"  # how the refusal reads: llama-cpp-python, llama.cpp, openai
    )
    props_n_ctx: int | None = None  # answer /props with this n_ctx (llama.cpp)
    tokenize: bool = False  # offer llama.cpp's /tokenize (one token per 4 characters)


@dataclass
class Seen:
    path: str
    status: int
    body: Any
    at: float = field(default_factory=time.monotonic)


class ModelServer:
    def __init__(
        self,
        flavour: str = "openai",
        respond: Callable[[dict[str, Any]], Reply] | None = None,
        behaviour: Behaviour | None = None,
    ) -> None:
        assert flavour in FLAVOURS
        self.flavour = flavour
        self.respond = respond or (lambda body: text("ok"))
        self.behaviour = behaviour or Behaviour()
        self.seen: list[Seen] = []
        self.lock = threading.Lock()
        self._refused_status = 0
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:  # noqa: N802
                b = owner.behaviour
                if self.path == "/props" and b.props_n_ctx:
                    owner._record(self.path, 200, None)
                    self._send(
                        200,
                        json.dumps(
                            {"default_generation_settings": {"n_ctx": b.props_n_ctx}}
                        ).encode(),
                    )
                elif self.path == "/v1/models":
                    owner._record(self.path, 200, None)
                    self._send(
                        200,
                        json.dumps(
                            {"object": "list", "data": [{"id": "m", "object": "model"}]}
                        ).encode(),
                    )
                else:
                    owner._record(self.path, 404, None)
                    self._send(404, b'{"error": "not found"}')

            def do_POST(self) -> None:  # noqa: N802
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                try:
                    body = json.loads(raw)
                except ValueError:
                    owner._record(self.path, 400, raw)
                    self._send(400, b'{"error": "not JSON"}')
                    return
                if self.path == "/tokenize" and owner.behaviour.tokenize:
                    n = -(-len(body.get("content", "")) // 4)
                    owner._record(self.path, 200, body)
                    self._send(200, json.dumps({"tokens": list(range(n))}).encode())
                    return
                if self.path != "/v1/chat/completions":
                    owner._record(self.path, 404, body)
                    self._send(404, b'{"error": "not found"}')
                    return
                status, payload, headers = owner._answer(body)
                owner._record(self.path, status, body)
                self._send(status, payload, headers)

            def _send(
                self, status: int, data: bytes, headers: dict[str, str] | None = None
            ) -> None:
                b = owner.behaviour
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                try:
                    if b.drip_every and status == 200:
                        for i in range(len(data)):
                            self.wfile.write(data[i : i + 1])
                            self.wfile.flush()
                            if owner._closing.wait(b.drip_every):
                                return
                    else:
                        self.wfile.write(data)
                except OSError:  # the client gave up
                    pass

            def log_message(self, *args: Any) -> None:
                pass

        self._closing = threading.Event()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def _record(self, path: str, status: int, body: Any) -> None:
        with self.lock:
            self.seen.append(Seen(path, status, body))

    def _answer(self, body: dict[str, Any]) -> tuple[int, bytes, dict[str, str]]:
        b = self.behaviour
        refused = validate(self.flavour, body)
        if refused is not None:
            status, message = refused
            return (
                status,
                json.dumps(
                    {"error": {"message": message, "type": "invalid_request_error"}}
                ).encode(),
                {},
            )
        if b.status is not None and (b.status_times == 0 or self._refused_status < b.status_times):
            self._refused_status += 1
            return (
                b.status,
                b.error_body.encode(),
                ({"Retry-After": b.retry_after} if b.retry_after else {}),
            )
        if b.context is not None:
            prompt = (
                sum(len(json.dumps(m)) for m in body["messages"]) // 4
                + len(json.dumps(body.get("tools", []))) // 4
            )
            wanted = prompt + int(body.get("max_tokens") or 0)
            if wanted > b.context:
                return (
                    400 if b.overflow_style != "llama.cpp" else 500,
                    self._overflow(prompt, wanted),
                    {},
                )
        if b.huge_bytes:
            filler = "x" * b.huge_bytes
            return (
                200,
                json.dumps({"choices": [{"index": 0, "message": text(filler)}]}).encode(),
                {},
            )
        out = self.respond(body)
        data = {
            "id": "chatcmpl-test",
            "object": "chat.completion",
            "model": body["model"],
            "choices": [
                {
                    "index": 0,
                    "message": out,
                    "finish_reason": "tool_calls" if out.get("tool_calls") else "stop",
                }
            ],
        }
        return 200, json.dumps(data).encode(), {}

    def _overflow(self, prompt: int, wanted: int) -> bytes:
        b = self.behaviour
        n = b.context
        if b.overflow_style == "llama.cpp":
            return json.dumps(
                {
                    "error": {
                        "code": 500,
                        "message": "llama_decode returned 1",
                        "type": "server_error",
                    }
                }
            ).encode()
        if b.overflow_style == "llama.cpp-400":
            return json.dumps(
                {
                    "error": {
                        "code": 400,
                        "type": "exceed_context_size_error",
                        "n_prompt_tokens": prompt,
                        "n_ctx": n,
                        "message": "the request exceeds the available context size, "
                        "try increasing it",
                    }
                }
            ).encode()
        return json.dumps(
            {
                "error": {
                    "message": f"This model's maximum context length is {n} tokens. However, you requested {wanted} tokens "
                    f"({prompt} in the messages, {wanted - prompt} in the completion). Please reduce the length "
                    "of the messages or completion.",
                    "type": "invalid_request_error",
                    "param": "messages",
                    "code": "context_length_exceeded",
                }
            }
        ).encode()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def completions(self) -> list[Seen]:
        with self.lock:
            return [s for s in self.seen if s.path == "/v1/chat/completions"]

    def __enter__(self) -> ModelServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._closing.set()
        self.server.shutdown()
        self.server.server_close()
