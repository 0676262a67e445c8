"""The package keeps its shape: no import circle between its modules, layers that point one way (the
memory layer never imports the session layer, the CLI or the runner's helpers), and no module reaching
into another's private names (imported ``_names``, or ``obj._field`` on anything but ``self``/``cls``).

Every import counts, also those inside functions and ``if TYPE_CHECKING:`` blocks: a circle hidden in a
function is still a circle in the design.
"""

from __future__ import annotations

import ast
from pathlib import Path

import sessionmem

PACKAGE_DIR = Path(sessionmem.__file__).parent
SESSION_DIR = PACKAGE_DIR / "session"


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE_DIR.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def all_modules() -> dict[str, Path]:
    return {module_name(path): path for path in sorted(PACKAGE_DIR.rglob("*.py"))}


def imported_names(path: Path, name: str | None = None) -> list[tuple[str, str | None, int]]:
    """``(module, name or None, line)`` for every import in ``path`` (module ``name``), relative ones
    made absolute."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    name = name or module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: list[tuple[str, str | None, int]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.extend((alias.name, None, node.lineno) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parts, *([node.module] if node.module else [])])
            found.extend((base, alias.name, node.lineno) for alias in node.names)
    return found


def dependencies(path: Path, modules: dict[str, Path]) -> set[str]:
    """The package modules ``path`` imports (``from pkg import mod`` counts as importing ``pkg.mod``)."""
    out = set()
    for base, name, _ in imported_names(path):
        target = f"{base}.{name}" if name is not None and f"{base}.{name}" in modules else base
        if target in modules and target != module_name(path):
            out.add(target)
    return out


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import circle in ``graph`` as a path that ends where it starts, or None."""
    visiting: list[str] = []
    done: set[str] = set()

    def visit(node: str) -> list[str] | None:
        if node in visiting:
            return [*visiting[visiting.index(node) :], node]
        if node in done:
            return None
        visiting.append(node)
        for nxt in sorted(graph.get(node, ())):
            cycle = visit(nxt)
            if cycle is not None:
                return cycle
        visiting.pop()
        done.add(node)
        return None

    for start in sorted(graph):
        cycle = visit(start)
        if cycle is not None:
            return cycle
    return None


def test_the_checker_finds_a_circle_through_a_function_level_import(tmp_path: Path) -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert find_cycle(graph) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None
    source = tmp_path / "mod.py"
    source.write_text("def f():\n    from . import runner\n    return runner\n")
    assert imported_names(source, "sessionmem.session.mod") == [("sessionmem.session", "runner", 2)]


def test_no_import_circle_between_the_session_modules() -> None:
    modules = all_modules()
    session = {name: path for name, path in modules.items() if path.parent == SESSION_DIR}
    assert len(session) > 15
    graph = {name: dependencies(path, modules) & set(session) for name, path in session.items()}
    assert find_cycle(graph) is None, " -> ".join(find_cycle(graph) or [])


def test_no_import_circle_anywhere_in_the_package() -> None:
    modules = all_modules()
    assert len(modules) > 60
    graph = {name: dependencies(path, modules) for name, path in modules.items()}
    assert find_cycle(graph) is None, " -> ".join(find_cycle(graph) or [])


def test_the_memory_layer_knows_nothing_of_sessions() -> None:
    # DESIGN: session uses memory; memory knows nothing of sessions except transcript files on disk.
    above = (
        "sessionmem.session",
        "sessionmem.cli",
        "sessionmem.hooks",
        "sessionmem.runs.recorded",
        "sessionmem.runs.walkthrough",
    )
    modules = all_modules()
    offenders = [
        f"{name} imports {target}"
        for name, path in modules.items()
        if name.startswith("sessionmem.memory")
        for target in sorted(dependencies(path, modules))
        if any(target == upper or target.startswith(upper + ".") for upper in above)
    ]
    assert offenders == []


def _is_private(name: str) -> bool:
    """``_name`` is private; a dunder such as ``__version__`` is the module's public face."""
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def test_no_module_imports_another_modules_private_names() -> None:
    offenders = [
        f"{module_name(path)}:{line} imports {name} from {base}"
        for path in all_modules().values()
        for base, name, line in imported_names(path)
        if base.startswith("sessionmem") and name is not None and _is_private(name)
    ]
    assert offenders == []


def test_session_modules_touch_only_their_own_private_fields() -> None:
    offenders = []
    for path in sorted(SESSION_DIR.glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if not isinstance(node, ast.Attribute):
                continue
            private = node.attr.startswith("_") and not node.attr.startswith("__")
            own = isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")
            if private and not own:
                offenders.append(f"{path.name}:{node.lineno} {ast.unparse(node)}")
    assert offenders == []
