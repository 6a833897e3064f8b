"""``remindkit mcp install-codex|install-gemini|install-opencode`` on files a person
already has: idempotent, the rest of each file kept, ``--dry-run`` writes nothing."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import pytest
import tomllib

from remindkit.cli.main import main
from remindkit.errors import InvalidInput
from remindkit.mcp.hosts import HOSTS, session_from_meta

RK = str(Path(sys.executable).parent / "remindkit")


def install(host: str, project: Path, *extra: str) -> str:
    out = io.StringIO()
    code = main(
        ["mcp", f"install-{host}", "--project", str(project), "--command", RK, *extra],
        stdout=out,
        stderr=io.StringIO(),
    )
    assert code == 0
    return out.getvalue()


def test_codex_keeps_the_rest_and_replaces_its_own_table(tmp_path: Path) -> None:
    codex = tmp_path / ".codex"
    codex.mkdir()
    (codex / "config.toml").write_text(
        '# mine\nmodel = "o3"\n\n[mcp_servers.remindkit]\ncommand = "old"\n\n'
        '[mcp_servers.remindkit.env]\nX = "1"\n\n[mcp_servers.other]\ncommand = "x"\n'
    )
    (codex / "hooks.json").write_text(
        json.dumps({"hooks": {"Stop": [{"hooks": [{"type": "command", "command": "echo hi"}]}]}})
    )
    out = install("codex", tmp_path, "--codex", "/opt/codex", "--pass-env", "MY_KEY")
    assert "written" in out and "Trust all and continue" in out
    text = (codex / "config.toml").read_text()
    config = tomllib.loads(text)
    assert text.startswith("# mine\n") and config["model"] == "o3"
    assert config["mcp_servers"]["other"] == {"command": "x"}
    ours = config["mcp_servers"]["remindkit"]
    assert ours["command"] == RK and "X" not in ours.get("env", {})
    args = ours["args"]
    assert args[:2] == ["mcp", "--no-channel"]
    resume = args[args.index("--resume-command") + 1]
    assert resume == "/opt/codex exec --skip-git-repo-check resume '{session}' -"
    passed = [args[i + 1] for i, a in enumerate(args) if a == "--pass-env"]
    assert passed == ["OPENAI_API_KEY", "CODEX_HOME", "MY_KEY"]
    hooks = json.loads((codex / "hooks.json").read_text())["hooks"]
    assert [h["command"] for g in hooks["Stop"] for h in g["hooks"]] == [
        "echo hi",
        f"{RK} session idle --hook",
    ]
    assert hooks["SessionStart"][0]["hooks"][0]["command"] == f"{RK} mcp bind"
    again = install("codex", tmp_path, "--codex", "/opt/codex", "--pass-env", "MY_KEY")
    assert again.count("up to date") == 2


def test_gemini_and_opencode_are_idempotent_and_dry_run_writes_nothing(tmp_path: Path) -> None:
    (tmp_path / ".gemini").mkdir()
    (tmp_path / ".gemini" / "settings.json").write_text(json.dumps({"theme": "dark"}))
    assert "BeforeAgent" in install("gemini", tmp_path, "--dry-run")
    assert json.loads((tmp_path / ".gemini" / "settings.json").read_text()) == {"theme": "dark"}
    assert not (tmp_path / "opencode.json").exists()
    install("opencode", tmp_path, "--dry-run")
    assert not (tmp_path / "opencode.json").exists()
    install("gemini", tmp_path)
    install("opencode", tmp_path)
    settings = json.loads((tmp_path / ".gemini" / "settings.json").read_text())
    assert settings["theme"] == "dark" and settings["mcpServers"]["remindkit"]["trust"] is True
    assert settings["hooks"]["AfterAgent"][0]["hooks"][0]["command"] == f"{RK} session idle --hook"
    entry = json.loads((tmp_path / "opencode.json").read_text())["mcp"]["remindkit"]
    assert entry["type"] == "local" and entry["command"][:3] == [RK, "mcp", "--no-channel"]
    plugin = (tmp_path / ".opencode" / "plugin" / "remindkit.js").read_text()
    assert f"const REMINDKIT = {json.dumps([RK])}" in plugin
    assert install("gemini", tmp_path).count("up to date") == 1
    assert install("opencode", tmp_path).count("up to date") == 2


def test_opencode_jsonc_is_left_to_the_person(tmp_path: Path) -> None:
    (tmp_path / "opencode.jsonc").write_text("{ // mine\n}")
    with pytest.raises(InvalidInput):
        HOSTS["opencode"].plan(project=tmp_path, user=False)


def test_codex_thread_id_from_tools_call_meta() -> None:
    assert session_from_meta({"threadId": "01a2"}) == "01a2"
    assert session_from_meta({"x-codex-turn-metadata": {"thread_id": "t1"}}) == "t1"
    assert session_from_meta({"progressToken": 3}) is None
    assert session_from_meta(None) is None
