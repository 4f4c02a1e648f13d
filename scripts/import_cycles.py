"""Lists import cycles between modules of orchestrator/ (exit 1 when there is one).

Every import counts, those under TYPE_CHECKING and inside functions too: a
cycle is a knot in the design even when Python tolerates it at run time.
``from pkg import sub`` counts as importing the submodule, not the package.
"""

from __future__ import annotations

import ast
import pathlib
import sys


def graph(root: pathlib.Path) -> dict[str, set[str]]:
    trees = {}
    for path in root.rglob("*.py"):
        trees[".".join(path.with_suffix("").parts).removesuffix(".__init__")] = ast.parse(
            path.read_text()
        )
    mods: dict[str, set[str]] = {}
    for name, tree in trees.items():
        deps: set[str] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and not node.level:
                for alias in node.names:
                    sub = f"{node.module}.{alias.name}"
                    deps.add(sub if sub in trees else node.module)
            elif isinstance(node, ast.Import):
                deps.update(alias.name for alias in node.names)
        mods[name] = {d for d in deps if d in trees and d != name}
    return mods


def cycles(mods: dict[str, set[str]]) -> list[list[str]]:
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in mods[v]:
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
                found.append(sorted(comp))

    sys.setrecursionlimit(10_000)
    for v in sorted(mods):
        if v not in index:
            visit(v)
    return found


if __name__ == "__main__":
    knots = cycles(graph(pathlib.Path("orchestrator")))
    for knot in knots:
        print(" <-> ".join(knot))
    print(f"{len(knots)} import cycle(s)")
    sys.exit(1 if knots else 0)
