"""``<schedule>`` and ``<cancel-schedule>`` tags in an agent reply.

::

    <schedule label="check back" delay="5m" alarm="true" announce="Time to check in!">
    Remember to ask about the meeting outcome.
    </schedule>
    <cancel-schedule label="check back" />

:func:`parse_tags` returns the commands in reply order and the errors of the
tags that could not be read (a malformed tag is never executed; its error goes
back to the agent in its next turn). :func:`strip_tags` removes the tags for
display. Both are pure and run in time linear in the reply:

* the tag names are matched case-insensitively, attributes in any order, with
  double, single or no quotes; XML entities are decoded in values and bodies;
* a tag inside a fenced code block or an inline code span is text, not a
  command, so an agent explaining the syntax schedules nothing;
* the body of ``<schedule>`` runs to the first ``</schedule>``; another
  ``<schedule`` or ``<cancel-schedule`` inside it makes the whole element
  ``nested_tag``; an open tag with no closing one is ``unclosed_tag``
  (``<schedule … />`` is self-closing: its text is then ``announce`` or
  ``label``);
* attribute names are checked (``unknown_attribute``, ``duplicate_attribute``),
  sizes bounded (``attribute_too_long``, ``tag_too_long``), and at most
  :data:`MAX_TAGS` commands are read from one reply (``too_many_tags``).

What a schedule *means* (durations, zones, limits) is checked later by the
reminders API, which has its own stable codes.
"""

from __future__ import annotations

import functools
import re
from bisect import bisect_left, bisect_right
from collections.abc import Iterator
from dataclasses import dataclass

MAX_TAGS = 20
MAX_ELEMENTS = 4 * MAX_TAGS  # tag elements read from one reply; the rest stays text
MAX_HEAD = 8_192  # characters from "<schedule" to its ">"
MAX_VALUE = 2_000  # characters in one attribute value
SNIPPET = 80

SCHEDULE_ATTRS = frozenset(
    {
        "label",
        "delay",
        "at",
        "tz",
        "every",
        "cron",
        "repeat",
        "until",
        "alarm",
        "announce",
        "on_busy",
    }
)
CANCEL_ATTRS = frozenset({"label", "id"})
_ALIASES = {"in": "delay", "on-busy": "on_busy", "timezone": "tz", "time_zone": "tz"}
_TRUE = frozenset({"true", "1", "yes", "on", ""})
_FALSE = frozenset({"false", "0", "no", "off"})

_FENCE = re.compile(r"^[ ]{0,3}(?:`{3,}|~{3,})", re.MULTILINE)
_TAG_ONLY = re.compile(r"<(?:schedule|cancel-schedule)(?=[\s/>]|\Z)", re.IGNORECASE | re.ASCII)
_CLOSE = re.compile(r"</schedule\s*>", re.IGNORECASE | re.ASCII)
_INNER_OPEN = re.compile(r"<(?:schedule|cancel-schedule)(?=[\s/>]|\Z)", re.IGNORECASE | re.ASCII)
_CANCEL_CLOSE = re.compile(r"[ \t]*</cancel-schedule\s*>", re.IGNORECASE | re.ASCII)
_OPEN_OR_CLOSE = re.compile(r"<schedule(?=[\s/>]|\Z)|</schedule\s*>", re.IGNORECASE | re.ASCII)
_TICK_RUN = re.compile(r"`+")
_BLANK_LINE = re.compile(r"\n[ \t]*\n")
_NAME = re.compile(r"[A-Za-z_:][-A-Za-z0-9_:.]*")
_UNQUOTED = re.compile(r"[^\s\"'=<>`/]+")
_ENTITY = re.compile(r"&(#[0-9]{1,7}|#[xX][0-9A-Fa-f]{1,6}|amp|lt|gt|quot|apos);")
_NAMED = {"amp": "&", "lt": "<", "gt": ">", "quot": '"', "apos": "'"}


@dataclass(frozen=True)
class ScheduleTag:
    """``<schedule>``: set (or, with a live label, replace) a reminder."""

    label: str
    text: str
    delay: str | None = None
    at: str | None = None
    tz: str | None = None
    every: str | None = None
    cron: str | None = None
    repeat: str | None = None
    until: str | None = None
    alarm: bool = False
    announce: str | None = None
    on_busy: str | None = None
    start: int = 0
    end: int = 0


@dataclass(frozen=True)
class CancelTag:
    """``<cancel-schedule label="…" />`` (or ``id="rem_…"``)."""

    label: str | None = None
    id: str | None = None
    start: int = 0
    end: int = 0


@dataclass(frozen=True)
class TagError:
    code: str
    message: str
    snippet: str
    start: int = 0
    end: int = 0


Command = ScheduleTag | CancelTag


@dataclass(frozen=True)
class ParsedTags:
    commands: tuple[Command, ...] = ()
    errors: tuple[TagError, ...] = ()
    spans: tuple[tuple[int, int], ...] = ()  # every tag element read, valid or not

    def __bool__(self) -> bool:
        return bool(self.commands or self.errors)


class _Malformed(Exception):
    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def parse_tags(reply: str) -> ParsedTags:
    """Read the schedule tags of ``reply`` (outside code), in order."""
    if not reply or _TAG_ONLY.search(reply) is None:
        return ParsedTags()
    commands: list[Command] = []
    errors: list[TagError] = []
    spans: list[tuple[int, int]] = []
    for start, end, result in _scan(reply):
        spans.append((start, end))
        if isinstance(result, TagError):
            errors.append(result)
        elif len(commands) >= MAX_TAGS:
            if not any(e.code == "too_many_tags" for e in errors):
                errors.append(
                    TagError(
                        "too_many_tags",
                        f"at most {MAX_TAGS} schedule tags are read from one reply; "
                        "the rest were not carried out",
                        _snippet(reply, start, end),
                        start,
                        end,
                    )
                )
        else:
            commands.append(result)
    return ParsedTags(tuple(commands), tuple(errors), tuple(spans))


def strip_tags(reply: str) -> str:
    """The reply without its schedule tags (valid or not), for display."""
    parsed = parse_tags(reply)
    if not parsed.spans:
        return reply
    out: list[str] = []
    pos = 0
    for start, end in parsed.spans:
        out.append(reply[pos:start])
        pos = end
    out.append(reply[pos:])
    return _tidy("".join(out))


def _tidy(text: str) -> str:
    lines = [line.rstrip() for line in text.split("\n")]
    kept: list[str] = []
    for line in lines:
        if not line and kept and not kept[-1]:
            continue
        kept.append(line)
    return "\n".join(kept).strip()


# -- the scanner ----------------------------------------------------------------------------


def _fences(text: str) -> list[tuple[int, int]]:
    """(start, end) of every fenced code block (block structure comes first)."""
    out: list[tuple[int, int]] = []
    pos = 0
    while True:
        m = _FENCE.search(text, pos)
        if m is None:
            return out
        end = _fence_end(text, m)
        if end is None:
            pos = m.end()
            continue
        out.append((m.start(), end))
        pos = max(end, m.end())


def _fence_end(text: str, m: re.Match[str]) -> int | None:
    """End of the fenced block opened at ``m`` (None: the line is no fence)."""
    opener = m.group(0).lstrip(" ")
    char, count = opener[0], len(opener)
    line_end = text.find("\n", m.end())
    info = text[m.end() :] if line_end < 0 else text[m.end() : line_end]
    if char == "`" and "`" in info:
        return None  # a backtick fence's info string has no backticks
    if line_end < 0:
        return len(text)
    close = _closer(char, count).search(text, line_end + 1)
    return len(text) if close is None else close.end()  # an unclosed fence runs to the end


@functools.lru_cache(maxsize=64)
def _closer(char: str, count: int) -> re.Pattern[str]:
    return re.compile(rf"^[ ]{{0,3}}{re.escape(char)}{{{count},}}[ \t]*$", re.MULTILINE)


class _Paragraph:
    """Backtick runs of one paragraph, to pair inline code spans (a run closes at
    the next run of the same length; one without such a run is text)."""

    def __init__(self, text: str, start: int, end: int) -> None:
        self.start, self.end = start, end
        starts: list[int] = []
        lengths: list[int] = []
        for m in _TICK_RUN.finditer(text, start, end):
            starts.append(m.start())
            lengths.append(m.end() - m.start())
        following: list[int] = [-1] * len(starts)  # index of the next run of the same length
        last: dict[int, int] = {}
        for i in range(len(starts) - 1, -1, -1):
            following[i] = last.get(lengths[i], -1)
            last[lengths[i]] = i
        self.starts, self.lengths, self.following = starts, lengths, following

    def code_end(self, pos: int, target: int) -> int | None:
        """If ``target`` lies inside an inline code span that opens in [pos, target),
        the end of that span; else None."""
        starts, following = self.starts, self.following
        i = bisect_left(starts, pos)
        n = len(starts)
        while i < n and starts[i] < target:
            j = following[i]
            if j < 0:
                i += 1
            elif starts[j] > target:
                return starts[j] + self.lengths[j]
            else:
                i = j + 1
        return None


def _scan(text: str) -> Iterator[tuple[int, int, Command | TagError]]:
    """Yield (start, end, ScheduleTag | CancelTag | TagError) for each tag outside code.

    Only the paragraph around a tag candidate is examined for inline code, so
    the cost is linear in the reply whatever it holds."""
    fences = _fences(text) if ("```" in text or "~~~" in text) else []
    fence_starts = [f[0] for f in fences]
    pos = 0
    elements = 0
    para: _Paragraph | None = None
    while True:
        m = _TAG_ONLY.search(text, pos)
        if m is None:
            return
        c = m.start()
        k = bisect_right(fence_starts, c) - 1
        if k >= 0 and fences[k][1] > c:
            pos = fences[k][1]  # inside a fenced block
            continue
        if para is None or not (para.start <= c < para.end):
            floor = fences[k][1] if k >= 0 else 0
            para_start = max(floor, _paragraph_start(text, max(floor, pos), c))
            blank = _BLANK_LINE.search(text, c)
            para_end = blank.start() if blank else len(text)
            if k + 1 < len(fences):
                para_end = min(para_end, fences[k + 1][0])
            para = _Paragraph(text, para_start, para_end)
        code_end = para.code_end(max(pos, para.start), c)
        if code_end is not None:
            pos = code_end  # inside an inline code span
            continue
        elements += 1
        if elements > MAX_ELEMENTS:
            return  # hostile input: the rest stays text
        end, result = _read_element(text, c, m.group(0)[1:].lower())
        yield c, end, result
        pos = end


def _paragraph_start(text: str, lo: int, pos: int) -> int:
    """Just after the last blank line in [lo, pos), or ``lo``."""
    start = lo
    for m in _BLANK_LINE.finditer(text, lo, pos):
        start = m.end()
    return start


def _read_element(text: str, start: int, name: str) -> tuple[int, Command | TagError]:
    try:
        attrs, head_end, self_closing = _read_head(text, start + 1 + len(name))
    except _Malformed as exc:
        end = _resync(text, start)
        return end, TagError(exc.code, exc.message, _snippet(text, start, end), start, end)
    if name == "cancel-schedule":
        end = head_end
        if not self_closing:
            own_close = _CANCEL_CLOSE.match(text, end)
            if own_close is not None:
                end = own_close.end()
        return end, _build_cancel(attrs, text, start, end)
    if self_closing:
        return head_end, _build_schedule(attrs, "", text, start, head_end)
    close = _CLOSE.search(text, head_end)
    inner = _INNER_OPEN.search(text, head_end, close.start() if close else len(text))
    if close is None:
        end = head_end
        return end, TagError(
            "unclosed_tag",
            "this <schedule> has no </schedule>; write the text between "
            "<schedule …> and </schedule>, or close the tag with />",
            _snippet(text, start, end),
            start,
            end,
        )
    if inner is not None:
        end = _skip_nested(text, head_end, close)
        return end, TagError(
            "nested_tag",
            "a <schedule> cannot contain another schedule tag; write them one after the other",
            _snippet(text, start, end),
            start,
            end,
        )
    body = decode_entities(text[head_end : close.start()])
    return close.end(), _build_schedule(attrs, body, text, start, close.end())


def _skip_nested(text: str, pos: int, close: re.Match[str]) -> int:
    """End of a nested element: opens and closes matched by depth (linear); when
    they never balance, the last close seen."""
    depth = 1
    last = close.end()
    for m in _OPEN_OR_CLOSE.finditer(text, pos):
        if m.group(0)[1] == "/":
            depth -= 1
            last = m.end()
            if depth == 0:
                return m.end()
        else:
            depth += 1
    return last


def _resync(text: str, start: int) -> int:
    """Where to go on after a malformed head: past its ``>``, or the line's end."""
    gt = text.find(">", start, start + MAX_HEAD + 1)
    if gt >= 0:
        return gt + 1
    nl = text.find("\n", start)
    return len(text) if nl < 0 else nl


def _read_head(text: str, pos: int) -> tuple[dict[str, str], int, bool]:
    """Parse attributes up to ``>`` or ``/>``. Returns (attrs, end, self_closing)."""
    attrs: dict[str, str] = {}
    limit = min(len(text), pos + MAX_HEAD)
    n = len(text)
    while True:
        while pos < n and text[pos] in " \t\r\n":
            pos += 1
        if pos >= limit:
            if limit < n:
                raise _Malformed(
                    "tag_too_long", f"the tag's attributes are longer than {MAX_HEAD} characters"
                )
            raise _Malformed("malformed_tag", "the tag is not closed with > or />")
        ch = text[pos]
        if ch == ">":
            return attrs, pos + 1, False
        if ch == "/":
            if pos + 1 < n and text[pos + 1] == ">":
                return attrs, pos + 2, True
            raise _Malformed("malformed_tag", "expected /> to close the tag")
        m = _NAME.match(text, pos)
        if m is None:
            raise _Malformed(
                "malformed_tag", f'unexpected {ch!r} in the tag; write name="value" attributes'
            )
        raw_name = m.group(0)
        key = raw_name.lower()
        key = _ALIASES.get(key, key)
        pos = m.end()
        while pos < n and text[pos] in " \t\r\n":
            pos += 1
        value = ""
        if pos < n and text[pos] == "=":
            pos += 1
            while pos < n and text[pos] in " \t\r\n":
                pos += 1
            if pos >= n:
                raise _Malformed("malformed_tag", f"attribute {raw_name} has no value")
            q = text[pos]
            if q in "\"'":
                close = text.find(q, pos + 1, min(n, pos + 2 + MAX_VALUE))
                if close < 0:
                    if text.find(q, pos + 1, limit) >= 0:
                        raise _Malformed(
                            "attribute_too_long",
                            f"attribute {raw_name} is longer than {MAX_VALUE} characters",
                        )
                    raise _Malformed("malformed_tag", f"attribute {raw_name} has no closing quote")
                value = text[pos + 1 : close]
                pos = close + 1
            else:
                um = _UNQUOTED.match(text, pos)
                if um is None:
                    raise _Malformed("malformed_tag", f"attribute {raw_name} has no value")
                value = um.group(0)
                pos = um.end()
                if len(value) > MAX_VALUE:
                    raise _Malformed(
                        "attribute_too_long",
                        f"attribute {raw_name} is longer than {MAX_VALUE} characters",
                    )
        if key in attrs:
            raise _Malformed("duplicate_attribute", f"attribute {raw_name} is given twice")
        attrs[key] = decode_entities(value)


def _build_schedule(
    attrs: dict[str, str], body: str, text: str, start: int, end: int
) -> Command | TagError:
    def err(code: str, message: str) -> TagError:
        return TagError(code, message, _snippet(text, start, end), start, end)

    unknown = sorted(set(attrs) - SCHEDULE_ATTRS)
    if unknown:
        return err(
            "unknown_attribute",
            f"<schedule> does not take {', '.join(unknown)}; it takes "
            f"{', '.join(sorted(SCHEDULE_ATTRS))}",
        )
    label = " ".join(attrs.get("label", "").split())
    if not label:
        return err(
            "missing_label", 'a <schedule> needs label="…" (its name, also used to cancel it)'
        )
    alarm_raw = attrs.get("alarm", "false").strip().lower()
    if alarm_raw not in _TRUE | _FALSE:
        return err("invalid_attribute", f"alarm must be true or false (got {attrs['alarm']!r})")
    text_value = body.strip() or (attrs.get("announce") or "").strip() or label

    def opt(name: str) -> str | None:
        value = attrs.get(name)
        return None if value is None or not value.strip() else value.strip()

    return ScheduleTag(
        label=label,
        text=text_value,
        delay=opt("delay"),
        at=opt("at"),
        tz=opt("tz"),
        every=opt("every"),
        cron=opt("cron"),
        repeat=opt("repeat"),
        until=opt("until"),
        alarm=alarm_raw in _TRUE and "alarm" in attrs,
        announce=opt("announce"),
        on_busy=opt("on_busy"),
        start=start,
        end=end,
    )


def _build_cancel(attrs: dict[str, str], text: str, start: int, end: int) -> Command | TagError:
    unknown = sorted(set(attrs) - CANCEL_ATTRS)
    if unknown:
        return TagError(
            "unknown_attribute",
            f"<cancel-schedule> takes label or id, not {', '.join(unknown)}",
            _snippet(text, start, end),
            start,
            end,
        )
    label = " ".join(attrs.get("label", "").split()) or None
    rid = attrs.get("id", "").strip() or None
    if label is None and rid is None:
        return TagError(
            "missing_label",
            'a <cancel-schedule> needs label="…" (or id="…")',
            _snippet(text, start, end),
            start,
            end,
        )
    return CancelTag(label=label, id=rid, start=start, end=end)


def decode_entities(value: str) -> str:
    """Decode the XML entities (named and numeric); others stay as written."""
    if "&" not in value:
        return value

    def sub(m: re.Match[str]) -> str:
        ref = m.group(1)
        if ref[0] != "#":
            return _NAMED[ref]
        code = int(ref[2:], 16) if ref[1] in "xX" else int(ref[1:])
        if code == 0 or code > 0x10FFFF or 0xD800 <= code <= 0xDFFF:
            return m.group(0)
        return chr(code)

    return _ENTITY.sub(sub, value)


def _snippet(text: str, start: int, end: int) -> str:
    s = " ".join(text[start : min(end, start + SNIPPET + 1)].split())
    return s if len(s) <= SNIPPET else s[: SNIPPET - 1] + "…"


__all__ = [
    "MAX_TAGS",
    "CancelTag",
    "Command",
    "ParsedTags",
    "ScheduleTag",
    "TagError",
    "decode_entities",
    "parse_tags",
    "strip_tags",
]
