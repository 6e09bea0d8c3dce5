"""The import layers of `src/nmem`: no cycle, no lower layer importing a higher one, no adapter
importing another. Imports inside functions count; imports under `if TYPE_CHECKING:` do not
(they never run). docs/architecture.md draws the layers."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
LAYERS = (  # lowest first; a module may import its own layer and those below
    ("nmem.util", "nmem.errors", "nmem.ids", "nmem.jsonlite"),
    ("nmem.config", "nmem.models", "nmem.refs", "nmem.text"),
    ("nmem.store",),
    ("nmem.capture", "nmem.search", "nmem.lifecycle", "nmem.context", "nmem.changes", "nmem.team", "nmem.sync"),
    ("nmem.service",),
    ("nmem.portable", "nmem.compat"),
    ("nmem.setup", "nmem.adapters"),
    ("nmem", "nmem.__main__", "nmem.hook_entry"),  # entry points
)
# Edges allowed across the rules, each with its reason.
EXCEPTIONS = {
    ("nmem.adapters.http", "nmem.adapters.mcp"): "the HTTP app mounts the MCP app",
    ("nmem.adapters.cli", "nmem.adapters.hooks"): "`nmem record` / `nmem hook` as click commands run the hook",
    ("nmem.adapters.cli.serve", "nmem.adapters.http"): "`nmem serve` starts the HTTP server",
    ("nmem.adapters.cli.serve", "nmem.adapters.mcp"): "`nmem serve` starts the MCP server",
    ("nmem.models", "nmem.capture.errorline"): "an error observation's key line (errorline is pure text, stdlib only)",
    ("nmem.store.migrate", "nmem.team"): "copying a team server's users",
}
CYCLES_ALLOWED_IN: tuple[str, ...] = ()


def modules() -> dict[str, Path]:
    found = {}
    for path in (SRC / "nmem").rglob("*.py"):
        parts = list(path.relative_to(SRC).with_suffix("").parts)
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def imports(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    typing_only = {id(n) for node in ast.walk(tree) if isinstance(node, ast.If)
                   and getattr(node.test, "id", getattr(node.test, "attr", "")) == "TYPE_CHECKING"
                   for stmt in node.body for n in ast.walk(stmt)}
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out = set()
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                here = package.split(".")
                base = ".".join([*here[: len(here) - node.level + 1], *filter(None, [base])])
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names]
        else:
            continue
        for asked in targets:
            target = asked
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target.startswith("nmem") and target != name and not (target == "nmem" and name != "nmem"):
                out.add(target)
    return out


def graph() -> dict[str, set[str]]:
    known = modules()
    return {name: imports(name, path, known) for name, path in known.items()}


def layer(name: str) -> int:
    best = max(((len(p), i) for i, group in enumerate(LAYERS) for p in group
                if name == p or name.startswith(p + ".")), default=None)
    assert best is not None, f"{name} belongs to no layer: add it to LAYERS"
    return best[1]


def excepted(source: str, target: str) -> bool:
    return any((source == a or source.startswith(a + ".")) and (target == b or target.startswith(b + "."))
               for a, b in EXCEPTIONS)


def test_no_module_imports_a_higher_layer() -> None:
    upward = sorted(f"{a} -> {b}" for a, targets in graph().items() for b in targets
                    if layer(b) > layer(a) and not excepted(a, b))
    assert upward == []


def test_adapters_do_not_import_each_other() -> None:
    def adapter(name: str) -> str | None:
        parts = name.split(".")
        return parts[2] if len(parts) > 3 and parts[1] == "adapters" else None  # adapters/net.py is shared

    crossing = sorted(f"{a} -> {b}" for a, targets in graph().items() for b in targets
                      if adapter(a) and adapter(b) and adapter(a) != adapter(b) and not excepted(a, b))
    assert crossing == []


def test_no_import_cycles() -> None:
    edges = graph()
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def visit(node: str) -> None:  # Tarjan's strongly connected components
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in edges[node]:
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = [stack.pop()]
            while group[-1] != node:
                group.append(stack.pop())
            if len(group) > 1:
                cycles.append(sorted(group))

    for node in edges:
        if node not in index:
            visit(node)
    unexpected = [c for c in cycles if not all(m.startswith(CYCLES_ALLOWED_IN) for m in c)]
    assert unexpected == []


def test_the_checks_see_function_local_imports() -> None:
    edges = graph()
    assert "nmem.adapters.hooks.remote" in edges["nmem.adapters.hooks.run"]  # imported inside a function
    assert "nmem.service.api" not in edges["nmem.service.base"]             # only under TYPE_CHECKING
