"""No import circle between modules anywhere in trioka's packages (imports under TYPE_CHECKING
aside): import-linter's contracts keep the arrows between packages and rooms, this keeps every
file importing downward. A failure names one circle, module by module."""

from __future__ import annotations

import grimp

PACKAGES = ("protocol", "storage", "raft", "zkstore", "controller", "broker", "client", "deploy")
PACKAGES_WITH_ANALYTICS = (*PACKAGES, "analytics")


def find_circle(graph: grimp.ImportGraph) -> list[str] | None:
    """One import circle of `graph`'s modules (a list ending where it starts), or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(module: str) -> list[str] | None:
        state[module] = 1
        path.append(module)
        for imported in sorted(graph.find_modules_directly_imported_by(module)):
            if state.get(imported) == 1:
                return [*path[path.index(imported) :], imported]
            if imported not in state:
                found = visit(imported)
                if found is not None:
                    return found
        path.pop()
        state[module] = 2
        return None

    for module in sorted(graph.modules):
        if module not in state:
            found = visit(module)
            if found is not None:
                return found
    return None


def test_no_import_circle_between_modules() -> None:
    graph = grimp.build_graph(*PACKAGES_WITH_ANALYTICS, exclude_type_checking_imports=True)
    circle = find_circle(graph)
    assert circle is None, "import circle: " + " -> ".join(circle or [])


def test_a_circle_is_found_when_there_is_one() -> None:
    graph = grimp.ImportGraph()
    for module in ("a", "a.b", "a.c", "a.d"):
        graph.add_module(module)
    graph.add_import(importer="a.b", imported="a.c")
    graph.add_import(importer="a.c", imported="a.d")
    assert find_circle(graph) is None
    graph.add_import(importer="a.d", imported="a.b")
    assert find_circle(graph) == ["a.b", "a.c", "a.d", "a.b"]
