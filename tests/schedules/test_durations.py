import pytest

from remindkit.errors import InvalidSchedule
from remindkit.schedules import format_countdown, format_duration, parse_duration


@pytest.mark.parametrize(
    "text, seconds",
    [
        ("30s", 30),
        ("5m", 300),
        ("2h", 7200),
        ("2d", 172800),
        ("1w", 604800),
        ("1y", 31_536_000),
        ("1y2w", 31_536_000 + 1_209_600),
        ("1h30m", 5400),
        ("90", 90),
        (" 10M ", 600),
        ("1d2h3m4s", 93784),
        (45, 45),
    ],
    ids=str,
)
def test_parse_duration(text, seconds):
    assert parse_duration(text) == seconds


@pytest.mark.parametrize(
    "text",
    [
        "",
        "0",
        "0s",
        "-5m",
        "5q",
        "m5",
        "1.5h",
        "30m1h",
        "5m5m",
        "2w1y",
        "h",
        "1 h",
        "x" * 50,
        True,
        0,
        -3,
    ],
    ids=repr,
)
def test_bad_duration(text):
    with pytest.raises(InvalidSchedule) as exc:
        parse_duration(text)
    assert exc.value.code == "invalid_duration"


@pytest.mark.parametrize("seconds, text", [(5400, "1h30m"), (45, "45s"), (86400, "1d"), (0, "0s")])
def test_format_duration(seconds, text):
    assert format_duration(seconds) == text


@pytest.mark.parametrize(
    "seconds, text", [(134, "2:14"), (0, "0:00"), (3725, "1:02:05"), (-4, "0:00")]
)
def test_format_countdown(seconds, text):
    assert format_countdown(seconds) == text
