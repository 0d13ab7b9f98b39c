"""The package layout ARCHITECTURE.md describes: envmatrix/ holds packages and a few small shared modules only."""

from __future__ import annotations

from pathlib import Path

import envmatrix

# Top-level modules every layer may import (the bottom of .importlinter's layers); anything else at the top
# of envmatrix/ belongs in a package of its layer (a command in cli/, orchestration in app/, and so on).
SHARED_MODULES = {
    "__init__.py",  # the version
    "__main__.py",  # python -m envmatrix
    "errors.py",  # the error types and exit codes of every command
    "results.py",  # the one result schema
    "paths.py",  # where packaged data is found and outputs go
    "registry.py",  # the one plugin registry of every family
    "boundary.py",  # the process boundary's types (ProcessSpec/ProcessOutcome, rank report files, the echoed env), both sides
    "values.py",  # the one validation layer: every user value a parser reads, named by key in a one-line error
    "interrupts.py",  # a Ctrl-C noted by the handler, raised again where a finalizer would have dropped it
}


def test_top_level_holds_only_packages_and_the_shared_modules():
    root = Path(envmatrix.__file__).parent
    modules = {p.name for p in root.glob("*.py")}
    assert modules - SHARED_MODULES == set(), "move these into the package of their layer (see ARCHITECTURE.md)"
    assert SHARED_MODULES - modules == set(), "a shared module is gone: drop it from SHARED_MODULES"
    packages = [p for p in root.iterdir() if p.is_dir() and not p.name.startswith(("_", "."))]
    assert packages and all((p / "__init__.py").is_file() for p in packages), "every package has an __init__.py"


# ---- no import cycle between envmatrix's packages -------------------------------------------------------------

# Cycles that other work in flight removes; each names that work. An entry may only shrink: a cycle is excused when
# its packages are a subset of one entry, and an entry no cycle needs any more fails below, so it is dropped.
KNOWN_CYCLES: set[frozenset[str]] = set()  # none left: the engine took the runner, boundary.py the process records


def package_graph() -> dict[str, dict[str, list[tuple[str, str]]]]:
    """``{package: {imported package: [(importing module, imported module), ...]}}`` over envmatrix's packages.

    Counted: every ``import`` grimp finds in a module's source, both those run at module import time and the lazy
    ones inside functions (a lazy import is a real dependency, only deferred). Not counted: imports under
    ``if TYPE_CHECKING:`` (annotations only; .importlinter excludes them the same way).
    """
    import grimp

    graph = grimp.build_graph("envmatrix", exclude_type_checking_imports=True)

    def package(module: str) -> str:
        return ".".join(module.split(".")[:2])

    edges: dict[str, dict[str, list[tuple[str, str]]]] = {}
    for module in sorted(graph.modules):
        for imported in sorted(graph.find_modules_directly_imported_by(module)):
            a, b = package(module), package(imported)
            if imported.startswith("envmatrix.") and a != b:
                edges.setdefault(a, {}).setdefault(b, []).append((module, imported))
    return edges


def strongly_connected(edges: dict[str, dict[str, list]]) -> list[set[str]]:
    """Tarjan's components of more than one package: each is one or more import cycles."""
    nodes = sorted(set(edges) | {b for targets in edges.values() for b in targets})
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[set[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(edges.get(v, {})):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while True:
                w = stack.pop()
                component.add(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(component)

    for v in nodes:
        if v not in index:
            visit(v)
    return found


def cycle_chain(component: set[str], edges: dict[str, dict[str, list[tuple[str, str]]]], start: str) -> str:
    """The shortest cycle through ``start`` inside the component, each step named by the module import that makes it."""
    paths = {start: [start]}
    frontier = [start]
    while frontier:  # breadth first: the shortest way back to start
        nxt = []
        for v in frontier:
            for w in sorted(edges.get(v, {})):
                if w == start:
                    path = paths[v] + [start]
                    return " -> ".join(
                        f"{a} ({edges[a][b][0][0]} imports {edges[a][b][0][1]})" for a, b in zip(path, path[1:])
                    ) + f" -> {start}"
                if w in component and w not in paths:
                    paths[w] = paths[v] + [w]
                    nxt.append(w)
        frontier = nxt
    raise AssertionError(f"{sorted(component)}: not a cycle")


def cycle_chains(component: set[str], edges: dict[str, dict[str, list[tuple[str, str]]]]) -> list[str]:
    """A chain through every package of the component (one component can hold several cycles), each cycle once."""
    chains: dict[frozenset, str] = {}
    for start in sorted(component):
        chain = cycle_chain(component, edges, start)
        chains.setdefault(frozenset(part.split(" (")[0] for part in chain.split(" -> ")), chain)
    return list(chains.values())


def test_strongly_connected_finds_cycles_and_chains_name_them():
    edges = {"p.a": {"p.b": [("p.a.x", "p.b.y")]}, "p.b": {"p.c": [("p.b.y", "p.c.z")]},
             "p.c": {"p.a": [("p.c.z", "p.a.x")]}, "p.d": {"p.a": [("p.d.w", "p.a.x")]}}
    assert strongly_connected(edges) == [{"p.a", "p.b", "p.c"}]
    assert cycle_chains({"p.a", "p.b", "p.c"}, edges) == [
        "p.a (p.a.x imports p.b.y) -> p.b (p.b.y imports p.c.z) -> p.c (p.c.z imports p.a.x) -> p.a"]
    edges["p.b"]["p.a"] = [("p.b.v", "p.a.x")]  # a second cycle in the same component is printed too
    assert cycle_chains({"p.a", "p.b", "p.c"}, edges) == [
        "p.a (p.a.x imports p.b.y) -> p.b (p.b.v imports p.a.x) -> p.a",
        "p.c (p.c.z imports p.a.x) -> p.a (p.a.x imports p.b.y) -> p.b (p.b.y imports p.c.z) -> p.c"]
    del edges["p.b"]["p.a"]
    del edges["p.c"]
    assert strongly_connected(edges) == []


def test_no_import_cycle_between_packages():
    edges = package_graph()
    cycles = [c for c in strongly_connected(edges) if not any(c <= known for known in KNOWN_CYCLES)]
    assert not cycles, "import cycles between envmatrix's packages (move the shared piece down a layer):\n" + "\n".join(
        chain for c in cycles for chain in cycle_chains(c, edges))


def test_every_known_cycle_is_still_there():
    components = strongly_connected(package_graph())
    stale = [sorted(known) for known in KNOWN_CYCLES if not any(c <= known for c in components)]
    assert not stale, f"these cycles are gone: drop them from KNOWN_CYCLES: {stale}"


# Calls that create a process. The launchers' shim is a rank-side process and forks through the same module.
_STARTS = {("subprocess", "Popen"), ("subprocess", "run"), ("subprocess", "call"), ("subprocess", "check_call"),
           ("subprocess", "check_output"), ("os", "fork"), ("os", "forkpty"), ("os", "posix_spawn"),
           ("os", "posix_spawnp"), ("os", "system"), ("os", "popen"), ("os", "execv"), ("os", "execve"),
           ("os", "execvp"), ("os", "execvpe"), ("os", "spawnv"), ("multiprocessing", "Process")}


def process_starts(source: str) -> list[str]:
    import ast

    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and isinstance(node.func.value, ast.Name):
            if (node.func.value.id, node.func.attr) in _STARTS:
                found.append(f"{node.func.value.id}.{node.func.attr} (line {node.lineno})")
    return found


def test_process_starts_are_found():
    assert process_starts("import os, subprocess\nsubprocess.Popen(['x'])\nos.fork()\nos.getpid()\n") == [
        "subprocess.Popen (line 2)", "os.fork (line 3)"]


def test_only_execution_processes_starts_processes():
    root = Path(envmatrix.__file__).parent
    offenders = {str(p.relative_to(root)): found for p in sorted(root.rglob("*.py"))
                 if p != root / "execution" / "processes.py" and (found := process_starts(p.read_text()))}
    assert not offenders, f"start processes through envmatrix/execution/processes.py: {offenders}"
