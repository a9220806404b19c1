"""The replay core reads a step at a time: a function of mcsim/replay/ longer than LIMIT lines
says in its docstring why that length is its clearest form ("long on purpose", and the
reason), or it is split into named steps."""

from __future__ import annotations

import ast

from conftest import REPO

LIMIT = 80
CORE = REPO / "mcsim" / "replay"


def long_functions(source: str) -> list[tuple[str, int, str]]:
    """(name, lines, docstring) of each function of `source` over LIMIT lines."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            assert node.end_lineno is not None
            lines = node.end_lineno - node.lineno + 1
            if lines > LIMIT:
                found.append((node.name, lines, ast.get_docstring(node) or ""))
    return found


def test_a_long_function_of_the_replay_core_says_why() -> None:
    unexplained = [
        f"{path.relative_to(REPO)}: {name} ({lines} lines)"
        for path in sorted(CORE.rglob("*.py"))
        for name, lines, doc in long_functions(path.read_text())
        if "long on purpose" not in doc
    ]
    assert unexplained == []


def test_the_measure_counts_every_line_of_a_function() -> None:
    body = "\n".join(f"    x{i} = {i}" for i in range(LIMIT))
    assert long_functions(f"def f():\n{body}\n") == [("f", LIMIT + 1, "")]
    assert long_functions(f"def f():\n{body[: body.rindex(chr(10))]}\n") == []
