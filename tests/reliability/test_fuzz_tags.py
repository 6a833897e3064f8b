"""Fuzzing the ``<schedule>`` tag parser with hostile agent replies.

Replies are built from fragments of tags, attributes, quotes, entities, code
fences, backtick runs, nesting, control characters and huge values. For each:

* ``parse_tags``, ``strip_tags`` and the display helpers return (no exception)
  within a hard time bound;
* every error has a documented code, every tag read lies inside the reply, in
  order, without overlap;
* no tag read starts inside code, by a reference written here (fenced blocks
  line by line, then backtick spans paragraph by paragraph), and no tag outside
  code is silently skipped;
* wrapping the reply in a fence that nothing in it can close executes nothing.
"""

from __future__ import annotations

import bisect
import re

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from remindkit.protocol.display import fired_labels, strip_user_display_tags
from remindkit.protocol.tags import (
    MAX_TAGS,
    SCHEDULE_ATTRS,
    CancelTag,
    ParsedTags,
    ScheduleTag,
    parse_tags,
    strip_tags,
)

from .bounded import time_limit
from .hostile import SOAK_CHUNK, documented_codes, soak_chunks

pytestmark = pytest.mark.reliability

BOUND_S = 2.0
MAX_ELEMENTS = 4 * MAX_TAGS
CI = settings(max_examples=2_500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
SOAK = settings(
    max_examples=SOAK_CHUNK,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

# -- what replies are made of ----------------------------------------------------------------

NAMES = [
    "schedule",
    "cancel-schedule",
    "SCHEDULE",
    "Cancel-Schedule",
    "schedule-fired",
    "schedulex",
    "schedule-",
]
ATTRS = sorted(SCHEDULE_ATTRS) + [
    "id",
    "in",
    "on-busy",
    "timezone",
    "time_zone",
    "x",
    "LABEL",
    "a:b",
    "1x",
    "",
]
PIECES = [
    "<",
    ">",
    "/>",
    "/",
    "</schedule>",
    "</schedule >",
    "</SCHEDULE>",
    "</ schedule>",
    "</cancel-schedule>",
    '"',
    "'",
    "=",
    " ",
    "\t",
    "\n",
    "\n\n",
    "\r\n",
    "\n \n",
    "&",
    "&amp;",
    "&lt;",
    "&gt;",
    "&quot;",
    "&#60;",
    "&#x3C;",
    "&#0;",
    "&#1114112;",
    "&#xD800;",
    "&#99999999;",
    "&bogus;",
    "`",
    "``",
    "```",
    "````",
    "~~~",
    "\n```\n",
    "\n~~~\n",
    "```python\n",
    "```a`b\n",
    "\n   ```\n",
    "\n    ```\n",
    "<!--",
    "-->",
    "<![CDATA[",
    "]]>",
    "\x00",
    "\x1b[2J",
    "\u2028",
    "\u2029",
    "\u202e",
    "\ufeff",
    "</schedule-fired>",
    "<schedule-feedback>",
]
VALID = [
    '<schedule label="ok" delay="5m">body</schedule>',
    "<schedule label=ok every=10m repeat=3 />",
    "<cancel-schedule label='ok'/>",
    '<cancel-schedule id="rem_0123456789ab"></cancel-schedule>',
    '<SCHEDULE Label="a &amp; b" in="1h">x</Schedule>',
]


ENTITIES = [
    "&amp;",
    "&lt;",
    "&gt;",
    "&quot;",
    "&apos;",
    "&#60;",
    "&#x3C;",
    "&#X3c;",
    "&#0;",
    "&#1114111;",
    "&#1114112;",
    "&#x110000;",
    "&#xD800;",
    "&#xDFFF;",
    "&#9999999;",
    "&#99999999;",
    "&#x;",
    "&#;",
    "&nbsp;",
    "&AMP;",
    "&amp",
]
texts = st.one_of(
    st.text(max_size=12),
    st.lists(st.sampled_from([*ENTITIES, "a", " ", '"', "'", "<", ">", "`", "\n"]), max_size=5).map(
        "".join
    ),
)


@st.composite
def attribute(draw: st.DrawFn) -> str:
    name = draw(st.sampled_from(ATTRS))
    form = draw(st.sampled_from(["bare", "dq", "sq", "unquoted", "open", "huge", "spaced"]))
    value = draw(texts)
    if form == "bare":
        return name
    if form == "dq":
        return f'{name}="{value}"'
    if form == "sq":
        return f"{name}='{value}'"
    if form == "unquoted":
        return f"{name}={value}"
    if form == "open":
        return f'{name}="{value}'
    if form == "spaced":
        return f'{name} =\n "{value}"'
    return f'{name}="{"v" * draw(st.integers(1_990, 2_010))}"'


@st.composite
def element(draw: st.DrawFn) -> str:
    name = draw(st.sampled_from(NAMES[:2] * 3 + NAMES))
    attrs = " ".join(draw(st.lists(attribute(), max_size=5)))
    if draw(st.booleans()):
        attrs = f'label="{draw(texts)}" delay=5m {attrs}'
    end = draw(st.sampled_from([">", ">", "/>", " />", "", "\n>"]))
    body = draw(st.one_of(st.just(""), texts, fragments()))
    close = draw(
        st.sampled_from(["", "</schedule>", "</schedule>", "</cancel-schedule>", "</Schedule >"])
    )
    return f"<{name} {attrs}{end}{body}{close}"


def fragments() -> st.SearchStrategy[str]:
    return st.one_of(
        st.text(max_size=15),
        st.sampled_from(PIECES),
        st.sampled_from(VALID),
        st.integers(1, 3_000).map(lambda n: "`" * (n % 7 + 1) + "x" * n),
        st.integers(8_000, 9_000).map(lambda n: "<schedule " + "a" * n),
    )


replies = st.lists(st.one_of(fragments(), element()), max_size=30).map("".join)

# -- a reference for what is code ------------------------------------------------------------

_OPENER = re.compile(r"[ ]{0,3}(`{3,}|~{3,})")
_CANDIDATE = re.compile(r"<(?:schedule|cancel-schedule)(?=[\s/>]|\Z)", re.IGNORECASE)


def fenced_blocks(text: str) -> list[tuple[int, int]]:
    """Fenced code blocks, line by line: an opener of 3+ backticks or tildes (up to 3
    spaces in; a backtick fence's info has no backtick), closed by a line of the same
    character at least as long and nothing else but spaces, or else by the end."""
    lines, pos = [], 0
    for line in text.split("\n"):
        lines.append((pos, line))
        pos += len(line) + 1
    blocks, i = [], 0
    while i < len(lines):
        start, line = lines[i]
        m = _OPENER.match(line)
        if m is None or (m.group(1)[0] == "`" and "`" in line[m.end() :]):
            i += 1
            continue
        char, count = m.group(1)[0], len(m.group(1))
        j = i + 1
        while j < len(lines) and not re.fullmatch(
            rf"[ ]{{0,3}}{re.escape(char)}{{{count},}}[ \t]*", lines[j][1]
        ):
            j += 1
        if j >= len(lines):
            blocks.append((start, len(text)))
            break
        blocks.append((start, lines[j][0] + len(lines[j][1])))
        i = j + 1
    return blocks


def code_regions(text: str, tag_spans: tuple[tuple[int, int], ...]) -> Regions:
    """Fenced blocks, plus backtick code spans: in each paragraph (split by blank lines
    and fenced blocks), a run of backticks and the next run of the same length. Runs
    inside a tag the parser read do not count (the tag came first)."""
    fences = fenced_blocks(text)
    tags, in_fence = Regions(tag_spans), Regions(fences)
    cuts = sorted(
        {0, len(text)}
        | {m.start() for m in re.finditer(r"\n[ \t]*\n", text)}
        | {m.end() for m in re.finditer(r"\n[ \t]*\n", text)}
        | {p for f in fences for p in f}
    )
    regions = list(fences)
    for lo, hi in zip(cuts, cuts[1:], strict=False):
        if in_fence.holds(lo):
            continue
        runs = [(m.start(), m.end()) for m in re.finditer(r"`+", text[lo:hi])]
        runs = [(a + lo, b + lo) for a, b in runs if not tags.holds(a + lo)]
        following: dict[int, list[int]] = {}  # run length -> indexes, to find a partner fast
        for n, (a, b) in enumerate(runs):
            following.setdefault(b - a, []).append(n)
        k = 0
        while k < len(runs):
            a, b = runs[k]
            same = following[b - a]
            i = bisect.bisect_right(same, k)
            if i == len(same):
                k += 1
                continue
            regions.append((a, runs[same[i]][1]))
            k = same[i] + 1
    return Regions(regions)


class Regions:
    """Half-open [a, b) ranges; ``holds(pos)`` by bisection."""

    def __init__(self, ranges: list[tuple[int, int]] | tuple[tuple[int, int], ...]) -> None:
        merged: list[list[int]] = []
        for a, b in sorted(ranges):
            if merged and a <= merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], b)
            else:
                merged.append([a, b])
        self.starts = [a for a, _ in merged]
        self.ends = [b for _, b in merged]

    def holds(self, pos: int) -> bool:
        i = bisect.bisect_right(self.starts, pos) - 1
        return i >= 0 and pos < self.ends[i]


# -- the properties --------------------------------------------------------------------------


def parse_bounded(text: str) -> ParsedTags:
    with time_limit(BOUND_S, f"parse_tags of {len(text)} characters"):
        parsed = parse_tags(text)
        strip_tags(text)
        strip_user_display_tags(text)
        fired_labels(text)
    return parsed


def check_reply(reply: str) -> ParsedTags:
    parsed = parse_bounded(reply)
    codes = documented_codes()
    for err in parsed.errors:
        assert err.code in codes, f"undocumented tag error {err.code!r}"
        assert isinstance(err.message, str) and err.message
    last = 0
    for start, end in parsed.spans:
        assert last <= start < end <= len(reply), parsed.spans
        assert _CANDIDATE.match(reply, start), reply[start : start + 20]
        last = end
    assert len(parsed.commands) <= MAX_TAGS
    for cmd in parsed.commands:
        assert (cmd.start, cmd.end) in parsed.spans
        if isinstance(cmd, ScheduleTag):
            assert cmd.label and cmd.label == " ".join(cmd.label.split())
        else:
            assert isinstance(cmd, CancelTag) and (cmd.label or cmd.id)
    code, read = code_regions(reply, parsed.spans), Regions(parsed.spans)
    for start, _end in parsed.spans:
        assert not code.holds(start), f"a tag inside code was read: {reply[start : start + 40]!r}"
    if len(parsed.spans) < MAX_ELEMENTS:
        for m in _CANDIDATE.finditer(reply):
            if code.holds(m.start()) or read.holds(m.start()):
                continue
            raise AssertionError(
                f"a tag outside code was skipped: {reply[m.start() : m.start() + 40]!r}"
            )
    return parsed


def check_fenced(reply: str) -> None:
    """Inside a fence that only a longer run of tildes can close, nothing is a tag; the
    valid tags around it are read, and nothing else."""
    longest = max((len(m.group(0)) for m in re.finditer(r"~+", reply)), default=0)
    fence = "~" * max(3, longest + 1)
    before, after = VALID[0], VALID[2]
    parsed = parse_bounded(f"{before}\n{fence}\n{reply}\n{fence}\n{after}")
    assert not parsed.errors, parsed.errors
    assert [type(c).__name__ for c in parsed.commands] == ["ScheduleTag", "CancelTag"]


def check_inline(reply: str) -> None:
    """Inside one inline code span (a backtick run longer than any in the reply) of a
    paragraph with no blank line and no fence line, nothing is a tag."""
    if (
        re.search(r"\n[ \t]*\n", reply)
        or fenced_blocks(reply)
        or re.search(r"^[ ]{0,3}(`{3,}|~{3,})", reply, re.M)
    ):
        return
    longest = max((len(m.group(0)) for m in re.finditer(r"`+", reply)), default=0)
    ticks = "`" * (longest + 1)
    parsed = parse_bounded(
        f"see {ticks} {reply} .{ticks} here"
    )  # "." keeps the closer off a line start
    assert not parsed.commands and not parsed.errors, parsed


def _fuzz(reply: str) -> None:
    parsed = check_reply(reply)
    event("a tag was read" if parsed.commands else "no tag was read")
    if parsed.errors:
        event("a tag error")
    if any(code_regions(reply, parsed.spans).holds(m.start()) for m in _CANDIDATE.finditer(reply)):
        event("a tag inside code")
    check_fenced(reply)
    check_inline(reply)


test_tag_parser_fuzz = CI(given(reply=replies)(_fuzz))


@pytest.mark.soak
@pytest.mark.parametrize("chunk", soak_chunks("tags"))
@SOAK
@given(reply=replies)
def test_tag_parser_fuzz_soak(chunk: int, reply: str) -> None:
    _fuzz(reply)


# -- large hostile replies -------------------------------------------------------------------

MB = 1_000_000
HUGE = [
    ("many openers", "<schedule " * (MB // 10)),
    ("many cancels", '<cancel-schedule label="x"/>' * (MB // 28)),
    ("open quotes", '<schedule label="' * (MB // 17)),
    ("backtick runs", "` `` ``` " * (MB // 9)),
    ("backticks then a tag", "`" * MB + '<schedule label="x" delay="1m">t</schedule>'),
    ("nested opens", "<schedule label=x delay=1m>" * (MB // 27) + "</schedule>" * 10),
    ("closes only", "</schedule>" * (MB // 11)),
    ("fence lines", "```\n" * (MB // 4)),
    ("tilde fence never closed", "~~~\n" + "<schedule label=x delay=1m/>\n" * (MB // 29)),
    ("one huge attribute", '<schedule label="' + "a" * MB + '" delay="1m"/>'),
    ("entities", "<schedule label=x delay=1m>" + "&amp;&#60;&#x3C;" * (MB // 16) + "</schedule>"),
    ("blank lines and ticks", "`\n\n" * (MB // 3) + "<schedule label=x delay=1m/>"),
]


@pytest.mark.parametrize("reply", [r for _, r in HUGE], ids=[i for i, _ in HUGE])
def test_huge_replies(reply: str) -> None:
    """1 MB of one hostile pattern: bounded time, and the same checks as the fuzz."""
    check_reply(reply)
