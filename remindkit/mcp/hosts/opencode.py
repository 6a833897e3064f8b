"""opencode (``opencode-ai``): ``remindkit mcp install-opencode``.

What it writes (the project's ``opencode.json`` and ``.opencode/plugin/remindkit.js``, or
``--user``: ``~/.config/opencode/``):

* ``mcp.remindkit``: a ``local`` server with the absolute command, ``environment`` with
  ``REMINDKIT_HOME`` / ``REMINDKIT_DB`` when set, and a 30 s tool-list timeout;
* the plugin (opencode has no command hooks; it loads ``plugin/*.js``), which runs
  remindkit's hook commands with the JSON Claude Code's hooks get (``session_id`` is
  opencode's ``ses_…`` id): ``remindkit mcp bind`` on ``session.created``;
  ``remindkit session busy --hook`` on each message (``chat.message``: its
  ``additionalContext`` is appended to the message, so fires due while the conversation
  sat idle come with the next prompt); ``remindkit session idle --hook`` each time the
  model finishes a text (``experimental.text.complete``), whose ``{"decision": "block",
  "reason": …}`` is stored in the session as a user message before the turn's loop looks
  for more, so the same turn goes on with the fired block (``opencode run`` too), and
  again on ``session.idle`` (a block then is sent as a new prompt).

The resume preset: ``opencode run --session {session} --dir . {message}``, run in the
project folder (without ``--dir`` a run started outside it does not end), with
``OPENCODE_CONFIG``, ``OPENCODE_CONFIG_DIR`` and ``XDG_CONFIG_HOME`` / ``XDG_DATA_HOME``
passed on; a provider's key variable needs ``--pass-env``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from ...errors import InvalidInput
from ..install import Change
from .common import (
    Plan,
    Preset,
    check_target,
    executable,
    remindkit_command,
    remindkit_env,
    server_args,
    with_entry,
)

NAME = "opencode"
TITLE = "opencode"
SERVER_KEY = "remindkit"
# its clientInfo.name: the hooks hand fires in to it (the plugin acts on the hook commands' ``decision: block`` and ``additionalContext``)
MCP_CLIENT = "opencode"
KEY_ENV = ("OPENCODE_CONFIG", "OPENCODE_CONFIG_DIR", "XDG_CONFIG_HOME", "XDG_DATA_HOME")
TOOLS_TIMEOUT_MS = 30_000

PLUGIN = """\
// remindkit for opencode: written by `remindkit mcp install-opencode` (it rewrites this file).
// Runs remindkit's hook commands with the JSON Claude Code's hooks get, so that a reminder
// set in a session comes back to that session.
import { spawn } from "node:child_process"

const REMINDKIT = __ARGV__
const TIMEOUT_MS = 20000
const MAX_OUT = 1 << 20

function hook(args, payload) {
  return new Promise((resolve) => {
    let out = ""
    let child
    try {
      child = spawn(REMINDKIT[0], [...REMINDKIT.slice(1), ...args], {
        stdio: ["pipe", "pipe", "ignore"],
      })
    } catch {
      resolve(null)
      return
    }
    const timer = setTimeout(() => child.kill("SIGKILL"), TIMEOUT_MS)
    child.stdout.on("data", (d) => {
      if (out.length < MAX_OUT) out += d
    })
    child.on("error", () => {
      clearTimeout(timer)
      resolve(null)
    })
    child.on("close", () => {
      clearTimeout(timer)
      try {
        resolve(out.trim() ? JSON.parse(out) : null)
      } catch {
        resolve(null)
      }
    })
    child.stdin.on("error", () => {})
    child.stdin.end(JSON.stringify(payload))
  })
}

export const RemindkitPlugin = async ({ client, directory }) => {
  const bound = new Set()
  const children = new Set() // subagent sessions: no reminders of their own
  const ours = new Set() // the texts this plugin put into a session itself
  const base = (sid, event) => ({ session_id: sid, cwd: directory, hook_event_name: event })
  const bind = async (sid, source) => {
    if (bound.has(sid)) return
    bound.add(sid)
    await hook(["mcp", "bind"], { ...base(sid, "SessionStart"), source })
  }
  // a Stop hook's {"decision": "block", "reason"}: the reason goes into the session as
  // a user message; awaited, so that it is stored before the turn's loop looks for more
  const handIn = async (sid, reason) => {
    ours.add(reason)
    const parts = [{ type: "text", text: reason }]
    await client.session
      .prompt({ path: { id: sid }, body: { noReply: true, parts }, sessionID: sid, noReply: true, parts })
      .catch(() => {})
  }
  const stop = async (sid) => {
    const out = await hook(["session", "idle", "--hook"], base(sid, "Stop"))
    if (out && out.decision === "block" && typeof out.reason === "string" && out.reason) return out.reason
    return null
  }
  return {
    event: async ({ event }) => {
      const props = event.properties || {}
      if (event.type === "session.created") {
        const info = props.info || {}
        if (info.id && info.parentID) children.add(info.id)
        else if (info.id) await bind(info.id, "startup")
      } else if (event.type === "session.idle" && props.sessionID && !children.has(props.sessionID)) {
        // the turn is over: fires due since its last answer start a new turn
        const reason = await stop(props.sessionID)
        if (reason) {
          ours.add(reason)
          const parts = [{ type: "text", text: reason }]
          client.session
            .prompt({ path: { id: props.sessionID }, body: { parts }, sessionID: props.sessionID, parts })
            .catch(() => {})
        }
      }
    },
    // the model finished a text: fires due during the turn go in now, and the turn's loop
    // goes on with them (opencode ends a turn only when no newer user message waits)
    "experimental.text.complete": async (input) => {
      const sid = input && input.sessionID
      if (!sid || children.has(sid) || !bound.has(sid)) return
      const reason = await stop(sid)
      if (reason) await handIn(sid, reason)
    },
    "chat.message": async (input, output) => {
      const sid = input.sessionID
      if (!sid || children.has(sid)) return
      const part = (output.parts || []).find((p) => p.type === "text")
      if (part && ours.delete(part.text)) return // remindkit's own hand-in
      await bind(sid, "resume")
      const out = await hook(["session", "busy", "--hook"], base(sid, "UserPromptSubmit"))
      const context = out && out.hookSpecificOutput && out.hookSpecificOutput.additionalContext
      if (typeof context === "string" && context && part) part.text = `${part.text}\\n\\n${context}`
    },
  }
}
"""


def config_dir(environ: dict[str, str] | None = None) -> Path:
    env = os.environ if environ is None else environ
    base = env.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base).expanduser() / "opencode"


def plugin_source(command: list[str]) -> str:
    return PLUGIN.replace("__ARGV__", json.dumps(command))


def preset(opencode: str | None = None) -> Preset:
    argv = (
        executable("opencode", opencode),
        "run",
        "--session",
        "{session}",
        "--dir",
        ".",
        "{message}",
    )
    return Preset(argv, KEY_ENV)


def plan(
    *,
    project: Path,
    user: bool,
    command: str | None = None,
    host_executable: str | None = None,
    resume: bool = True,
    pass_env: tuple[str, ...] = (),
    environ: dict[str, str] | None = None,
) -> Plan:
    root = config_dir(environ) if user else project
    if (
        not user
        and (project / "opencode.jsonc").exists()
        and not (project / "opencode.json").exists()
    ):
        raise InvalidInput(
            f"{project / 'opencode.jsonc'} holds comments remindkit cannot keep: add the entry "
            "by hand (remindkit mcp install-opencode --dry-run shows it)",
            code="invalid_argument",
        )
    config = check_target(root / "opencode.json", root)
    plugin_path = check_target(
        (root if user else project / ".opencode") / "plugin" / "remindkit.js", root
    )
    rk = remindkit_command(command)
    the_preset = preset(host_executable) if resume else None
    entry: dict[str, Any] = {
        "type": "local",
        "command": [*rk, *server_args(the_preset, pass_env)],
        "enabled": True,
        "timeout": TOOLS_TIMEOUT_MS,
    }
    env = remindkit_env(environ)
    if env:
        entry["environment"] = env
    try:
        before = plugin_path.read_text(encoding="utf-8")
    except FileNotFoundError:
        before = ""
    changes = [
        with_entry(config, ("mcp", SERVER_KEY), entry),
        Change(plugin_path, before, plugin_source(rk)),
    ]
    return Plan(changes, [])


__all__ = ["NAME", "PLUGIN", "plan", "plugin_source", "preset"]
