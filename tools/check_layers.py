#!/usr/bin/env python3
"""The layering contract of npa_pulumi, and the check that enforces it (run by
tests/unit/tools/test_layers.py, part of `make test`; `python3 tools/check_layers.py` prints the same report).

    simulator_cli → cli → {sdk, machine} → engine → {components, preflight, output, policies} → {bridge, plan}
        → simulator → {spec, cloud} → kube → runtime

A module may import its own package, and any package of a lower layer. It may not import a higher layer,
nor a sibling of its own layer unless `SIBLING_EDGES` names that edge (and why). `policies` (the
CrossGuard pack, run by the engine in a plugin host of its own) depends only on `ONLY_ALLOWED["policies"]`.
Every import counts: inside functions and `if TYPE_CHECKING:` blocks too. The package graph must have no
cycle, and neither may the module graph inside a package (an import hidden in a function or under
TYPE_CHECKING still ties two modules together). Fences: only the modules of `FENCES[name]` import the
external module `name` (Pulumi's Automation API has one importer); a package of `FACES` is imported from
outside only through its face (its `__init__`), never its modules; `NEVER_IMPORTS` names modules a
package may not import at all; and `ENTRY_POINT_ONLY` names packages nothing outside imports but the
packages it lists: the local simulator and its CLI are reached through their entry points. A package or root
module that is in no layer is an error: decide where it goes (docs/architecture.md
says how) and add it here.

Reads source files only (the standard library's `ast`); imports nothing of npa_pulumi.
"""

from __future__ import annotations

import ast
import os
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PACKAGE = "npa_pulumi"

# Top to bottom. A layer's members may not import each other unless SIBLING_EDGES allows it.
LAYERS: tuple[tuple[str, ...], ...] = (
    # The local cloud's `local-cloud` command group: it uses the CLI's helpers and the simulator; the CLI
    # finds it through the `npa_pulumi.commands` entry point (cli/main.py), so nothing imports it.
    ("simulator_cli",),
    ("cli",),
    # The SDK (a fleet's operations), and setting up a machine for a fleet (`doctor`, `backend init`): both
    # above the engine, neither imports the other.
    ("sdk", "machine"),
    ("engine",),
    ("components", "preflight", "output", "policies"),
    ("bridge", "plan"),
    # The local simulator: it implements the cloud port and runs Kubernetes API servers; the cloud layer
    # finds it through an entry point (cloud/factory.py), and only its own CLI imports it.
    ("simulator",),
    ("spec", "cloud"),
    # Kubernetes API servers: kubeconfigs, a small client, the GPU health gate's reading of a cluster. The
    # local cloud runs API servers and the engine and components read them; it knows nothing of either.
    ("kube",),
    ("runtime",),
)
# The package root's own modules: the version and the error base every layer raises.
ROOT_MODULES: dict[str, str] = {PACKAGE: "runtime", f"{PACKAGE}.errors": "runtime"}
# Allowed imports between members of one layer: (importer, imported) -> why.
SIBLING_EDGES: dict[tuple[str, str], str] = {
    ("output", "preflight"): "the pull-request preview renders preflight's report",
    ("bridge", "plan"): "the bridge materializes recipes whose variable surface plan reads",
}
# Packages that may import only these (besides themselves).
ONLY_ALLOWED: dict[str, frozenset[str]] = {"policies": frozenset({"runtime"})}
# External modules only one subpackage may import: module -> the package prefix that owns it.
FENCES: dict[str, str] = {"pulumi.automation": f"{PACKAGE}.engine.automation"}
# Packages with a public face: outside the package only the package itself is imported (its __init__ says
# what it offers), never one of its modules; inside it, its modules import each other. package -> why.
FACES: dict[str, str] = {
    f"{PACKAGE}.engine.automation": "the Automation API fence is imported through its face "
    f"({PACKAGE}.engine.automation), never its modules",
}
# (importer package prefix, imported module prefix) -> why the importer never imports it.
NEVER_IMPORTS: dict[tuple[str, str], str] = {
    **{
        (f"{PACKAGE}.cli.{module}", f"{PACKAGE}.engine"): "the CLI's fleet commands call the SDK (one typed "
        "request per operation), never the engine around it"
        for module in (
            "deploy_commands",
            "teardown_commands",
            "status_commands",
            "verify_commands",
            "preflight_commands",
            "report_commands",
            "fleet_options",
            "fleet_output",
            "observability",
            "audit_commands",
        )
    },
}
# Packages reached only through their entry points: package -> (the other packages that may import it, why).
# (The simulator's CLI needs no entry here: it is the top layer, which nothing may import.)
ENTRY_POINT_ONLY: dict[str, tuple[tuple[str, ...], str]] = {
    f"{PACKAGE}.simulator": (
        (f"{PACKAGE}.simulator_cli",),
        "the product reaches the local simulator only through its entry points: the `local` cloud adapter "
        "(the cloud port, cloud/factory.py) and the `local-cloud` command (cli/main.py)",
    ),
}
# Source directories outside npa_pulumi/ that install as its subpackages (pyproject.toml package-dir).
MAPPED_DIRS: dict[str, str] = {"components": f"{PACKAGE}.components", "policies": f"{PACKAGE}.policies"}


@dataclass(frozen=True)
class Import:
    source: str  # importing module
    target: str  # imported module (or package)
    path: Path
    line: int


def layer_of(group: str) -> int | None:
    for index, members in enumerate(LAYERS):
        if group in members:
            return index
    return None


def group_of(module: str) -> str | None:
    """The layer member a module belongs to: its npa_pulumi subpackage, or a root module's layer."""
    if module in ROOT_MODULES:
        return ROOT_MODULES[module]
    parts = module.split(".")
    if parts[0] != PACKAGE or len(parts) < 2:
        return None
    return parts[1] if layer_of(parts[1]) is not None else f"?{parts[1]}"


def source_files(repo: Path = REPO) -> Iterator[tuple[str, Path]]:
    """(module name, path) of every module of the installed package, links not followed."""
    roots = [(repo / PACKAGE, PACKAGE), *((repo / d, name) for d, name in MAPPED_DIRS.items())]
    for root, prefix in roots:
        if not root.is_dir():
            continue
        for directory, dirnames, filenames in os.walk(root):  # followlinks=False: the mapped links
            dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
            for name in sorted(filenames):
                if not name.endswith(".py"):
                    continue
                path = Path(directory) / name
                parts = list(path.relative_to(root).with_suffix("").parts)
                if parts[-1] == "__init__":
                    parts = parts[:-1]
                yield ".".join([prefix, *parts]), path


def _resolve_relative(module: str, is_package: bool, level: int, name: str | None) -> str:
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[: len(base) - (level - 1)]
    return ".".join([*base, *([name] if name else [])])


@dataclass(frozen=True)
class ModuleImports:
    """What one module imports, from one parse and one walk of its source (the check reads each file
    once: walking the package's syntax trees is most of its time)."""

    internal: list[Import]  # imports of the package's own modules
    external: list[tuple[str, int]]  # (module, line) of every absolute import of anything


def _import_module_target(node: ast.Call) -> str | None:
    """The module an `import_module("...")` call names, if the call is one."""
    func = node.func
    name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None
    if name != "import_module" or not node.args:
        return None
    first = node.args[0]
    return first.value if isinstance(first, ast.Constant) and isinstance(first.value, str) else None


@dataclass(frozen=True)
class Statement:
    """One import in a module's source: `import a, b` (kind "import"), `from base import a, b` ("from",
    relative bases resolved), or `import_module("a")` ("call")."""

    kind: str
    line: int
    names: tuple[str, ...]
    base: str = ""
    absolute: bool = True  # a `from` without dots


# Each distinct source is parsed and walked once per process (the walk is most of the check's time, and
# tests/unit/tools/test_layers.py checks copies of the package that differ from it in one file).
_statements: dict[tuple[str, bool, str], tuple[Statement, ...]] = {}


def statements(module: str, path: Path) -> tuple[Statement, ...]:
    """The imports of a module's source: also those hidden in functions, under TYPE_CHECKING or through
    import_module."""
    is_package = path.name == "__init__.py"
    text = path.read_text(encoding="utf-8")
    key = (module, is_package, text)
    if key in _statements:
        return _statements[key]
    found: list[Statement] = []
    for node in ast.walk(ast.parse(text, filename=str(path))):
        if isinstance(node, ast.Import):
            found.append(Statement("import", node.lineno, tuple(alias.name for alias in node.names)))
        elif isinstance(node, ast.ImportFrom):
            base = (
                _resolve_relative(module, is_package, node.level, node.module)
                if node.level
                else node.module or ""
            )
            names = tuple(alias.name for alias in node.names)
            found.append(Statement("from", node.lineno, names, base, absolute=not node.level))
        elif isinstance(node, ast.Call):
            named = _import_module_target(node)
            if named:
                found.append(Statement("call", node.lineno, (named,)))
    _statements[key] = result = tuple(found)
    return result


def scan(module: str, path: Path, known: set[str]) -> ModuleImports:
    """The package imports of a module and its absolute imports, `from a import b` counted as both `a`
    and `a.b` (so `from pulumi import automation` is an import of pulumi.automation)."""
    internal: list[Import] = []
    external: list[tuple[str, int]] = []
    for statement in statements(module, path):
        targets: list[str] = []
        if statement.kind == "import":
            targets = list(statement.names)
            external.extend((name, statement.line) for name in statement.names)
        elif statement.kind == "from":
            for name in statement.names:
                submodule = f"{statement.base}.{name}"
                targets.append(submodule if submodule in known else statement.base)
            if statement.absolute and statement.base:
                external.append((statement.base, statement.line))
                external.extend((f"{statement.base}.{name}", statement.line) for name in statement.names)
        else:
            targets = list(statement.names)
        internal.extend(
            Import(module, target, path, statement.line)
            for target in targets
            if target == PACKAGE or target.startswith(f"{PACKAGE}.")
        )
    return ModuleImports(internal, external)


def _within(module: str, prefix: str) -> bool:
    return module == prefix or module.startswith(f"{prefix}.")


def _owning_module(target: str, known: set[str]) -> str | None:
    while target not in known and "." in target:
        target = target.rsplit(".", 1)[0]
    return target if target in known else None


def fence_problems(files: list[tuple[str, Path]], scanned: dict[str, ModuleImports], repo: Path) -> list[str]:
    problems = []
    for module, path in files:
        for target, line in scanned[module].external:
            for fenced, owner in FENCES.items():
                if _within(target, fenced) and not _within(module, owner):
                    where = path.relative_to(repo)
                    problems.append(f"{where}:{line}: {module} imports {fenced}: only {owner} may")
    return sorted(set(problems))


def module_cycle_problems(
    files: list[tuple[str, Path]], scanned: dict[str, ModuleImports], known: set[str]
) -> list[str]:
    """Cycles of the module graph inside each package (imports of the package itself excluded: a
    submodule importing its package's `__init__` is how Python loads it anyway)."""
    edges: dict[str, set[str]] = {}
    for module, _ in files:
        for imp in scanned[module].internal:
            target = _owning_module(imp.target, known)
            if target is None or target == module or module.startswith(f"{target}."):
                continue
            edges.setdefault(module, set()).add(target)
    return [f"module cycle among: {', '.join(cycle[:-1])}" for cycle in cycles(edges)]


def violations(repo: Path = REPO) -> list[str]:
    files = list(source_files(repo))
    known = {module for module, _ in files}
    scanned = {module: scan(module, path, known) for module, path in files}
    problems: list[str] = []
    edges: dict[str, set[str]] = {}
    for module, path in files:
        source = group_of(module)
        where = path.relative_to(repo)
        if source is None or source.startswith("?"):
            problems.append(f"{where}: {module} is in no layer of the contract (tools/check_layers.py)")
            continue
        for imp in scanned[module].internal:
            target = group_of(imp.target)
            if target is None or target.startswith("?"):
                problems.append(f"{where}:{imp.line}: {module} imports {imp.target}, which is in no layer")
                continue
            for (importer, imported), why in NEVER_IMPORTS.items():
                if _within(module, importer) and _within(imp.target, imported):
                    problems.append(f"{where}:{imp.line}: {module} imports {imp.target}: {why}")
            for package, (importers, why) in ENTRY_POINT_ONLY.items():
                if _within(imp.target, package) and not any(
                    _within(module, p) for p in (package, *importers)
                ):
                    problems.append(f"{where}:{imp.line}: {module} imports {imp.target}: {why}")
            for package, why in FACES.items():
                if imp.target.startswith(f"{package}.") and not _within(module, package):
                    problems.append(f"{where}:{imp.line}: {module} imports {imp.target}: {why}")
            if target == source:
                continue
            edges.setdefault(source, set()).add(target)
            reason = _forbidden(source, target)
            if reason:
                problems.append(f"{where}:{imp.line}: {module} imports {imp.target}: {reason}")
    problems.extend(f"package cycle among: {', '.join(cycle[:-1])}" for cycle in cycles(edges))
    problems.extend(module_cycle_problems(files, scanned, known))
    problems.extend(fence_problems(files, scanned, repo))
    return problems


def _forbidden(source: str, target: str) -> str | None:
    allowed = ONLY_ALLOWED.get(source)
    if allowed is not None and target not in allowed:
        return f"{source} may import only {', '.join(sorted(allowed))}"
    source_layer, target_layer = layer_of(source), layer_of(target)
    assert source_layer is not None and target_layer is not None
    if target_layer < source_layer:
        return f"{source} may not import {target}, a higher layer"
    if target_layer == source_layer and (source, target) not in SIBLING_EDGES:
        return f"{source} and {target} are siblings of one layer; they do not import each other"
    return None


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The package graph's cycles, as its strongly connected components of more than one package
    (each sorted, then closed: `[a, b, a]`). Tarjan's algorithm; the graph is tiny."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def connect(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(edges.get(node, ())):
            if nxt not in index:
                connect(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component: list[str] = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                ordered = sorted(component)
                components.append([*ordered, ordered[0]])

    for node in sorted(set(edges) | {n for targets in edges.values() for n in targets}):
        if node not in index:
            connect(node)
    return sorted(components)


def main(argv: Iterable[str] = ()) -> int:
    problems = violations()
    for problem in problems:
        print(problem)
    if problems:
        print(f"{len(problems)} layering problem(s); see tools/check_layers.py", file=sys.stderr)
        return 1
    print("layers: every import points down")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
