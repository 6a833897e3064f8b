"""The chat view: a session's transcript as a person sees it, and a box to type in.

``<schedule>`` tags are stripped from replies, and a fired turn (the hidden
``<schedule-fired>`` message) shows as one marker, ``⏰ check back fired
14:05``, with the agent's reply below it (:func:`.state.chat_lines`). The hub
refreshes it when the transcript grows, whichever process wrote it, so a reply
to a fired reminder appears while the notebook is idle. A message typed in the
box runs its turn on a thread of its own, so the kernel stays free.
"""

from __future__ import annotations

import logging
import threading
from datetime import tzinfo
from pathlib import Path
from typing import Any

import anywidget
import traitlets

from ..chats.session import ChatSession
from ..errors import RemindkitError
from .hub import Hub
from .state import TRANSCRIPT_LINES, Line, chat_lines

log = logging.getLogger(__name__)
STATIC = Path(__file__).with_name("static")


class ChatView(anywidget.AnyWidget):
    _esm = (STATIC / "chat.js").read_text(encoding="utf-8")
    _css = (STATIC / "panel.css").read_text(encoding="utf-8")

    lines = traitlets.List(traitlets.Dict()).tag(sync=True)
    busy = traitlets.Bool(False).tag(sync=True)
    placeholder = traitlets.Unicode("Message the agent…").tag(sync=True)

    def __init__(self, chat: ChatSession, hub: Hub, *, zone: tzinfo, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.chat = chat
        self.hub = hub
        self.zone = zone
        self._shown: tuple[int, int] = (-1, 0)  # (last seq, notes) the lines were built from
        self._notes: list[Line] = []  # failed typed turns, shown in place
        self._turns: list[threading.Thread] = []
        self._running = 0
        self._lock = threading.Lock()
        self.on_msg(self._on_msg)

    # -- hub thread ----------------------------------------------------------------------

    def refresh(self) -> None:
        """Rebuild the lines when the transcript grew (or a turn failed here)."""
        last = self.chat.last_seq()
        with self._lock:
            notes = list(self._notes)
            busy = self._running > 0
        # failed fired turns and replies that went to a fallback session, placed after their fired turn
        notes += [Line(e.seq, "note", e.text) for e in self.chat.delivery_notes()]
        if (last, len(notes)) != self._shown:
            messages = self.chat.store.transcripts.messages(self.chat.id, last=2 * TRANSCRIPT_LINES)
            merged = sorted([*chat_lines(messages, self.zone), *notes], key=lambda ln: ln.seq)
            state = [ln.to_json() for ln in merged[-TRANSCRIPT_LINES:]]
            if state != self.lines:
                self.lines = state
            self._shown = (last, len(notes))
        if busy != self.busy:
            self.busy = busy

    # -- typing (kernel main thread) -----------------------------------------------------

    def _on_msg(self, _widget: Any, content: Any, _buffers: Any) -> None:
        if isinstance(content, dict) and content.get("action") == "send":
            text = str(content.get("text", "")).strip()
            if text:
                self.send_message(text)

    def send_message(self, text: str) -> threading.Thread:
        """Run a turn with ``text`` on a thread; the view updates when it is done."""
        with self._lock:
            self._running += 1
        thread = threading.Thread(
            target=self._turn, args=(text,), name="remindkit-notebook-turn", daemon=True
        )
        self._turns.append(thread)
        thread.start()
        self.hub.refresh()
        return thread

    def _turn(self, text: str) -> None:
        note = None
        try:
            reply = self.chat.send(text)
            if not reply.ok:
                note = f"⚠ the turn failed: {reply.code or 'error'}: {reply.error}"
        except RemindkitError as exc:
            note = f"⚠ {exc.code}: {exc.message}"
        except Exception as exc:  # a model bug must not kill the view
            log.exception("notebook chat turn failed")
            note = f"⚠ {type(exc).__name__}: {exc}"
        finally:
            with self._lock:
                self._running -= 1
                if note is not None:
                    self._notes.append(Line(self.chat.last_seq(), "note", note))
            self.hub.refresh()

    def join(self, timeout: float = 30.0) -> None:
        """Wait for the turns started from the box (tests, notebook cells)."""
        for thread in list(self._turns):
            thread.join(timeout)


__all__ = ["ChatView"]
