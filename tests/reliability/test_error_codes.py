"""Every refusal code the package can give is documented (errors.py tree or README),
so the fuzz tests' set of known codes is the documented one."""

from __future__ import annotations

import pytest

from .hostile import NOT_REFUSALS, documented_codes, raised_codes

pytestmark = pytest.mark.reliability


def test_every_code_set_in_the_package_is_documented() -> None:
    undocumented = {
        code: where
        for code, where in raised_codes().items()
        if code not in documented_codes() and code not in NOT_REFUSALS
    }
    assert not undocumented, f"document these codes in README's Errors section: {undocumented}"


def test_the_exemptions_are_real() -> None:
    assert set(NOT_REFUSALS) <= set(raised_codes())


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
