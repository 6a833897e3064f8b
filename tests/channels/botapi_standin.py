"""A Telegram Bot API stand-in on loopback: the real HTTP protocol
(``/bot<token>/<method>``, form or JSON parameters, ``{"ok": …}`` answers) for
the methods the bot uses: getMe, getUpdates (long polling with ``offset``; a
second concurrent poll ends the first with 409 as Telegram does), sendMessage,
sendChatAction, answerCallbackQuery, editMessageText, and 429 with
``parameters.retry_after`` when a test asks for it."""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs

BOT_ID = 4242
TOKEN = f"{BOT_ID}:AAH-standin-secret-token-value"


@dataclass
class Sent:
    chat: int
    text: str
    thread: int | None
    message_id: int
    at: float
    markup: Any = None


@dataclass
class BotAPI:
    token: str = TOKEN
    updates: list[dict[str, Any]] = field(default_factory=list)
    sent: list[Sent] = field(default_factory=list)
    actions: list[tuple[int, str]] = field(default_factory=list)
    answers: list[tuple[str, str]] = field(default_factory=list)
    edits: list[tuple[int, int, str]] = field(default_factory=list)
    send_attempts: list[float] = field(default_factory=list)
    rate_limit: list[int] = field(default_factory=list)  # retry_after of the next sendMessage calls
    calls: list[str] = field(default_factory=list)
    confirmed: int = 0  # every update below this id was confirmed by an offset
    log: list[str] = field(default_factory=list)  # the conversation as it happened

    def __post_init__(self) -> None:
        self.cond = threading.Condition()
        self._next_update = 1
        self._next_message = 1000
        self._poll_generation = 0
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/bot"

    def start(self) -> BotAPI:
        self.thread.start()
        return self

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    # -- what a user does ------------------------------------------------------------------

    def user_says(self, chat: int, text: str, *, thread: int | None = None, user: int = 7) -> int:
        with self.cond:
            mid = self._next_message
            self._next_message += 1
            message: dict[str, Any] = {
                "message_id": mid,
                "date": int(time.time()),
                "text": text,
                "chat": {
                    "id": chat,
                    "type": "supergroup" if thread else "private",
                    "title": f"chat {chat}",
                }
                if thread
                else {"id": chat, "type": "private", "first_name": "Ada"},
                "from": {"id": user, "is_bot": False, "first_name": "Ada"},
            }
            if thread is not None:
                message.update(message_thread_id=thread, is_topic_message=True)
            if text.startswith("/"):
                message["entities"] = [
                    {"type": "bot_command", "offset": 0, "length": len(text.split()[0])}
                ]
            self._add({"message": message})
            self.log.append(f"user  [{chat}{'/' + str(thread) if thread else ''}] {text}")
            return mid

    def note(self, text: str) -> None:
        with self.cond:
            self.log.append(f"-- {text}")

    def press(self, chat: int, message_id: int, data: str) -> None:
        with self.cond:
            self.log.append(f"user  [{chat}] (presses the button {data})")
            self._add(
                {
                    "callback_query": {
                        "id": f"cq{self._next_update}",
                        "chat_instance": "ci",
                        "data": data,
                        "from": {"id": 7, "is_bot": False, "first_name": "Ada"},
                        "message": {
                            "message_id": message_id,
                            "date": int(time.time()),
                            "text": "list",
                            "chat": {"id": chat, "type": "private", "first_name": "Ada"},
                        },
                    }
                }
            )

    def _add(self, body: dict[str, Any]) -> None:
        body["update_id"] = self._next_update
        self._next_update += 1
        self.updates.append(body)
        self.cond.notify_all()

    def texts(self, chat: int) -> list[str]:
        with self.cond:
            return [s.text for s in self.sent if s.chat == chat]

    def wait_for(self, what: Any, timeout: float = 60.0, message: str = "") -> Any:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            got = what()
            if got:
                return got
            time.sleep(0.05)
        raise AssertionError(
            f"timed out waiting for {message or what}; sent: {[(s.chat, s.text) for s in self.sent]}"
        )

    # -- the methods -----------------------------------------------------------------------

    def call(self, method: str, p: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        self.calls.append(method)
        if method == "getMe":
            return 200, {
                "ok": True,
                "result": {
                    "id": BOT_ID,
                    "is_bot": True,
                    "first_name": "Reminders",
                    "username": "remindkit_bot",
                    "can_join_groups": True,
                },
            }
        if method == "getUpdates":
            return self._get_updates(p)
        if method == "sendMessage":
            with self.cond:
                self.send_attempts.append(time.monotonic())
                if self.rate_limit:
                    after = self.rate_limit.pop(0)
                    self.log.append(f"(sendMessage answered 429, retry_after {after})")
                    return 429, {
                        "ok": False,
                        "error_code": 429,
                        "description": f"Too Many Requests: retry after {after}",
                        "parameters": {"retry_after": after},
                    }
                mid = self._next_message
                self._next_message += 1
                chat = int(p["chat_id"])
                thread = int(p["message_thread_id"]) if p.get("message_thread_id") else None
                markup = (
                    json.loads(p["reply_markup"])
                    if isinstance(p.get("reply_markup"), str)
                    else p.get("reply_markup")
                )
                self.sent.append(Sent(chat, str(p["text"]), thread, mid, time.monotonic(), markup))
                self.log.append(f"bot   [{chat}{'/' + str(thread) if thread else ''}] {p['text']}")
            return 200, {"ok": True, "result": self._message(mid, chat, str(p["text"]), thread)}
        if method == "sendChatAction":
            with self.cond:
                self.actions.append((int(p["chat_id"]), str(p["action"])))
            return 200, {"ok": True, "result": True}
        if method == "answerCallbackQuery":
            with self.cond:
                self.answers.append((str(p["callback_query_id"]), str(p.get("text", ""))))
            return 200, {"ok": True, "result": True}
        if method == "editMessageText":
            chat, mid = int(p["chat_id"]), int(p["message_id"])
            with self.cond:
                self.edits.append((chat, mid, str(p["text"])))
            return 200, {"ok": True, "result": self._message(mid, chat, str(p["text"]), None)}
        if method in ("deleteWebhook", "close", "logOut"):
            return 200, {"ok": True, "result": True}
        return 404, {"ok": False, "error_code": 404, "description": "Not Found: method not found"}

    def _message(self, mid: int, chat: int, text: str, thread: int | None) -> dict[str, Any]:
        out: dict[str, Any] = {
            "message_id": mid,
            "date": int(time.time()),
            "text": text,
            "chat": {"id": chat, "type": "private", "first_name": "Ada"},
            "from": {"id": BOT_ID, "is_bot": True, "first_name": "Reminders"},
        }
        if thread is not None:
            out.update(message_thread_id=thread, is_topic_message=True)
        return out

    def _get_updates(self, p: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        offset = int(p.get("offset") or 0)
        timeout = float(p.get("timeout") or 0)
        deadline = time.monotonic() + min(timeout, 50)
        with self.cond:
            self._poll_generation += 1
            mine = self._poll_generation
            self.cond.notify_all()
            if offset:
                self.confirmed = max(self.confirmed, offset)
            while True:
                if self._poll_generation != mine:
                    return 409, {
                        "ok": False,
                        "error_code": 409,
                        "description": "Conflict: terminated by other getUpdates request",
                    }
                ready = [u for u in self.updates if u["update_id"] >= max(offset, self.confirmed)]
                left = deadline - time.monotonic()
                if ready or left <= 0:
                    return 200, {"ok": True, "result": ready[:100]}
                self.cond.wait(min(left, 0.5))


def _handler(api: BotAPI) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            self._serve()

        def do_POST(self) -> None:
            self._serve()

        def _serve(self) -> None:
            path = self.path.split("?", 1)[0]
            prefix = f"/bot{api.token}/"
            length = int(self.headers.get("content-length") or 0)
            raw = self.rfile.read(length) if length else b""
            if not path.startswith("/bot"):
                return self._reply(
                    404, {"ok": False, "error_code": 404, "description": "Not Found"}
                )
            if not path.startswith(prefix):
                return self._reply(
                    401, {"ok": False, "error_code": 401, "description": "Unauthorized"}
                )
            ctype = self.headers.get("content-type", "")
            params: dict[str, Any]
            if "json" in ctype:
                params = json.loads(raw or b"{}")
            else:
                params = {k: v[0] for k, v in parse_qs(raw.decode()).items()}
                if "multipart/form-data" in ctype:
                    params = _multipart(raw, ctype)
            for k, v in list(params.items()):  # form values of complex types are JSON
                if (
                    isinstance(v, str)
                    and v[:1] in "[{"
                    and k in ("allowed_updates", "reply_markup")
                ):
                    params[k] = v
            status, body = api.call(path[len(prefix) :], params)
            self._reply(status, body)

        def _reply(self, status: int, body: dict[str, Any]) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    return Handler


def _multipart(raw: bytes, ctype: str) -> dict[str, Any]:
    from email.parser import BytesParser
    from email.policy import HTTP

    msg = BytesParser(policy=HTTP).parsebytes(f"content-type: {ctype}\r\n\r\n".encode() + raw)
    out: dict[str, Any] = {}
    for part in msg.iter_parts():
        name = part.get_param("name", header="content-disposition")
        if name:
            out[str(name)] = (
                part.get_content()
                if part.get_content_maintype() == "text"
                else part.get_payload(decode=True)
            )
    return out
