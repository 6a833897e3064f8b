"""The display text of a reply that streams in pieces: a tag, and the reminder text
inside it, never show, whatever the pieces; the end equals strip_tags of the whole."""

from __future__ import annotations

import pytest

from remindkit.protocol.streaming import DisplayStream, hold_from
from remindkit.protocol.tags import strip_tags

REPLY = 'Sure. <schedule label="tea" delay="5m" announce="Tea!">the tea</schedule> Enjoy <b>it</b>.'


@pytest.mark.parametrize("size", [1, 2, 3, 5, 8, 13, len(REPLY)], ids=lambda n: f"pieces of {n}")
def test_no_piece_shows_a_tag_or_its_text(size: int) -> None:
    d = DisplayStream()
    shown = ""
    for i in range(0, len(REPLY), size):
        got = d.feed(REPLY[i : i + size])
        if got is not None:
            kind, value = got
            shown = shown + value if kind == "append" else value
        assert "<sch" not in shown and "the tea" not in shown and "Tea!" not in shown, shown
    assert shown == strip_tags(REPLY)


@pytest.mark.parametrize(
    ("raw", "held"),
    [
        ("plain text", None),
        ("a < b and c > d", None),
        ("x <", 2),
        ("x <sched", 2),
        ('x <schedule label="a"', 2),
        ('x <schedule label="a" delay="5m">text', 2),
        ('x <schedule label="a" delay="5m" />', None),
        ('x <cancel-schedule label="a"', 2),
        ('x <cancel-schedule label="a" />', None),
        ("x <schedules are fun>", None),
    ],
)
def test_what_is_held_back(raw: str, held: int | None) -> None:
    assert hold_from(raw) == (len(raw) if held is None else held)
