"""The documentation: the site under docs/ builds strictly, its reference pages hold what
the code has, and the README stays a short introduction whose links lead somewhere.

The site is built as a person would build it (``sphinx-build -W --keep-going``, a
separate process) into a temporary folder: a warning, a broken link between pages or a
missing anchor fails it. The reference pages are made from the code by docs/_ext while
it builds; the settings page from docs/_ext/envvars.py, which these tests hold to
every ``REMINDKIT_*`` name the code reads."""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
sys.path.insert(0, str(DOCS / "_ext"))

import envvars  # noqa: E402 - docs/_ext
import refpages  # noqa: E402

# Where the code reads or sets variables: the package, the tray, the Claude Code plugin's
# scripts, the set-up and test scripts, the tests, the benches, the TypeScript client.
SCANNED = ["remindkit", "tray", "scripts", ".ci", "tests", "bench", "clients/typescript"]
SKIPPED_PARTS = {"node_modules", "__pycache__", ".venv", "static"}
TEXT_SUFFIXES = {"", ".py", ".sh", ".js", ".ts", ".json", ".toml", ".md", ".cfg", ".ini"}
NAME = re.compile(r"\bREMINDKIT_[A-Z0-9_]+\b")


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if sys.version_info < (3, 11):
        pytest.skip("the docs extra (Sphinx 9, MyST 5) needs Python 3.11")
    pytest.importorskip("sphinx", reason="the docs extra is part of the test extra")
    out = tmp_path_factory.mktemp("site")
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "sphinx",
            "-W",
            "--keep-going",
            "-q",
            "-b",
            "html",
            str(DOCS),
            str(out),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "WARNING" not in proc.stderr, proc.stderr
    return out


def _text(page: Path) -> str:
    """A built page's text, without its markup."""
    return re.sub(r"<[^>]+>", " ", page.read_text(encoding="utf-8"))


def test_the_site_builds_with_no_warning_and_every_page_is_in_it(site: Path) -> None:
    sources = {
        p.relative_to(DOCS).with_suffix("").as_posix()
        for p in DOCS.rglob("*.md")
        if "_build" not in p.parts and "_ext" not in p.parts
    }
    built = {
        p.relative_to(site).with_suffix("").as_posix()
        for p in site.rglob("*.html")
        if p.parent != site / "_static"
    }
    assert sources <= built, sorted(sources - built)
    assert (site / "index.html").exists()


def test_the_error_reference_has_every_code(site: Path) -> None:
    from remindkit.error_codes import ErrorCode

    page = _text(site / "reference" / "errors.html")
    missing = [str(code) for code in ErrorCode if str(code) not in page]
    assert not missing, missing
    assert len(list(ErrorCode)) > 50


def test_the_cli_reference_has_every_command_and_flag(site: Path) -> None:
    from remindkit.cli.main import build_parser

    page = _text(site / "reference" / "cli.html")
    commands = refpages._commands(build_parser(), ["remindkit"])
    assert len(commands) > 40
    for path, _aliases, _help, parser in commands:
        if path[1] == "reminders" and len(path) > 2:
            continue  # the group's commands are the flat ones
        assert " ".join(path) in page, path
        for action in parser._actions:
            for option in action.option_strings:
                if action.help != argparse.SUPPRESS:
                    assert option in page, (path, option)


def test_the_http_reference_and_the_openapi_document_are_beside_the_pages(site: Path) -> None:
    doc = json.loads((site / "openapi.json").read_text(encoding="utf-8"))
    page = _text(site / "reference" / "http-api.html")
    operations = [op for ops in doc["paths"].values() for op in ops.values()]
    assert len(operations) >= 10
    for op in operations:
        assert op["operationId"] in page, op["operationId"]
    assert "create_reminder" in page and "/v1/events" in page


def test_the_module_map_has_every_module(site: Path) -> None:
    page = _text(site / "development" / "modules.html")
    for name, _path in refpages.module_files():
        assert name in page, name


def _variables_in_code() -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for top in SCANNED:
        for path in (ROOT / top).rglob("*"):
            parts = path.relative_to(ROOT).parts
            if (
                any(part in SKIPPED_PARTS or part.startswith(".venv") for part in parts)
                or path.suffix not in TEXT_SUFFIXES
                or not path.is_file()
                or path.name == "package-lock.json"
            ):
                continue
            try:
                text = path.read_text(encoding="utf-8")
            except (UnicodeDecodeError, OSError):
                continue
            for name in NAME.findall(text):
                found.setdefault(name, set()).add(path.relative_to(ROOT).as_posix())
    return found


def test_the_settings_reference_lists_every_variable_the_code_reads() -> None:
    in_code = _variables_in_code()
    listed = envvars.names()
    missing = {
        name: sorted(where)
        for name, where in in_code.items()
        if name not in listed and name not in envvars.NOT_VARIABLES
    }
    assert not missing, f"add these to docs/_ext/envvars.py: {missing}"
    unread = sorted(listed - set(in_code))
    assert not unread, f"docs/_ext/envvars.py lists variables no code reads: {unread}"
    assert len(listed) > 60


def test_the_settings_reference_has_each_variable_and_the_codes_defaults() -> None:
    from remindkit.settings import Limits, Settings

    text = refpages.settings()
    for name in envvars.names():
        assert f"`{name}`" in text, name
    row = {
        line.split("|")[1].strip(" `"): line.split("|")[3].strip()
        for line in text.splitlines()
        if line.startswith("| `REMINDKIT_")
    }
    assert row["REMINDKIT_LEASE"] == str(int(Settings().lease_s))
    assert row["REMINDKIT_MAX_PER_SESSION"] == str(Limits().per_session)
    assert row["REMINDKIT_CATCHUP_MAX"] == str(Settings().catchup_max)


README_MAX_LINES = 150
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


def _outside_code(text: str) -> str:
    return re.sub(r"```.*?```", "", text, flags=re.S)


def test_the_readme_is_short_and_its_links_lead_to_files() -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= README_MAX_LINES
    targets = [t for t in LINK.findall(text) if "://" not in t]
    assert len(targets) > 15
    for target in targets:
        assert (ROOT / target).exists(), target
    # no dated figures: those belong in CHANGELOG.md
    assert not re.search(r"\b20\d\d-\d\d-\d\d\b", _outside_code(text))
    assert "load average" not in text


def test_the_readmes_two_commands_are_the_ones_ci_runs() -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "scripts/run " in text and "scripts/test " in text
    for script in ("scripts/run", "scripts/test", "scripts/setup", ".ci/run"):
        assert (ROOT / script).stat().st_mode & 0o111, script
    assert "exec scripts/test" in (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert "scripts/setup" in (ROOT / "scripts" / "test").read_text(encoding="utf-8")
    assert "remindkit serve" in (ROOT / "scripts" / "run").read_text(encoding="utf-8")


def test_the_readmes_extras_table_is_pyprojects() -> None:
    import tomllib

    extras = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"][
        "optional-dependencies"
    ]
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    table = "\n".join(line for line in text.splitlines() if line.startswith("| `"))
    named = set(re.findall(r"`([a-z-]+)`", table))
    assert set(extras) <= named, sorted(set(extras) - named)
    assert "remindkit[docs]" in extras["test"]
