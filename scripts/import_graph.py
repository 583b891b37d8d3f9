"""The package's import graph: modules, import cycles, layer violations, long modules.

    .venv/bin/python scripts/import_graph.py            # a readable report
    .venv/bin/python scripts/import_graph.py --json     # the same as one JSON object

Every ``import`` statement counts, also those inside functions (a lazy import is still
a dependency). ``from P import name`` is an edge to the module ``P.name`` when that is a
module of the package, else to ``P``. Layers go one way; a module may import modules of
its own group and of earlier layers only (two groups of one layer, such as training and
sampling, may not import each other). Exit status 1 on any cycle, layer violation,
module outside the layer table, or module longer than ``--max-lines``.
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
from pathlib import Path

# (layer, {group: module prefixes}) from the bottom up
LAYERS: list[tuple[str, dict[str, tuple[str, ...]]]] = [
    ("base", {"base": ("compgen.__init__", "compgen.errors", "compgen.io", "compgen.device",
                       "compgen.system", "compgen.configs")}),
    ("data", {"data": ("compgen.data", "compgen.neighborhoods", "compgen.augment")}),
    # neural models, KenLM n-gram models, the decoding core and the metrics every trainer
    # and evaluator shares; the sampling options, which a generator preset's [sample] holds
    ("models", {"models": ("compgen.models", "compgen.lm", "compgen.decoding",
                           "compgen.evaluation.metrics", "compgen.sampling.options")}),
    ("training", {"training": ("compgen.training",)}),
    # what reads and writes an export folder: its format, the graphs traced into it
    ("graphs", {"graphs": ("compgen.export.artifact", "compgen.export.card",
                           "compgen.export.graphs", "compgen.export.predictor_graphs",
                           "compgen.export.inflection_graphs",
                           "compgen.export.torchscript", "compgen.export.onnx_export",
                           "compgen.export.ties",
                           "compgen.export.reduced", "compgen.export.compiled")}),
    ("sampling", {"sampling": ("compgen.sampling",)}),
    ("export", {"export": ("compgen.export",)}),
    # the machine report probes every part (torch, ONNX Runtime, KenLM), so it sits high
    ("pipelines", {"pipelines": ("compgen.evaluation", "compgen.pipelines"),
                   "report": ("compgen.system.environment",)}),
    # the command line and the Python API: two facades over everything below
    ("cli", {"cli": ("compgen.cli", "compgen.__main__"), "api": ("compgen.api",)}),
]


# the package root re-exports the API lazily (on first attribute access), so
# `import compgen` stays light while `compgen.geca` works
FACADE_EDGES = {("compgen", "compgen.api")}


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__" and len(parts) > 1:
        parts = parts[:-1]
    return ".".join(parts)


def find_modules(package_dir: Path) -> dict[str, Path]:
    root = package_dir.parent
    return {module_name(p, root): p for p in sorted(package_dir.rglob("*.py"))}


def _resolve(node: ast.ImportFrom, current: str, is_package: bool) -> str:
    if not node.level:
        return node.module or ""
    base = current.split(".")
    base = base if is_package else base[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _owning_module(name: str, modules: dict[str, Path]) -> str | None:
    while name:
        if name in modules:
            return name
        name = name.rpartition(".")[0]
    return None


def imports_of(name: str, path: Path, modules: dict[str, Path]) -> list[tuple[str, int]]:
    """(imported module of the package, line) for every import statement of ``path``."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    is_package = path.name == "__init__.py"
    found = []
    for node in ast.walk(tree):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            source = _resolve(node, name, is_package)
            targets = [f"{source}.{alias.name}" if f"{source}.{alias.name}" in modules else source
                       for alias in node.names]
        for target in targets:
            owner = _owning_module(target, modules)
            if owner is not None and owner != name:
                found.append((owner, node.lineno))
    return found


def layer_of(name: str) -> tuple[int, str, str] | None:
    """(layer index, layer name, group) of a module, by its longest listed prefix."""
    best = None
    for index, (layer, groups) in enumerate(LAYERS):
        for group, prefixes in groups.items():
            for prefix in prefixes:
                key = "compgen" if prefix == "compgen.__init__" else prefix
                exact_root = prefix == "compgen.__init__"
                hit = name == key if exact_root else (name == key or name.startswith(key + "."))
                if hit and (best is None or len(key) > best[0]):
                    best = (len(key), (index, layer, group))
    return best[1] if best else None


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return sorted(found)


def analyse(package_dir: Path, max_lines: int = 600) -> dict:
    modules = find_modules(package_dir)
    graph: dict[str, set[str]] = {name: set() for name in modules}
    lines_of_edge: dict[tuple[str, str], int] = {}
    for name, path in modules.items():
        for target, line in imports_of(name, path, modules):
            graph[name].add(target)
            lines_of_edge.setdefault((name, target), line)
    violations, unplaced = [], []
    for name in sorted(modules):
        source = layer_of(name)
        if source is None:
            unplaced.append(name)
            continue
        for target in sorted(graph[name]):
            dest = layer_of(target)
            if dest is None:
                continue
            if (name, target) in FACADE_EDGES:
                continue
            upward = dest[0] > source[0]
            sideways = dest[0] == source[0] and dest[2] != source[2]
            if upward or sideways:
                violations.append({
                    "module": name, "imports": target,
                    "line": lines_of_edge[(name, target)],
                    "rule": f"{source[1]}/{source[2]} may not import {dest[1]}/{dest[2]}"})
    line_counts = {name: len(path.read_text(encoding="utf-8").splitlines())
                   for name, path in modules.items()}
    long_modules = {name: n for name, n in sorted(line_counts.items()) if n > max_lines}
    return {
        "modules": len(modules),
        "edges": sum(len(t) for t in graph.values()),
        "cycles": cycles(graph),
        "layer_violations": violations,
        "unplaced_modules": unplaced,
        "long_modules": long_modules,
        "max_lines": max_lines,
        "largest_modules": dict(sorted(line_counts.items(), key=lambda kv: -kv[1])[:5]),
        "layers": [layer for layer, _ in LAYERS],
    }


def problems(report: dict) -> int:
    return (len(report["cycles"]) + len(report["layer_violations"])
            + len(report["unplaced_modules"]) + len(report["long_modules"]))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    here = Path(__file__).resolve().parents[1]
    parser.add_argument("package", nargs="?", default=str(here / "compgen"),
                        help="the package folder (default: this repository's compgen/)")
    parser.add_argument("--max-lines", type=int, default=600, help="longest module allowed")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args(argv)
    package_dir = Path(args.package)
    if not (package_dir / "__init__.py").is_file():
        print(f"error: {package_dir}: not a Python package (no __init__.py)", file=sys.stderr)
        return 2
    report = analyse(package_dir, args.max_lines)
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print(f"{report['modules']} modules, {report['edges']} import edges; "
              f"layers (bottom up): {' -> '.join(report['layers'])}")
        print(f"cycles: {len(report['cycles'])}")
        for component in report["cycles"]:
            print("  " + " <-> ".join(component))
        print(f"layer violations: {len(report['layer_violations'])}")
        for v in report["layer_violations"]:
            print(f"  {v['module']} (line {v['line']}) imports {v['imports']}: {v['rule']}")
        print(f"modules in no layer: {len(report['unplaced_modules'])}")
        for name in report["unplaced_modules"]:
            print(f"  {name}")
        print(f"modules over {report['max_lines']} lines: {len(report['long_modules'])}")
        for name, n in report["long_modules"].items():
            print(f"  {name}: {n}")
        print("largest: " + ", ".join(f"{k} {v}" for k, v in report["largest_modules"].items()))
    return 1 if problems(report) else 0


if __name__ == "__main__":
    sys.exit(main())
