"""The layout shows the architecture: a module imports only from its own layer or
the layers below it (function-level imports and imports for type hints only count
too: a type named across layers is a dependency all the same), and there are no
import cycles between modules. The desktop app in ``tray/`` is installed as
``remindkit.tray`` and is checked under that name. Read statically with ``ast``:
nothing is imported."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# Lowest first. A module belongs to the layer of its first package below remindkit.
LAYERS: list[set[str]] = [
    {
        "_compat",
        "clock",
        "errors",
        "error_codes",
        "failpoints",
        "statusfile",
        "credential",
        "wakeup",
        "runtime",
    },  # vocabulary, time, waiting, the local credential, the runtime folder
    {
        "schedules",
        "models",
        "audit",
        "events",
        "settings",
        "checks",
    },  # pure domain, its in-process events, configuration, input checks
    {"protocol"},  # tags, framing, tool schemas: pure
    {"store", "imports"},  # SQLAlchemy, the only package that knows rows; import lines checked
    {"reminders"},  # the reminders API over the store
    {"agent"},  # tool calls, tags of replies, the agent loop, model clients' protocol
    {"sessions", "alerts"},  # adapters that run turns; alarm, speech, notifications
    {"engine"},  # claiming, firing, delivery
    {"wiring"},  # the object graph a surface runs on (settings, clock, store, API, engines)
    {
        "cli",
        "notebook",
        "api",
        "mcp",
        "channels",
        "client",
        "chats",
        "tray",
        "__main__",
        "service",
    },  # surfaces
]
# The package facade hands on names of every layer (loaded on first use).
SURFACE_MODULES = {"remindkit"}


def _layer_of(module: str) -> int:
    if module in SURFACE_MODULES:
        return len(LAYERS) - 1
    parts = module.split(".")
    head = parts[1] if len(parts) > 1 else parts[0]
    for i, names in enumerate(LAYERS):
        if head in names:
            return i
    raise AssertionError(
        f"{module}: its package {head!r} has no layer in tests/test_layers.py; add it"
    )


# Folders of the repository and the package names they are installed under
# (pyproject.toml's package-dir).
SOURCES = {"remindkit": "remindkit", "tray": "remindkit.tray"}


def _sources() -> list[tuple[Path, str]]:
    """Every module file with its dotted name as installed (a package by its own name)."""
    found = []
    for folder, package in SOURCES.items():
        for path in sorted((ROOT / folder).rglob("*.py")):
            rel = path.relative_to(ROOT / folder).with_suffix("")
            parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
            found.append((path, ".".join([package, *parts])))
    return found


def _package_of(path: Path, module: str) -> str:
    return module if path.name == "__init__.py" else module.rsplit(".", 1)[0]


def _from_target(node: ast.ImportFrom, package: str) -> str:
    """The module a ``from … import`` names, relative imports resolved in ``package``."""
    if not node.level:
        return node.module or ""
    base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _imports() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = defaultdict(set)
    known = {name for _, name in _sources()}
    for path, module in _sources():
        package = _package_of(path, module)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom):
                target = _from_target(node, package)
                if not target.startswith("remindkit"):
                    continue
                for alias in node.names:  # from pkg import mod: the module itself
                    sub = f"{target}.{alias.name}"
                    graph[module].add(sub if sub in known or node.module is None else target)
            elif isinstance(node, ast.Import):
                graph[module].update(a.name for a in node.names if a.name.startswith("remindkit"))
    return graph


def test_no_module_imports_a_higher_layer() -> None:
    bad = []
    for module, targets in _imports().items():
        mine = _layer_of(module)
        for target in targets:
            if target == "remindkit" and module != "remindkit":
                bad.append(f"{module} imports the package facade 'remindkit'")
                continue
            theirs = _layer_of(target)
            if theirs > mine:
                bad.append(f"{module} (layer {mine}) imports {target} (layer {theirs})")
    assert not bad, "\n".join(sorted(bad))


def test_no_import_cycles_between_modules() -> None:
    graph = _imports()
    known = {name for _, name in _sources()}

    def resolve(name: str) -> str | None:
        while name not in known and "." in name:
            name = name.rsplit(".", 1)[0]  # ``from pkg.mod import Name``
        return name if name in known else None

    edges = {
        m: {r for t in ts if (r := resolve(t)) is not None and r != m and not _is_parent(r, m)}
        for m, ts in graph.items()
    }
    # Tarjan's strongly connected components
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    cycles: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                cycles.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    assert not cycles, "import cycles: " + "; ".join(" <-> ".join(c) for c in cycles)


def _is_parent(package: str, module: str) -> bool:
    """A module importing its own package's ``__init__`` (re-exports) is not a cycle
    worth reporting; the package importing the module is how packages work."""
    return module.startswith(package + ".")


# The reminders API and the engine are built by the composition root (remindkit.wiring),
# which attaches the alerter, the hints and the settings every surface shares; these
# places build them otherwise, each for a reason of its own.
BUILT_ELSEWHERE = {
    # the command line's readers and writer through the SQLite driver alone (no graph:
    # its cost is the import of SQLAlchemy that ``ls`` and ``remind`` avoid)
    ("remindkit.cli.context", "remindkit.reminders.Reminders"),
    # an Engine given no reminders API (built without the root): its own, from its store
    ("remindkit.sessions.registry", "remindkit.reminders.Reminders"),
}
BUILT_BY_THE_ROOT = ("remindkit.reminders.Reminders", "remindkit.engine.core.Engine")
# the names the packages hand them on under
ALIASES = {
    "remindkit.engine.Engine": "remindkit.engine.core.Engine",
    "remindkit.Reminders": "remindkit.reminders.Reminders",
    "remindkit.Engine": "remindkit.engine.core.Engine",
}


def _constructions() -> set[tuple[str, str]]:
    """(module, class) for every call of a root-built class in the package, the class
    known by what the module imported under the called name."""
    found = set()
    for path, module in _sources():
        package = _package_of(path, module)
        tree = ast.parse(path.read_text(encoding="utf-8"))
        names: dict[str, str] = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                target = _from_target(node, package)
                for alias in node.names:
                    names[alias.asname or alias.name] = f"{target}.{alias.name}"
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
                full = names.get(node.func.id)
                full = ALIASES.get(full, full) if full is not None else None
                if full is None and module in ("remindkit.reminders", "remindkit.engine.core"):
                    full = f"{module}.{node.func.id}"  # the class's own module
                if full in BUILT_BY_THE_ROOT:
                    found.add((module, full))
    return found


def test_the_api_and_the_engine_are_built_by_the_composition_root() -> None:
    built = _constructions()
    assert ("remindkit.wiring", "remindkit.reminders.Reminders") in built  # the scan sees it
    assert ("remindkit.wiring", "remindkit.engine.core.Engine") in built
    others = {b for b in built if b[0] != "remindkit.wiring"} - BUILT_ELSEWHERE
    assert not others, (
        f"built outside remindkit.wiring: {sorted(others)}; take them from rk.build() "
        "(a Graph), or say in BUILT_ELSEWHERE why not"
    )
