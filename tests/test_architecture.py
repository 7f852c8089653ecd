"""The package's structure: no import cycles, layers import downwards only.

Every ``import``/``from ... import`` inside ``prism_analytic/`` is read with :mod:`ast`
(function-level imports included: a lazy import is still a dependency), resolved to a module
of the package, and the graph is checked with networkx.
"""

from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx
import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "prism_analytic"

#: Layers, lowest first: a module may import its own layer or lower ones, never higher.
LAYERS = [
    {"_checks", "policy", "datasets", "plotting", "progress"},
    {"distributions", "operations", "evt"},
    {"graph", "schedules"},
    {"engines"},
    {"workload"},
]


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _exists(module: str) -> bool:
    path = PACKAGE.parent / Path(*module.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def import_graph() -> nx.DiGraph:
    """Edges module -> imported module, within the package."""
    graph = nx.DiGraph()
    for path in PACKAGE.rglob("*.py"):
        name = _module_name(path)
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        graph.add_node(name)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[: len(package.split(".")) - node.level + 1]
                    target = ".".join(base + ([node.module] if node.module else []))
                else:
                    target = node.module or ""
                # "from . import x" imports the submodule x when there is one
                subs = [f"{target}.{a.name}" for a in node.names if _exists(f"{target}.{a.name}")]
                targets = subs or [target]
            for target in targets:
                if target.startswith("prism_analytic") and target != name:
                    graph.add_edge(name, target)
    return graph


def _top(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def test_the_walker_sees_the_package():
    graph = import_graph()
    assert "prism_analytic.engines.predict" in graph
    assert graph.number_of_edges() > 50


def test_no_import_cycles():
    graph = import_graph()
    # a package importing its own submodules (its __init__ re-exporting) is not a cycle
    graph.remove_edges_from(
        [(a, b) for a, b in graph.edges if b.startswith(a + ".") and _exists(b)]
    )
    cycles = sorted(nx.simple_cycles(graph), key=len)
    assert not cycles, "import cycles:\n" + "\n".join(" -> ".join(c) for c in cycles[:10])


@pytest.mark.parametrize("low", range(len(LAYERS)))
def test_lower_layers_do_not_import_higher_ones(low):
    graph = import_graph()
    higher = set().union(*LAYERS[low + 1 :])
    bad = [(a, b) for a, b in graph.edges if _top(a) in LAYERS[low] and _top(b) in higher]
    assert not bad, f"layer {sorted(LAYERS[low])} imports upwards: {bad}"
