"""`remindkit session add` for each adapter, and its refusals."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from remindkit.cli.main import main


@pytest.fixture
def db(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("REMINDKIT_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("REMINDKIT_TZ", "UTC")
    monkeypatch.setenv("REMINDKIT_API_KEY_ENVS", "MY_KEY")
    return f"sqlite:///{tmp_path / 'store.db'}"


def run(db: str, *args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(["--db", db, *args], stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def test_add_each_adapter(db: str) -> None:
    code, out, _ = run(
        db,
        "session",
        "add",
        "a",
        "--command",
        "my-agent --resume {session}",
        "--fresh-command",
        "my-agent --new {session}",
        "--json",
    )
    assert code == 0 and json.loads(out)["config"]["argv"] == ["my-agent", "--resume", "{session}"]
    code, out, _ = run(
        db,
        "session",
        "add",
        "o",
        "--openai",
        "--base-url",
        "http://127.0.0.1:11434/v1",
        "--model",
        "llama3.2",
        "--api-key-env",
        "MY_KEY",
        "--json",
    )
    data = json.loads(out)
    assert code == 0 and data["adapter"] == "openai" and data["config"]["base_url"].endswith("/v1")
    code, out, _ = run(db, "session", "add", "p", "--python", "--json")
    assert code == 0 and json.loads(out)["adapter"] == "python"
    code, out, _ = run(db, "session", "ls", "--json")
    assert {s["id"]: s["adapter"] for s in json.loads(out)} == {
        "a": "command",
        "o": "openai",
        "p": "python",
    }


@pytest.mark.parametrize(
    "args, code",
    [
        (["--openai", "--model", "m"], "invalid_argument"),
        (["--openai", "--base-url", "ftp://x", "--model", "m"], "invalid_argument"),
        (["--python", "--command", "x"], "invalid_argument"),
        (["--base-url", "http://x/v1"], "invalid_argument"),
        (["--fresh-command", "x"], "invalid_argument"),
        (["--command", "'unclosed"], "invalid_command"),
    ],
    ids=["no base url", "not http", "two adapters", "base url alone", "fresh alone", "bad argv"],
)
def test_add_refusals(db: str, args: list[str], code: str) -> None:
    rc, _, err = run(db, "session", "add", "x", *args)
    assert rc == 1 and err.startswith(f"error: {code}:")
    assert run(db, "session", "ls", "--json")[1].strip() == "[]"


def test_rm_pauses_reminders(db: str) -> None:
    run(db, "remind", "x", "--session", "s", "--in", "5m")
    code, out, _ = run(db, "session", "rm", "s", "--json")
    assert code == 0 and len(json.loads(out)["paused"]) == 1
    (rem,) = json.loads(run(db, "ls", "--json")[1])
    assert rem["state"] == "paused" and rem["last_error"] == "session s was deleted"
