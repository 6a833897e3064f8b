"""The tag parser: a table of replies and what they carry out, hostile input,
and its speed on a 1 MB reply."""

from __future__ import annotations

import time

import pytest

from remindkit.protocol.tags import MAX_TAGS, CancelTag, ScheduleTag, parse_tags, strip_tags

S = ScheduleTag


def one(reply: str) -> ScheduleTag | CancelTag:
    parsed = parse_tags(reply)
    assert not parsed.errors, parsed.errors
    assert len(parsed.commands) == 1, parsed.commands
    return parsed.commands[0]


VALID = [
    (
        "seed 000",
        '<schedule label="check back" delay="5m" alarm="true" announce="Time to check in!">\n'
        "Remember to ask about the meeting outcome.\n</schedule>",
        dict(
            label="check back",
            delay="5m",
            alarm=True,
            announce="Time to check in!",
            text="Remember to ask about the meeting outcome.",
        ),
    ),
    (
        "attribute order",
        '<schedule delay="5m" label="x">t</schedule>',
        dict(label="x", delay="5m", text="t"),
    ),
    (
        "single quotes",
        "<schedule label='it\"s' delay='30s'>t</schedule>",
        dict(label='it"s', delay="30s"),
    ),
    ("unquoted", "<schedule label=deploy delay=2h>t</schedule>", dict(label="deploy", delay="2h")),
    (
        "entities in attrs",
        '<schedule label="a &amp; b &lt;c&gt; &#39;d&#x27;" delay="1m">t</schedule>',
        dict(label="a & b <c> 'd'"),
    ),
    (
        "entities in body",
        '<schedule label="x" delay="1m">fish &amp; chips &#8364;</schedule>',
        dict(text="fish & chips €"),
    ),
    (
        "unknown entity kept",
        '<schedule label="x" delay="1m">a &nbsp; b</schedule>',
        dict(text="a &nbsp; b"),
    ),
    (
        "case-insensitive names",
        '<SCHEDULE Label="x" DELAY="1m">t</Schedule>',
        dict(label="x", delay="1m"),
    ),
    ("in alias", '<schedule label="x" in="10m">t</schedule>', dict(delay="10m")),
    (
        "at with tz",
        '<schedule label="x" at="2026-12-01T09:00" tz="Europe/Berlin">t</schedule>',
        dict(at="2026-12-01T09:00", tz="Europe/Berlin"),
    ),
    (
        "every repeat until",
        '<schedule label="x" every="10m" repeat="forever" until="2026-12-01T00:00:00Z">t</schedule>',
        dict(every="10m", repeat="forever", until="2026-12-01T00:00:00Z"),
    ),
    (
        "cron",
        '<schedule label="x" cron="0 9 * * 1-5" tz="Europe/Berlin">standup</schedule>',
        dict(cron="0 9 * * 1-5", text="standup"),
    ),
    ("on_busy", '<schedule label="x" every="1m" on-busy="skip">t</schedule>', dict(on_busy="skip")),
    ("alarm false", '<schedule label="x" delay="1m" alarm="false">t</schedule>', dict(alarm=False)),
    ("bare alarm", '<schedule label="x" delay="1m" alarm>t</schedule>', dict(alarm=True)),
    (
        "self-closing uses announce",
        '<schedule label="x" delay="1m" announce="Tea!" />',
        dict(text="Tea!"),
    ),
    (
        "self-closing uses label",
        '<schedule label="check back" delay="1m"/>',
        dict(text="check back"),
    ),
    (
        "whitespace in head",
        '<schedule\n  label = "x"\n  delay =\t"1m"\n>t</schedule >',
        dict(label="x", delay="1m"),
    ),
    (
        "label spaces collapsed",
        '<schedule label="  a   b " delay="1m">t</schedule>',
        dict(label="a b"),
    ),
]


@pytest.mark.parametrize(
    "reply, expect", [(r, e) for _, r, e in VALID], ids=[i for i, _, _ in VALID]
)
def test_schedule_tag(reply: str, expect: dict) -> None:
    tag = one(f"Sure.\n{reply}\nDone.")
    assert isinstance(tag, ScheduleTag)
    for key, value in expect.items():
        assert getattr(tag, key) == value, key


@pytest.mark.parametrize(
    "reply, label, rid",
    [
        ('<cancel-schedule label="check back" />', "check back", None),
        ("<cancel-schedule label='x'/>", "x", None),
        ('<cancel-schedule id="rem_0123456789ab" />', None, "rem_0123456789ab"),
        ('<cancel-schedule label="x"></cancel-schedule>', "x", None),
    ],
    ids=["double", "single", "by id", "with close"],
)
def test_cancel_tag(reply: str, label: str | None, rid: str | None) -> None:
    tag = one(reply)
    assert tag == CancelTag(label=label, id=rid, start=tag.start, end=tag.end)


NOT_COMMANDS = [
    ("inline code", 'Write `<schedule label="x" delay="5m">text</schedule>` to set one.'),
    ("double backtick code", 'Like ``<schedule label="x" delay="5m">a ` b</schedule>`` this.'),
    ("fenced code", 'Example:\n```xml\n<schedule label="x" delay="5m">text</schedule>\n```\n'),
    ("tilde fence", '~~~\n<cancel-schedule label="x" />\n~~~'),
    ("unclosed fence runs to the end", '```\n<schedule label="x" delay="5m">text</schedule>'),
    ("indented fence", '  ```\n<schedule label="x" delay="5m">t</schedule>\n  ```'),
    ("schedule-fired is not a tag", '<schedule-fired id="x">\n</schedule-fired>'),
    ("other tag name", '<schedules label="x" delay="1m">t</schedules>'),
    ("no tags", "Nothing to see here < schedule >"),
]


@pytest.mark.parametrize("reply", [r for _, r in NOT_COMMANDS], ids=[i for i, _ in NOT_COMMANDS])
def test_not_a_command(reply: str) -> None:
    parsed = parse_tags(reply)
    assert parsed.commands == () and parsed.errors == ()
    assert strip_tags(reply) == reply


def test_code_then_real_tag() -> None:
    reply = (
        'Syntax: `<schedule label="demo" delay="1m">x</schedule>`.\n```\n<cancel-schedule label="a"/>\n```\n'
        'Now for real: <schedule label="real" delay="2m">go</schedule> and an unmatched ` backtick.'
    )
    parsed = parse_tags(reply)
    assert [c.label for c in parsed.commands] == ["real"]


def test_unmatched_backtick_does_not_hide_tag() -> None:
    tag = one('It`s time: <schedule label="x" delay="1m">t</schedule>')
    assert tag.label == "x"


ERRORS = [
    ("unclosed", '<schedule label="x" delay="5m">never closed', "unclosed_tag"),
    (
        "nested",
        '<schedule label="a" delay="1m">x <schedule label="b" delay="1m">y</schedule></schedule>',
        "nested_tag",
    ),
    (
        "nested cancel",
        '<schedule label="a" delay="1m"><cancel-schedule label="b"/></schedule>',
        "nested_tag",
    ),
    ("missing label", '<schedule delay="5m">t</schedule>', "missing_label"),
    ("empty label", '<schedule label="  " delay="5m">t</schedule>', "missing_label"),
    ("cancel without label", "<cancel-schedule />", "missing_label"),
    (
        "unknown attribute",
        '<schedule label="x" delay="5m" color="red">t</schedule>',
        "unknown_attribute",
    ),
    ("unknown cancel attribute", '<cancel-schedule label="x" all="true" />', "unknown_attribute"),
    (
        "duplicate attribute",
        '<schedule label="x" label="y" delay="5m">t</schedule>',
        "duplicate_attribute",
    ),
    ("bad alarm", '<schedule label="x" delay="5m" alarm="loud">t</schedule>', "invalid_attribute"),
    ("no closing quote", '<schedule label="x delay=5m>t</schedule>', "malformed_tag"),
    ("garbage in head", '<schedule label="x" ;; delay="5m">t</schedule>', "malformed_tag"),
    ("head never ends", '<schedule label="x" delay="5m"', "malformed_tag"),
    (
        "huge attribute",
        '<schedule label="' + "a" * 5000 + '" delay="5m">t</schedule>',
        "attribute_too_long",
    ),
    (
        "huge head",
        "<schedule " + " ".join(f"a{i}=1" for i in range(3000)) + ">t</schedule>",
        "tag_too_long",
    ),
]


@pytest.mark.parametrize(
    "reply, code", [(r, c) for _, r, c in ERRORS], ids=[i for i, _, _ in ERRORS]
)
def test_malformed_is_reported_not_run(reply: str, code: str) -> None:
    parsed = parse_tags("before " + reply + " after")
    assert parsed.commands == ()
    assert [e.code for e in parsed.errors] == [code]
    err = parsed.errors[0]
    assert err.message and len(err.snippet) <= 80


def test_malformed_does_not_stop_later_tags() -> None:
    reply = '<schedule label="x" color="red">t</schedule> then <schedule label="ok" delay="1m">fine</schedule>'
    parsed = parse_tags(reply)
    assert [c.label for c in parsed.commands] == ["ok"]
    assert [e.code for e in parsed.errors] == ["unknown_attribute"]


def test_order_is_kept() -> None:
    reply = (
        '<cancel-schedule label="old"/><schedule label="a" delay="1m">1</schedule>'
        '<schedule label="b" delay="2m">2</schedule>'
    )
    parsed = parse_tags(reply)
    assert [(type(c).__name__, c.label) for c in parsed.commands] == [
        ("CancelTag", "old"),
        ("ScheduleTag", "a"),
        ("ScheduleTag", "b"),
    ]


def test_too_many_tags() -> None:
    reply = "".join(f'<schedule label="l{i}" delay="1m">t</schedule>' for i in range(MAX_TAGS + 5))
    parsed = parse_tags(reply)
    assert len(parsed.commands) == MAX_TAGS
    assert [e.code for e in parsed.errors] == ["too_many_tags"]


def test_body_cannot_hide_a_closing_tag_trick() -> None:
    # the body ends at the first </schedule>: text after it is plain reply text
    parsed = parse_tags('<schedule label="x" delay="1m">a</schedule><script>b</schedule>')
    assert [c.text for c in parsed.commands] == ["a"]


@pytest.mark.parametrize(
    "reply, shown",
    [
        ('Sure! <schedule label="x" delay="5m">t</schedule>', "Sure!"),
        (
            'Line one.\n<schedule label="x" delay="5m">\nctx\n</schedule>\nLine two.',
            "Line one.\n\nLine two.",
        ),
        ('Done. <cancel-schedule label="x" />', "Done."),
        ('Bad: <schedule label="x" nope="1">t</schedule> ok', "Bad:  ok"),
        (
            'Code: `<schedule label="x" delay="1m">t</schedule>`',
            'Code: `<schedule label="x" delay="1m">t</schedule>`',
        ),
        ("plain", "plain"),
    ],
    ids=["trailing", "block", "cancel", "malformed too", "code stays", "plain"],
)
def test_strip_tags(reply: str, shown: str) -> None:
    assert strip_tags(reply) == shown


# -- speed: linear, and fast on a realistic 1 MB reply ------------------------------------------

TAGS = (
    '<schedule label="check back" delay="5m" alarm="true">ask about it</schedule>\n'
    '<cancel-schedule label="old" />\n'
)


def realistic_reply(size: int) -> str:
    para = (
        "The migration ran in `db/migrate.py`; see **notes** <b>here</b> & there. " * 12
    ) + "\n\n"
    block = '```python\nfor i in range(3):\n    print(i)  # `x` <schedule label="no">\n```\n\n'
    unit = para * 4 + block
    body = unit * (size // len(unit) + 1)
    return TAGS + body[:size] + "\n" + TAGS


def best_of(fn, reply: str, n: int = 3) -> float:  # type: ignore[no-untyped-def]
    """CPU seconds of this thread (best of ``n``): what the parser costs, not how busy
    the machine is (a quadratic blow-up still shows; other processes do not)."""
    times = []
    for _ in range(n):
        t = time.thread_time()
        fn(reply)
        times.append(time.thread_time() - t)
    return min(times)


def test_one_megabyte_reply_is_fast() -> None:
    reply = realistic_reply(1_000_000)
    parsed = parse_tags(reply)
    assert [c.label for c in parsed.commands] == ["check back", "old", "check back", "old"]
    elapsed = best_of(parse_tags, reply)
    assert elapsed < 0.05, f"{elapsed * 1000:.1f} ms for 1 MB"
    assert best_of(strip_tags, reply) < 0.05


HOSTILE = {
    "backtick pairs": lambda n: "` " * (n // 2),
    "one backtick run": lambda n: "`" * n,
    "open tags": lambda n: "<schedule " * (n // 10),
    "nested opens": lambda n: (
        '<schedule label="a" delay="1m">' + "<schedule " * (n // 10) + "</schedule>"
    ),
    "endless attribute": lambda n: '<schedule label="' + "a" * n,
    "entities": lambda n: "&amp;" * (n // 5),
    "fence lines": lambda n: "```\n" * (n // 4),
    "lt signs": lambda n: "<" * n,
    "self-closing tags": lambda n: '<schedule label="a" delay="1m"/>' * (n // 32),
    "unclosed spans and tags": lambda n: "`a` <schedule " * (n // 14),
}


@pytest.mark.parametrize("name", list(HOSTILE), ids=list(HOSTILE))
def test_hostile_input_is_linear(name: str) -> None:
    make = HOSTILE[name]
    small, big = make(250_000) + TAGS, make(1_000_000) + TAGS
    t_small, t_big = best_of(parse_tags, small, 2), best_of(parse_tags, big, 2)
    assert t_big < 0.5, f"{name}: {t_big * 1000:.0f} ms for 1 MB"
    assert t_big < 8 * t_small + 0.02, (
        f"{name}: not linear ({t_small * 1000:.1f} ms -> {t_big * 1000:.1f} ms)"
    )
