"""The package's stages import only downwards (docs/development.md#the-stages): a module may
import its own stage and the stages before it, never a later one; and no modules import each
other in a loop. Imports inside functions count too: they run as surely, only later."""

from __future__ import annotations

import ast
from collections.abc import Mapping
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "mcsim"

# Bottom to top. A module's stage is its first folder under mcsim/, or its name at the top.
STAGES: dict[str, int] = {
    "model": 0, "errors": 0, "text": 0, "processes": 0, "version": 0,  # the shared bottom
    "tuning": 0, "frozen": 0,
    "ingest": 1,
    "accounting": 2,
    "replay": 3,
    "outputs": 4,
    "cli": 5, "__main__": 5, "__init__": 5,  # the CLI and the public API
}  # fmt: skip


def module_sources() -> dict[str, str]:
    """Every module of the package by dotted name (a package by its own name), with its source."""
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path.read_text()
    return out


SOURCES = module_sources()
PACKAGES = {p.parent.relative_to(PACKAGE.parent).as_posix().replace("/", ".")
            for p in PACKAGE.rglob("__init__.py")}  # fmt: skip


def stage_of(module: str) -> int:
    """`mcsim.replay.simulate` -> 3; the package itself (`mcsim`) is the public API."""
    parts = module.split(".")
    assert parts[0] == "mcsim", module
    return STAGES[parts[1]] if len(parts) > 1 else STAGES["__init__"]


def imports(source: str, module: str, known: Mapping[str, str] = SOURCES) -> list[tuple[int, str]]:
    """(line, imported mcsim module) for every import in `source`, relative ones resolved;
    `from a.b import c` is the module `a.b.c` when there is one, else `a.b` (a name of it)."""
    found = []
    package = module if module in PACKAGES else module.rsplit(".", 1)[0]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names if a.name.startswith("mcsim")]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1])
                base = f"{base}.{node.module}" if node.module else base
            if base == "mcsim" or base.startswith("mcsim."):
                for a in node.names:
                    submodule = f"{base}.{a.name}"
                    found.append((node.lineno, submodule if submodule in known else base))
    return found


def violations(source: str, module: str) -> list[str]:
    own = stage_of(module)
    return [
        f"{module}:{line} imports {target}"
        for line, target in imports(source, module)
        if stage_of(target) > own
    ]


def import_graph(sources: Mapping[str, str]) -> dict[str, set[str]]:
    """module -> the modules it imports (anywhere in it, functions included). A module's import
    of a package it sits in is left out: Python runs a package before any module inside it, so
    that import orders nothing that was not ordered already. It is how a registry gets its
    plugins (loaders/, policies/ and providers/ import each of their modules at the end, and
    each module imports the package to register itself) and how accounting/prices/ reaches
    its LiteLLM importer; an import of a name the package has not defined yet fails at once."""
    graph: dict[str, set[str]] = {}
    for module, source in sources.items():
        graph[module] = {
            target
            for _, target in imports(source, module, sources)
            if target in sources and not f"{module}.".startswith(f"{target}.")
        }
    return graph


def cycles(graph: Mapping[str, set[str]]) -> list[set[str]]:
    """The groups of modules that import each other in a loop (strongly connected components
    of more than one module, Tarjan's algorithm), each as a set, sorted by their first name."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[set[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            group = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.add(member)
                if member == node:
                    break
            if len(group) > 1:
                found.append(group)

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(found, key=min)


def test_every_module_belongs_to_a_stage() -> None:
    for name in SOURCES:
        stage_of(name)  # a KeyError names a module outside every stage


def test_imports_go_down_the_stages() -> None:
    found = [v for name, source in SOURCES.items() for v in violations(source, name)]
    assert found == []


def test_no_modules_import_each_other_in_a_loop() -> None:
    assert cycles(import_graph(SOURCES)) == []


@pytest.mark.parametrize(
    ("module", "source"),
    [
        ("mcsim.ingest.pipeline", "from mcsim.replay.calibrate import CalCall"),
        ("mcsim.accounting.breaks", "def f():\n    from mcsim.outputs import charts"),
        ("mcsim.model", "import mcsim.ingest.discovery"),
        ("mcsim.replay.simulate", "from mcsim import load_sessions"),
        ("mcsim.replay.policies.none", "from ...outputs.report import build_report"),
        ("mcsim.ingest.disk_cache", "from mcsim import __version__"),  # the API: everything
        ("mcsim.version", "from mcsim.text import shown\nfrom mcsim.cli import cli"),
    ],
)
def test_an_upward_import_is_caught(module: str, source: str) -> None:
    assert len(violations(source, module)) == 1


def test_imports_within_a_stage_and_downwards_are_allowed() -> None:
    source = (
        "from mcsim.replay.scenario import Scenario\n"
        "from mcsim.accounting.breaks import is_drop\n"
        "from mcsim.version import __version__\n"
        "from . import cached_microcompact\n"
        "import mcsim.model\n"
    )
    assert violations(source, "mcsim.replay.policies.none") == []


def test_a_loop_is_caught_through_functions_packages_and_relative_imports() -> None:
    sources = {
        "mcsim.replay": "",
        "mcsim.replay.a": "from mcsim.replay import b\n",
        "mcsim.replay.b": "def f():\n    from .c import g\n",
        "mcsim.replay.c": "import mcsim.replay.a\n",
        "mcsim.replay.d": "from mcsim.replay.e import x\n",
        "mcsim.replay.e": "from mcsim.replay import d\n",
        "mcsim.replay.f": "from mcsim.replay import a\n",  # into the loop, not part of it
    }
    assert cycles(import_graph(sources)) == [
        {"mcsim.replay.a", "mcsim.replay.b", "mcsim.replay.c"},
        {"mcsim.replay.d", "mcsim.replay.e"},
    ]


def test_a_module_importing_its_own_package_is_no_loop_but_a_way_around_is() -> None:
    registry = {  # the package imports its plugin, the plugin registers itself with the package
        "mcsim.replay.policies": "def register(): ...\nfrom . import none\n",
        "mcsim.replay.policies.none": "from mcsim.replay.policies import register\n",
    }
    assert cycles(import_graph(registry)) == []
    around = {  # the package -> its module -> another package's module -> back to the package
        **registry,
        "mcsim.replay.policies.none": "from mcsim.replay.scenario import Scenario\n",
        "mcsim.replay.scenario": "def f():\n    from mcsim.replay.policies import register\n",
    }
    assert cycles(import_graph(around)) == [set(around)]
