"""The import graph runs one way: foundation < store < retrieval < work < surfaces,
operations beside them, the project's wiring on top; and it has no circle.

Every ``import`` in memories/, retrieval/ and timothy/ counts, the ones inside a
function (lazy) and under ``TYPE_CHECKING`` included: an import deferred to run
time is still an arrow. Migrations are history and are left out. No database:
the graph is read from the source with ``ast``.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("memories", "retrieval", "timothy")

FOUNDATION, STORE, RETRIEVAL, WORK, SURFACES, OPERATIONS, PROJECT = (
    "foundation", "store", "retrieval", "work", "surfaces", "operations", "project"
)  # fmt: skip
# What each layer may import besides itself.
MAY_IMPORT = {
    FOUNDATION: set(),
    STORE: {FOUNDATION},
    RETRIEVAL: {FOUNDATION, STORE},
    WORK: {FOUNDATION, STORE, RETRIEVAL},
    SURFACES: {FOUNDATION, STORE, RETRIEVAL, WORK},
    OPERATIONS: {FOUNDATION, STORE, RETRIEVAL},
    PROJECT: {FOUNDATION, STORE, RETRIEVAL, WORK, SURFACES, OPERATIONS},
}

# The layer of each module: the longest matching prefix wins (docs/architecture.md).
LAYERS = {
    # Django-free helpers any layer may use.
    "timothy.env": FOUNDATION,
    "timothy.http_errors": FOUNDATION,
    "timothy.http_retry": FOUNDATION,
    "timothy.concurrency": FOUNDATION,
    "timothy.request_body": FOUNDATION,
    "timothy.security_headers": FOUNDATION,
    "timothy.access_log": FOUNDATION,
    "timothy.scratch": FOUNDATION,
    # The store: memories, their states, chain, events, API tokens, redaction.
    "memories.models": STORE,
    "memories.rules": STORE,
    "memories.about": STORE,
    "memories.proper_nouns": STORE,
    "memories.matching": STORE,
    "memories.signals": STORE,
    "memories.redaction": STORE,
    "memories.api_tokens": STORE,
    "memories.access_log": STORE,
    "memories.disk_erase": STORE,
    "memories.disk_erase_records": STORE,
    "memories.idempotency_records": STORE,
    "memories.memory_json": STORE,
    "memories.vectors": STORE,
    "memories.schema": STORE,
    # Retrieval: the index the store's triggers keep, the legs, fusion, packing.
    "retrieval": RETRIEVAL,
    # What memories does with the store and retrieval: extraction, consolidation,
    # related memories, import and export, the background tasks.
    "memories.consolidation": WORK,
    "memories.extraction": WORK,
    "memories.about_llm": WORK,
    "memories.llm": WORK,
    "memories.related": WORK,
    "memories.related_evaluation": WORK,
    "memories.io": WORK,
    "memories.tasks": WORK,
    # The surfaces: API, pages, admin, commands.
    "memories": SURFACES,
    "retrieval.management": SURFACES,
    # Operations: serving, the database's guards, fault drills.
    "memories.management.commands.serve": OPERATIONS,
    "memories.management.commands.drill_faults": OPERATIONS,
    "timothy.database": OPERATIONS,
    "timothy.db_backend": OPERATIONS,
    "timothy.drill": OPERATIONS,
    "timothy.gunicorn_conf": OPERATIONS,
    "timothy.gunicorn_worker": OPERATIONS,
    "timothy.startup": OPERATIONS,
    "timothy.warmup": OPERATIONS,
    # Wiring: settings, URLconfs, WSGI, and each app's ready(), which hands the
    # store what the layers above it provide.
    "timothy": PROJECT,
    "memories.apps": PROJECT,
    "retrieval.apps": PROJECT,
}


def module_of(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def our_modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            if "migrations" not in path.parts:
                found[module_of(path)] = path
    return found


def longest_known(name: str, known) -> str | None:
    while name:
        if name in known:
            return name
        name = name.rpartition(".")[0]
    return None


def imports_of(module: str, path: Path, known) -> list[tuple[str, str]]:
    """(imported module, "file:line: statement [lazy]") for each import of ours."""
    tree = ast.parse(path.read_text(), str(path))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = []

    def visit(node, lazy: bool) -> None:
        for child in ast.iter_child_nodes(node):
            inner = lazy or isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef)
            if isinstance(child, ast.Import):
                names = [alias.name for alias in child.names]
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    anchor = package.split(".")[: len(package.split(".")) - child.level + 1]
                    base = ".".join([*anchor, *([base] if base else [])])
                names = [f"{base}.{alias.name}" for alias in child.names]
            else:
                visit(child, inner)
                continue
            shown = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
            where = f"{shown}:{child.lineno}: {ast.unparse(child)}"
            where += " [lazy]" if inner else ""
            for target in {longest_known(name, known) for name in names}:
                if target and target != module:
                    found.append((target, where))

    visit(tree, False)
    return found


def graph() -> dict[str, list[tuple[str, str]]]:
    known = our_modules()
    return {module: imports_of(module, path, known) for module, path in known.items()}


def layer_of(module: str) -> str | None:
    name = longest_known(module, LAYERS)
    return LAYERS.get(name) if name else None


def circles(edges: dict[str, list[tuple[str, str]]]) -> list[list[str]]:
    """Each strongly connected set of two or more modules (Tarjan, iterative)."""
    successors = {module: sorted({target for target, _ in out}) for module, out in edges.items()}
    index, low, on_stack, stack, found = {}, {}, set(), [], []
    for root in successors:
        if root in index:
            continue
        work = [(root, iter(successors[root]))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(successors.get(child, ()))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                members = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    members.append(member)
                    if member == node:
                        break
                if len(members) > 1:
                    found.append(sorted(members))
    return found


def test_every_module_has_a_layer():
    missing = sorted(module for module in our_modules() if layer_of(module) is None)
    assert not missing, f"Give these modules a layer in tests/test_layers.py: {missing}"


def test_no_import_runs_upward():
    upward = []
    for module, out in graph().items():
        mine = layer_of(module)
        for target, where in out:
            theirs = layer_of(target)
            if theirs != mine and theirs not in MAY_IMPORT[mine]:
                upward.append(f"{where}  ({mine} {module} -> {theirs} {target})")
    assert not upward, "Imports that run against the layers:\n" + "\n".join(sorted(upward))


def test_no_import_circle():
    edges = graph()
    found = []
    for members in circles(edges):
        inside = set(members)
        lines = [where for module in members for target, where in edges[module] if target in inside]
        found.append(" <-> ".join(members) + "\n    " + "\n    ".join(sorted(lines)))
    assert not found, "Modules that import each other:\n" + "\n".join(found)


def test_the_layer_test_sees_lazy_imports(tmp_path):
    """The parser counts an import inside a function (it could fail: a lazy
    import is the usual way around a circle)."""
    package = tmp_path / "memories"
    package.mkdir()
    (package / "x.py").write_text("def f():\n    from retrieval.legs import run_legs\n")
    edges = imports_of("memories.x", package / "x.py", {"memories.x", "retrieval.legs"})
    assert [(target, where.endswith("[lazy]")) for target, where in edges] == [
        ("retrieval.legs", True)
    ]
