"""`remindkit mcp install`, `install-claude-code` (idempotent, shows the diff), the
SessionStart binding, and the resume command of a session with no server connected."""

from __future__ import annotations

import io
import json
import os
import shlex
import time
from pathlib import Path

import pytest

from remindkit.cli.main import main
from remindkit.clock import SystemClock, now_us
from remindkit.engine import Engine
from remindkit.mcp import identity
from remindkit.models import Session
from remindkit.reminders import Reminders
from remindkit.sessions.mcp import LEASE_PREFIX
from remindkit.settings import Settings
from remindkit.store import open_store

from .conftest import wait_for


def run(
    *argv: str, stdin: str | None = None, monkeypatch: pytest.MonkeyPatch | None = None
) -> tuple[int, str]:
    out = io.StringIO()
    if stdin is not None and monkeypatch is not None:
        monkeypatch.setattr("sys.stdin", io.StringIO(stdin))
    code = main(list(argv), stdout=out, stderr=io.StringIO())
    return code, out.getvalue()


def test_install_prints_valid_json_for_each_host() -> None:
    code, text = run("mcp", "install")
    assert code == 0
    blocks = [b for b in text.split("\n\n") if b.strip().startswith("#") and "{" in b]
    parsed = [json.loads(b[b.index("{") :]) for b in blocks]
    assert parsed[0]["mcpServers"]["remindkit"] == {
        "command": "remindkit",
        "args": ["mcp", "--session", "claude-desktop"],
    }
    assert parsed[1]["mcpServers"]["remindkit"]["args"] == ["mcp", "--session", "cursor"]
    assert parsed[2]["servers"]["remindkit"]["type"] == "stdio"


def test_install_claude_code_is_idempotent_and_keeps_the_rest(tmp_path: Path) -> None:
    project = tmp_path / "proj"
    (project / ".claude").mkdir(parents=True)
    (project / ".mcp.json").write_text(json.dumps({"mcpServers": {"other": {"command": "x"}}}))
    theirs = {"type": "command", "command": "echo hi"}
    old = {"type": "command", "command": "remindkit session idle --hook"}  # an earlier install
    (project / ".claude" / "settings.local.json").write_text(
        json.dumps(
            {"permissions": {"allow": ["Bash(ls)"]}, "hooks": {"Stop": [{"hooks": [theirs, old]}]}}
        )
    )
    code, first = run("mcp", "install-claude-code", "--project", str(project))
    assert code == 0 and "written" in first and "remindkit service install" in first
    servers = json.loads((project / ".mcp.json").read_text())["mcpServers"]
    assert servers["other"] == {"command": "x"}
    rk = servers["remindkit"]
    assert os.path.isabs(rk["command"]) and rk["args"][-1] == "mcp"  # hooks work without PATH
    argv = [rk["command"], *rk["args"][:-1]]
    settings = json.loads((project / ".claude" / "settings.local.json").read_text())
    assert settings["permissions"] == {"allow": ["Bash(ls)"]}
    assert settings["enabledMcpjsonServers"] == ["remindkit"]
    commands = {
        ev: [h["command"] for g in groups for h in g["hooks"]]
        for ev, groups in settings["hooks"].items()
    }
    line = " ".join(shlex.quote(a) for a in argv)
    assert commands == {
        "Stop": ["echo hi", f"{line} mcp hook stop"],  # the old remindkit hook replaced
        "SessionStart": [f"{line} mcp hook start"],
        "UserPromptSubmit": [f"{line} mcp hook prompt"],
    }
    assert not (project / ".claude" / "settings.json").exists()  # personal: not checked in
    before = {
        p: p.read_bytes()
        for p in (project / ".mcp.json", project / ".claude" / "settings.local.json")
    }
    code, second = run("mcp", "install-claude-code", "--project", str(project))
    assert code == 0 and second.count("up to date") == 2 and "+" not in second
    assert {p: p.read_bytes() for p in before} == before
    code, _ = run("mcp", "install-claude-code", "--project", str(project), "--shared")
    shared = json.loads((project / ".claude" / "settings.json").read_text())
    assert [h["command"] for g in shared["hooks"]["Stop"] for h in g["hooks"]] == [
        f"{line} mcp hook stop"
    ]


def test_install_claude_code_command_is_one_executable(tmp_path: Path) -> None:
    """--command names one executable (a path with a space stays one), never a shell line."""
    folder = tmp_path / "my tools"
    folder.mkdir()
    exe = folder / "remindkit"
    exe.write_text("#!/bin/sh\n")
    exe.chmod(0o755)
    project = tmp_path / "p"
    project.mkdir()
    code, _ = run("mcp", "install-claude-code", "--project", str(project), "--command", str(exe))
    assert code == 0
    entry = json.loads((project / ".mcp.json").read_text())["mcpServers"]["remindkit"]
    assert entry == {"command": str(exe), "args": ["mcp"]}
    hook = json.loads((project / ".claude" / "settings.local.json").read_text())["hooks"]
    assert hook["Stop"][0]["hooks"][0]["command"] == f"{shlex.quote(str(exe))} mcp hook stop"
    code, _ = run(
        "mcp", "install-claude-code", "--project", str(project), "--command", "uvx remindkit"
    )
    assert code == 1  # not split like a shell line


def test_install_claude_code_never_goes_through_a_symlink(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A repository whose .mcp.json links to the user's ~/.claude.json (or whose .claude
    folder links out of it): nothing is read through the link, nothing written."""
    home = tmp_path / "home"
    home.mkdir()
    secret = home / ".claude.json"
    secret.write_text(json.dumps({"oauthAccount": {"token": "do-not-copy"}}))
    monkeypatch.setenv("HOME", str(home))
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / ".mcp.json").symlink_to(secret)
    code, text = run("mcp", "install-claude-code", "--project", str(repo))
    assert code == 1 and "do-not-copy" not in text
    assert (repo / ".mcp.json").is_symlink() and "do-not-copy" in secret.read_text()
    (repo / ".mcp.json").unlink()
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (repo / ".claude").symlink_to(outside)
    code, _ = run("mcp", "install-claude-code", "--project", str(repo))
    assert code == 1 and list(outside.iterdir()) == [] and not (repo / ".mcp.json").exists()
    (home / ".claude").mkdir()
    (home / ".claude" / "settings.json").symlink_to(outside / "x.json")
    code, _ = run("mcp", "install-claude-code", "--user")
    assert code == 1 and not (outside / "x.json").exists()


def test_install_claude_code_user_and_dry_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    code, text = run("mcp", "install-claude-code", "--user", "--dry-run")
    assert code == 0 and "~" not in text and str(tmp_path / ".claude.json") in text
    assert not (tmp_path / ".claude.json").exists()
    code, _ = run(
        "mcp",
        "install-claude-code",
        "--user",
        "--resume-command",
        "claude -p --resume {session}",
        "--pass-env",
        "ANTHROPIC_API_KEY",
    )
    entry = json.loads((tmp_path / ".claude.json").read_text())["mcpServers"]["remindkit"]
    assert entry["args"][-5:] == [
        "mcp",
        "--resume-command",
        "claude -p --resume {session}",
        "--pass-env",
        "ANTHROPIC_API_KEY",
    ]
    assert (tmp_path / ".claude" / "settings.json").exists()


def test_install_refuses_a_broken_settings_file(tmp_path: Path) -> None:
    (tmp_path / ".mcp.json").write_text("{not json")
    code, _ = run("mcp", "install-claude-code", "--project", str(tmp_path))
    assert code == 1 and (tmp_path / ".mcp.json").read_text() == "{not json"


def test_binding_rules(tmp_path: Path) -> None:
    home, project = tmp_path / "home", tmp_path / "proj"
    project.mkdir()
    assert identity.resolve(home, project, parent_pid=4242) == (
        identity.project_session_id(project),
        "project",
    )
    identity.write_binding(home, project, "sess-a", pids=[100, 4242, 1], source="startup")
    identity.write_binding(home, project, "sess-b", pids=[200, 5353, 1], source="startup")
    assert identity.resolve(home, project, parent_pid=4242) == ("sess-a", "hook")
    assert identity.resolve(home, project, parent_pid=5353) == ("sess-b", "hook")
    assert identity.resolve(home, project, parent_pid=999) == ("sess-b", "hook-newest")
    time.sleep(0.01)
    identity.write_binding(
        home, project, "sess-a2", pids=[101, 4242, 1], source="clear"
    )  # /clear in A
    assert identity.resolve(home, project, parent_pid=4242) == ("sess-a2", "hook")
    assert (
        identity.resolve(tmp_path / "home", tmp_path, parent_pid=4242)[1] == "project"
    )  # another project


def test_bind_hook_reads_stdin_and_never_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("REMINDKIT_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("CLAUDE_PROJECT_DIR", raising=False)
    db = f"sqlite:///{tmp_path / 'rk.db'}"
    payload = {
        "session_id": "abc-1",
        "cwd": str(tmp_path),
        "hook_event_name": "SessionStart",
        "source": "startup",
    }
    code, out = run(
        "mcp", "bind", "--db", db, "--json", stdin=json.dumps(payload), monkeypatch=monkeypatch
    )
    assert code == 0 and json.loads(out)["session"] == "abc-1"
    assert (
        identity.resolve(tmp_path / "home", tmp_path.resolve(), parent_pid=os.getppid())[0]
        == "abc-1"
    )
    for bad in ("not json", json.dumps({"cwd": "/"}), json.dumps({"session_id": "x\n\x1b"})):
        code, _ = run("mcp", "bind", "--db", db, stdin=bad, monkeypatch=monkeypatch)
        assert code == 0
        code, _ = run("session", "busy", "--hook", "--db", db, stdin=bad, monkeypatch=monkeypatch)
        assert code == 0


def test_resume_command_delivers_while_no_server_is_connected(tmp_path: Path) -> None:
    """An ``mcp`` session that names a resume command: with no server connected, any
    engine delivers through the command; while a server holds the session's lease,
    the fires wait for it."""
    store = open_store(
        f"sqlite:///{tmp_path / 'rk.db'}",
        settings=Settings.from_env({"REMINDKIT_HOME": str(tmp_path)}),
    )
    api = Reminders(store, clock=SystemClock())
    out = tmp_path / "turns.txt"
    store.sessions.put_session(
        Session("cc", adapter="mcp", config={"argv": ["sh", "-c", f"cat >> {out}; echo done"]}),
        now_us=now_us(api.clock),
    )
    holder = "another-process"
    store.coordination.hold_lease(
        LEASE_PREFIX + "cc",
        holder=holder,
        priority=0,
        until_us=now_us(api.clock) + 600_000_000,
        now_us=now_us(api.clock),
    )
    engine = Engine(
        store, clock=api.clock, settings=api.settings, role="test", can_alert=False
    ).start()
    try:
        api.add("while the server runs", session="cc", in_="1s")
        wait_for(
            lambda: [o for o in api.history(session="cc") if o.state == "waiting"], 60, "waiting"
        )
        assert not out.exists()
        store.coordination.drop_lease(LEASE_PREFIX + "cc", holder=holder)  # the server went away
        engine.notice_change()
        wait_for(
            lambda: out.exists() and "while the server runs" in out.read_text(),
            60,
            "the resume command",
        )
        assert "<schedule-fired" in out.read_text()
        wait_for(
            lambda: [o for o in api.history(session="cc") if o.state == "delivered"],
            60,
            "delivered",
        )
    finally:
        engine.close()
        store.close()
