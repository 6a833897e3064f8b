"""Shared by the hostile-input tests: the documented error codes, a snapshot of a
store's rows (to show that a refusal wrote nothing), and example counts.

The known codes are the registry the error reference is made from
(:class:`remindkit.error_codes.ErrorCode`, each with its meaning), less the codes
that are not refusals. A refusal that carries another code fails the tests.
"""

from __future__ import annotations

import functools
import os
from typing import Any

from sqlalchemy import select

from remindkit.error_codes import ErrorCode
from remindkit.store import SqlStore
from remindkit.store import schema as t

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
    """The refusal codes: the registry's (``python -m remindkit.errors`` lists them with
    their meaning), less those that are not refusals."""
    return frozenset(str(code) for code in ErrorCode) - set(NOT_REFUSALS)


def snapshot(store: SqlStore) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of every table, in a stable order."""
    out = {}
    with store.engine.connect() as conn:
        for table in t.metadata.sorted_tables:
            rows = conn.execute(select(table)).all()
            out[table.name] = sorted((tuple(r) for r in rows), key=repr)
        conn.rollback()
    return out
