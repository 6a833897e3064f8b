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

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..agent.model import Completion, ModelError, ToolCall
from ..clock import Clock, SystemClock, now_us
from ..models import Fire, Session
from ..settings import Settings
from .base import TurnResult
from .trust import allowed_key_envs, request_extra

if TYPE_CHECKING:
    import httpx

    from ..store import SqlStore

DEFAULT_KEY_ENV = "OPENAI_API_KEY"
DEFAULT_TIMEOUT = 120.0
INSTANT_STATUS = frozenset({400, 404, 409, 413, 422})
BACKOFF_FIRST_US = 2_000_000  # an unreachable endpoint is not called again for this long ...
BACKOFF_MAX_US = 120_000_000  # ... doubling after each failed try, up to this


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
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.name = f"{model} at {self.base_url}"
        self.api_key = api_key
        self.timeout = timeout
        self.transport = transport
        self.extra = request_extra(extra)  # it cannot replace model, messages, tools

    @classmethod
    def from_config(cls, config: dict[str, Any], *, transport: httpx.BaseTransport | None = None) -> OpenAIChatModel:
        key_env = config.get("api_key_env") or DEFAULT_KEY_ENV
        key = os.environ.get(key_env) if key_env in allowed_key_envs() else None  # never another variable
        return cls(
            str(config["base_url"]), str(config["model"]), api_key=key or None,
            timeout=float(config.get("timeout") or DEFAULT_TIMEOUT), transport=transport,
            extra=config.get("extra") or None,
        )

    def complete(self, messages: Sequence[dict[str, Any]], tools: Sequence[dict[str, Any]]) -> Completion:
        import httpx

        body: dict[str, Any] = {"model": self.model, "messages": list(messages), **self.extra}
        if tools:
            body["tools"] = list(tools)
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        try:
            with httpx.Client(transport=self.transport, timeout=self.timeout) as client:
                resp = client.post(f"{self.base_url}/chat/completions", json=body, headers=headers)
        except httpx.TimeoutException as exc:
            raise ModelError(f"{self.name} did not answer in {self.timeout:g}s ({exc})", code="model_unreachable") from None
        except httpx.HTTPError as exc:
            raise ModelError(f"cannot reach {self.name}: {exc}", code="model_unreachable") from None
        if resp.status_code >= 400:
            raise ModelError(f"{self.name} answered HTTP {resp.status_code}: {resp.text[:300]}",
                             code="model_http_error", instant=resp.status_code in INSTANT_STATUS)
        try:
            message = resp.json()["choices"][0]["message"]
            calls = tuple(
                ToolCall(str(c.get("id") or f"call_{i}"), str(c["function"]["name"]),
                         _arguments_text(c["function"].get("arguments")))
                for i, c in enumerate(message.get("tool_calls") or [])
            )
            content = message.get("content")
        except (ValueError, KeyError, IndexError, TypeError) as exc:
            raise ModelError(f"{self.name} sent a reply that is not a chat completion ({exc!r})",
                             code="model_bad_response") from None
        return Completion(content=content if isinstance(content, str) else None, tool_calls=calls)


def _arguments_text(arguments: object) -> str:
    if arguments is None:
        return "{}"
    if isinstance(arguments, str):
        return arguments
    import json

    return json.dumps(arguments)


class OpenAISessions:
    """The ``openai`` adapter (shared: any engine process runs its turns)."""

    name = "openai"
    shared = True

    def __init__(self, store: SqlStore, *, clock: Clock | None = None, settings: Settings | None = None,
                 transport: httpx.BaseTransport | None = None) -> None:
        self.store = store
        self.clock: Clock = clock or SystemClock()
        self.settings = settings or store.settings
        self.transport = transport
        self._down: dict[str, tuple[int, int]] = {}  # base_url -> (not before, back-off) in µs

    def can_deliver(self, session: Session) -> bool:
        return bool(session.config.get("base_url") and session.config.get("model")) and self.why_not(session) is None

    def why_not(self, session: Session) -> str | None:
        """Why a turn cannot run now (its endpoint is in back-off), or None."""
        down = self._down.get(str(session.config.get("base_url")))
        if down is None or now_us(self.clock) >= down[0]:
            return None
        return f"model server {session.config.get('base_url')} unreachable; trying again in {(down[0] - now_us(self.clock)) / 1e6:.0f}s"

    def conversation(self, session: Session, *, owner: str | None = None) -> Any:
        from ..agent.loop import DEFAULT_SYSTEM, Conversation

        system = session.config.get("system", DEFAULT_SYSTEM)
        return Conversation(
            self.store, session.id, OpenAIChatModel.from_config(session.config, transport=self.transport),
            clock=self.clock, settings=self.settings, system=system or None, owner=owner,
        )

    def run_turn(self, session: Session, message: str, fires: Sequence[Fire]) -> TurnResult:
        """Run the fired turn; the dispatcher holds the session's turn lease."""
        reply = self.conversation(session).run_fired(fires)
        url = str(session.config.get("base_url"))
        if reply.code == "model_unreachable":
            _, last = self._down.get(url, (0, 0))
            backoff = min(BACKOFF_MAX_US, last * 2) if last else BACKOFF_FIRST_US
            self._down[url] = (now_us(self.clock) + backoff, backoff)
            return TurnResult(False, error=f"{reply.code}: {reply.error}", retry=True)
        self._down.pop(url, None)
        if reply.duplicate:
            return TurnResult(True, duplicate=True)
        if not reply.ok:
            return TurnResult(False, error=f"{reply.code}: {reply.error}", instant=reply.instant)
        return TurnResult(True, reply=reply.text)


__all__ = ["DEFAULT_KEY_ENV", "OpenAIChatModel", "OpenAISessions"]
