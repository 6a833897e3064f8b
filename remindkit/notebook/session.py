"""``rk.chat(...)``: a chat with an agent in a notebook, in one call.

It opens the store (the default one unless given), starts this kernel's
engine for it (once; see :mod:`remindkit.notebook.runtime`) and returns a
:class:`~remindkit.chats.session.ChatSession` registered with that engine, so the
reminders the agent sets (with tags or tool calls) fire back into this chat as
new turns while the notebook is idle. ``rk.panel(chat)`` shows it.

>>> chat = rk.chat(base_url="http://127.0.0.1:11434/v1", model="llama3.2")   # doctest: +SKIP
>>> chat = rk.chat(model=my_agent)          # fn(messages, tools) -> str, or a ChatModel   # doctest: +SKIP
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, TypeVar

from ..agent.loop import DEFAULT_SYSTEM
from ..agent.model import ChatModel
from ..chats.session import ChatSession
from ..settings import Settings
from ..store import SqlStore
from .runtime import runtime_for

T = TypeVar("T")


def chat(
    base_url: str | None = None,
    model: str | ChatModel | Callable[..., Any] | None = None,
    *,
    session: str | None = None,
    store: SqlStore | None = None,
    db: str | None = None,
    settings: Settings | None = None,
    api_key_env: str | None = None,
    system: str | None = DEFAULT_SYSTEM,
    title: str | None = None,
) -> ChatSession:
    """A chat whose reminders come back to it, with this kernel's engine.

    ``base_url`` + ``model`` (a name): an OpenAI-compatible endpoint (Ollama,
    llama.cpp, vLLM, a cloud API); the key is read from ``api_key_env`` when a
    turn runs. ``model`` alone: a model object with ``complete(messages, tools)``
    or a function ``fn(messages, tools) -> str`` (your own agent, or
    :class:`~remindkit.notebook.scripted.ScriptedAssistant` offline).
    ``store`` / ``db``: where reminders live (default: the configured store).
    ``session``: resume a conversation by id (default: a new one)."""
    rt = runtime_for(store, db=db, settings=settings)
    return ChatSession(
        rt.store,
        session=session,
        base_url=base_url,
        model=model,
        api_key_env=api_key_env,
        engine=rt.engine,
        clock=rt.clock,
        settings=settings or rt.store.settings,
        system=system,
        title=title,
    )


def wait_for(check: Callable[[], T], timeout: float = 30.0, *, every: float = 0.2) -> T:
    """Block until ``check()`` returns something truthy and return it; raise
    ``TimeoutError`` after ``timeout`` seconds. The engine, the panel and the
    browser's countdown keep going meanwhile (they run in threads and the page)."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise TimeoutError(f"not true within {timeout:g}s")
        time.sleep(every)


__all__ = ["chat", "wait_for"]
