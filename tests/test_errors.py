"""Every error code written in the package is a member of the registry
(:class:`remindkit.error_codes.ErrorCode`) the error reference is made from, and the
reference lists each member with its meaning. Read statically with ``ast``.

A code is found where the package writes one as a string:

* a ``code=`` argument, or a positional argument bound to a parameter named ``code``
  of a function or class (its ``__init__``, or a dataclass's fields) of the package
  (``tool_error("unknown_tool", …)``, ``TagError("unclosed_tag", …)``,
  ``_json(403, "origin_not_allowed", …)``);
* ``code = "…"`` in a class body (the errors' defaults);
* a comparison with ``code`` or ``….code`` (``exc.code == "conflict"``);
* the values given to a variable named ``code`` (``code = {404: "not_found"}.get(…)``);
* a collection bound to a name ending in ``_CODES`` (``SCHEDULE_CODES``).
"""

from __future__ import annotations

import ast
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest

from remindkit.error_codes import ErrorCode
from remindkit.errors import reference

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = ("remindkit", "tray")


def _modules() -> list[tuple[str, ast.Module]]:
    return [
        (str(path.relative_to(ROOT)), ast.parse(path.read_text(encoding="utf-8")))
        for folder in FOLDERS
        for path in sorted((ROOT / folder).rglob("*.py"))
    ]


def _name_of(func: ast.expr) -> str | None:
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return func.attr
    return None


def _code_positions(modules: list[tuple[str, ast.Module]]) -> dict[str, set[int]]:
    """For each function (or class, by its ``__init__``) of the package, the positions
    of its parameter named ``code``; an alias (``tool_error = _error``) shares them."""
    found: dict[str, set[int]] = defaultdict(set)
    aliases: list[tuple[str, str]] = []
    for _, tree in modules:
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                params = [a.arg for a in (*node.args.posonlyargs, *node.args.args)]
                if "code" in params:
                    found[node.name].add(params.index("code"))
            elif isinstance(node, ast.ClassDef):
                for item in node.body:
                    if isinstance(item, ast.FunctionDef) and item.name == "__init__":
                        params = [a.arg for a in (*item.args.posonlyargs, *item.args.args)]
                        if "code" in params:  # a call passes no self
                            found[node.name].add(params.index("code") - 1)
                if any("dataclass" in ast.unparse(d) for d in node.decorator_list):
                    fields = [
                        item.target.id
                        for item in node.body
                        if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name)
                    ]
                    if "code" in fields:  # a dataclass's __init__ takes its fields in order
                        found[node.name].add(fields.index("code"))
            elif (
                isinstance(node, ast.Assign)
                and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Name)
                and isinstance(node.value, ast.Name)
            ):
                aliases.append((node.targets[0].id, node.value.id))
    for alias, target in aliases:
        if target in found:
            found[alias] |= found[target]
    return found


def _strings(node: ast.expr) -> list[str]:
    """A string constant, or those of a tuple, list or set of them."""
    items = node.elts if isinstance(node, (ast.Tuple, ast.List, ast.Set)) else [node]
    return [i.value for i in items if isinstance(i, ast.Constant) and isinstance(i.value, str)]


def _given_to_code(value: ast.expr) -> list[str]:
    """The strings a ``code = …`` assignment may give: the value, a conditional's two,
    a dict's values (looked up)."""
    out = _strings(value)
    for node in ast.walk(value):
        if isinstance(node, ast.IfExp):
            out += _strings(node.body) + _strings(node.orelse)
        elif isinstance(node, ast.Dict):
            out += [s for v in node.values if v is not None for s in _strings(v)]
    return out


def written_codes() -> dict[str, set[str]]:
    """Every error code written as a string in the package, with the files it is in."""
    modules = _modules()
    positions = _code_positions(modules)
    found: dict[str, set[str]] = defaultdict(set)
    for where, tree in modules:
        for node in ast.walk(tree):
            codes: list[str] = []
            if isinstance(node, ast.Call):
                for kw in node.keywords:
                    if kw.arg == "code":
                        codes += _strings(kw.value)
                for i in positions.get(_name_of(node.func) or "", ()):
                    if i < len(node.args):
                        codes += _strings(node.args[i])
            elif isinstance(node, ast.ClassDef):
                for item in node.body:
                    if isinstance(item, ast.Assign) and any(
                        isinstance(t, ast.Name) and t.id == "code" for t in item.targets
                    ):
                        codes += _strings(item.value)
            elif isinstance(node, ast.Compare):
                left = node.left
                if (isinstance(left, ast.Attribute) and left.attr == "code") or (
                    isinstance(left, ast.Name) and left.id == "code"
                ):
                    for comparator in node.comparators:
                        codes += _strings(comparator)
            elif isinstance(node, ast.Assign) and node.value is not None:
                for target in node.targets:
                    if isinstance(target, ast.Name) and target.id == "code":
                        codes += _given_to_code(node.value)
                    elif isinstance(target, ast.Name) and target.id.endswith("_CODES"):
                        codes += [
                            n.value
                            for n in ast.walk(node.value)
                            if isinstance(n, ast.Constant) and isinstance(n.value, str)
                        ]
            for code in codes:
                found[code].add(where)
    return found


def test_every_code_written_in_the_package_is_in_the_registry() -> None:
    known = {str(code) for code in ErrorCode}
    unknown = {code: sorted(where) for code, where in written_codes().items() if code not in known}
    assert not unknown, f"add these to remindkit/error_codes.py (ErrorCode): {unknown}"


def test_the_scan_finds_codes_in_each_way_they_are_written() -> None:
    """The scan is no stand-in: each rule above finds the codes it is there for."""
    found = written_codes()
    for code, where in [
        ("interval_too_short", "remindkit/schedules/spec.py"),  # code=
        ("unknown_tool", "remindkit/agent/tools.py"),  # _error(code, …)
        ("malformed_tag", "remindkit/protocol/tags.py"),  # _Malformed(code, …)
        ("unclosed_tag", "remindkit/protocol/tags.py"),  # TagError(code, …), a dataclass
        ("origin_not_allowed", "remindkit/api/guard.py"),  # _json(status, code, …)
        ("invalid_urgency", "remindkit/reminders.py"),  # _choice(…, code)
        ("callback_slots_full", "remindkit/agent/callbacks.py"),  # _err(code, …)
        ("too_many_connections", "remindkit/api/limits.py"),  # _raw(status, code, …)
        ("plan_refused", "remindkit/errors.py"),  # a class's code
        ("method_not_allowed", "remindkit/api/app.py"),  # code = {…}.get(…)
        ("no_future_fire", "remindkit/client.py"),  # SCHEDULE_CODES
        ("tray_unavailable", "remindkit/errors.py"),
    ]:
        assert where in found.get(code, set()), (code, where, found.get(code))


def test_no_twin_codes() -> None:
    """One code for one meaning: no code is another's plural (invalid_argument[s])."""
    codes = {str(code) for code in ErrorCode}
    assert not {c for c in codes if c.endswith("s") and c[:-1] in codes}


def test_every_code_has_a_meaning_and_a_place() -> None:
    assert [c for c in ErrorCode if not c.meaning or not c.where] == []
    assert len({str(c) for c in ErrorCode}) == len(ErrorCode)


def test_the_reference_is_a_table_of_every_code() -> None:
    table = reference()
    lines = table.splitlines()
    assert lines[:2] == ["| code | meaning | where |", "|---|---|---|"]
    assert len(lines) == 2 + len(ErrorCode)
    for code, line in zip(ErrorCode, lines[2:], strict=True):
        assert line == f"| `{code}` | {code.meaning} | {code.where} |"


def test_python_m_remindkit_errors_prints_the_reference() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "remindkit.errors"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
    )
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    assert proc.stdout == reference()


@pytest.mark.parametrize("code", ["conflict", "schedule_not_found", "persistence_uncertain"])
def test_a_code_compares_and_prints_as_its_string(code: str) -> None:
    member = ErrorCode(code)
    assert member == code and str(member) == code and f"{member}" == code
