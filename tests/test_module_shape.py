"""The package keeps its shape: no import circle between its modules; rooms (folders by job) that import
one way only, from the bottom up (:data:`LAYERS`: memory never imports sessions, the CLI and the server
sit on top); rooms small enough to find one's way in, with no two module names a reader would mix up;
and no module reaching into another's private names (imported ``_names``, or ``obj._field`` on anything
but ``self``/``cls``).

Every import counts, also those inside functions and ``if TYPE_CHECKING:`` blocks: a circle hidden in a
function is still a circle in the design.
"""

from __future__ import annotations

import ast
from pathlib import Path

import sessionmem

PACKAGE_DIR = Path(sessionmem.__file__).parent


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


def test_no_import_circle_anywhere_in_the_package() -> None:
    modules = all_modules()
    assert len(modules) > 60
    graph = {name: dependencies(path, modules) for name, path in modules.items()}
    assert find_cycle(graph) is None, " -> ".join(find_cycle(graph) or [])


# The rooms from the bottom up: a module imports only from its own room or rooms below it. A module
# belongs to the room of the longest prefix that names it. The package's own ``__init__`` (the lazy
# public facade) stands above every room.
LAYERS: tuple[tuple[str, ...], ...] = (
    (
        "sessionmem.errors",
        "sessionmem.clock",
        "sessionmem.messages",
        "sessionmem.tokens",
        "sessionmem.pathnames",
        "sessionmem.dsn",
        "sessionmem.safefs",
        "sessionmem.privacy",
        "sessionmem.config_base",
        "sessionmem.config",
        "sessionmem.model.reasoning",
        "sessionmem.model.noreply",
        "sessionmem.hooks",
        "sessionmem.lazy",
    ),
    ("sessionmem.tools", "sessionmem.model"),
    ("sessionmem.memory.embed",),
    ("sessionmem.memory.store",),
    ("sessionmem.memory.search", "sessionmem.memory.sync"),
    ("sessionmem.memory.tools",),
    ("sessionmem.memory",),
    ("sessionmem.session.stores",),
    ("sessionmem.session.turn",),
    ("sessionmem.session.lifecycle",),
    ("sessionmem.session",),
    ("sessionmem.context", "sessionmem.assembly", "sessionmem.runs", "sessionmem.testing"),
    ("sessionmem.server",),
    ("sessionmem.cli",),
)


def layer_of(module: str) -> int:
    """The index in :data:`LAYERS` of ``module``'s room (the longest prefix that names it)."""
    best, found = -1, None
    for index, rooms in enumerate(LAYERS):
        for room in rooms:
            if (module == room or module.startswith(room + ".")) and len(room) > best:
                best, found = len(room), index
    if found is None:
        raise AssertionError(f"{module} is in no room of LAYERS: add it where it belongs")
    return found


def test_the_checker_places_a_module_in_its_longest_room() -> None:
    assert layer_of("sessionmem.memory.index") == layer_of("sessionmem.memory")
    assert layer_of("sessionmem.memory.store.meta") < layer_of("sessionmem.memory.search.ranking")
    assert layer_of("sessionmem.session.runner") > layer_of("sessionmem.session.turn.gate")


def test_every_import_points_down_the_rooms() -> None:
    # DESIGN: sessions use memory; memory knows nothing of sessions; the CLI and the server sit on top.
    modules = all_modules()
    offenders = [
        f"{name} imports {target}"
        for name, path in modules.items()
        if name != "sessionmem"
        for target in sorted(dependencies(path, modules))
        if target != "sessionmem" and layer_of(target) > layer_of(name)
    ]
    assert offenders == []


def test_rooms_stay_small_and_names_say_which_is_which() -> None:
    modules = all_modules()
    folders: dict[Path, list[str]] = {}
    for path in modules.values():
        if path.name != "__init__.py":
            folders.setdefault(path.parent, []).append(path.stem)
    crowded = {str(folder.relative_to(PACKAGE_DIR.parent)): len(names) for folder, names in folders.items()}
    assert {folder: n for folder, n in crowded.items() if n > MAX_MODULES_PER_FOLDER} == {}
    # cli/ names its modules after the commands they implement (cli/memory.py is `sessionmem memory`)
    stems = sorted(
        (path.stem, str(path.relative_to(PACKAGE_DIR.parent)))
        for path in modules.values()
        if path.name not in ("__init__.py", "__main__.py") and path.parent.name != "cli"
    )
    twins = [(a[1], b[1]) for i, a in enumerate(stems) for b in stems[i + 1 :] if are_twins(a[0], b[0])]
    assert twins == []


MAX_MODULES_PER_FOLDER = 15


def are_twins(a: str, b: str) -> bool:
    """Two module names a reader would mix up: the same name in two folders, one the other plus a short
    suffix (``store``/``stores``, ``index``/``indexer``, ``embed``/``embedding``), or the same words in
    another order (``sqlite_store``/``store_sqlite``)."""
    if a == b:
        return True
    short, long = sorted((a, b), key=len)
    if long.startswith(short) and len(long) - len(short) <= 4 and long[len(short)] != "_":
        return True
    return sorted(a.split("_")) == sorted(b.split("_"))


def test_the_twin_check_catches_the_names_that_were_mixed_up() -> None:
    assert are_twins("store", "stores") and are_twins("index", "indexer") and are_twins("embed", "embedding")
    assert are_twins("sqlite_store", "store_sqlite") and are_twins("demo", "demo")
    assert not are_twins("schema", "postgres_schema") and not are_twins("keys", "earlier_keys")


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


def test_modules_touch_only_their_own_private_fields() -> None:
    # ``other._field`` is fine where this module's own classes define ``_field`` (a classmethod building
    # an instance, a merge of two registries); anything else reaches into another module's object.
    offenders = []
    for path in sorted(PACKAGE_DIR.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        own_fields = {
            node.attr
            for node in ast.walk(tree)
            if isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id == "self"
        } | {node.name for node in ast.walk(tree) if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)}
        for node in ast.walk(tree):
            if not isinstance(node, ast.Attribute):
                continue
            private = node.attr.startswith("_") and not node.attr.startswith("__")
            own = isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")
            if private and not own and node.attr not in own_fields:
                offenders.append(f"{module_name(path)}:{node.lineno} {ast.unparse(node)}")
    assert offenders == []
