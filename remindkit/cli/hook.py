"""``remindkit mcp hook start|prompt|stop``: Claude Code's hooks (see
:mod:`remindkit.mcp.hooks`), also reached as ``mcp bind``, ``session busy --hook``
and ``session idle --hook``.

Run on every prompt, so quick: the hook's JSON is handed to the engine that serves
the store (the MCP server of the conversation runs one), which answers from its open
store; this process loads no store at all. When no engine answers, the hook runs
here. Whatever happens the hook exits 0 (a failing hook must not stop the
conversation) and says what went wrong on stderr.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Sequence
from typing import Any, TextIO

MAX_INPUT = 1 << 20  # bytes of hook JSON read from stdin
LEGACY = {
    ("mcp", "bind"): "start",
    ("session", "busy"): "prompt",
    ("session", "idle"): "stop",
}
# options a hook command may carry (with a value: True)
OPTIONS = {"--db": True, "--project": True, "--json": False, "--hook": False}


def hook_event(argv: Sequence[str]) -> tuple[str, dict[str, Any]] | None:
    """(event, options) when ``argv`` is a hook command, else None."""
    words: list[str] = []
    opts: dict[str, Any] = {}
    i = 0
    while i < len(argv):
        arg = argv[i]
        name, eq, value = arg.partition("=")
        if name in OPTIONS:
            if OPTIONS[name]:
                if not eq:
                    i += 1
                    if i >= len(argv):
                        return None
                    value = argv[i]
                opts[name] = value
            elif eq:
                return None
            else:
                opts[name] = True
        elif arg.startswith("-"):
            return None
        else:
            words.append(arg)
        i += 1
    if len(words) == 3 and words[:2] == ["mcp", "hook"] and words[2] in ("start", "prompt", "stop"):
        return words[2], opts
    if len(words) == 2 and tuple(words) in LEGACY:
        if words[0] == "session" and not opts.get("--hook"):
            return None
        return LEGACY[(words[0], words[1])], opts
    return None


def run(event: str, opts: dict[str, Any], stdin: Any, out: TextIO, err: TextIO) -> int:
    try:
        data = _read_input(stdin)
        _run(event, opts, data, out)
    except Exception as exc:  # never fail the hook
        name = getattr(exc, "code", None) or type(exc).__name__
        err.write(f"remindkit mcp hook {event}: {name}: {exc}\n")
    return 0


def _read_input(stdin: Any) -> dict[str, Any]:
    stream = getattr(stdin, "buffer", stdin)
    raw = stream.read(MAX_INPUT + 1)
    if isinstance(raw, bytes):
        raw = raw.decode("utf-8", "replace")
    if len(raw) > MAX_INPUT:
        raise ValueError("hook input is larger than 1 MiB")
    data = json.loads(raw)
    if not isinstance(data, dict) or not isinstance(data.get("session_id"), str):
        raise ValueError("hook input has no session_id")
    return data


def _run(event: str, opts: dict[str, Any], data: dict[str, Any], out: TextIO) -> None:
    from ..mcp.identity import ancestors, project_dir
    from ..settings import Settings

    settings = Settings.from_env()
    url = opts.get("--db") or settings.url
    cwd = data.get("cwd") if isinstance(data.get("cwd"), str) else None
    project = project_dir(opts.get("--project") or os.environ.get("CLAUDE_PROJECT_DIR") or cwd)
    scope = os.environ.get("REMINDKIT_SESSION") or None
    if scope is not None and data["session_id"] != scope:
        raise PermissionError(f"hook of another session in session scope {scope!r}")
    pids = ancestors() if event == "start" else []
    request: dict[str, Any] = {
        "event": event,
        "input": data,
        "home": str(settings.home),
        "project": str(project),
        "pids": pids,
        "scope": scope,
    }
    from .handoff import hook_printed, try_hook

    answer = try_hook(request, url) if url else None
    if answer is not None:
        _print(out, answer["out"], answer.get("info"), opts)
        if answer.get("err"):
            sys.stderr.write(str(answer["err"]))
        if answer.get("ticket"):
            hook_printed(url, str(answer["ticket"]))
        return
    _run_here(event, data, opts, settings, project, pids, out)


def _run_here(
    event: str,
    data: dict[str, Any],
    opts: dict[str, Any],
    settings: Any,
    project: Any,
    pids: list[int],
    out: TextIO,
) -> None:
    """No engine serves the store: the hook in this process."""
    import socket

    from ..mcp.hooks import Hooks
    from ..wiring import build

    graph = build(settings, db=opts.get("--db"))
    try:
        hooks = Hooks(graph.api, owner=f"hook:{socket.gethostname()}:{os.getpid()}")
        answer = hooks.answer(event, data, project=project, pids=pids, home=settings.home)
        try:
            _print(out, answer.out, answer.info, opts)
        except BaseException:
            hooks.settle(answer.taken, printed=False)
            raise
        hooks.settle(answer.taken, printed=True)
    finally:
        graph.close()


def _print(out: TextIO, text: str, info: Any, opts: dict[str, Any]) -> None:
    if opts.get("--json") and info and not text:
        text = json.dumps(info) + "\n"
    if text:
        out.write(text)
    out.flush()


__all__ = ["hook_event", "run"]
