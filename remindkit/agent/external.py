"""Turns of agents that keep their own conversation (``command`` sessions, plain
python callables): remindkit records what it handed over and what came back.

:meth:`ExternalTurns.begin` drops the occurrence keys this session has taken
already (when none is left the turn is not run) and puts the
``<schedule-feedback>`` of the previous reply in front of the hidden message.
:meth:`ExternalTurns.end`, once the agent has answered, takes the keys in the
store together with that message and records the reply, then carries out its
tags; errors become the feedback for the next turn.

Keys are taken when the turn is over, not when it starts: an engine killed while
the agent works leaves them untaken, and the engine that takes the claim over
hands them to the agent again (at-least-once, under the same keys). A repeat
that comes after a finished turn (its acknowledgement was lost) is dropped.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..clock import Clock, now_us
from ..models import FEEDBACK, FIRED_TURN, Fire, Message, Role
from ..protocol.framing import frame_feedback, frame_fired
from ..reminders import Reminders
from ..store import SqlStore
from .actions import TagOutcome, feedback_errors, run_reply_tags

FEEDBACK_LOOKBACK = 50


@dataclass(frozen=True)
class Handover:
    message: str  # what the agent gets: feedback (if any), then the fired blocks
    fires: tuple[Fire, ...]  # the occurrences not taken before
    framed: str = ""  # the fired blocks alone (kept in the transcript when all are taken now)


class ExternalTurns:
    """The agent side of the sessions whose agent keeps its own conversation: over
    the store of ``api``, the reminders API their replies' tags act through."""

    def __init__(self, api: Reminders) -> None:
        self.api = api
        self.store: SqlStore = api.store
        self.clock: Clock = api.clock

    def begin(
        self, session: str, fires: Sequence[Fire], *, framed: str | None = None
    ) -> Handover | None:
        """The message to hand over; None: every key was taken by an earlier turn.
        ``framed``: the fired message delivery made for exactly ``fires`` (used as it
        is when none of their keys was taken before; a subset is framed anew)."""
        by_key = {f.key: f for f in fires}
        taken = self.store.transcripts.taken_keys(session, list(by_key))
        fresh = [f for k, f in by_key.items() if k not in taken]
        if not fresh:
            return None
        if framed is None or len(fresh) != len(fires):
            framed = frame_fired(fresh)
        text = "\n".join([*self.pending_feedback(session), framed])
        return Handover(text, tuple(fresh), framed)

    def end(self, session: str, handover: Handover, reply: str | None) -> list[TagOutcome]:
        """The agent answered: take the keys with the fired message, record the
        reply, carry out its tags, store the feedback for next time."""
        by_key = {f.key: f for f in handover.fires}

        def build(fresh: list[str]) -> Message:
            whole = handover.framed and len(fresh) == len(by_key)
            return Message(
                session,
                Role.USER,
                handover.framed if whole else frame_fired([by_key[k] for k in fresh]),
                kind=FIRED_TURN,
                hidden=True,
            )

        self.store.transcripts.append_fired(session, list(by_key), build, now_us=now_us(self.clock))
        if reply is None:
            return []
        rows = [Message(session, Role.ASSISTANT, reply)]
        echoed_from = [f.text for f in handover.fires]
        outcomes = (
            run_reply_tags(self.api, session, reply, echoed_from=echoed_from) if reply else []
        )
        errors = feedback_errors(outcomes)
        if errors:
            rows.append(
                Message(session, Role.USER, frame_feedback(errors), kind=FEEDBACK, hidden=True)
            )
        self.store.transcripts.append_messages(session, rows, now_us=now_us(self.clock))
        return outcomes

    def pending_feedback(self, session: str) -> list[str]:
        """Feedback recorded after the session's last reply (not yet handed over)."""
        tail = self.store.transcripts.messages(session, last=FEEDBACK_LOOKBACK)
        out: list[str] = []
        for m in reversed(tail):
            if m.role == "assistant" or m.kind == FIRED_TURN:
                break
            if m.kind == FEEDBACK and m.content:
                out.append(m.content)
        return list(reversed(out))


__all__ = ["ExternalTurns", "Handover"]
