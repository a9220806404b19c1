"""JSON numbers keep the decimals their unit allows, the same in every document mcsim writes:
dollars 6 (cents to 4), percent 4, seconds 3, token means 1, fractions 6."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from conftest import REPO, SAMPLES

from mcsim.cli import cli
from mcsim.outputs.run_dir import rounded


def test_rounded_by_the_unit_in_the_key() -> None:
    doc = {
        "cost_usd": 1.27193744999,
        "net_savings_vs_baseline_pct": 4.068755697,
        "gap_seconds": 321.61749,
        "mean_context_tokens": 48_213.66667,
        "refetch_risk": 0.4039408866995074,
        "rows": [{"cost_usd": 0.0000004}, {"cost_usd": -0.0000004}],
        "by": {"claude-x": {"cache_hit_ratio": 0.99999949}},
        "calls": 7,
        "name": "a_usd",
    }
    assert rounded(doc) == {
        "cost_usd": 1.271937,
        "net_savings_vs_baseline_pct": 4.0688,
        "gap_seconds": 321.617,
        "mean_context_tokens": 48_213.7,
        "refetch_risk": 0.403941,
        "rows": [{"cost_usd": 0.0}, {"cost_usd": 0.0}],
        "by": {"claude-x": {"cache_hit_ratio": 0.999999}},
        "calls": 7,
        "name": "a_usd",
    }
    assert str(rounded({"cost_usd": -0.0000004})["cost_usd"]) == "0.0"  # no -0.0


def test_rounded_walks_whatever_is_not_plain() -> None:
    """Values of the plain JSON types are passed through unwalked; a float's subclass (numpy),
    a tuple, or a key that is not a string are still rounded by their unit."""
    import numpy as np

    doc = {
        "a_usd": np.float64(1.23456789),
        "pairs": ((0.12345678, 1),),
        7: 0.123456789,
        "flag": True,
        "none": None,
        "count": 3,
    }
    assert rounded(doc) == {
        "a_usd": 1.234568,
        "pairs": [[0.123457, 1]],
        7: 0.123457,
        "flag": True,
        "none": None,
        "count": 3,
    }
    for _ in range(2):  # the same again, with the decimals of the keys met now cached
        assert rounded({"x_seconds": 1.23456, "x_pct": 1.234567}) == {
            "x_seconds": 1.235,
            "x_pct": 1.2346,
        }


def _too_precise(value: Any, decimals: int, path: str, out: list[str]) -> None:
    if isinstance(value, dict):
        for key, item in value.items():
            allowed = next(
                (n for s, n in (("_usd", 6), ("_pct", 4), ("_seconds", 3)) if key.endswith(s)),
                1 if key.endswith("_tokens") else 6,
            )
            _too_precise(item, allowed, f"{path}.{key}", out)
    elif isinstance(value, list):
        for item in value:
            _too_precise(item, decimals, f"{path}[]", out)
    elif isinstance(value, float) and round(value, decimals) != value:
        out.append(f"{path}={value!r}")


@pytest.mark.slow
def test_every_document_of_a_replay_and_a_sweep(tmp_path: Path) -> None:
    runner = CliRunner()
    policy = str(REPO / "policies" / "all.yaml")
    docs = []
    for command, extra in (
        ("replay", []),
        ("sweep", ["--name", "claude-code", "--grid", "cached_microcompact.keep_recent=2,5"]),
    ):
        out = tmp_path / command
        args = [command, str(SAMPLES), "--policy", policy, "--out", str(out), "--json"]
        result = runner.invoke(cli, [*args, "--no-cache", *extra])
        assert result.exit_code == 0, result.output
        docs += [json.loads(result.stdout), json.loads((out / "run.json").read_text())]
    result = runner.invoke(cli, ["inspect", str(SAMPLES), "--json", "--by", "day"])
    docs.append(json.loads(result.stdout))
    bad: list[str] = []
    for doc in docs:
        _too_precise(doc, 6, "", bad)
    assert bad == []
    # The refetch figures were printed with 16 digits before (4.068755697620452).
    assert "net_savings_vs_baseline_pct" in docs[0]["policies"][1]


def test_a_streamed_document_is_the_same_bytes() -> None:
    """`json_stream` (what --json prints, a piece at a time) writes what `json_bytes` does."""
    from mcsim.outputs.run_dir import Each, json_bytes, json_stream

    docs: list[dict[str, Any]] = [
        {},
        {"a": [], "b": {}, "c": None},
        {"cost_usd": 1.23456789, "rows": [1.5, {"saved_pct": 2.123456789}, []], "n": -0.0},
        {"x": {"deep": {"deeper": [[1, 2], [], {"k_tokens": 3.33333}]}, "s": "é\u0085"}},
        {"sessions": Each([1.0, 2.0], lambda v: {"gap_seconds": v / 3, "id": "a\nb"})},
        {"none": Each([], str), "inner": {"rows": Each(["x"], str)}},
    ]
    for doc in docs:
        held = {k: _lists(v) for k, v in doc.items()}  # every Each made a list
        assert b"".join(json_stream(doc)) == json_bytes(held)


def _lists(value: Any) -> Any:
    from mcsim.outputs.run_dir import Each

    if isinstance(value, dict):
        return {k: _lists(v) for k, v in value.items()}
    return list(value) if isinstance(value, Each) else value


def test_the_library_inspect_document_is_plain_json(tmp_path: Path) -> None:
    """inspect_json's lists are made lazily only for the command line (lazy=True): the
    library's document is plain data any JSON writer takes, with the same text."""
    from mcsim import default_table, inspect_usage
    from mcsim.outputs.json_documents import inspect_json
    from mcsim.outputs.run_dir import json_bytes, json_stream

    report = inspect_usage([str(REPO / "tests" / "data" / "corpus")], default_table())
    doc = inspect_json(report)
    assert len(json.loads(json.dumps(doc))["sessions"]) == 8
    lazy = b"".join(json_stream(inspect_json(report, lazy=True)))
    assert json_bytes(doc) == lazy
