"""Which session an MCP server speaks for.

An MCP host does not tell its servers which conversation they serve, but Claude
Code's hooks receive it: the ``SessionStart`` hook (``remindkit mcp bind``)
reads ``session_id`` from the hook's JSON on stdin and writes it, with the
process ids of its ancestors (Claude Code is one of them), to a per-project
file under ``<REMINDKIT_HOME>/mcp-sessions/``. The server of that project reads
the file and takes, in order:

1. ``--session`` / ``REMINDKIT_SESSION`` when given;
2. the binding whose ancestors include the server's own parent (the Claude Code
   process that spawned both the hook and the server; it follows ``/clear``);
3. ``CLAUDE_CODE_SESSION_ID``, which Claude Code sets for the servers it starts
   (the conversation it started them in);
4. the newest binding of the project;
5. a stable per-project id, ``project-<12 hex of the project path's SHA-256>``.

The server looks at the file again at every tool call and once a second (a
``stat``), so ``/clear`` or ``--resume`` moves it to the new conversation.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..checks import check_session_id
from ..errors import InvalidInput

MAX_BINDINGS = 16  # per project; the oldest go first


def project_dir(explicit: str | os.PathLike[str] | None = None) -> Path:
    """The project: ``explicit``, else ``CLAUDE_PROJECT_DIR``, else the working directory."""
    raw = explicit or os.environ.get("CLAUDE_PROJECT_DIR") or os.getcwd()
    return Path(raw).expanduser().resolve()


def project_key(project: Path) -> str:
    return hashlib.sha256(str(project).encode("utf-8", "surrogatepass")).hexdigest()[:12]


def project_session_id(project: Path) -> str:
    return f"project-{project_key(project)}"


def bindings_file(home: Path, project: Path) -> Path:
    return home / "mcp-sessions" / f"{project_key(project)}.json"


def ancestors(pid: int | None = None, depth: int = 6) -> list[int]:
    """``pid`` (default: this process) and its parents, nearest first (Linux /proc;
    elsewhere just this process and its parent)."""
    out: list[int] = []
    cur = os.getpid() if pid is None else pid
    for _ in range(depth):
        if cur <= 1 or cur in out:
            break
        out.append(cur)
        try:
            stat = Path(f"/proc/{cur}/stat").read_text()
            cur = int(stat.rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            if cur == os.getpid():
                cur = os.getppid()
                continue
            break
    return out


@dataclass(frozen=True)
class Binding:
    session_id: str
    pids: tuple[int, ...]
    at: float
    source: str | None = None


def read_bindings(path: Path) -> list[Binding]:
    try:
        data: Any = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    out = []
    for item in data.get("bindings", []) if isinstance(data, dict) else []:
        try:
            sid = check_session_id(item["session_id"])
            if sid is None:
                continue
            out.append(
                Binding(
                    sid,
                    tuple(int(p) for p in item.get("pids", [])),
                    float(item.get("at", 0)),
                    item.get("source") if isinstance(item.get("source"), str) else None,
                )
            )
        except (KeyError, TypeError, ValueError, InvalidInput):
            continue
    return out


def write_binding(
    home: Path, project: Path, session_id: str, *, pids: list[int], source: str | None
) -> Path:
    """Record ``session_id`` for the host process among ``pids`` (atomic replace)."""
    path = bindings_file(home, project)
    path.parent.mkdir(parents=True, exist_ok=True)
    keep = [b for b in read_bindings(path) if b.session_id != session_id]
    keep.append(Binding(session_id, tuple(pids), time.time(), source))
    keep = keep[-MAX_BINDINGS:]
    body = {
        "project": str(project),
        "bindings": [
            {"session_id": b.session_id, "pids": list(b.pids), "at": b.at, "source": b.source}
            for b in keep
        ],
    }
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".bind-", suffix=".json")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(body, fh)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def resolve(
    home: Path,
    project: Path,
    *,
    parent_pid: int | None = None,
    env: dict[str, str] | os._Environ[str] | None = None,
) -> tuple[str, str]:
    """(session id, how it was found): ``hook``, ``host`` (Claude Code's
    ``CLAUDE_CODE_SESSION_ID``), ``hook-newest`` or ``project``."""
    found = read_bindings(bindings_file(home, project))
    parent = os.getppid() if parent_pid is None else parent_pid
    mine = [b for b in found if parent in b.pids]
    if mine:
        return max(mine, key=lambda b: b.at).session_id, "hook"
    env = os.environ if env is None else env
    try:
        given = check_session_id(env.get("CLAUDE_CODE_SESSION_ID") or None)
    except InvalidInput:
        given = None
    if given is not None:
        return given, "host"
    if found:
        return max(found, key=lambda b: b.at).session_id, "hook-newest"
    return project_session_id(project), "project"


__all__ = [
    "Binding",
    "ancestors",
    "bindings_file",
    "project_dir",
    "project_session_id",
    "read_bindings",
    "resolve",
    "write_binding",
]
