"""What a person sees of a conversation: tags and hidden blocks stripped.

* :func:`strip_assistant_display` removes ``<schedule>`` / ``<cancel-schedule>``
  tags from an agent reply (tags inside code stay: they are text);
* :func:`strip_user_display_tags` removes the ``<schedule-fired>`` and
  ``<schedule-feedback>`` blocks that remindkit adds to user-role messages; a
  message that is empty afterwards is hidden;
* :func:`fired_marker` is the short line UIs show in place of a fired turn;
* :func:`transcript_view` is what a person sees of a whole transcript.

Pure and linear: blocks are found with ``str.find``, never a backtracking regex.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime, timedelta

from ..clock import parse_utc
from ..models import CHAT, FIRED_TURN, Message
from .tags import strip_tags

HIDDEN_BLOCKS = ("schedule-fired", "schedule-feedback")


def strip_assistant_display(reply: str) -> str:
    return strip_tags(reply)


def strip_user_display_tags(message: str) -> str:
    """The message without remindkit's hidden blocks; ``""`` means: hide it."""
    out = message
    for name in HIDDEN_BLOCKS:
        out = _strip_blocks(out, name)
    return out.strip()


def is_hidden_user_message(message: str) -> bool:
    return strip_user_display_tags(message) == ""


def _strip_blocks(text: str, name: str) -> str:
    opener, closer = f"<{name}", f"</{name}>"
    if opener not in text:
        return text
    parts: list[str] = []
    pos = 0
    while True:
        start = text.find(opener, pos)
        if start < 0:
            break
        after = start + len(opener)
        if after < len(text) and text[after] not in " \t\r\n>/":
            parts.append(text[pos:after])
            pos = after
            continue
        end = text.find(closer, after)
        if end < 0:
            break  # an unclosed block is not ours: keep it as text
        parts.append(text[pos:start])
        pos = end + len(closer)
    parts.append(text[pos:])
    return "".join(parts)


def fired_labels(message: str) -> list[str]:
    """Labels (or ids) of the ``<schedule-fired>`` blocks of a message, in order."""
    labels: list[str] = []
    pos = 0
    while True:
        start = message.find("<schedule-fired ", pos)
        if start < 0:
            return labels
        head_end = message.find(">", start)
        if head_end < 0:
            return labels
        head = message[start:head_end]
        labels.append(_attr(head, "label") or _attr(head, "id") or "reminder")
        pos = head_end


def fired_marker(message: str) -> str:
    """``⏰ reminder fired: check back, deploy`` for a fired turn."""
    labels = fired_labels(message)
    if not labels:
        return "⏰ reminder fired"
    return "⏰ reminder fired: " + ", ".join(labels)


def fired_keys(message: str) -> list[str]:
    """The occurrence keys (``id@due``) of the ``<schedule-fired>`` blocks of a message."""
    keys = []
    for part in message.split("<schedule-fired ")[1:]:
        head = " " + part.split(">", 1)[0]
        rid, due = _attr(head, "id"), _attr(head, "due")
        if rid is not None and due is not None:
            keys.append(f"{rid}@{due}")
    return keys


def fired_time(message: str) -> datetime | None:
    """When the first ``<schedule-fired>`` block fired (its ``due`` plus ``late_ms``; an
    older message's ``fired``), if readable."""
    start = message.find("<schedule-fired ")
    end = message.find(">", start) if start >= 0 else -1
    if end < 0:
        return None
    head = message[start:end]
    try:
        fired = _attr(head, "fired")
        if fired is not None:
            return parse_utc(fired)
        due, late = _attr(head, "due"), _attr(head, "late_ms")
        if due is None:
            return None
        return parse_utc(due) + timedelta(milliseconds=int(late) if late and late.isdigit() else 0)
    except ValueError:
        return None


def transcript_view(
    messages: Sequence[Message], marker: Callable[[Message], str]
) -> list[tuple[int, str, str]]:
    """``(seq, who, text)`` for what a person sees: typed messages (``you``), one
    ``marker(message)`` per fired turn (``fired``), replies without their tags
    (``agent``). Feedback blocks, tool traffic and empty replies are hidden."""
    out: list[tuple[int, str, str]] = []
    for m in messages:
        if m.role == "user" and m.kind == CHAT:
            out.append((m.seq, "you", m.content or ""))
        elif m.role == "user" and m.kind == FIRED_TURN:
            out.append((m.seq, "fired", marker(m)))
        elif m.role == "assistant" and m.content:
            text = strip_assistant_display(m.content)
            if text:
                out.append((m.seq, "agent", text))
    return out


def _attr(head: str, name: str) -> str | None:
    key = f' {name}="'
    i = head.find(key)
    if i < 0:
        return None
    j = head.find('"', i + len(key))
    if j < 0:
        return None
    from .tags import decode_entities

    return decode_entities(head[i + len(key) : j]) or None


__all__ = [
    "fired_labels",
    "fired_keys",
    "fired_time",
    "fired_marker",
    "is_hidden_user_message",
    "strip_assistant_display",
    "strip_user_display_tags",
    "transcript_view",
]
