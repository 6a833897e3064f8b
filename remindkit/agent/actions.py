"""Carrying out the ``<schedule>`` / ``<cancel-schedule>`` tags of a reply.

Every tag goes through the reminders API for the session whose reply it was,
so it obeys the same validation and limits as the CLI. A tag that fails (it
was malformed, or the API refused it) is not carried out; its error, with a
stable code, is what :func:`feedback_errors` reports back to the agent in its
next turn.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..audit import Surface
from ..errors import RemindkitError
from ..models import Reminder
from ..protocol.tags import CancelTag, ParsedTags, ScheduleTag, parse_tags
from ..reminders import Reminders

NOT_FOUND = "schedule_not_found"


@dataclass(frozen=True)
class TagOutcome:
    ok: bool
    action: str  # schedule | cancel | parse
    snippet: str
    reminder: Reminder | None = None
    cancelled: tuple[str, ...] = ()
    replaced: tuple[str, ...] = ()
    code: str | None = None
    message: str | None = None


def run_reply_tags(api: Reminders, session: str | None, reply: str) -> list[TagOutcome]:
    """Parse ``reply`` and carry out its tags for ``session``, in order."""
    return execute_tags(api, session, parse_tags(reply), reply)


def execute_tags(api: Reminders, session: str | None, parsed: ParsedTags, reply: str = "") -> list[TagOutcome]:
    outcomes: list[TagOutcome] = []
    for err in parsed.errors:
        outcomes.append(TagOutcome(False, "parse", err.snippet, code=err.code, message=err.message))
    for cmd in parsed.commands:
        snippet = _snippet(reply, cmd.start, cmd.end) if reply else ""
        try:
            if isinstance(cmd, ScheduleTag):
                outcomes.append(_schedule(api, session, cmd, snippet))
            else:
                outcomes.append(_cancel(api, session, cmd, snippet))
        except RemindkitError as exc:
            code = NOT_FOUND if exc.code in ("not_found", "not_active") and isinstance(cmd, CancelTag) else exc.code
            outcomes.append(TagOutcome(False, "schedule" if isinstance(cmd, ScheduleTag) else "cancel", snippet,
                                       code=code, message=exc.message))
    return outcomes


def feedback_errors(outcomes: list[TagOutcome]) -> list[tuple[str, str, str]]:
    """(code, message, snippet) of the tags that were not carried out."""
    return [(o.code or "error", o.message or "", o.snippet) for o in outcomes if not o.ok]


def _schedule(api: Reminders, session: str | None, tag: ScheduleTag, snippet: str) -> TagOutcome:
    created = api.add(
        tag.text, session=session, label=tag.label, in_=tag.delay, at=tag.at, every=tag.every, cron=tag.cron,
        tz=tag.tz, repeat=tag.repeat, until=tag.until, alarm=tag.alarm, announce=tag.announce,
        on_busy=tag.on_busy or "wait", source="tag", surface=Surface.TAG,
    )
    return TagOutcome(True, "schedule", snippet, reminder=created.reminder, replaced=created.replaced)


def _cancel(api: Reminders, session: str | None, tag: CancelTag, snippet: str) -> TagOutcome:
    if tag.id is not None:
        done = api.cancel([tag.id], session=session, surface=Surface.TAG)
    else:
        assert tag.label is not None
        done = api.cancel_label(session, tag.label, surface=Surface.TAG)
    return TagOutcome(True, "cancel", snippet, cancelled=tuple(r.id for r in done))


def _snippet(text: str, start: int, end: int, limit: int = 80) -> str:
    s = " ".join(text[start:min(end, start + limit + 1)].split())
    return s if len(s) <= limit else s[: limit - 1] + "…"


__all__ = ["TagOutcome", "execute_tags", "feedback_errors", "run_reply_tags"]
