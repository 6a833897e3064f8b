"""Turns of agents that keep their own conversation (``command`` sessions, plain
python callables): remindkit records what it handed over and what came back.

:meth:`ExternalTurns.begin` takes the delivery's occurrence keys in the store
together with the hidden message it hands over (keys this session already
took are dropped; when none is left the turn is not run), and puts in front
of it the ``<schedule-feedback>`` of the previous reply, if any.
:meth:`ExternalTurns.end` records the reply and carries out its tags; errors
become the feedback for the next turn.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..clock import Clock, SystemClock, now_us
from ..models import FEEDBACK, FIRED_TURN, Fire, Message
from ..protocol.framing import frame_feedback, frame_fired
from ..reminders import Reminders
from ..settings import Settings
from ..store import SqlStore
from .actions import TagOutcome, feedback_errors, run_reply_tags

FEEDBACK_LOOKBACK = 50


@dataclass(frozen=True)
class Handover:
    message: str  # what the agent gets: feedback (if any), then the fired blocks
    fires: tuple[Fire, ...]  # the occurrences not taken before


class ExternalTurns:
    def __init__(self, store: SqlStore, *, clock: Clock | None = None, settings: Settings | None = None) -> None:
        self.store = store
        self.clock: Clock = clock or SystemClock()
        self.api = Reminders(store, clock=self.clock, settings=settings or store.settings)

    def begin(self, session: str, fires: Sequence[Fire]) -> Handover | None:
        """Take the keys and record the fired message; None: all were taken before."""
        by_key = {f.key: f for f in fires}
        pending = self.pending_feedback(session)

        def build(fresh: list[str]) -> Message:
            return Message(session, "user", frame_fired([by_key[k] for k in fresh]), kind=FIRED_TURN, hidden=True)

        msg, fresh = self.store.append_fired(session, list(by_key), build, now_us=now_us(self.clock))
        if msg is None:
            return None
        text = "\n".join([*pending, msg.content or ""])
        return Handover(text, tuple(by_key[k] for k in fresh))

    def end(self, session: str, reply: str | None) -> list[TagOutcome]:
        """Record the reply, carry out its tags, store the feedback for next time."""
        if reply is None:
            return []
        rows = [Message(session, "assistant", reply)]
        outcomes = run_reply_tags(self.api, session, reply) if reply else []
        errors = feedback_errors(outcomes)
        if errors:
            rows.append(Message(session, "user", frame_feedback(errors), kind=FEEDBACK, hidden=True))
        self.store.append_messages(session, rows, now_us=now_us(self.clock))
        return outcomes

    def pending_feedback(self, session: str) -> list[str]:
        """Feedback recorded after the session's last reply (not yet handed over)."""
        tail = self.store.messages(session, last=FEEDBACK_LOOKBACK)
        out: list[str] = []
        for m in reversed(tail):
            if m.role == "assistant" or m.kind == FIRED_TURN:
                break
            if m.kind == FEEDBACK and m.content:
                out.append(m.content)
        return list(reversed(out))


__all__ = ["ExternalTurns", "Handover"]
