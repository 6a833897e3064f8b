"""The reference pages' text, made from the code at build time (Markdown for MyST).

* :func:`errors` from :class:`remindkit.error_codes.ErrorCode` (``python -m remindkit.errors``);
* :func:`settings` from :data:`envvars.VARIABLES`, which tests/test_docs.py holds to
  every ``REMINDKIT_*`` name the code reads;
* :func:`cli` from the argparse parser of ``remindkit`` (``remindkit.cli.main.build_parser``);
* :func:`http` from the OpenAPI document ``remindkit api`` serves (:func:`openapi`);
* :func:`modules` from the package's files and tests/test_layers.py's layers.

Each returns Markdown; docs/_ext/remindkit_docs.py renders it where a page says
``{remindkit-reference} NAME``.
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
import json
import logging
import os
import re
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


def _cell(text: object) -> str:
    """Text for a table cell: one line, pipes escaped."""
    return " ".join(str(text).split()).replace("|", "\\|")


# -- errors ------------------------------------------------------------------------------


def errors() -> str:
    from remindkit.errors import reference

    return reference()


# -- settings ----------------------------------------------------------------------------


def settings() -> str:
    import envvars

    out: list[str] = []
    for group in envvars.VARIABLES:
        out += [f"## {group.title}", ""]
        if group.intro:
            out += [group.intro, ""]
        out += ["| variable | meaning | default |", "|---|---|---|"]
        for var in group.variables:
            out.append(f"| `{var.name}` | {_cell(var.meaning)} | {_cell(var.default_text())} |")
        out.append("")
    return "\n".join(out)


# -- the command line --------------------------------------------------------------------


def _commands(
    parser: argparse.ArgumentParser, path: list[str]
) -> list[tuple[list[str], list[str], str, argparse.ArgumentParser]]:
    """(path, aliases, help, parser) of every command below ``parser``, depth first."""
    found = []
    for action in parser._actions:
        if not isinstance(action, argparse._SubParsersAction):
            continue
        helps = {a.dest: a.help or "" for a in action._choices_actions}
        names: dict[int, list[str]] = {}
        for name, sub in action.choices.items():
            names.setdefault(id(sub), []).append(name)
        for aliases in names.values():
            sub = action.choices[aliases[0]]
            here = [*path, aliases[0]]
            found.append((here, aliases[1:], helps.get(aliases[0], ""), sub))
            found += _commands(sub, here)
    return found


def _argument(action: argparse.Action) -> str:
    if action.option_strings:
        metavar = ""
        if action.nargs != 0:
            shown = action.metavar or action.dest.upper()
            metavar = " " + (" ".join(shown) if isinstance(shown, tuple) else shown)
        return ", ".join(f"`{o}{metavar}`" for o in action.option_strings)
    shown = action.metavar or action.dest
    if isinstance(shown, tuple):
        shown = " ".join(shown)
    suffix = {"*": " …", "+": " …", "?": " (optional)"}.get(str(action.nargs), "")
    return f"`{shown}`{suffix}"


def _arguments(parser: argparse.ArgumentParser, common: set[str]) -> list[str]:
    rows = []
    for action in parser._actions:
        if isinstance(action, (argparse._HelpAction, argparse._SubParsersAction)):
            continue
        if action.help == argparse.SUPPRESS or set(action.option_strings) & common:
            continue
        meaning = action.help or ""
        if action.choices is not None and not isinstance(action.choices, dict):
            meaning += f" (one of: {', '.join(f'`{c}`' for c in action.choices)})"
        default = action.default
        if (
            default not in (None, False, argparse.SUPPRESS, [], "")
            and action.nargs != 0
            and "default" not in meaning
        ):
            meaning += f" (default: `{default}`)"
        rows.append(f"| {_argument(action)} | {_cell(meaning.strip()) or '-'} |")
    if not rows:
        return []
    return ["| argument | meaning |", "|---|---|", *rows, ""]


def cli() -> str:
    from remindkit.cli.main import build_parser

    old = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = "80"  # argparse's usage lines, the same on every machine
    try:
        parser = build_parser()
        common = {"--db", "--json"}
        out: list[str] = []
        for path, aliases, help_text, sub in _commands(parser, ["remindkit"]):
            if path[1] == "reminders" and len(path) > 2:
                continue  # the group's commands are the flat ones (below)
            out += [f"{'#' * min(len(path), 4)} {' '.join(path)}", ""]
            if aliases:
                out += ["Also: " + ", ".join(f"`{' '.join([*path[:-1], a])}`" for a in aliases), ""]
            if help_text:
                out += [help_text[0].upper() + help_text[1:] + ".", ""]
            if path[1] == "reminders" and len(path) == 2:
                group = [p for p, _a, _h, _s in _commands(sub, path)]
                out += [
                    "The same commands as the flat ones: "
                    + ", ".join(f"`{' '.join(p)}`" for p in group)
                    + " (`reminders add` is `remind`).",
                    "",
                ]
                continue
            out += ["```text", sub.format_usage().strip(), "```", ""]
            out += _arguments(sub, common)
        return "\n".join(out)
    finally:
        if old is None:
            os.environ.pop("COLUMNS", None)
        else:
            os.environ["COLUMNS"] = old


# -- the HTTP API ------------------------------------------------------------------------


def openapi() -> dict[str, Any]:
    """The OpenAPI document of ``remindkit api`` on its default port, made in process
    over a throwaway store with the default settings."""
    import remindkit as rk
    from remindkit.api.app import create_app
    from remindkit.api.events import EventFeed
    from remindkit.settings import Settings

    logging.getLogger("alembic").setLevel(logging.WARNING)  # the migrations' progress
    with tempfile.TemporaryDirectory(prefix="remindkit-docs-") as tmp:
        settings = Settings.from_env({}, home=Path(tmp))
        graph = rk.build(settings, db=f"sqlite:///{Path(tmp) / 'docs.db'}")
        try:
            app = create_app(graph.api, feed=EventFeed(graph.store), cookie="remindkit-8765")
            return app.openapi()
        finally:
            graph.store.close()


def _schema_type(schema: dict[str, Any]) -> str:
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        return f"[{name}](#schema-{name.lower()})"
    for key in ("anyOf", "oneOf"):
        if key in schema:
            return " or ".join(_schema_type(s) for s in schema[key])
    kind = schema.get("type", "any")
    if kind == "array":
        return f"array of {_schema_type(schema.get('items', {}))}"
    if "enum" in schema:
        return " \\| ".join(f"`{v}`" for v in schema["enum"])
    return str(kind)


def http(doc: dict[str, Any] | None = None) -> str:
    doc = doc if doc is not None else openapi()
    out = [
        "## The document",
        "",
        f"The document below is `remindkit api`'s `/openapi.json` (OpenAPI "
        f"{doc.get('openapi', '')}), made from the code when these pages are built; the file "
        'itself is <a href="../openapi.json">openapi.json</a> beside these pages.',
        "",
        "Security: every operation takes "
        + " or ".join(f"`{name}`" for name in doc.get("components", {}).get("securitySchemes", {}))
        + " unless it says otherwise.",
        "",
        "## Operations",
        "",
        "| method | path | operation id | statuses |",
        "|---|---|---|---|",
    ]
    operations = []
    for path, ops in doc.get("paths", {}).items():
        for method, op in ops.items():
            operations.append((path, method, op))
            statuses = ", ".join(sorted(op.get("responses", {})))
            anchor = f"#op-{op.get('operationId', '').replace('_', '-')}"
            out.append(
                f"| {method.upper()} | `{path}` | [`{op.get('operationId')}`]({anchor}) | {statuses} |"
            )
    out.append("")
    for path, method, op in operations:
        out += [f"(op-{op.get('operationId', '').replace('_', '-')})=", ""]
        out += [f"### {op.get('summary') or op.get('operationId')}", ""]
        out += [f"`{method.upper()} {path}` · operation id `{op.get('operationId')}`", ""]
        if op.get("description"):
            out += [" ".join(op["description"].split()), ""]
        if op.get("security") == []:
            out += ["No credential needed.", ""]
        params = op.get("parameters", [])
        if params:
            out += ["| parameter | in | type | required | meaning |", "|---|---|---|---|---|"]
            for p in params:
                out.append(
                    f"| `{p['name']}` | {p['in']} | {_cell(_schema_type(p.get('schema', {})))} "
                    f"| {'yes' if p.get('required') else 'no'} | {_cell(p.get('description', ''))} |"
                )
            out.append("")
        body = op.get("requestBody", {}).get("content", {})
        for media, content in body.items():
            out += [f"Body ({media}): {_schema_type(content.get('schema', {}))}", ""]
        out += ["| status | meaning | body |", "|---|---|---|"]
        for status, response in sorted(op.get("responses", {}).items()):
            content = response.get("content", {})
            kinds = "; ".join(
                f"{media}: {_schema_type(c.get('schema', {}))}" for media, c in content.items()
            )
            out.append(f"| {status} | {_cell(response.get('description', ''))} | {_cell(kinds)} |")
        out.append("")
    out += ["## Schemas", ""]
    for name, schema in doc.get("components", {}).get("schemas", {}).items():
        out += [f"(schema-{name.lower()})=", "", f"### {name}", ""]
        if schema.get("description"):
            out += [" ".join(schema["description"].split()), ""]
        props = schema.get("properties", {})
        if props:
            required = set(schema.get("required", []))
            out += ["| field | type | required | meaning |", "|---|---|---|---|"]
            for field, prop in props.items():
                bounds = [
                    f"{k} {prop[k]}"
                    for k in ("minLength", "maxLength", "minimum", "maximum", "pattern")
                    if k in prop
                ]
                meaning = prop.get("description", "")
                if bounds:
                    meaning += (" (" if meaning else "(") + ", ".join(bounds) + ")"
                out.append(
                    f"| `{field}` | {_cell(_schema_type(prop))} | "
                    f"{'yes' if field in required else 'no'} | {_cell(meaning)} |"
                )
            out.append("")
    return "\n".join(out)


def openapi_json(doc: dict[str, Any] | None = None) -> str:
    return json.dumps(doc if doc is not None else openapi(), indent=2, sort_keys=False) + "\n"


# -- the module map ----------------------------------------------------------------------


def _layers() -> list[set[str]]:
    spec = importlib.util.spec_from_file_location("_layers", ROOT / "tests" / "test_layers.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return list(module.LAYERS)


_ROLE = re.compile(r":[a-z]+:`~?([^`<]*?)(?: <[^>]*>)?`")


def layers() -> str:
    """The layers of tests/test_layers.py as a table, with the comment each has there."""
    source = (ROOT / "tests" / "test_layers.py").read_text(encoding="utf-8")
    block = source[source.index("LAYERS:") : source.index("\n]\n", source.index("LAYERS:"))]
    comments = re.findall(r"\}\s*,\s*#\s*(.*)", block)
    names = _layers()
    assert len(comments) == len(names), "tests/test_layers.py: a comment after each layer"
    out = ["| layer | packages | what |", "|---|---|---|"]
    for i, (layer, comment) in enumerate(zip(names, comments, strict=True)):
        packages = ", ".join(f"`{n}`" for n in sorted(layer))
        out.append(f"| {i} | {packages} | {_cell(comment)} |")
    return "\n".join(out) + "\n"


def _summary(path: Path) -> str:
    """A module docstring's first paragraph, its reST roles as code spans."""
    try:
        doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
    except SyntaxError:  # pragma: no cover - the tests would fail first
        return ""
    first = doc.strip().split("\n\n", 1)[0]
    first = _ROLE.sub(lambda m: f"`{m.group(1).rsplit('.', 1)[-1]}`", first)
    return " ".join(first.replace("``", "`").split())


def module_files() -> list[tuple[str, Path]]:
    """Every module of the package as installed (tray/ as remindkit.tray), by name."""
    found = []
    for folder, package in (("remindkit", "remindkit"), ("tray", "remindkit.tray")):
        for path in sorted((ROOT / folder).rglob("*.py")):
            rel = path.relative_to(ROOT / folder).with_suffix("")
            parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
            found.append((".".join([package, *parts]), path))
    return sorted(found)


def modules() -> str:
    layers = _layers()
    files = module_files()
    total = sum(len(p.read_text(encoding="utf-8").splitlines()) for _n, p in files)
    out = [
        "## In all",
        "",
        f"{len(files)} modules, {total:,} lines. Layers lowest first, as tests/test_layers.py "
        "has them: a module imports only from its own layer or the layers below.",
        "",
    ]
    placed: set[str] = set()
    for i, names in enumerate(layers):
        here = [(n, p) for n, p in files if n != "remindkit" and n.split(".")[1] in names]
        if i == len(layers) - 1:
            here = [(n, p) for n, p in files if n == "remindkit"] + here  # the facade
        placed |= {n for n, _p in here}
        lines = sum(len(p.read_text(encoding="utf-8").splitlines()) for _n, p in here)
        out += [
            f"## Layer {i}: {', '.join(sorted(names))}",
            "",
            f"{len(here)} modules, {lines:,} lines.",
            "",
            "| module | lines | what it is |",
            "|---|---|---|",
        ]
        for name, path in here:
            count = len(path.read_text(encoding="utf-8").splitlines())
            where = path.relative_to(ROOT).as_posix()
            out.append(f"| `{name}` ({where}) | {count} | {_cell(_summary(path))} |")
        out.append("")
    unplaced = sorted({n for n, _p in files} - placed)
    assert not unplaced, f"modules in no layer of tests/test_layers.py: {unplaced}"
    return "\n".join(out)


KINDS = {
    "errors": errors,
    "settings": settings,
    "cli": cli,
    "http": http,
    "modules": modules,
    "layers": layers,
}
