"""Every pointer in the code's comments and docstrings resolves
(docs/development.md#comments-and-signposts): a `docs/` page it names exists, with the section
after its `#`; a repository path it names exists; a dotted `mcsim.` name is a module or
something in one; it names no tracker number (the reason goes in words instead) and no document
that is not in the repository. And the docs' `file.py:name` pointers name what is there."""

from __future__ import annotations

import ast
import functools
import importlib
import io
import os
import re
import tokenize
from collections.abc import Iterator

import pytest
from conftest import REPO, heading_ids

ROOTS = ("mcsim", "tests", "bench")

# A path from the top of the repository, named in running text: `docs/domain.md#prices`,
# `tests/data/corpus/README.md`, `mcsim/replay/cache.py`. Not a part of a longer path or URL.
REPO_PATH = re.compile(
    r"(?<![\w/.-])((?:mcsim|tests|bench|docs|policies|sample_transcripts)/[\w./*<>-]*\w)"
    r"(?:#([\w-]+))?"
)
TRACKER_NUMBER = re.compile(r"\bissues?\s+#?\d+", re.IGNORECASE)
# A document by its capitalised name, as a README is named: it must be in the repository.
NAMED_DOCUMENT = re.compile(r"\b[A-Z][A-Z0-9_-]*\.md\b")

# A module of the package, or something in one, by its dotted name: `mcsim.replay.run_replay`.
DOTTED_NAME = re.compile(r"(?<![\w.])(mcsim(?:\.\w+)+)")
# A definition in a file of the package, as the docs name one: `outputs/runs.py:replay_run`.
DEFINED_IN = re.compile(r"`((?:mcsim/)?[\w/]+\.py):(\w+(?:\.\w+)*)`")


def _ignored_folders() -> list[str]:
    """Folders .gitignore keeps out of the repository, made by a run (`bench/.work`)."""
    lines = (REPO / ".gitignore").read_text().splitlines()
    return [line.strip("/") for line in lines if line.startswith("/") and "*" not in line]


def _documents() -> set[str]:
    """The names of the repository's Markdown files (not those of installed packages)."""
    names = set()
    for _, subfolders, files in os.walk(REPO):
        subfolders[:] = [s for s in subfolders if not s.startswith(".") and s != "node_modules"]
        names |= {f for f in files if f.endswith(".md")}
    return names


IGNORED = _ignored_folders()
DOCUMENTS = _documents()
section_ids = functools.cache(heading_ids)


def notes(source: str) -> Iterator[tuple[int, str]]:
    """(line, text) of every comment and docstring in `source`."""
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            yield token.start[0], token.string
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            text = ast.get_docstring(node, clean=False)
            if text is not None:
                yield node.body[0].lineno, text


def path_problem(path: str, anchor: str | None) -> str | None:
    """Why `path` (and `#anchor`) named in a note does not resolve, or None."""
    if any(path == f or path.startswith(f"{f}/") for f in IGNORED):
        return None
    if "*" in path or "<" in path:  # a pattern: something must match it
        pattern = re.sub(r"<[^>]*>", "*", path)
        return None if next(REPO.glob(pattern), None) else f"nothing matches {path}"
    if not (REPO / path).exists():
        return f"{path} is not in the repository"
    if anchor and (not path.endswith(".md") or anchor not in section_ids(REPO / path)):
        return f"{path} has no section #{anchor}"
    return None


@functools.cache
def dotted_problem(name: str) -> str | None:
    """Why the dotted `name` is neither a module of mcsim nor something in one, or None."""
    parts = name.split(".")
    for end in range(len(parts), 0, -1):
        module = ".".join(parts[:end])
        try:
            found: object = importlib.import_module(module)
        except ModuleNotFoundError as exc:
            if not f"{module}.".startswith(f"{exc.name}."):  # one it imports is missing
                raise
            continue
        for part in parts[end:]:
            if not hasattr(found, part):
                return f"{name} is not in mcsim"
            found = getattr(found, part)
        return None
    return f"{name} is not in mcsim"


def problems(source: str, where: str) -> list[tuple[str, str]]:
    """(`where:line: why`, what is cited) for each pointer in `source`'s notes that does not
    resolve."""
    return unresolved(list(notes(source)), where)


def unresolved(texts: list[tuple[int, str]], where: str) -> list[tuple[str, str]]:
    found = []
    for line, text in texts:
        for match in REPO_PATH.finditer(text):
            why = path_problem(match[1], match[2])
            if why:
                found.append((f"{where}:{line}: {why}", match[0]))
        for match in DOTTED_NAME.finditer(text):
            why = dotted_problem(match[1])
            if why:
                found.append((f"{where}:{line}: {why}", match[0]))
        for match in TRACKER_NUMBER.finditer(text):
            found.append((f"{where}:{line}: cites a tracker number", match[0]))
        for match in NAMED_DOCUMENT.finditer(text):
            if match[0] not in DOCUMENTS:
                found.append((f"{where}:{line}: {match[0]} is not in the repository", match[0]))
    return found


@functools.cache
def code_notes() -> dict[str, list[tuple[int, str]]]:
    """The notes of every Python file of mcsim/, tests/ and bench/, by the file's path."""
    paths = sorted(p for root in ROOTS for p in (REPO / root).rglob("*.py"))
    return {p.relative_to(REPO).as_posix(): list(notes(p.read_text())) for p in paths}


@pytest.mark.slow
def test_every_pointer_in_the_code_resolves() -> None:
    found = [why for path, texts in code_notes().items() for why, _ in unresolved(texts, path)]
    assert found == []


def test_the_docs_name_definitions_that_are_there() -> None:
    """`replay/run.py:run_replay` in a page of docs/ or the README: the file is in mcsim/ and
    defines the name (a class's method as `Class.method`)."""
    found = []
    for page in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]:
        for match in DEFINED_IN.finditer(page.read_text()):
            file, name = match[1].removeprefix("mcsim/"), match[2]
            path = REPO / "mcsim" / file
            if not path.is_file() or not _defines(ast.parse(path.read_text()), name.split(".")):
                found.append(f"{page.name}: {match[0]}")
    assert found == []


def _defines(node: ast.AST, names: list[str]) -> bool:
    """Whether the body of `node` defines names[0] (and that, the rest in turn)."""
    for child in getattr(node, "body", []):
        if isinstance(child, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            defined = [child.name]
        elif isinstance(child, ast.Assign):
            defined = [t.id for t in child.targets if isinstance(t, ast.Name)]
        elif isinstance(child, ast.AnnAssign) and isinstance(child.target, ast.Name):
            defined = [child.target.id]
        else:
            continue
        if names[0] in defined:
            return len(names) == 1 or _defines(child, names[1:])
    return False


@pytest.mark.slow
def test_the_code_points_into_the_domain_and_design_pages() -> None:
    """The code cites the pages that hold what it rests on (the other test checks only the
    links there are)."""
    cited = {
        match[0].split("#")[0]
        for texts in code_notes().values()
        for _, text in texts
        for match in REPO_PATH.finditer(text)
    }
    assert {"docs/domain.md", "docs/design.md"} <= cited


@pytest.mark.parametrize(
    ("source", "cited"),
    [
        ('"""See docs/no-such-page.md."""', "docs/no-such-page.md"),
        ("# the rule: docs/domain.md#no-such-section", "docs/domain.md#no-such-section"),
        ("# the rule: docs/domain.md#prices-", "docs/domain.md#prices-"),
        ('def f():\n    """As mcsim/replay/gone.py does."""', "mcsim/replay/gone.py"),
        ("x = 1  # a ceiling (tests/data/<none>/x.json)", "tests/data/<none>/x.json"),
        ("# grew the driver (issue 13)", "issue 13"),
        ('class C:\n    """Fast paths (Issue #14)."""', "Issue #14"),
        ('"""The cache (DOMAIN.md §3.1)."""', "DOMAIN.md"),
        ("# see STYLE.md", "STYLE.md"),
        ("# as mcsim.replay.run.no_such_function does", "mcsim.replay.run.no_such_function"),
        ('"""Kept by mcsim.replay.gone."""', "mcsim.replay.gone"),
    ],
)
def test_a_pointer_that_does_not_resolve_is_caught(source: str, cited: str) -> None:
    assert [c for _, c in problems(source, "x.py")] == [cited]


def test_pointers_that_resolve_and_other_text_pass() -> None:
    source = (
        '"""The break rule (docs/domain.md#the-cache-break-detector, docs/design.md), as\n'
        'tests/test_breaks.py checks it; the cache folder in bench/.work; README.md."""\n'
        "# tests/data/corpus/README.md says where each comes from; policies/*.yaml\n"
        'ERROR = "issue 13 and DOMAIN.md in a string that is not a docstring"\n'
        "# https://example.com/docs/guide.md and ccusage/ccusage#913, PR #1155\n"
        "# mcsim.replay.run_replay (lazily), mcsim.outputs.rows_sink.RowsSink.finish.\n"
    )
    assert problems(source, "x.py") == []
