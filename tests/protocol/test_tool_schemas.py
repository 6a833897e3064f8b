"""Tool definitions exported for OpenAI function calling and Anthropic tools."""

from __future__ import annotations

import json

import pytest

from remindkit.protocol.tools import TOOL_NAMES, anthropic_tools, openai_tools, tool_specs


def test_names() -> None:
    assert TOOL_NAMES == (
        "schedule_create",
        "schedule_list",
        "schedule_delete",
        "set_callback",
        "schedule_pause",
        "schedule_resume",
        "schedule_snooze",
    )


def test_openai_shape() -> None:
    tools = openai_tools()
    assert [t["type"] for t in tools] == ["function"] * len(TOOL_NAMES)
    for t in tools:
        fn = t["function"]
        assert set(fn) == {"name", "description", "parameters"}
        assert fn["parameters"]["type"] == "object"
        json.dumps(t)


def test_anthropic_shape() -> None:
    tools = anthropic_tools()
    for t in tools:
        assert set(t) == {"name", "description", "input_schema"}
        assert t["input_schema"]["type"] == "object"


def test_both_exports_share_one_definition() -> None:
    for o, a in zip(openai_tools(), anthropic_tools(), strict=True):
        assert o["function"]["name"] == a["name"]
        assert o["function"]["parameters"] == a["input_schema"]


def test_exports_are_copies() -> None:
    openai_tools()[0]["function"]["parameters"]["properties"].clear()
    assert openai_tools()[0]["function"]["parameters"]["properties"]


def test_set_callback_ranges() -> None:
    props = anthropic_tools(["set_callback"])[0]["input_schema"]["properties"]
    assert props["action"]["enum"] == ["set", "list", "cancel"]
    assert (props["delay_seconds"]["minimum"], props["delay_seconds"]["maximum"]) == (1, 3600)
    assert (props["callback_id"]["minimum"], props["callback_id"]["maximum"]) == (0, 7)


def test_unknown_name() -> None:
    with pytest.raises(KeyError):
        tool_specs(["nope"])
