"""The fuzz tests' set of known refusal codes is the registry's (ErrorCode), less the
codes that are not refusals; tests/test_errors.py holds every code in the package to
the registry."""

from __future__ import annotations

import pytest

from remindkit.error_codes import ErrorCode

from .hostile import NOT_REFUSALS, documented_codes

pytestmark = pytest.mark.reliability


def test_the_exemptions_are_codes_of_the_registry() -> None:
    assert set(NOT_REFUSALS) <= {str(code) for code in ErrorCode}


@pytest.mark.parametrize(
    "code",
    [
        "invalid_cron",
        "text_too_long",
        "malformed_tag",
        "unknown_tool",
        "schedule_not_found",
        "callback_slots_full",
        "conflict",
        "invalid_session",
    ],
)
def test_the_documented_set_is_read(code: str) -> None:
    assert code in documented_codes()


def test_what_is_not_a_refusal_is_left_out() -> None:
    assert not set(NOT_REFUSALS) & documented_codes()
