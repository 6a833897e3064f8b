"""The project's own checks: ruff (lint and format) over the code and tests, mypy over
the package."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_ruff_is_clean():
    proc = subprocess.run(
        [sys.executable, "-m", "ruff", "check", "remindkit", "tray", "tests", "bench", "docs"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_ruff_format_is_the_style():
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "ruff",
            "format",
            "--check",
            "remindkit",
            "tray",
            "tests",
            "bench",
            "docs",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_mypy_is_clean():
    proc = subprocess.run(
        [sys.executable, "-m", "mypy"], cwd=ROOT, capture_output=True, text=True, timeout=600
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_tests_that_cannot_run_fail_where_they_are_required(monkeypatch):
    """The attacks made by a second Unix user, and the agent CLIs' tests, skip where
    they cannot run, except under scripts/test (REMINDKIT_REQUIRE_USERS=1,
    REMINDKIT_REQUIRE_CLIENTS=1), where they fail: no row of the attack table or the
    host matrix is lost quietly."""
    import pytest

    from tests.conftest import second_user_or_skip
    from tests.hosts.agent_clis.conftest import cli

    def outcome(call, *args):  # type: ignore[no-untyped-def]
        try:
            call(*args)
        except BaseException as exc:  # pytest's skip and fail are BaseExceptions
            return type(exc)
        return None

    monkeypatch.setenv("PATH", str(ROOT / "no-such-folder"))  # no useradd to be found
    for value, expected in (("1", pytest.fail.Exception), ("0", pytest.skip.Exception)):
        monkeypatch.setenv("REMINDKIT_REQUIRE_USERS", value)
        assert outcome(second_user_or_skip, "useradd", "userdel") is expected, value
        monkeypatch.setenv("REMINDKIT_REQUIRE_CLIENTS", value)
        assert outcome(cli, "no-such-cli") is expected, value
    script = (ROOT / "scripts" / "test").read_text()
    for name in ("REMINDKIT_REQUIRE_USERS", "REMINDKIT_REQUIRE_CLIENTS"):
        assert f'export {name}="${{{name}:-1}}"' in script, name


def test_every_package_is_installed_under_remindkit():
    """pyproject.toml lists the packages (tray/ is mapped to remindkit.tray, which no
    search finds): each folder of remindkit/ and tray/ is listed, and nothing else,
    so a new sub-package cannot be left out of the wheel, nor "tray" put in it."""
    import tomllib

    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]
    listed = config["setuptools"]["packages"]
    mapped = config["setuptools"]["package-dir"]
    assert mapped == {"remindkit.tray": "tray"}

    def folders(top: str, name: str) -> set[str]:
        return {
            ".".join([name, *p.relative_to(ROOT / top).parts])
            for p in [ROOT / top, *(ROOT / top).rglob("*")]
            if p.is_dir() and p.name != "__pycache__" and p.name.isidentifier()
        }

    assert sorted(listed) == sorted(
        folders("remindkit", "remindkit") | folders("tray", "remindkit.tray")
    )
    assert all(name == "remindkit" or name.startswith("remindkit.") for name in listed)
