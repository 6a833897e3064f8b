"""Every tool's input schema under OpenAI's strict function calling, as its Structured
Outputs guide publishes the rules ("Supported schemas"):

* the root is an object, not ``anyOf``;
* every object sets ``additionalProperties: false`` and lists every property in
  ``required``; an optional field is emulated as a union with ``null``;
* types are string, number, boolean, integer, object, array, enum and ``anyOf`` (``null``
  as the second member of a type list); the supported keywords are ``pattern`` and
  ``format`` for strings, ``multipleOf``, ``minimum``, ``maximum``, ``exclusiveMinimum``
  and ``exclusiveMaximum`` for numbers, ``minItems`` and ``maxItems`` for arrays;
  ``allOf``, ``not``, ``dependentRequired``, ``dependentSchemas``, ``if``, ``then`` and
  ``else`` are not supported;
* at most 5,000 object properties, 10 levels of nesting, 1,000 enum values, and
  120,000 characters of property names, enum and const values in all.

Then a strict model's calls, which fill in every argument (``null`` or ``""`` for what
they do not mean), carried out for real by ``handle_tool_call``.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from remindkit.agent import ToolContext, handle_tool_call
from remindkit.clock import FakeClock
from remindkit.protocol.tools import TOOLS, mcp_tools, openai_tools
from remindkit.reminders import Reminders
from remindkit.settings import Settings
from remindkit.store import SqlStore

TYPES = {"string", "number", "boolean", "integer", "object", "array", "null"}
KEYWORDS = {
    "type",
    "description",
    "title",
    "properties",
    "required",
    "additionalProperties",
    "items",
    "enum",
    "const",
    "anyOf",
    "$defs",
    "$ref",
    "pattern",
    "format",
    "multipleOf",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "minItems",
    "maxItems",
}
# the arguments a call must give: everything else is nullable
MEANT = {
    "schedule_create": {"prompt"},
    "schedule_list": set(),
    "schedule_delete": {"id"},
    "set_callback": {"action"},
    "schedule_pause": {"id"},
    "schedule_resume": {"id"},
    "schedule_snooze": {"id", "duration"},
}


def strict_problems(schema: dict[str, Any]) -> list[str]:
    """What OpenAI's strict mode would refuse in ``schema`` (empty: nothing)."""
    problems: list[str] = []
    counts = {"properties": 0, "enum": 0, "chars": 0}

    if schema.get("type") != "object" or "anyOf" in schema:
        problems.append("the root must be a plain object")

    def walk(node: Any, where: str, depth: int) -> None:
        if not isinstance(node, dict):
            problems.append(f"{where}: not a schema")
            return
        if depth > 10:
            problems.append(f"{where}: nested deeper than 10 levels")
        for key in sorted(set(node) - KEYWORDS):
            problems.append(f"{where}: keyword {key!r} is not supported")
        types = node.get("type")
        listed = types if isinstance(types, list) else [types] if types is not None else []
        for t in listed:
            if t not in TYPES:
                problems.append(f"{where}: type {t!r}")
        if isinstance(types, list) and not (len(types) == 2 and types[1] == "null"):
            problems.append(f"{where}: a type list is [T, 'null'], not {types}")
        if "enum" in node:
            counts["enum"] += len(node["enum"])
            for value in node["enum"]:
                if value is None and "null" not in listed:
                    problems.append(f"{where}: null in the enum of a non-nullable type")
                if isinstance(value, str):
                    counts["chars"] += len(value)
        if "object" in listed:
            props = node.get("properties", {})
            counts["properties"] += len(props)
            counts["chars"] += sum(len(name) for name in props)
            if node.get("additionalProperties") is not False:
                problems.append(f"{where}: additionalProperties must be false")
            if sorted(node.get("required", [])) != sorted(props):
                problems.append(f"{where}: required must list every property")
            for name, sub in props.items():
                walk(sub, f"{where}.{name}", depth + 1)
        if "items" in node:
            walk(node["items"], f"{where}[]", depth + 1)
        for i, sub in enumerate(node.get("anyOf", [])):
            walk(sub, f"{where}|{i}", depth + 1)

    walk(schema, "$", 1)
    if counts["properties"] > 5000:
        problems.append("more than 5,000 object properties")
    if counts["enum"] > 1000:
        problems.append("more than 1,000 enum values")
    if counts["chars"] > 120_000:
        problems.append("more than 120,000 characters of names and values")
    return problems


def nullable(schema: dict[str, Any]) -> bool:
    types = schema.get("type")
    return isinstance(types, list) and "null" in types


@pytest.mark.parametrize("spec", TOOLS, ids=lambda t: t.name)
def test_every_input_schema_is_strict(spec: Any) -> None:
    assert strict_problems(spec.parameters) == []
    props = spec.parameters["properties"]
    assert {name for name, sub in props.items() if not nullable(sub)} == MEANT[spec.name]


def test_the_checker_finds_what_strict_mode_refuses() -> None:
    # the schemas as they were: optional properties left out of required, a two-type union
    loose = {
        "type": "object",
        "properties": {"after": {"type": ["string", "integer"]}, "n": {"type": "integer"}},
        "required": ["n"],
    }
    found = strict_problems(loose)
    assert any("additionalProperties" in p for p in found)
    assert any("required must list" in p for p in found)
    assert any("type list" in p for p in found)
    assert strict_problems({"type": "object", "allOf": [], "properties": {}}) != []
    nested = {"type": "object", "properties": {}, "required": [], "additionalProperties": False}
    for _ in range(11):
        nested = {
            "type": "object",
            "properties": {"x": nested},
            "required": ["x"],
            "additionalProperties": False,
        }
    assert any("deeper than 10" in p for p in strict_problems(nested))


def test_the_exports_carry_the_same_schemas() -> None:
    for o, m, spec in zip(openai_tools(), mcp_tools(), TOOLS, strict=True):
        assert o["function"]["parameters"] == m["inputSchema"] == spec.parameters
    strict = openai_tools(strict=True)
    assert all(t["function"]["strict"] is True for t in strict)
    assert [t["function"]["parameters"] for t in strict] == [t.parameters for t in TOOLS]
    assert json.dumps(mcp_tools()) == json.dumps(mcp_tools())  # byte-stable


def strict_call(name: str, **given: Any) -> dict[str, Any]:
    """A strict model's arguments: every property, null where nothing is given."""
    spec = next(t for t in TOOLS if t.name == name)
    return {prop: given.get(prop) for prop in spec.parameters["properties"]}


def _call(api: Reminders, name: str, args: dict[str, Any]) -> Any:
    return handle_tool_call(ToolContext(api, "s1"), name, json.dumps(args))


@pytest.fixture
def api(sqlite_store: SqlStore, clock: FakeClock, settings: Settings) -> Reminders:
    return Reminders(sqlite_store, clock=clock, settings=settings)


@pytest.mark.parametrize("unset", [None, ""], ids=["null", "empty"])
def test_strict_calls_are_carried_out(api: Reminders, unset: object) -> None:
    blank = {
        p: unset
        for p in ("label", "at", "every", "cron", "time_zone", "until", "announce", "on_busy")
    }
    made = _call(
        api,
        "schedule_create",
        strict_call("schedule_create", prompt="Check the deploy", after="5m")
        | blank
        | {"repeat": None if unset is None else "", "alarm": None},
    )
    assert made.ok, made.content
    rem = made.data["reminder"]
    assert (rem["kind"], rem["label"], rem["alarm"], rem["delivery"]["on_busy"]) == (
        "after",
        None,
        False,
        "wait",
    )
    every = _call(
        api,
        "schedule_create",
        strict_call(
            "schedule_create", prompt="Poll", every="10m", repeat=3, label="poll", time_zone=unset
        ),
    )
    assert every.ok and every.data["reminder"]["remaining"] == 3, every.content
    listed = _call(api, "schedule_list", strict_call("schedule_list"))
    assert sorted(r["prompt"] for r in listed.data["reminders"]) == ["Check the deploy", "Poll"]
    gone = _call(api, "schedule_delete", strict_call("schedule_delete", id=rem["id"]))
    assert gone.ok and gone.data["deleted"] == rem["id"]
    # still refused: an empty prompt, two schedules, none at all
    for args, code in [
        (strict_call("schedule_create", prompt="", after="5m"), "empty_text"),
        (
            strict_call("schedule_create", prompt="x", after="5m", cron="0 9 * * *"),
            "conflicting_schedule",
        ),
        (strict_call("schedule_create", prompt="x") | {"after": unset}, "missing_schedule"),
    ]:
        refused = _call(api, "schedule_create", args)
        assert (refused.ok, refused.code) == (False, code)


def test_strict_callbacks_set_list_and_cancel_all(api: Reminders) -> None:
    for _ in range(2):
        made = _call(
            api,
            "set_callback",
            strict_call("set_callback", action="set", message="m", delay_seconds=30),
        )
        assert made.ok and "repeats 20 times" in made.content, made.content
    listed = _call(api, "set_callback", strict_call("set_callback", action="list", message=""))
    assert listed.content.startswith("Active callbacks (2/8):")
    one = _call(api, "set_callback", strict_call("set_callback", action="cancel", callback_id=0))
    assert one.ok and one.content.startswith("Cancelled callback slot 0")
    rest = _call(api, "set_callback", strict_call("set_callback", action="cancel"))  # null: all
    assert (rest.ok, rest.content) == (True, "Cancelled 1 callback.")
    assert _call(api, "set_callback", strict_call("set_callback", action="list")).content == (
        "No active callbacks"
    )
    refused = _call(api, "set_callback", strict_call("set_callback", action="set", message="m"))
    assert (refused.ok, refused.code) == (False, "invalid_delay")
