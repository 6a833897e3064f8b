"""A stand-in model that follows a script (not a language model, and it says so):
``remindkit demo`` and the notebook's offline assistant run the whole loop with it,
with no model server."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from ..protocol.framing import TAG
from .model import Completion

SCRIPT_LABEL = "scripted local model"


class ScriptedModel:
    """A stand-in model that follows a script: asked anything, it sets a reminder
    ``delay`` seconds out with a ``<schedule>`` tag; handed a ``<schedule-fired>``
    message, it tells the user what the reminder was about."""

    name = SCRIPT_LABEL

    def __init__(
        self,
        *,
        delay_s: int = 3,
        label: str = "stretch",
        text: str = "Stand up, stretch and drink some water.",
        announce: str = "Time to stretch!",
    ) -> None:
        self.delay_s = delay_s
        self.label = label
        self.text = text
        self.announce = announce
        self.calls = 0

    def complete(
        self, messages: Sequence[dict[str, Any]], tools: Sequence[dict[str, Any]]
    ) -> Completion:
        self.calls += 1
        last = next((m for m in reversed(messages) if m.get("role") == "user"), None)
        content = str((last or {}).get("content") or "")
        if f"<{TAG}" in content:
            texts = _reminder_texts(content)
            about = "; ".join(texts) if texts else "your reminder"
            return Completion(
                f"[{SCRIPT_LABEL}] Your reminder is due: {about} I'm back in this conversation, "
                "as promised."
            )
        return Completion(
            f"[{SCRIPT_LABEL}] Sure, I'll remind you in {self.delay_s} seconds.\n"
            f'<schedule label="{self.label}" delay="{self.delay_s}s" alarm="true" announce="{self.announce}">'
            f"{self.text}</schedule>"
        )


def _reminder_texts(message: str) -> list[str]:
    out = []
    for line in message.splitlines():
        if line.startswith("reminder_text_json: "):
            try:
                out.append(str(json.loads(line.split(": ", 1)[1])))
            except ValueError:
                continue
    return out


__all__ = ["SCRIPT_LABEL", "ScriptedModel"]
