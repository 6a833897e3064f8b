"""What every driver shares. A driver runs in its framework's own venv (not remindkit's):
it reads its job from ``argv[1]`` (JSON), drives the framework against remindkit's MCP
server, and reports on stdout, one JSON object a line; the test on the other end reads
them. Before each connection closes it says ``await_fire`` and waits for a line on stdin,
so that the test can watch what happens to a fire while the client is connected. The
eras of one job run at once, each on a connection of its own.

The job: ``{"transport": "stdio" | "http", "eras": [...], "command": [...], "env": {...},
"cwd": ..., "url": ..., "token": ..., "model_url": ..., "per_era": {era: {...}}}``.
"""

from __future__ import annotations

import asyncio
import json
import sys
import threading
import time
from typing import Any

FIRE_AFTER = "1s"


def job() -> dict[str, Any]:
    return dict(json.loads(sys.argv[1]))


def for_era(spec: dict[str, Any], era: str) -> dict[str, Any]:
    """The job as one era sees it: ``spec["per_era"][era]`` (its own session's command
    or token) over the rest."""
    return {**spec, **spec.get("per_era", {}).get(era, {})}


def emit(event: str, **data: Any) -> None:
    sys.stdout.write(json.dumps({"event": event, "at": time.time(), **data}, default=str) + "\n")
    sys.stdout.flush()


_GO: dict[str, asyncio.Event] = {}
_READER: list[threading.Thread] = []


def _read_go(loop: asyncio.AbstractEventLoop) -> None:
    for line in sys.stdin:
        word, _, era = line.strip().partition(" ")
        if word == "go":
            loop.call_soon_threadsafe(_GO.setdefault(era, asyncio.Event()).set)


async def wait_go(era: str = "", **data: Any) -> None:
    """Say ``await_fire`` and wait until the test has seen the fire's outcome (it
    writes ``go ERA``). The eras of one driver may run at once."""
    event = _GO.setdefault(era, asyncio.Event())
    if not _READER:
        loop = asyncio.get_running_loop()
        _READER.append(threading.Thread(target=_read_go, args=(loop,), daemon=True))
        _READER[0].start()
    emit("await_fire", era=era, **data)
    await event.wait()


ZERO = {"string": "", "integer": 0, "number": 0, "boolean": False, "array": [], "object": {}}


def strict_args(schema: dict[str, Any], **given: Any) -> dict[str, Any]:
    """A strict model's arguments: every property of ``schema``; where it means nothing,
    ``null`` if the property takes it, else its first enum value or the emptiest value of
    its type (``""``, ``0``, ``false``): a model held to the schema cannot leave anything
    out."""
    out: dict[str, Any] = {}
    for name, prop in schema.get("properties", {}).items():
        if name in given:
            out[name] = given[name]
            continue
        types = prop.get("type")
        types = types if isinstance(types, list) else [types]
        if "null" in types:
            out[name] = None
        elif prop.get("enum"):
            out[name] = prop["enum"][0]
        else:
            out[name] = ZERO.get(types[0])
    return out


def data_of(result: Any) -> dict[str, Any]:
    """A tool result's JSON, from its structured content or its first text block."""
    structured = getattr(result, "structured_content", None) or getattr(
        result, "structuredContent", None
    )
    if isinstance(structured, dict):
        return structured
    content = getattr(result, "content", None) or []
    for block in content:
        text = getattr(block, "text", None)
        if text is not None:
            try:
                return dict(json.loads(text))
            except ValueError:
                return {"text": text}
    raise AssertionError(f"no result in {result!r}")


# The calls every driver makes, in order, the way its framework makes them (directly, or
# as a scripted model's tool calls). ``("reminder", N)`` is the id of the reminder that
# step N answered with.
STEPS: list[tuple[str, dict[str, Any]]] = [
    ("schedule_create", {"prompt": "fire while connected", "after": FIRE_AFTER}),
    ("schedule_create", {"prompt": "to delete", "after": "1h", "label": "del"}),
    ("schedule_list", {}),
    ("schedule_delete", {"id": ("reminder", 1)}),
    ("set_callback", {"action": "set", "message": "poll the build", "delay_seconds": 30}),
    ("set_callback", {"action": "list"}),
    ("set_callback", {"action": "cancel"}),
    ("schedule_list", {}),
]


def step(i: int, results: list[dict[str, Any]]) -> tuple[str, dict[str, Any]]:
    """Step ``i``'s tool and arguments, its references resolved from the results so far."""
    name, args = STEPS[i]
    out: dict[str, Any] = {}
    for key, value in args.items():
        if isinstance(value, tuple):
            out[key] = results[value[1]][value[0]]["id"]
        else:
            out[key] = value
    return name, out


def as_result(text: str) -> dict[str, Any]:
    """A tool result's text as a model reads it: JSON, or set_callback's plain text. A
    framework that hands the model the MCP content blocks themselves (``{"type": "text",
    "text": …}``, or a list of them) is unwrapped first."""
    try:
        value = json.loads(text)
    except ValueError:
        return {"ok": True, "text": text}
    if isinstance(value, list) and len(value) == 1:
        value = value[0]
    if (
        isinstance(value, dict)
        and value.get("type") == "text"
        and isinstance(value.get("text"), str)
    ):
        return as_result(value["text"])
    return value if isinstance(value, dict) else {"ok": True, "text": text}
