"""The package's stages import only downwards (docs/development.md): a module may import its
own stage and the stages before it, never a later one. Imports inside functions count too."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "mcsim"

# Bottom to top. A module's stage is its first folder under mcsim/, or its name at the top.
STAGES: dict[str, int] = {
    "model": 0, "errors": 0, "text": 0, "processes": 0, "tuning": 0,  # the shared bottom
    "ingest": 1,
    "accounting": 2,
    "replay": 3,
    "outputs": 4,
    "cli": 5, "__main__": 5, "__init__": 5,  # the CLI and the public API
}  # fmt: skip


def stage_of(module: str) -> int:
    """`mcsim.replay.simulate` -> 3; the package itself (`mcsim`) is the public API."""
    parts = module.split(".")
    assert parts[0] == "mcsim", module
    return STAGES[parts[1]] if len(parts) > 1 else STAGES["__init__"]


def imports(source: str, module: str) -> list[tuple[int, str]]:
    """(line, imported mcsim module) for every import in `source`, relative ones resolved."""
    found = []
    package = module.rsplit(".", 1)[0]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names if a.name.startswith("mcsim")]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1])
                base = f"{base}.{node.module}" if node.module else base
            if base == "mcsim":  # from mcsim import x: the submodule x, or a name of the API
                for a in node.names:
                    if a.name == "__version__":
                        continue  # a constant of the package, not its API
                    submodule = f"mcsim.{a.name}"
                    found.append((node.lineno, submodule if a.name in STAGES else "mcsim"))
            elif base.startswith("mcsim"):
                found.append((node.lineno, base))
    return found


def violations(source: str, module: str) -> list[str]:
    own = stage_of(module)
    return [
        f"{module}:{line} imports {target}"
        for line, target in imports(source, module)
        if stage_of(target) > own
    ]


def modules() -> list[tuple[str, Path]]:
    out = []
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out.append((name, path))
    return out


def test_every_module_belongs_to_a_stage() -> None:
    for name, _ in modules():
        stage_of(name)  # a KeyError names a module outside every stage


def test_imports_go_down_the_stages() -> None:
    found = [v for name, path in modules() for v in violations(path.read_text(), name)]
    assert found == []


@pytest.mark.parametrize(
    ("module", "source"),
    [
        ("mcsim.ingest.pipeline", "from mcsim.replay.calibrate import CalCall"),
        ("mcsim.accounting.breaks", "def f():\n    from mcsim.outputs import charts"),
        ("mcsim.model", "import mcsim.ingest.discovery"),
        ("mcsim.replay.simulate", "from mcsim import load_sessions"),
        ("mcsim.replay.policies.none", "from ...outputs.report import build_report"),
    ],
)
def test_an_upward_import_is_caught(module: str, source: str) -> None:
    assert len(violations(source, module)) == 1


def test_imports_within_a_stage_and_downwards_are_allowed() -> None:
    source = (
        "from mcsim.replay.scenario import Scenario\n"
        "from mcsim.accounting.breaks import is_drop\n"
        "from mcsim import __version__\n"
        "from . import cached_microcompact\n"
        "import mcsim.model\n"
    )
    assert violations(source, "mcsim.replay.policies.none") == []
