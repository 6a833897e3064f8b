"""``openai`` sessions: a chat whose transcript remindkit keeps in the store, run
against any OpenAI-compatible Chat Completions endpoint (Ollama, llama.cpp
server, vLLM, LM Studio, a cloud API).

Configured with ``remindkit session add s1 --openai --base-url URL --model NAME``
(config ``{"base_url", "model", "api_key_env"}``); the key is read from the
environment variable named by ``api_key_env`` (default ``OPENAI_API_KEY``) when
a turn runs, and is never stored. Any engine process can run a turn (the turn
is claimed in the store); the turn is a :class:`~remindkit.agent.loop.Conversation`
turn, so tool calls and tags in the reply are carried out and the loop closes.

:class:`OpenAIChatModel` is the HTTP client (httpx; tests inject a transport)::

    POST {base_url}/chat/completions  {"model", "messages", "tools"}
    -> choices[0].message: {"content", "tool_calls": [{"id", "function": {"name", "arguments"}}]}

Errors are :class:`~remindkit.agent.model.ModelError`: ``model_unreachable``
(connection refused, timeout), ``model_http_error`` (a 4xx about this
conversation — 400, 404, 409, 413, 422 — counts as failing at once, so the
delivery is re-sent into a fresh session), ``model_bad_response``.

A model server that cannot be reached (not started yet, restarting) fails
nothing: the fires wait, and the endpoint is tried again after a back-off
(2 s, doubling up to 2 min) during which this process does not call it; the
dispatcher gives up (``failed``) only when a fire has waited an hour.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from datetime import datetime, timezone
from email.utils import parsedate_to_datetime
from typing import TYPE_CHECKING, Any

from ..agent.budget import estimate_tokens, reply_tokens
from ..agent.model import Completion, ToolCall
from ..clock import Clock, now_us
from ..errors import ModelError
from ..models import Fire, Session
from ..settings import DEFAULT_CONTEXT_TOKENS, ModelLimits, Settings
from .base import TurnResult, origin
from .bounded_http import Answer, bounded_request
from .trust import allowed_key_envs, request_extra

if TYPE_CHECKING:
    import httpx

    from ..reminders import Reminders
    from ..store import SqlStore

DEFAULT_KEY_ENV = "OPENAI_API_KEY"
DEFAULT_TIMEOUT = 120.0
INSTANT_STATUS = frozenset({400, 404, 409, 413, 422})
BACKOFF_FIRST_US = 2_000_000  # an unreachable endpoint is not called again for this long ...
BACKOFF_MAX_US = 120_000_000  # ... doubling after each failed try, up to this
RETRY_AFTER_MAX_S = 600.0  # a server's Retry-After is honoured up to this
PROBE_TIMEOUT = 5.0  # seconds for each question about the server (context size, tokenizer)
PROBE_BYTES = 1_000_000
COUNT_CACHE = 4096
MIN_CONTEXT = 512  # an overflow without a size halves the context, down to this  # token counts remembered per server

# what servers say when the request does not fit the context (llama.cpp, llama-cpp-python, OpenAI, vLLM)
OVERFLOW = re.compile(
    r"exceeds? the available context size|context_length_exceeded|maximum context length|"
    r"exceed context window|llama_decode returned 1|context window|too many tokens|"
    r"exceed_context_size_error|longer than the model'?s? context",
    re.IGNORECASE | re.ASCII,
)
TOLD_CONTEXT = re.compile(
    r"maximum context length is (\d+)|context window of (\d+)|\"n_ctx\"\s*:\s*(\d+)|"
    r"available context size \((\d+) tokens\)|max_model_len[\"'= :]+(\d+)",
    re.ASCII,
)


class ServerInfo:
    """What remindkit learned about one model server: its context size (asked once,
    or told by a context-overflow answer) and its tokenizer endpoint, if any."""

    def __init__(self) -> None:
        self.probed = False
        self.probe_after = (
            0.0  # monotonic time before which a server that did not answer is not asked again
        )
        self.context: int | None = None  # what the server says (/props, /v1/models)
        self.learned: int | None = None  # from an overflow answer: the context is at most this
        self.tokenize: tuple[str, str] | None = None  # (url, field) of the server's tokenizer
        self.counts: OrderedDict[str, int] = OrderedDict()
        self.lock = threading.Lock()


class OpenAIChatModel:
    """A chat model behind an OpenAI-compatible ``/chat/completions`` endpoint."""

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        transport: httpx.BaseTransport | None = None,
        extra: dict[str, Any] | None = None,
        limits: ModelLimits | None = None,
        context_tokens: int | None = None,
        max_tokens: int | None = None,
        info: ServerInfo | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.name = f"{model} at {self.base_url}"
        self.api_key = api_key
        self.timeout = timeout
        self.transport = transport
        self.extra = request_extra(extra)  # it cannot replace model, messages, tools
        self.limits = limits or ModelLimits()
        self.context_setting = context_tokens or self.limits.context_tokens
        self.max_tokens = max_tokens or self.limits.max_tokens
        self.info = info or ServerInfo()

    @classmethod
    def from_config(
        cls,
        config: dict[str, Any],
        *,
        transport: httpx.BaseTransport | None = None,
        limits: ModelLimits | None = None,
        info: ServerInfo | None = None,
    ) -> OpenAIChatModel:
        key_env = config.get("api_key_env") or DEFAULT_KEY_ENV
        key = (
            os.environ.get(key_env) if key_env in allowed_key_envs() else None
        )  # never another variable
        return cls(
            str(config["base_url"]),
            str(config["model"]),
            api_key=key or None,
            timeout=float(config.get("timeout") or DEFAULT_TIMEOUT),
            transport=transport,
            extra=config.get("extra") or None,
            limits=limits,
            context_tokens=_positive(config.get("context_tokens")),
            max_tokens=_positive(config.get("max_tokens")),
            info=info,
        )

    # -- the context ----------------------------------------------------------------------

    def context_tokens(self) -> int:
        """The context to fit requests in: the setting, else what the server says,
        else 4096; never more than an overflow answer said."""
        if (
            self.context_setting is None
            and not self.info.probed
            and time.monotonic() >= self.info.probe_after
        ):
            self._probe()
        context = self.context_setting or self.info.context or DEFAULT_CONTEXT_TOKENS
        return min(context, self.info.learned) if self.info.learned else context

    def reply_tokens(self) -> int:
        return reply_tokens(self.context_tokens(), self.max_tokens)

    def count_tokens(self, text: str) -> int:
        """Tokens in ``text``: the server's tokenizer where it has one, else a high estimate."""
        info = self.info
        if info.tokenize is None or not text:
            return estimate_tokens(text)
        key = hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()
        with info.lock:
            if key in info.counts:
                info.counts.move_to_end(key)
                return info.counts[key]
        url, field = info.tokenize
        try:
            answer = bounded_request(
                "POST",
                url,
                name=self.name,
                timeout=PROBE_TIMEOUT,
                max_bytes=max(PROBE_BYTES, len(text) * 16),
                json={field: text, "model": self.model},
                headers=self._auth(),
                transport=self.transport,
            )
            tokens = json.loads(answer.body)["tokens"] if answer.status == 200 else None
            n = len(tokens) if isinstance(tokens, list) else estimate_tokens(text)
        except Exception:  # the estimate will do
            return estimate_tokens(text)
        with info.lock:
            info.counts[key] = n
            while len(info.counts) > COUNT_CACHE:
                info.counts.popitem(last=False)
        return n

    def _probe(self) -> None:
        """Ask the server once for its context size and whether it tokenizes:
        llama.cpp's ``/props`` (``n_ctx``) and ``/tokenize``; ``/v1/models``
        (vLLM's ``max_model_len``, llama.cpp's ``meta``); llama-cpp-python's
        ``/extras/tokenize`` (listed in its ``/openapi.json``)."""
        info = self.info
        root = self.base_url[:-3] if self.base_url.endswith("/v1") else self.base_url
        answered = False
        deadline = time.monotonic() + min(
            PROBE_TIMEOUT, self.timeout / 3
        )  # all the questions together
        for url in (f"{root}/props", f"{self.base_url}/models", f"{root}/openapi.json"):
            left = deadline - time.monotonic()
            if left <= 0:
                break
            try:
                answer = bounded_request(
                    "GET",
                    url,
                    name=self.name,
                    timeout=left,
                    max_bytes=PROBE_BYTES,
                    headers=self._auth(),
                    transport=self.transport,
                )
                answered = True
                data = json.loads(answer.body) if answer.status == 200 else None
            except Exception:
                continue
            if not isinstance(data, dict):
                continue
            if url.endswith("/props"):
                gen = data.get("default_generation_settings")
                n_ctx = data.get("n_ctx") or (gen.get("n_ctx") if isinstance(gen, dict) else None)
                if isinstance(n_ctx, int) and n_ctx > 0:
                    info.context = info.context or n_ctx
                    info.tokenize = (f"{root}/tokenize", "content")
            elif url.endswith("/models"):
                for item in data.get("data") or []:
                    if isinstance(item, dict) and item.get("id") in (self.model, None):
                        meta: dict[str, Any] = (
                            item["meta"] if isinstance(item.get("meta"), dict) else {}
                        )
                        told = (
                            item.get("max_model_len")
                            or meta.get("n_ctx")
                            or meta.get("n_ctx_train")
                        )
                        if isinstance(told, int) and told > 0:
                            info.context = info.context or told
            elif "/extras/tokenize" in (data.get("paths") or {}) and info.tokenize is None:
                info.tokenize = (f"{root}/extras/tokenize", "input")
        info.probed = answered  # a server that did not answer is asked again a minute later
        info.probe_after = time.monotonic() + 60

    # -- the call -------------------------------------------------------------------------

    streams = True  # complete() takes on_text: the reply's text as it is produced

    def complete(
        self,
        messages: Sequence[dict[str, Any]],
        tools: Sequence[dict[str, Any]],
        *,
        on_text: Callable[[str], None] | None = None,
    ) -> Completion:
        """One completion. ``on_text``: asks the server to stream (``"stream": true``)
        and is called with each piece of the reply's text as it arrives, on a worker
        thread, within the same deadline and byte bound; the whole completion (text
        and tool calls) is returned as without it."""
        body: dict[str, Any] = {
            "model": self.model,
            "messages": list(messages),
            "max_tokens": self.reply_tokens(),
            **self.extra,
        }
        if tools:
            body["tools"] = list(tools)
        reader = StreamReader(on_text) if on_text is not None else None
        if reader is not None:
            body["stream"] = True
        answer = bounded_request(
            "POST",
            f"{self.base_url}/chat/completions",
            name=self.name,
            timeout=self.timeout,
            max_bytes=self.limits.max_response_bytes,
            json=body,
            headers=self._auth(),
            transport=self.transport,
            on_chunk=None if reader is None else reader.feed,
        )
        if answer.status >= 400:
            raise self._http_error(answer)
        if reader is not None and reader.events:
            return reader.completion(self.name)
        try:
            message = json.loads(answer.body)["choices"][0]["message"]
            calls = tuple(
                ToolCall(
                    str(c.get("id") or f"call_{i}"),
                    str(c["function"]["name"]),
                    _arguments_text(c["function"].get("arguments")),
                )
                for i, c in enumerate(message.get("tool_calls") or [])
            )
            content = message.get("content")
        except (ValueError, KeyError, IndexError, TypeError, AttributeError) as exc:
            raise ModelError(
                f"{self.name} sent a reply that is not a chat completion ({exc!r})",
                code="model_bad_response",
            ) from None
        if reader is not None and isinstance(content, str) and content:
            on_text(content)  # type: ignore[misc]  # a server that did not stream: all at once
        return Completion(content=content if isinstance(content, str) else None, tool_calls=calls)

    def _auth(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}

    def _http_error(self, answer: Answer) -> ModelError:
        status = answer.status
        said = answer.text(2000)
        head = f"{self.name} answered HTTP {status}: {answer.text(300)}"
        if status in (400, 413, 500) and OVERFLOW.search(said):
            told = next(
                (int(g) for m in TOLD_CONTEXT.finditer(said) for g in m.groups() if g), None
            )
            # the context is at most what the server told, else take half of what we thought
            smaller = told or max(MIN_CONTEXT, self.context_tokens() // 2)
            self.info.learned = min(smaller, self.info.learned or smaller)
            return ModelError(head, code="model_context_overflow", context=told)
        if status == 429 or status >= 500:
            return ModelError(
                head,
                code="model_unavailable",
                retry_after=_retry_after(answer.headers.get("retry-after")),
            )
        return ModelError(head, code="model_http_error", instant=status in INSTANT_STATUS)


class StreamReader:
    """A streamed chat completion (server-sent ``chat.completion.chunk`` events) read
    piece by piece: each ``delta.content`` goes to ``on_text`` as it arrives, the
    tool calls are put together by their ``index``."""

    def __init__(self, on_text: Callable[[str], None]) -> None:
        self.on_text = on_text
        self.events = 0
        self._buffer = b""
        self._text: list[str] = []
        self._calls: dict[int, dict[str, str]] = {}
        self._bad: str | None = None

    def feed(self, chunk: bytes) -> None:
        self._buffer += chunk
        *lines, self._buffer = self._buffer.split(b"\n")
        for line in lines:
            self._line(line.strip())

    def _line(self, line: bytes) -> None:
        if not line.startswith(b"data:"):
            return
        data = line[5:].strip()
        if data == b"[DONE]":
            return
        self.events += 1
        try:
            event = json.loads(data)
            if "error" in event and not event.get("choices"):
                self._bad = f"an error event: {str(event['error'])[:300]}"
                return
            choices = event.get("choices") or []
            delta = (choices[0].get("delta") or {}) if choices else {}
            for call in delta.get("tool_calls") or []:
                slot = self._calls.setdefault(
                    int(call.get("index", len(self._calls))), {"id": "", "name": "", "args": ""}
                )
                fn = call.get("function") or {}
                slot["id"] = str(call.get("id") or slot["id"])
                slot["name"] += str(fn.get("name") or "")
                slot["args"] += _arguments_text(fn.get("arguments")) if fn.get("arguments") else ""
            piece = delta.get("content")
        except (ValueError, TypeError, AttributeError) as exc:
            self._bad = repr(exc)
            return
        if isinstance(piece, str) and piece:
            self._text.append(piece)
            self.on_text(piece)

    def completion(self, name: str) -> Completion:
        if self._buffer.strip():
            self._line(self._buffer.strip())
            self._buffer = b""
        if self._bad is not None:
            raise ModelError(
                f"{name} sent a stream that is not a chat completion ({self._bad})",
                code="model_bad_response",
            )
        calls = tuple(
            ToolCall(c["id"] or f"call_{i}", c["name"], c["args"] or "{}")
            for i, c in sorted(self._calls.items())
            if c["name"]
        )
        text = "".join(self._text)
        return Completion(content=text or (None if calls else ""), tool_calls=calls)


def _positive(value: object) -> int | None:
    try:
        n = int(value)  # type: ignore[call-overload]
    except (TypeError, ValueError):
        return None
    return n if n > 0 else None


def _retry_after(value: str | None) -> float | None:
    """Seconds from a ``Retry-After`` header (a number or an HTTP date), at most ten minutes."""
    if not value:
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = parsedate_to_datetime(value)
        except (TypeError, ValueError, IndexError):
            return None
        if when.tzinfo is None:
            return None
        seconds = (when - datetime.now(timezone.utc)).total_seconds()
    if seconds != seconds:  # NaN
        return None
    return min(RETRY_AFTER_MAX_S, max(0.0, seconds))


def _arguments_text(arguments: object) -> str:
    if arguments is None:
        return "{}"
    if isinstance(arguments, str):
        return arguments
    return json.dumps(arguments)


RETRY_CODES = frozenset({"model_unreachable", "model_unavailable"})


class OpenAISessions:
    """The ``openai`` adapter (shared: any engine process runs its turns)."""

    name = "openai"
    shared = True

    def __init__(self, api: Reminders, *, transport: httpx.BaseTransport | None = None) -> None:
        self.api = api  # what the sessions' tools and tags act through
        self.store: SqlStore = api.store
        self.clock: Clock = api.clock
        self.settings: Settings = api.settings
        self.transport = transport
        self._down: dict[str, tuple[int, int]] = {}  # base_url -> (not before, back-off) in µs
        self._servers: dict[tuple[str, str], ServerInfo] = {}

    def claims_turn(self, session: Session) -> bool:
        return True  # any engine process runs its turns: claimed in the store

    def fresh_differs(self, session: Session) -> bool:
        return True  # a fresh session starts a new transcript

    def can_deliver(self, session: Session) -> bool:
        return (
            bool(session.config.get("base_url") and session.config.get("model"))
            and self.why_not(session) is None
        )

    def why_not(self, session: Session) -> str | None:
        """Why a turn cannot run now (its endpoint is in back-off), or None."""
        down = self._down.get(str(session.config.get("base_url")))
        if down is None or now_us(self.clock) >= down[0]:
            return None
        return f"model server {session.config.get('base_url')} unreachable; trying again in {(down[0] - now_us(self.clock)) / 1e6:.0f}s"

    def model(self, session: Session) -> OpenAIChatModel:
        key = (str(session.config.get("base_url")), str(session.config.get("model")))
        info = self._servers.setdefault(key, ServerInfo())
        return OpenAIChatModel.from_config(
            session.config, transport=self.transport, limits=self.settings.model, info=info
        )

    def conversation(self, session: Session, *, owner: str | None = None) -> Any:
        from ..agent.loop import Conversation, session_system

        return Conversation(
            self.api,
            session.id,
            self.model(session),
            system=session_system(session),
            owner=owner,
        )

    def user_turn(
        self,
        session: Session,
        text: str,
        *,
        wait_s: float,
        on_text: Callable[[str], None] | None = None,
        on_tool: Callable[[str, Any], None] | None = None,
        on_start: Callable[[], None] | None = None,
    ) -> Any:
        """A turn with a message the person typed (the HTTP API's ``…/messages``): the
        same conversation as a fired turn's, holding the session's turn lease (fires
        due meanwhile wait for it), the reply streamed to ``on_text`` as it comes."""
        return self.conversation(session).send(
            text, wait_s=wait_s, on_text=on_text, on_tool=on_tool, on_start=on_start
        )

    def peer(self, session: Session) -> str | None:
        """The model server's origin: the turns of sessions using it share a peer."""
        return origin(session.config.get("base_url"))

    def run_turn(self, session: Session, message: str, fires: Sequence[Fire]) -> TurnResult:
        """Run the fired turn; the dispatcher holds the session's turn lease."""
        reply = self.conversation(session).run_fired(fires, framed=message)
        url = str(session.config.get("base_url"))
        if reply.code in RETRY_CODES:
            _, last = self._down.get(url, (0, 0))
            backoff = min(BACKOFF_MAX_US, last * 2) if last else BACKOFF_FIRST_US
            wait = max(backoff, int((reply.retry_after or 0) * 1e6))
            self._down[url] = (now_us(self.clock) + wait, backoff)
            return TurnResult(False, error=f"{reply.code}: {reply.error}", retry=True)
        self._down.pop(url, None)
        if reply.duplicate:
            return TurnResult(True, duplicate=True)
        if not reply.ok:
            return TurnResult(False, error=f"{reply.code}: {reply.error}", instant=reply.instant)
        return TurnResult(True, reply=reply.text)


__all__ = ["DEFAULT_KEY_ENV", "OpenAIChatModel", "OpenAISessions", "ServerInfo"]
