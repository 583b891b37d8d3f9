"""The package's import graph: modules, import cycles, layer violations, long modules.

    .venv/bin/python scripts/import_graph.py            # a readable report
    .venv/bin/python scripts/import_graph.py --json     # the same as one JSON object

Every ``import`` statement counts, also those inside functions (a lazy import is still
a dependency). ``from P import name`` is an edge to the module ``P.name`` when that is a
module of the package, else to ``P``. Layers go one way; a module may import modules of
its own group and of earlier layers only (two groups of one layer, such as training and
sampling, may not import each other).

An import inside a function hides a dependency from the top of its module, so each one
needs a reason: a comment on its line, or on the comment line(s) directly above its block
of imports (consecutive but for blank lines), starting with one of ``REASON_TAGS``::

    # optional: ray is an extra; `compgen sample` runs without it
    import ray

Exit status 1 on any cycle, layer violation, module outside the layer table, module
longer than ``--max-lines``, or import inside a function without a reason.
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import sys
import tokenize
from pathlib import Path

# (layer, {group: packages}) from the bottom up: every package (or top-level module) of
# compgen in the one layer where it lives, and no module placed apart from its package
LAYERS: list[tuple[str, dict[str, tuple[str, ...]]]] = [
    ("errors", {"errors": ("compgen.__init__", "compgen.errors")}),
    ("io", {"io": ("compgen.io",)}),
    ("system", {"system": ("compgen.system",), "configs": ("compgen.configs",)}),
    ("device", {"device": ("compgen.device",)}),
    ("data", {"data": ("compgen.data",)}),
    ("neighborhoods", {"neighborhoods": ("compgen.neighborhoods",),
                       "augment": ("compgen.augment",)}),
    ("decoding", {"decoding": ("compgen.decoding",)}),
    ("models", {"models": ("compgen.models",), "lm": ("compgen.lm",)}),
    ("training", {"training": ("compgen.training",)}),
    ("runtimes", {"runtimes": ("compgen.runtimes",)}),
    ("sampling", {"sampling": ("compgen.sampling",), "export": ("compgen.export",)}),
    ("evaluation", {"evaluation": ("compgen.evaluation",)}),
    ("pipelines", {"pipelines": ("compgen.pipelines",)}),
    # the command line and the Python API: two facades over everything below
    ("cli", {"cli": ("compgen.cli", "compgen.__main__"), "api": ("compgen.api",)}),
]


# the package root re-exports the API lazily (on first attribute access), so
# `import compgen` stays light while `compgen.geca` works
FACADE_EDGES = {("compgen", "compgen.api")}

# why an import may sit inside a function: an optional dependency (Ray, KenLM's module,
# ONNX Runtime, onnx, matplotlib, the native build tools), start-up time (`import compgen`,
# `compgen --help` and the ONNX Runtime and C++ paths of `compgen sample` load no torch),
# or an import cycle that moving code cannot break
REASON_TAGS = ("optional", "start-up", "cycle")
REASON = re.compile(r"#\s*(" + "|".join(map(re.escape, REASON_TAGS)) + r"):\s*\S")


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


def deferred_imports(path: Path) -> list[dict]:
    """Every import statement inside a function body, with the tag of its reason (None
    when it has none)."""
    text = path.read_text(encoding="utf-8")
    lines = text.splitlines()
    comments: dict[int, str] = {}
    with path.open(encoding="utf-8") as handle:
        for token in tokenize.generate_tokens(handle.readline):
            if token.type == tokenize.COMMENT:
                comments[token.start[0]] = token.string
    nodes = {id(node): node
             for function in ast.walk(ast.parse(text, str(path)))
             if isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef))
             for node in ast.walk(function) if isinstance(node, (ast.Import, ast.ImportFrom))}
    found: list[dict] = []
    block_reason, block_end = None, -1
    for node in sorted(nodes.values(), key=lambda n: n.lineno):
        end = node.end_lineno or node.lineno
        gap = lines[block_end:node.lineno - 1] if block_end > 0 else ["new"]
        if any(line.strip() for line in gap):  # a new block: its reason is the comment above
            block_reason, above = None, node.lineno - 1
            while above >= 1 and lines[above - 1].strip().startswith("#"):
                match = REASON.match(comments.get(above, ""))
                block_reason = block_reason or (match.group(1) if match else None)
                above -= 1
        own = next((m.group(1) for line in range(node.lineno, end + 1)
                    if (m := REASON.match(comments.get(line, "")))), None)
        found.append({"line": node.lineno, "import": ast.unparse(node),
                      "reason": own or block_reason})
        block_end = end
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
    unexplained, reasons = [], dict.fromkeys(REASON_TAGS, 0)
    for name, path in sorted(modules.items()):
        for found in deferred_imports(path):
            if found["reason"] is None:
                unexplained.append({"module": name, "line": found["line"],
                                    "import": found["import"]})
            else:
                reasons[found["reason"]] += 1
    return {
        "modules": len(modules),
        "edges": sum(len(t) for t in graph.values()),
        "cycles": cycles(graph),
        "layer_violations": violations,
        "unplaced_modules": unplaced,
        "long_modules": long_modules,
        "max_lines": max_lines,
        "deferred_imports_without_reason": unexplained,
        "deferred_imports_by_reason": reasons,
        "largest_modules": dict(sorted(line_counts.items(), key=lambda kv: -kv[1])[:5]),
        "layers": [layer for layer, _ in LAYERS],
    }


def problems(report: dict) -> int:
    return (len(report["cycles"]) + len(report["layer_violations"])
            + len(report["unplaced_modules"]) + len(report["long_modules"])
            + len(report["deferred_imports_without_reason"]))


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
        unexplained = report["deferred_imports_without_reason"]
        print(f"imports inside functions without a reason: {len(unexplained)} (with one: "
              + ", ".join(f"{tag} {n}" for tag, n in report["deferred_imports_by_reason"].items())
              + ")")
        for d in unexplained:
            print(f"  {d['module']} (line {d['line']}): {d['import']}")
        print("largest: " + ", ".join(f"{k} {v}" for k, v in report["largest_modules"].items()))
    return 1 if problems(report) else 0


if __name__ == "__main__":
    sys.exit(main())
