"""Scripted local models for the notebooks: offline stand-ins for a language
model. They are not language models: they follow a fixed script, say so in
every reply (``[scripted local model]``), and write the same ``<schedule>``
tags and tool calls a real model would, so the whole loop runs without a
model server or network.

* :class:`ScriptedAssistant` understands three sentences: ``Remind me in 10
  seconds to stretch``, ``Every 30 seconds remind me to drink water`` and
  ``Cancel stretch``. A reminder's label is the last word of what to do.
* :class:`ScriptedPoller` is an agent that polls: asked to watch something,
  it sets a callback (the ``set_callback`` tool) and on each fire calls your
  ``check()``; when ``until(status)`` holds, it cancels its own callback and
  reports.
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Callable, Sequence
from typing import Any

from ..agent.model import Completion, ToolCall
from ..agent.scripted import SCRIPT_LABEL, ScriptedModel
from ..protocol.framing import TAG, escape_attr
from ..protocol.tags import decode_entities

PREFIX = f"[{SCRIPT_LABEL}]"
UNITS = {
    "s": "s",
    "sec": "s",
    "second": "s",
    "m": "m",
    "min": "m",
    "minute": "m",
    "h": "h",
    "hour": "h",
}
_AMOUNT = r"(?P<n>\d+)\s*(?P<unit>s|secs?|seconds?|m|mins?|minutes?|h|hours?)"
_ONCE = re.compile(rf"remind me in {_AMOUNT} to (?P<what>.+)", re.IGNORECASE)
_EVERY = re.compile(rf"every {_AMOUNT},? remind me to (?P<what>.+)", re.IGNORECASE)
_CANCEL = re.compile(r"cancel (?:the )?(?P<label>[\w-]+)(?: reminder)?\W*$", re.IGNORECASE)


def _duration(n: str, unit: str) -> str:
    return f"{int(n)}{UNITS[unit.lower().rstrip('s') or 's']}"


class ScriptedAssistant(ScriptedModel):
    """A scripted local model for the quickstart (see the module docstring).
    Reminders it sets ring (``alarm``) and speak what to do (``announce``)."""

    def complete(
        self, messages: Sequence[dict[str, Any]], tools: Sequence[dict[str, Any]]
    ) -> Completion:
        self.calls += 1
        last = _last_user(messages)
        if f"<{TAG}" in last:  # a fired reminder: say what it was about
            about = "; ".join(_reminder_texts(last)) or "your reminder"
            return Completion(
                f"{PREFIX} Your reminder is due: {about}. I'm back in this conversation, as promised."
            )
        typed = last.rsplit("</schedule-feedback>", 1)[-1].strip().rstrip(".!")
        if m := _ONCE.search(typed):
            what, delay = m["what"].strip(), _duration(m["n"], m["unit"])
            return Completion(
                f"{PREFIX} Sure, I'll remind you in {delay} to {what}.\n"
                + _schedule_tag(_label(what), what, delay=delay)
            )
        if m := _EVERY.search(typed):
            what, every = m["what"].strip(), _duration(m["n"], m["unit"])
            return Completion(
                f"{PREFIX} Sure, every {every} I'll remind you to {what}.\n"
                + _schedule_tag(_label(what), what, every=every)
            )
        if m := _CANCEL.search(typed):
            label = m["label"].lower()
            return Completion(
                f'{PREFIX} Done, I cancelled "{label}".\n<cancel-schedule label="{escape_attr(label)}" />'
            )
        return Completion(
            f"{PREFIX} I only follow a script. Try: 'Remind me in 10 seconds to stretch', "
            "'Every 30 seconds remind me to drink water' or 'Cancel stretch'."
        )


def _reminder_texts(fired: str) -> list[str]:
    texts = []
    for line in fired.splitlines():
        if line.startswith("reminder_text_json: "):
            try:
                texts.append(str(json.loads(line.split(": ", 1)[1])))
            except ValueError:
                continue
    return texts


def _label(what: str) -> str:
    words = re.findall(r"[\w-]+", what.lower())
    return words[-1] if words else "reminder"


def _schedule_tag(label: str, what: str, **when: str) -> str:
    """``<schedule label=… delay=… alarm="true" announce=…>what</schedule>`` (or ``every=``)."""
    timing = " ".join(f'{key}="{escape_attr(value)}"' for key, value in when.items())
    text = what.replace("<", " ").replace(">", " ")
    return f'<schedule label="{escape_attr(label)}" {timing} alarm="true" announce="{escape_attr(what)}">{text}</schedule>'


class ScriptedPoller:
    """A scripted local model that polls until a condition holds, then cancels
    itself, like an agent whose callback says "Check the deploy status; if it
    succeeded or failed, cancel this callback and report; otherwise say nothing
    new".

    ``check()`` looks at the thing (returns a status), ``until(status)`` says when
    to stop. Any typed message starts the watch with ``set_callback`` every
    ``every_s`` seconds, at most ``repeat`` times."""

    name = SCRIPT_LABEL

    def __init__(
        self,
        check: Callable[[], Any],
        *,
        until: Callable[[Any], bool] = bool,
        every_s: int = 2,
        repeat: int = 30,
        what: str = "the build",
    ) -> None:
        self.check = check
        self.until = until
        self.every_s = every_s
        self.repeat = repeat
        self.what = what
        self.checks: list[Any] = []  # statuses seen, in order
        self._ids = itertools.count(1)

    def complete(
        self, messages: Sequence[dict[str, Any]], tools: Sequence[dict[str, Any]]
    ) -> Completion:
        last = messages[-1] if messages else {}
        if last.get("role") == "tool":  # the result of our own set_callback call
            result = str(last.get("content") or "")
            if result.startswith("Cancelled"):
                return Completion(
                    f"{PREFIX} {self.what.capitalize()} is {self.checks[-1]} after "
                    f"{len(self.checks)} checks, so I cancelled my callback. ({result})"
                )
            if result.startswith("Callback scheduled"):
                return Completion(
                    f"{PREFIX} Watching {self.what}: I'll check every {self.every_s}s and "
                    f"stop by myself when it is done. ({result})"
                )
            return Completion(f"{PREFIX} The callback tool said: {result}")
        content = _last_user(messages)
        if f"<{TAG}" in content:
            status = self.check()
            self.checks.append(status)
            if self.until(status):
                slot = _callback_slot(content)
                args: dict[str, Any] = {"action": "cancel"}
                if slot is not None:
                    args["callback_id"] = slot
                return self._call(args)
            return Completion(
                f"{PREFIX} Check {len(self.checks)}: {self.what} is {status}; "
                f"looking again in {self.every_s}s."
            )
        return self._call(
            {
                "action": "set",
                "delay_seconds": self.every_s,
                "repeat_count": self.repeat,
                "message": f"Check {self.what}; if it is done, cancel this callback and report; "
                "otherwise say nothing new.",
            }
        )

    def _call(self, args: dict[str, Any]) -> Completion:
        return Completion(
            None, (ToolCall(f"call_{next(self._ids)}", "set_callback", json.dumps(args)),)
        )


def _callback_slot(fired: str) -> int | None:
    """The slot of the callback that fired, from its label ``callback-N``."""
    m = re.search(r'<schedule-fired [^>]*label="callback-(\d+)"', fired)
    return int(decode_entities(m.group(1))) if m else None


def _last_user(messages: Sequence[dict[str, Any]]) -> str:
    last = next((m for m in reversed(messages) if m.get("role") == "user"), None)
    return str((last or {}).get("content") or "")


__all__ = ["ScriptedAssistant", "ScriptedPoller"]
