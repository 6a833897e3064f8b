"""What of a long transcript fits in a model's context.

A request is the system prompt, the tools, then the transcript's newest turns;
a turn starts at a user message and runs to the next one (the assistant's tool
calls and their results stay together). :func:`fit_turns` keeps the newest turn
whatever its size (it holds the message being answered: the typed or fired
turn), then older turns, newest first, while they fit; the oldest are dropped
(not summarised), so a session never dies because it is long.

Tokens are counted by a :data:`Counter` (the server's own tokenizer where it
offers one, see :mod:`remindkit.sessions.openai`), or by :func:`estimate_tokens`,
a deliberately high estimate.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from typing import Any

Counter = Callable[[str], int]

MESSAGE_OVERHEAD = 8  # role markers and separators a chat template adds per message
MARGIN = 0.05  # of the context, kept free for what the count misses (chat template, tool syntax)


def estimate_tokens(text: str) -> int:
    """A count no tokenizer goes over in practice: ASCII at three bytes a token
    (BPE vocabularies average near four for English and code), anything else at
    one token a byte (a byte-level vocabulary's worst case)."""
    ascii_bytes = sum(1 for c in text if ord(c) < 128)
    other = len(text.encode("utf-8", "surrogatepass")) - ascii_bytes
    return math.ceil(ascii_bytes / 3) + other


def message_text(message: dict[str, Any]) -> str:
    text = message.get("content") or ""
    if not isinstance(text, str):
        text = json.dumps(text)
    if message.get("tool_calls"):
        text += json.dumps(message["tool_calls"])
    return text


def message_tokens(message: dict[str, Any], count: Counter) -> int:
    return count(message_text(message)) + MESSAGE_OVERHEAD


def group_turns(history: Sequence[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """The transcript cut at each user message (a leading partial turn is one group)."""
    turns: list[list[dict[str, Any]]] = []
    for m in history:
        if m.get("role") == "user" or not turns:
            turns.append([m])
        else:
            turns[-1].append(m)
    return turns


def fit_turns(
    head: Sequence[dict[str, Any]],
    history: Sequence[dict[str, Any]],
    budget: int,
    count: Counter,
) -> tuple[list[dict[str, Any]], int]:
    """``head`` (the system prompt) plus the newest turns of ``history`` that fit
    in ``budget`` tokens; returns the messages and how many were dropped. The
    newest turn is always kept."""
    turns = group_turns(history)
    used = sum(message_tokens(m, count) for m in head)
    kept: list[list[dict[str, Any]]] = []
    for i, turn in enumerate(reversed(turns)):
        cost = sum(message_tokens(m, count) for m in turn)
        if i > 0 and used + cost > budget:
            break
        kept.append(turn)
        used += cost
    out = list(head)
    for turn in reversed(kept):
        out.extend(turn)
    dropped = len(history) - (len(out) - len(head))
    # a turn that begins with a tool result lost its assistant message: never send it alone
    while len(out) > len(head) and out[len(head)].get("role") == "tool":
        del out[len(head)]
        dropped += 1
    return out, dropped


def prompt_budget(context: int, reply_tokens: int, tools_tokens: int) -> int:
    """Tokens left for the messages: the context less the reply, the tools and a margin."""
    return max(0, context - reply_tokens - tools_tokens - int(context * MARGIN) - 16)


def reply_tokens(context: int, max_tokens: int) -> int:
    """The reply's ``max_tokens``: the setting, but at most a quarter of the context."""
    return max(16, min(max_tokens, context // 4))


__all__ = [
    "Counter",
    "estimate_tokens",
    "fit_turns",
    "group_turns",
    "message_tokens",
    "prompt_budget",
    "reply_tokens",
]
