"""Sweeps: grid parsing, variants, the recommendation, the command and its CI gates."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest
from click.testing import CliRunner
from conftest import REPO, SAMPLES

from mcsim.cli import cli
from mcsim.replay.run import PolicyTotals
from mcsim.replay.scenario import load_policy_file, parse_policies
from mcsim.replay.sweep import (
    GridError,
    Outcome,
    Variant,
    build_variants,
    pareto_front,
    parse_axis,
    recommend,
)

CLAUDE_CODE = REPO / "policies" / "claude-code.yaml"


@pytest.mark.parametrize(
    ("spec", "key", "values"),
    [
        ("keep_recent=1..5", "keep_recent", (1, 2, 3, 4, 5)),
        ("gap_threshold_minutes=0..120:30", "gap_threshold_minutes", (0, 30, 60, 90, 120)),
        ("ttl=5m,1h", "ttl", ("5m", "1h")),
        (
            "cached_microcompact.trigger_threshold=8,12",
            "cached_microcompact.trigger_threshold",
            (8, 12),
        ),
    ],
)
def test_grid_values(spec: str, key: str, values: tuple) -> None:
    axis = parse_axis(spec)
    assert (axis.key, axis.values) == (key, values)


def test_variants_address_stack_layers_and_validate_values() -> None:
    (_, stack, *_) = load_policy_file(CLAUDE_CODE)
    variants = build_variants(
        stack, [parse_axis("cached_microcompact.keep_recent=2..3"), parse_axis("ttl=5m,1h")]
    )
    assert [v.name for v in variants] == [
        "cached_microcompact.keep_recent=2,ttl=5m",
        "cached_microcompact.keep_recent=2,ttl=1h",
        "cached_microcompact.keep_recent=3,ttl=5m",
        "cached_microcompact.keep_recent=3,ttl=1h",
    ]
    last = variants[-1].scenario
    assert last.ttl == "1h"
    assert dict(last.layers[1].values)["keep_recent"] == 3
    assert dict(last.layers[0].values)["keep_recent"] == 5  # the other layer is untouched
    with pytest.raises(GridError, match=r"several layers have it; write kind\.keep_recent"):
        build_variants(stack, [parse_axis("keep_recent=1..3")])
    with pytest.raises(GridError, match="not a parameter of policy 'claude-code'"):
        build_variants(stack, [parse_axis("n=1..3")])
    with pytest.raises(
        GridError, match="key 'keep_recent': must be a whole number from 1 to 1_000_000_000, not 0"
    ):
        build_variants(stack, [parse_axis("cached_microcompact.keep_recent=0..2")])
    with pytest.raises(GridError, match="'2h' is not one of 5m, 1h, recorded"):
        build_variants(stack, [parse_axis("ttl=2h")])


def test_a_tool_list_parameter_stays_in_its_variants_and_sweeps_as_true_or_false() -> None:
    (_, api) = parse_policies(
        {"policies": [{"name": "api", "kind": "clear_tool_uses", "clear_tool_inputs": ["Bash"]}]},
        "f.yaml",
    )
    variants = build_variants(api, [parse_axis("keep=1..2")])
    assert [dict(v.scenario.layers[0].values)["clear_tool_inputs"] for v in variants] == [
        ("Bash",),
        ("Bash",),
    ]
    variants = build_variants(api, [parse_axis("clear_tool_inputs=true,false")])
    assert [v.name for v in variants] == ["clear_tool_inputs=True", "clear_tool_inputs=False"]
    assert [dict(v.scenario.layers[0].values)["clear_tool_inputs"] for v in variants] == [
        True,
        False,
    ]
    with pytest.raises(GridError) as err:  # a list cannot be written in a grid
        build_variants(api, [parse_axis("clear_tool_inputs=Read")])
    assert str(err.value) == (
        "--grid clear_tool_inputs: key 'clear_tool_inputs': must be true, false or a list of "
        "tool names, not 'Read'"
    )


def test_one_parameter_is_swept_once_and_each_value_once() -> None:
    (_, masking, *_) = load_policy_file(REPO / "policies" / "masking.yaml")
    # `n` and `keep_last_n.n` are the same parameter: the later grid would win unseen.
    with pytest.raises(GridError) as err:
        build_variants(masking, [parse_axis("n=1"), parse_axis("keep_last_n.n=2")])
    assert str(err.value) == (
        "--grid n and --grid keep_last_n.n name the same parameter (keep_last_n.n): give it once"
    )
    # 1 and 1.0 are both n = 1 once validated: two identical variants.
    with pytest.raises(GridError) as err:
        build_variants(masking, [parse_axis("n=1,1.0")])
    assert str(err.value) == "--grid n: value 1 is given twice"
    variants = build_variants(masking, [parse_axis("n=1.0,2")])
    n_values = [dict(v.scenario.layers[0].values)["n"] for v in variants]
    assert [(type(n), n) for n in n_values] == [(int, 1), (int, 2)]


def outcome(name: str, net: float, risk_hazards: int, cleared: int = 10) -> Outcome:
    (_, stack, *_) = load_policy_file(CLAUDE_CODE)
    totals = PolicyTotals(name, cleared_results=cleared, refetch_hazards=risk_hazards)
    return Outcome(Variant((("k", name),), stack), totals, net + 1, net)


def test_recommendation_is_the_best_net_saving_under_the_risk_limit() -> None:
    results = [
        outcome("a", 9.0, 6),
        outcome("b", 7.0, 2),
        outcome("c", 5.0, 1),
        outcome("d", 4.0, 3),
    ]
    rec = recommend(results, max_risk=0.5)
    assert rec.best is not None and rec.best.variant.name == "k=b"  # a's risk is 60%
    assert rec.runner_up is not None and rec.runner_up.variant.name == "k=c"
    assert "runner-up k=c" in rec.reason
    assert [o.variant.name for o in pareto_front(results)] == ["k=c", "k=b", "k=a"]
    none = recommend(results, max_risk=0.05)
    assert none.best is None
    assert none.reason == (
        "no variant keeps re-fetch risk at or under 5%; the lowest is k=c at 10%"
    )


@pytest.fixture(scope="module")
def corpus_sweep(corpus: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, Path]:
    out = tmp_path_factory.mktemp("sweep") / "run"
    result = CliRunner().invoke(
        cli,
        [
            "sweep",
            str(corpus),
            "--policy",
            str(CLAUDE_CODE),
            "--name",
            "claude-code",
            "--grid",
            "cached_microcompact.keep_recent=1..10",
            "--grid",
            "ttl=5m,1h",
            "--out",
            str(out),
            "--json",
            "--cache-dir",
            str(tmp_path_factory.mktemp("cache")),
        ],
    )
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout), out


def test_corpus_sweep_gives_twenty_variants_and_a_recommendation(
    corpus_sweep: tuple[dict, Path],
) -> None:
    doc, out = corpus_sweep
    assert len(doc["variants"]) == 20
    for v in doc["variants"]:
        assert set(v) >= {
            "params",
            "cost_usd",
            "savings_vs_baseline_pct",
            "cleared_tokens",
            "cache_breaks",
            "refetch_risk",
        }
        assert v["cleared_tokens"] > 0 and 0 < v["refetch_risk"] < 1
    rec = doc["recommendation"]
    assert set(rec["params"]) == {"cached_microcompact.keep_recent", "ttl"}
    best = next(v for v in doc["variants"] if v["params"] == rec["params"])
    eligible = [v for v in doc["variants"] if v["refetch_risk"] <= 0.5]
    assert best["net_savings_vs_baseline_pct"] == max(
        v["net_savings_vs_baseline_pct"] for v in eligible
    )
    assert "highest savings net of re-fetches" in rec["reason"]
    table = pl.read_parquet(out / "sweep.parquet")
    assert table.filter(pl.col("level") == "variant").height == 20
    assert table.filter(pl.col("level") == "session").height == 20 * 8
    assert table["recommended"].sum() == 1 + 8
    for png in ("savings_curve.png", "risk_tradeoff.png"):
        assert (out / png).read_bytes()[:4] == b"\x89PNG"


def test_gates_exit_1_with_a_reason(tmp_path: Path) -> None:
    base = [
        "sweep",
        str(SAMPLES),
        "--policy",
        str(CLAUDE_CODE),
        "--name",
        "claude-code",
        "--grid",
        "cached_microcompact.keep_recent=2,5",
        "--no-cache",
    ]
    ok = CliRunner().invoke(
        cli,
        [
            *base,
            "--out",
            str(tmp_path / "a"),
            "--fail-under-savings",
            "-50",
            "--fail-over-risk",
            "100",
        ],
    )
    assert ok.exit_code == 0, ok.output
    low = CliRunner().invoke(
        cli, [*base, "--out", str(tmp_path / "b"), "--fail-under-savings", "60"]
    )
    assert low.exit_code == 1
    assert "under --fail-under-savings 60%" in low.stderr
    risky = CliRunner().invoke(
        cli,
        [
            "replay",
            str(SAMPLES),
            "--policy",
            str(CLAUDE_CODE),
            "--out",
            str(tmp_path / "c"),
            "--no-cache",
            "--fail-over-risk",
            "0",
        ],
    )
    assert risky.exit_code == 1
    assert risky.stderr.startswith("Error: policy claude-code has a re-fetch risk of")
    assert (tmp_path / "c" / "summary.parquet").exists()  # outputs are written first


def test_bad_grid_exits_2(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        cli,
        [
            "sweep",
            str(SAMPLES),
            "--policy",
            str(CLAUDE_CODE),
            "--grid",
            "keep_recent=1..3",
            "--out",
            str(tmp_path / "x"),
        ],
    )
    assert result.exit_code == 2
    assert (
        "holds 3 policies (claude-code, time-based-only, cache-edits-only): choose with --name"
        in result.stderr
    )
    assert not (tmp_path / "x").exists()


def test_the_cli_default_risk_limit_is_the_library_default() -> None:
    from mcsim.cli import MAX_RISK_DEFAULT_PCT
    from mcsim.replay.sweep import DEFAULT_MAX_RISK

    assert MAX_RISK_DEFAULT_PCT == 100 * DEFAULT_MAX_RISK
