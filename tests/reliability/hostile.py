"""Shared by the hostile-input tests: the documented error codes, a snapshot of a
store's rows (to show that a refusal wrote nothing), and example counts.

The known codes are read from the documentation, not from the code: the tree in
``remindkit/errors.py`` and the README's Errors, Tags and Tools paragraphs. A
code that a refusal carries and that is not documented there fails the tests.
"""

from __future__ import annotations

import functools
import os
import re
from pathlib import Path
from typing import Any

from sqlalchemy import select

import remindkit.errors
from remindkit.store import SqlStore
from remindkit.store import schema as t

ROOT = Path(__file__).resolve().parents[2]
_TICKED = re.compile(r"`([a-z][a-z_]+)`")

# Codes the package sets that are not refusals of a tool call, a tag or a command:
# turn failures (recorded in a fire's history) and values built by code, not from input.
NOT_REFUSALS = {
    "error": "RemindkitError's default; every error raised sets its own",
    "session_busy": "a turn is running; fires wait (agent/loop.py)",
    "model_error": "a model turn failed (recorded, then the fallback)",
    "model_unreachable": "idem",
    "model_http_error": "idem",
    "model_bad_response": "idem",
    "model_unavailable": "a 5xx or 429 from the model server: the fires wait and are tried again",
    "model_context_overflow": "the request did not fit the model's context: sent again, shorter",
    "model_response_too_large": "a model answer over the byte cap: a failed turn",
    "invalid_schedule": "a Schedule built in code with an unknown kind",
    "invalid_state": "an import line's state: reported as invalid_import",
}

# Soak runs (--soak): about a million inputs across the tag parser, the tool calls (both
# backends together) and the command line, in chunks of SOAK_CHUNK examples, each a fresh
# hypothesis run (bounded memory, a new random start). REMINDKIT_SOAK_CHUNK overrides the
# examples per chunk; the number of chunks stays (a small value tries the soak quickly).
SOAK_EXAMPLES = {"tags": 600_000, "tools": 300_000, "cli": 100_000}
SOAK_CHUNK = int(os.environ.get("REMINDKIT_SOAK_CHUNK", 10_000))


def soak_chunks(kind: str, backends: int = 1) -> range:
    return range(SOAK_EXAMPLES[kind] // (10_000 * backends))


@functools.lru_cache(maxsize=1)
def documented_codes() -> frozenset[str]:
    """The codes in the tree of ``remindkit/errors.py``, the README's Errors section,
    its list of tag errors and its paragraph on tool refusals."""
    doc = remindkit.errors.__doc__ or ""
    tree = doc.split("::", 1)[1].split("Adapters", 1)[0]
    codes = {word.rstrip(",") for word in tree.split() if re.fullmatch(r"[a-z][a-z_]+,?", word)}
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    codes |= set(_TICKED.findall(readme.split("### Errors", 1)[1].split("\n### ", 1)[0]))
    tags = readme.split("A tag that is malformed", 1)[1].split("\n\n", 1)[0]
    tools = readme.split("Refusals are", 1)[1].split("\n\n", 1)[0]
    codes |= set(_TICKED.findall(tags)) | set(_TICKED.findall(tools))
    return frozenset(codes - {"code", "set_callback"})


def raised_codes() -> dict[str, str]:
    """Every code literal in the package, with the file it is in."""
    found: dict[str, str] = {}
    pkg = ROOT / "remindkit"
    patterns = [
        re.compile(r'code="([a-z_]+)"'),
        re.compile(r'_err(?:or)?\("([a-z_]+)"'),
        re.compile(r'code = "([a-z_]+)"'),
    ]
    for path in sorted(pkg.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        for pattern in patterns:
            for code in pattern.findall(text):
                found.setdefault(code, str(path.relative_to(ROOT)))
        if 'code=f"invalid_{name}"' in text:
            for name in re.findall(r'_choice\("([a-z_]+)"', text):
                found.setdefault(f"invalid_{name}", str(path.relative_to(ROOT)))
    return found


def snapshot(store: SqlStore) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of every table, in a stable order."""
    out = {}
    with store.engine.connect() as conn:
        for table in t.metadata.sorted_tables:
            rows = conn.execute(select(table)).all()
            out[table.name] = sorted((tuple(r) for r in rows), key=repr)
        conn.rollback()
    return out
