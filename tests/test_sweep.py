"""Sweeps: grid parsing, variants, the recommendation, the command and its CI gates."""

from __future__ import annotations

import itertools
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest
from click.testing import CliRunner
from conftest import REPO, SAMPLES

from mcsim.cli import cli
from mcsim.outputs.sweep_tables import risk_tradeoff, savings_curve
from mcsim.replay.results import PolicyTotals, SessionReplay
from mcsim.replay.run import ReplayReport
from mcsim.replay.scenario import baseline, load_policy_file, parse_policies
from mcsim.replay.sweep import (
    GridError,
    Outcome,
    Spread,
    Swept,
    Variant,
    build_variants,
    interval,
    more_conservative,
    net_savings_draws,
    outcomes,
    paired_interval,
    pareto_front,
    parse_axis,
    recommend,
    resample_counts,
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
    # (0 is taken: it acts as 1, as in Claude Code)
    with pytest.raises(
        GridError, match="key 'keep_recent': must be a whole number from 0 to 1_000_000_000, not -1"
    ):
        build_variants(stack, [parse_axis("cached_microcompact.keep_recent=-1..2")])
    with pytest.raises(GridError, match="'2h' is not one of 5m, 1h, 24h, recorded"):
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
    assert [v.name for v in variants] == ["clear_tool_inputs=true", "clear_tool_inputs=false"]
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


@pytest.mark.slow
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
    eligible = [v for v in doc["variants"] if v["refetch_risk"] <= 0.5]
    highest = max(eligible, key=lambda v: v["net_savings_vs_baseline_pct"])
    # On these 8 sessions keep_recent=1 (5m) saves the most net; keep_recent 2 to 10 (5m)
    # are all within noise of it, but from 7 on their own interval reaches below 0 (the
    # best's does not), and 4, 5 and 6 save less than 3 at a higher re-fetch risk: of 2 and
    # 3, the more conservative, 3, is recommended.
    assert highest["params"] == {"cached_microcompact.keep_recent": 1, "ttl": "5m"}
    assert rec["passed_over"] == highest["params"]
    assert rec["params"] == {"cached_microcompact.keep_recent": 3, "ttl": "5m"}
    low = {v["name"]: v["net_savings_interval_pct"][0] for v in doc["variants"]}
    assert low["cached_microcompact.keep_recent=1,ttl=5m"] > 0
    assert low["cached_microcompact.keep_recent=3,ttl=5m"] > 0
    risk = {v["name"]: v["refetch_risk"] for v in doc["variants"]}
    net = {v["name"]: v["net_savings_vs_baseline_pct"] for v in doc["variants"]}
    three = "cached_microcompact.keep_recent=3,ttl=5m"
    for k in (4, 5, 6):
        other = f"cached_microcompact.keep_recent={k},ttl=5m"
        assert risk[other] > risk[three] and net[other] < net[three]
    assert all(low[f"cached_microcompact.keep_recent={k},ttl=5m"] < 0 for k in (7, 8, 9, 10))
    assert rec["reason"].startswith(
        "within noise of the highest, "
        "cached_microcompact.keep_recent=1,ttl=5m (difference +0.33 points, 95% interval "
    )
    assert "over 8 sessions, 1,000 resamples, seed 0" in rec["reason"]
    assert doc["bootstrap"] == {
        "sessions": 8,
        "resamples": 1000,
        "seed": 0,
        "level_pct": 95,
        "note": "8 sessions, 1,000 resamples, seed 0",
    }
    for v in doc["variants"]:
        low, high = v["net_savings_interval_pct"]
        assert low < v["net_savings_vs_baseline_pct"] < high
    table = pl.read_parquet(out / "sweep.parquet")
    assert table.filter(pl.col("level") == "variant").height == 20
    assert table.filter(pl.col("level") == "session").height == 20 * 8
    assert table["recommended"].sum() == 1 + 8
    for png in ("savings_curve.png", "risk_tradeoff.png"):
        assert (out / png).read_bytes()[:4] == b"\x89PNG"


@pytest.mark.slow
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


@pytest.mark.slow
def test_one_session_is_counted_in_the_singular(tmp_path: Path) -> None:
    one = str(SAMPLES / "claude" / "projects" / "-home-dev-data-pipeline")
    policy = ["--policy", str(CLAUDE_CODE), "--no-cache"]
    grid = ["--name", "claude-code", "--grid", "cached_microcompact.keep_recent=2,5"]
    sweep = CliRunner().invoke(cli, ["sweep", one, *policy, *grid, "--out", str(tmp_path / "s")])
    assert sweep.exit_code == 0, sweep.output
    assert "; 1 session; fidelity 0.000% overall" in sweep.stdout
    replay = CliRunner().invoke(cli, ["replay", one, *policy, "--out", str(tmp_path / "r")])
    assert replay.exit_code == 0, replay.output
    assert "\n1 session, cache model anthropic (36 calls);" in replay.stdout


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


# ---------------------------------------------------------------- intervals


def test_bootstrap_draws_and_interval_by_enumerating_every_resample_of_two_sessions() -> None:
    # Baseline costs 10 and 30; variant A pays 5 and 27, variant B 8 and 24. With two
    # sessions the four resamples are (2,0), (1,1), (1,1), (0,2) (counts per session).
    counts = np.array([[2, 0], [1, 1], [1, 1], [0, 2]])
    draws = net_savings_draws(counts, np.array([10.0, 30.0]), np.array([[5.0, 8.0], [27.0, 24.0]]))
    # A: 1 - 10/20 = 50%, 1 - 32/40 = 20% (twice), 1 - 54/60 = 10%.
    # B: 1 - 16/20, 1 - 32/40, 1 - 48/60: 20% every time.
    assert draws[:, 0].tolist() == pytest.approx([50, 20, 20, 10])
    assert draws[:, 1].tolist() == pytest.approx([20, 20, 20, 20])
    # Sorted A: 10, 20, 20, 50. The 2.5th percentile sits at 0.025 x 3 = 0.075 of the way
    # from 10 to 20 (10.75), the 97.5th at 2.925: 0.925 of the way from 20 to 50 (47.75).
    assert interval(draws[:, 0]) == pytest.approx((10.75, 47.75))
    assert interval(draws[:, 1]) == pytest.approx((20, 20))
    # Paired, A - B: 30, 0, 0, -10 -> sorted -10, 0, 0, 30: -9.25 .. 27.75.
    assert interval(draws[:, 0] - draws[:, 1]) == pytest.approx((-9.25, 27.75))
    # A resample whose baseline is free saves 0%, as savings_pct says of a free run.
    free = net_savings_draws(np.array([[2, 0]]), np.array([0.0, 30.0]), np.array([[1.0], [2.0]]))
    assert free.tolist() == [[0.0]]


def test_resample_counts_draw_every_session_index_with_replacement_reproducibly() -> None:
    counts = resample_counts(5, 200, seed=0)
    assert counts.shape == (200, 5)
    assert set(counts.sum(axis=1).tolist()) == {5}  # five draws per resample
    assert (counts == resample_counts(5, 200, seed=0)).all()
    assert not (counts == resample_counts(5, 200, seed=1)).all()


def _keep(k: int, net: float, draws: list[float], hazards: int, low: float, high: float) -> Outcome:
    (_, stack, *_) = load_policy_file(CLAUDE_CODE)
    variant = Variant((("keep_recent", k),), stack, (Swept("keep_recent", "int", 1),), (k,))
    totals = PolicyTotals(variant.name, cleared_results=10, refetch_hazards=hazards)
    spread = Spread(sessions=4, resamples=4, seed=0)
    return Outcome(variant, totals, net + 1, net, low, high, np.array(draws), spread)


def test_a_more_conservative_variant_within_noise_is_recommended() -> None:
    best = _keep(1, 10.0, [10, 10, 10, 10], 3, 10, 10)
    # best - this, per resample: -1, 1, 1, 3 -> 95% interval -1 + 0.075 x 2 = -0.85 ..
    # 1 + 0.925 x 2 = 2.85: not clearly ahead. Its own draws sorted 7, 9, 9, 11: 7.15..10.85.
    within = _keep(4, 9.0, [11, 9, 9, 7], 2, 7.15, 10.85)
    # best - this is 5 on every resample: clearly ahead, though this one's risk is lowest.
    behind = _keep(8, 5.0, [5, 5, 5, 5], 1, 5, 5)
    risky = _keep(6, 9.9, [10, 10, 10, 10], 7, 10, 10)  # within noise but 70% risk
    assert interval(np.array([11.0, 9, 9, 7])) == pytest.approx((7.15, 10.85))
    assert more_conservative(within, best) and not more_conservative(best, within)
    rec = recommend([best, within, behind, risky], max_risk=0.5)
    assert rec.best is within and rec.passed_over is best
    assert rec.reason == (
        "within noise of the highest, keep_recent=1 (difference +1.00 points, 95% interval "
        "-0.85..+2.85), and clears less; +9.00% net (95% interval +7.15..+10.85 "
        "over 4 sessions, 4 resamples, seed 0), re-fetch risk 20% (2 hazards); keep_recent=1: "
        "+10.00% net, risk 30%"
    )


def test_the_most_conservative_within_noise_that_still_clearly_saves() -> None:
    best = _keep(1, 10.0, [10, 10, 10, 10], 3, 10, 10)
    # best - each, per resample: -1, 1, 1, 3 (5 and 8) and -2, 2, 2, 6 (9): within noise.
    # Each has a lower risk than the best (at the best's 30% it would be beaten on both).
    five = _keep(5, 9.0, [11, 9, 9, 7], 2, 7.15, 10.85)
    eight = _keep(8, 9.0, [11, 9, 9, 7], 2, 7.15, 10.85)
    # Its own draws 12, 8, 8, 4 are all above 0 too, but say its interval reached below 0:
    # where the best clearly saves, a variant that may save nothing is not recommended.
    nine = _keep(9, 8.0, [12, 8, 8, 4], 1, -0.5, 11.9)
    rec = recommend([best, five, nine, eight], max_risk=0.5)
    assert rec.best is eight  # furthest in keep_recent's conservative direction (higher)
    assert rec.reason.startswith("within noise of the highest, keep_recent=1")
    # At the best's risk, 5 and 8 save less for as much risk: the best stays.
    same_risk = [_keep(k, 9.0, [11, 9, 9, 7], 3, 7.15, 10.85) for k in (5, 8)]
    assert recommend([best, *same_risk], max_risk=0.5).best is best


def test_the_best_stays_recommended_when_clearly_ahead() -> None:
    best = _keep(1, 10.0, [10, 10, 10, 10], 3, 10, 10)
    close = _keep(4, 9.0, [9, 9, 9, 9], 2, 9, 9)  # best - this: 1 on every resample
    rec = recommend([best, close], max_risk=0.5)
    assert rec.best is best and rec.runner_up is close and rec.passed_over is None
    assert rec.reason == (
        "highest savings net of re-fetches (+10.00% net (95% interval +10.00..+10.00 over "
        "4 sessions, 4 resamples, seed 0) vs no pruning; +11.00% as simulated) among 2 of 2 "
        "variants with re-fetch risk at most 50% (its risk: 30%, 3 hazards); runner-up "
        "keep_recent=4 at +9.00% net, risk 20%, behind by +1.00 points (95% interval "
        "+1.00..+1.00)"
    )
    # A less conservative variant within noise is never preferred: keep_recent=1 is not
    # more conservative than keep_recent=4.
    flipped = recommend(
        [_keep(4, 10.0, [10] * 4, 3, 10, 10), _keep(1, 9.9, [10] * 4, 1, 10, 10)], 0.5
    )
    assert flipped.best is not None and flipped.best.variant.name == "keep_recent=4"


def _report(costs: list[tuple[float, float]], variant: Variant) -> ReplayReport:
    """A report of sessions with (baseline, variant) costs, added as a replay adds them."""
    report = ReplayReport([baseline(), variant.scenario])
    for i, (b, v) in enumerate(costs):
        totals = [PolicyTotals("baseline", cost_usd=b), PolicyTotals(variant.name, cost_usd=v)]
        report.add(SessionReplay(
            session_id=f"s{i}", project="p", start_s=0, end_s=0, calls=1,
            recorded=PolicyTotals("recorded"), policies=totals, fidelity_error_tokens=0,
            fidelity_weight_tokens=0, calibration_fallbacks=0,
        ))  # fmt: skip
    report.finish()
    return report


def test_outcomes_intervals_are_seeded_and_collapse_when_every_session_saves_alike() -> None:
    (_, stack, *_) = load_policy_file(CLAUDE_CODE)
    (variant,) = build_variants(stack, [parse_axis("cached_microcompact.keep_recent=4")])
    # Every session saves exactly 20%: so does every resample, and the interval is 20..20.
    (same,) = outcomes(_report([(10, 8), (30, 24), (5, 4)], variant), [variant])
    assert (same.net_savings_pct, same.low_pct, same.high_pct) == pytest.approx((20, 20, 20))
    # 50%, 10%, 0%: the headline is 1 - (5 + 27 + 10) / (10 + 30 + 10) = 16%, and the
    # interval lies within the sessions' extremes, 0..50.
    spread = _report([(10, 5), (30, 27), (10, 10)], variant)
    (first,) = outcomes(spread, [variant], resamples=500, seed=7)
    (again,) = outcomes(spread, [variant], resamples=500, seed=7)
    assert first.net_savings_pct == pytest.approx(16)
    assert 0 <= first.low_pct < 16 < first.high_pct <= 50
    assert (first.low_pct, first.high_pct) == (again.low_pct, again.high_pct)
    assert first.draws is not None and first.draws.shape == (500,)
    # One session: no spread, no interval, and the text says so.
    (one,) = outcomes(_report([(10, 8)], variant), [variant])
    assert math.isnan(one.low_pct) and math.isnan(one.high_pct) and one.draws is None
    assert one.interval_text() == "+20.00% net (one session: no interval)"
    rec = recommend([one], max_risk=0.5)
    assert rec.reason.startswith("highest savings net of re-fetches (+20.00% net (one session:")


def test_the_swept_keys_are_typed_columns_of_sweep_parquet(corpus_sweep: tuple[dict, Path]) -> None:
    _, out = corpus_sweep
    table = pl.read_parquet(out / "sweep.parquet")
    assert table.schema["param_cached_microcompact.keep_recent"] == pl.Int64
    assert table.schema["param_ttl"] == pl.String
    variants = table.filter(pl.col("level") == "variant")
    assert variants["param_cached_microcompact.keep_recent"].to_list() == [
        k for k in range(1, 11) for _ in range(2)
    ]
    assert variants["param_ttl"].to_list() == ["5m", "1h"] * 10
    assert variants["net_savings_low_pct"].null_count() == 0
    assert (variants["net_savings_low_pct"] < variants["net_savings_vs_baseline_pct"]).all()
    assert (variants["net_savings_vs_baseline_pct"] < variants["net_savings_high_pct"]).all()
    sessions = table.filter(pl.col("level") == "session")
    assert sessions["net_savings_low_pct"].null_count() == sessions.height
    assert sessions["param_ttl"].null_count() == 0


def test_cautions_name_an_interval_below_zero_and_the_edge_of_the_grid() -> None:
    from mcsim.replay.sweep import cautions

    best = _keep(1, 10.0, [10] * 4, 3, 10, 10)
    middle, top = _keep(4, 9.0, [9] * 4, 2, 9, 9), _keep(8, 5.0, [5] * 4, 1, 5, 5)
    # keep_recent=1 is the lowest value tried; its interval 10..10 is above 0.
    assert cautions(best, [best, middle, top]) == (
        "keep_recent=1 is at the bottom of the values tried (1..8): try beyond it",
    )
    # keep_recent=4 is inside the range, but its interval -0.5..+9 reaches below 0.
    shaky = _keep(4, 4.0, [9, 9, -1, -1], 2, -0.5, 9)
    assert cautions(shaky, [best, shaky, top]) == (
        "its 95% interval reaches below 0 (-0.50..+9.00): on other sessions it may save nothing",
    )
    # Two values are no range to be at the edge of.
    assert cautions(best, [best, top]) == ()
    # The best costs more than no pruning: said first (its interval, below 0 too, goes
    # without saying), for one session (no interval) as for many.
    losing = _keep(4, -15.84, [-20, -16, -15, -12], 2, -19.7, -12.2)
    assert cautions(losing, [best, losing, top]) == (
        "it saves nothing net of re-fetches (-15.84%): no pruning (the baseline) costs less",
    )
    alone = Outcome(losing.variant, losing.totals, -14.84, -15.84)
    assert math.isnan(alone.low_pct)
    assert cautions(alone, [alone]) == (
        "it saves nothing net of re-fetches (-15.84%): no pruning (the baseline) costs less",
    )
    assert recommend([best, middle, top], 0.5).cautions == cautions(best, [best, middle, top])


def _drawn(monkeypatch: pytest.MonkeyPatch, draw: Any, *args: Any) -> Any:
    """The axes a sweep chart drew, caught before they are saved and closed."""
    import mcsim.outputs.charts as charts

    caught = []
    monkeypatch.setattr(charts, "save", lambda plt, fig, path, tight=True: caught.append(fig))
    draw(*args, Path("unused.png"))
    (fig,) = caught
    return fig.axes[0]


def test_risk_tradeoff_numbers_the_front_and_names_it_in_the_key(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    best = _keep(1, 10.0, [10, 10, 10, 10], 3, 10, 10)
    within = _keep(4, 9.0, [11, 9, 9, 7], 2, 7.15, 10.85)
    behind = _keep(8, 5.0, [5, 5, 5, 5], 1, 5, 5)
    risky = _keep(6, 9.9, [10, 10, 10, 10], 7, 10, 10)
    rec = recommend([best, within, behind, risky], max_risk=0.5)
    ax = _drawn(monkeypatch, risk_tradeoff, [best, within, behind, risky], rec)
    # The front by risk: 8 (10%), 4 (20%), 1 (30%); 6 (70%) is beaten by 1 on both.
    numbers = [(t.get_text(), t.xy) for t in ax.texts]
    assert numbers == [("1", (10.0, 5.0)), ("2", (20.0, 9.0)), ("3", (30.0, 10.0))]
    key = [t.get_text() for t in ax.get_legend().get_texts()]
    assert key == [
        "variant",
        "Pareto front (no variant is better on both)",
        "recommended: clears less, within noise of the highest",
        "1: keep_recent=8",
        "2: keep_recent=4 (recommended)",
        "3: keep_recent=1 (highest net savings)",
    ]


def test_savings_curve_ticks_a_count_on_whole_numbers(monkeypatch: pytest.MonkeyPatch) -> None:
    results = [_keep(k, 10.0 - k, [10, 10, 10, 10], 3, 9.0 - k, 11.0 - k) for k in (1, 2, 3)]
    rec = recommend(results, max_risk=0.5)
    ax = _drawn(monkeypatch, savings_curve, results, rec)
    assert list(ax.get_xticks()) == [1.0, 2.0, 3.0]  # not 1.0, 1.25, ... 3.0
    assert [t.get_text() for t in ax.get_xticklabels()] == ["1", "2", "3"]
    key = [t.get_text() for t in ax.get_legend().get_texts()]
    assert key[0] == "as simulated"  # one line per group; no group: no "all: "


def test_savings_curve_over_text_values_keeps_the_groups_intervals_apart(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`--grid ttl=5m,1h --grid keep_recent=1,8`: on the ttl axis the two groups' error bars
    were drawn at the same place, one hiding the other; numbers were set apart already."""
    (_, stack, *_) = load_policy_file(CLAUDE_CODE)
    swept = (Swept("ttl", "str"), Swept("keep_recent", "int", 1))
    results = []
    for ttl, k in itertools.product(["5m", "1h"], [1, 8]):
        variant = Variant((("ttl", ttl), ("keep_recent", k)), stack, swept, (ttl, k))
        totals = PolicyTotals(variant.name, cleared_results=10, refetch_hazards=3)
        spread = Spread(sessions=4, resamples=4, seed=0)
        net = 5.0 - k
        draws = np.array([net - 1, net, net, net + 1])
        results.append(Outcome(variant, totals, net + 1, net, net - 2, net + 2, draws, spread))
    rec = recommend(results, max_risk=0.5)
    ax = _drawn(monkeypatch, savings_curve, results, rec)
    # The error bars' lines, by group (their caps and the plain lines aside): x of each value
    bars = [line.get_xdata() for line in ax.get_lines() if line.get_linestyle() == "--"]
    assert len(bars) == 2
    assert all(a < b for a, b in zip(bars[0], bars[1], strict=True))  # set apart, in order
    assert [t.get_text() for t in ax.get_xticklabels()] == ["5m", "1h"]
    assert [round(x) for x in bars[0]] == [0, 1]  # each near its value's tick


def _two_keys() -> list[Outcome]:
    """`--grid keep_recent=1,2 --grid ttl=5m,1h`, re-fetch risks 30% to 34%."""
    (_, stack, *_) = load_policy_file(CLAUDE_CODE)
    swept = (Swept("keep_recent", "int", 1), Swept("ttl", "str"))
    results = []
    for (k, ttl), hazards in zip(itertools.product([1, 2], ["5m", "1h"]), [30, 32, 33, 34],
                                 strict=True):  # fmt: skip
        variant = Variant((("keep_recent", k), ("ttl", ttl)), stack, swept, (k, ttl))
        totals = PolicyTotals(variant.name, cleared_results=100, refetch_hazards=hazards)
        net = 5.0 + k - (ttl == "1h")
        draws = np.array([net - 1, net, net, net + 1])
        spread = Spread(sessions=4, resamples=4, seed=0)
        results.append(Outcome(variant, totals, net + 1, net, net - 1, net + 1, draws, spread))
    return results


def test_risk_tradeoff_keys_each_group_and_starts_the_risk_axis_at_0(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """All variants were one blue "variant"; and risks of 30% to 34% spread over the whole
    width, as if they were far apart."""
    results = _two_keys()
    ax = _drawn(monkeypatch, risk_tradeoff, results, recommend(results, max_risk=0.5))
    key = [t.get_text() for t in ax.get_legend().get_texts()]
    assert key[:2] == ["variant: ttl=5m", "variant: ttl=1h"]
    groups = {dots.get_label(): dots for dots in ax.collections}
    five, hour = groups["variant: ttl=5m"], groups["variant: ttl=1h"]
    assert [list(xy) for xy in five.get_offsets()] == [[30.0, 6.0], [33.0, 7.0]]
    assert [list(xy) for xy in hour.get_offsets()] == [[32.0, 5.0], [34.0, 6.0]]
    assert list(five.get_facecolor()[0]) != list(hour.get_facecolor()[0])
    assert five.get_paths()[0].vertices.tolist() != hour.get_paths()[0].vertices.tolist()
    low, high = ax.get_xlim()
    assert low <= 0 and high >= 34
    assert (34 - 30) / (high - low) < 0.15  # four points of risk look like four points


def test_a_group_looks_the_same_on_both_sweep_charts(monkeypatch: pytest.MonkeyPatch) -> None:
    from matplotlib.colors import to_rgb

    results = _two_keys()
    rec = recommend(results, max_risk=0.5)
    curve = _drawn(monkeypatch, savings_curve, results, rec)
    risk = _drawn(monkeypatch, risk_tradeoff, results, rec)
    dots = {d.get_label(): to_rgb(d.get_facecolor()[0]) for d in risk.collections
            if d.get_label().startswith("variant")}  # fmt: skip
    lines = {line.get_label(): to_rgb(line.get_color()) for line in curve.get_lines()}
    for ttl in ("5m", "1h"):
        assert lines[f"ttl={ttl}: as simulated"] == dots[f"variant: ttl={ttl}"]
    assert lines["ttl=5m: as simulated"] != lines["ttl=1h: as simulated"]


def test_the_table_names_variants_by_the_keys_last_part_when_that_tells_them_apart(
    tmp_path: Path,
) -> None:
    """Whole, `cached_microcompact.keep_recent=10,ttl=5m` was cut in the middle at 80
    columns; the recommendation and the JSON keep the whole names."""
    one = str(SAMPLES / "claude" / "projects" / "-home-dev-data-pipeline")
    base = ["sweep", one, "--policy", str(CLAUDE_CODE), "--no-cache", "--name", "claude-code",
            "--max-risk", "100"]  # fmt: skip
    grid = ["--grid", "cached_microcompact.keep_recent=2,5", "--grid", "ttl=5m,1h"]
    out = CliRunner().invoke(cli, [*base, *grid, "--out", str(tmp_path / "a")]).stdout.splitlines()
    rows = [line.split()[0] for line in out if line.startswith("keep_recent=")]
    assert rows == ["keep_recent=2,ttl=5m", "keep_recent=2,ttl=1h",
                    "keep_recent=5,ttl=5m", "keep_recent=5,ttl=1h"]  # fmt: skip
    assert "variant keys: keep_recent is cached_microcompact.keep_recent" in out
    assert not any(line.startswith("cached_microcompact.") for line in out)
    recommendation = next(line for line in out if line.startswith("recommendation: "))
    assert recommendation.startswith("recommendation: cached_microcompact.keep_recent=")
    # Two keys whose last parts are the same: the whole names, and no such line.
    same = ["--grid", "cached_microcompact.keep_recent=2,5", "--grid",
            "time_based_microcompact.keep_recent=1,2"]  # fmt: skip
    both = CliRunner().invoke(cli, [*base, *same, "--out", str(tmp_path / "b")])
    assert both.exit_code == 0, both.output
    lines = both.stdout.splitlines()
    assert sum(line.startswith("cached_microcompact.keep_recent=") for line in lines) == 4
    assert not any(line.startswith("variant keys:") for line in lines)


# ---------------------------------------------------------------- never dominated


def _dominates(p: Outcome, o: Outcome) -> bool:
    """`p` is at least as good as `o` on net savings and risk, and better on one."""
    net, risk = p.net_savings_pct, p.totals.refetch_risk
    at_least = net >= o.net_savings_pct and risk <= o.totals.refetch_risk
    return at_least and (net > o.net_savings_pct or risk < o.totals.refetch_risk)


def _random_sweep(data: Any) -> list[Outcome]:
    """A grid of one or two swept keys (keep_recent with its conservative direction, and a
    ttl with none), each variant with random net savings, risk and paired resamples drawn
    around a few shared levels, so ties, near-ties and intervals on both sides of 0 occur."""
    from hypothesis import strategies as st

    (_, stack, *_) = load_policy_file(CLAUDE_CODE)
    keeps = data.draw(st.lists(st.integers(1, 12), min_size=1, max_size=7, unique=True))
    ttls = data.draw(st.sampled_from([("5m",), ("5m", "1h")]))
    swept = (Swept("keep_recent", "int", 1), Swept("ttl", "str"))
    sessions = data.draw(st.sampled_from([1, 4]))
    spread = Spread(sessions=sessions, resamples=6, seed=0)
    level = st.sampled_from([-3.0, -1.0, 0.0, 0.5, 1.0, 2.0, 2.5, 4.0])
    results = []
    for k, ttl in itertools.product(keeps, ttls):
        variant = Variant((("keep_recent", k), ("ttl", ttl)), stack, swept, (k, ttl))
        cleared = data.draw(st.integers(0, 20))
        hazards = data.draw(st.integers(0, cleared))
        totals = PolicyTotals(variant.name, cleared_results=cleared, refetch_hazards=hazards)
        net = data.draw(level)
        if sessions == 1:
            results.append(Outcome(variant, totals, net + 1, net))
            continue
        noise = data.draw(st.lists(st.sampled_from([-3.0, -1.0, 0.0, 1.0, 3.0]),
                                   min_size=6, max_size=6))  # fmt: skip
        draws = np.array([net + d for d in noise])
        low, high = interval(draws)
        results.append(Outcome(variant, totals, net + 1, net, low, high, draws, spread))
    return results


@pytest.mark.slow
def test_the_recommendation_is_never_dominated_on_random_grids() -> None:
    """Whatever the grid, ties, intervals and directions: no variant saves at least as much
    at no more risk and is better on one of the two than the recommended one, and the
    recommended one keeps to the risk limit. (A real sweep recommended gap=10, +0.24% net at
    32% risk, while gap=5 had +2.42% at 18%: the stand-in was checked against the other
    stand-ins only.)"""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    @settings(max_examples=400, deadline=None, derandomize=True)
    @given(st.data(), st.sampled_from([0.2, 0.5, 1.0]))
    def check(data: Any, max_risk: float) -> None:
        results = _random_sweep(data)
        rec = recommend(results, max_risk)
        allowed = [o for o in results if o.totals.refetch_risk <= max_risk]
        assert (rec.best is None) == (not allowed)
        if rec.best is None:
            return
        assert rec.best.totals.refetch_risk <= max_risk
        assert not [o.variant.name for o in results if _dominates(o, rec.best)]
        assert any(o is rec.best for o in pareto_front(results))

    check()


def test_a_more_conservative_variant_that_the_best_dominates_is_not_recommended() -> None:
    """The reported case in small: gap=5 saves the most at the lowest risk; gap=10 is within
    noise of it and clears later (more conservative), but at a higher risk: gap=5 stays."""
    (_, stack, *_) = load_policy_file(CLAUDE_CODE)
    swept = (Swept("gap_threshold_minutes", "int", 1),)
    spread = Spread(sessions=4, resamples=4, seed=0)

    def gap(minutes: int, net: float, hazards: int, draws: list[float]) -> Outcome:
        variant = Variant((("gap_threshold_minutes", minutes),), stack, swept, (minutes,))
        totals = PolicyTotals(variant.name, cleared_results=100, refetch_hazards=hazards)
        low, high = interval(np.array(draws))
        return Outcome(variant, totals, net + 1, net, low, high, np.array(draws), spread)

    five = gap(5, 2.42, 18, [2.0, 4.0, 3.0, 0.68])
    ten = gap(10, 0.24, 32, [2.5, 4.0, -0.3, -3.24])  # five - ten: -0.5, 0, 3.3, 3.92
    paired = paired_interval(five, ten)
    assert paired is not None and paired[0] <= 0 < paired[1]  # within noise
    assert more_conservative(ten, five)
    rec = recommend([five, ten], max_risk=0.5)
    assert rec.best is five and rec.passed_over is None


TB = "time_based_microcompact"


@pytest.mark.slow
@pytest.mark.parametrize(
    ("preset", "name", "grids"),
    [
        # The reported case's grid, on the bundled corpus.
        ("claude-code", "time-based-only", [f"{TB}.gap_threshold_minutes=5..60:5"]),
        # Before the fix: keep_recent=6,gap=7 (+1.44% net, risk 0%) was recommended over
        # keep_recent=5,gap=7 (+1.98%, risk 0%), which it was compared with only as a rival
        # stand-in, not as the best.
        ("claude-code", "time-based-only",
         [f"{TB}.keep_recent=1..10", f"{TB}.gap_threshold_minutes=1..10"]),
        ("masking", "masking-study-n10", ["n=1..12", "ttl=5m,1h"]),
        ("anthropic-api", "api-defaults",
         ["keep=1..6", "trigger_input_tokens=20000..100000:20000"]),
        ("claude-code", "claude-code",
         ["cached_microcompact.trigger_threshold=2..20:3", "cached_microcompact.keep_recent=1..6"]),
    ],
)  # fmt: skip
def test_real_sweeps_never_recommend_a_dominated_variant(
    corpus: Path, tmp_path: Path, preset: str, name: str, grids: list[str]
) -> None:
    args = ["sweep", str(corpus), "--policy", preset, "--name", name, "--json", "--no-cache",
            "--out", str(tmp_path / "run"), *(a for g in grids for a in ("--grid", g))]  # fmt: skip
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    variants = doc["variants"]
    rec = doc["recommendation"]
    assert rec["params"] is not None, rec["reason"]
    best = next(v for v in variants if v["params"] == rec["params"])
    net, risk = best["net_savings_vs_baseline_pct"], best["refetch_risk"]
    beaten_by = [
        v["name"]
        for v in variants
        if v["net_savings_vs_baseline_pct"] >= net
        and v["refetch_risk"] <= risk
        and (v["net_savings_vs_baseline_pct"] > net or v["refetch_risk"] < risk)
    ]
    assert beaten_by == [], f"{best['name']} is beaten on both by {beaten_by}"


def test_resamples_drawn_in_chunks_are_the_draws_of_one_call(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Counts are drawn a few resamples at a time (memory stays flat in sessions): the same
    counts as drawing every resample at once, whatever the split."""
    import mcsim.replay.sweep as sweep

    def at_once(sessions: int, resamples: int, seed: int) -> np.ndarray:
        drawn = np.random.default_rng(seed).integers(0, sessions, size=(resamples, sessions))
        counts = np.zeros((resamples, sessions), dtype=np.int64)
        np.add.at(counts, (np.arange(resamples)[:, None], drawn), 1)
        return counts

    for cells in (7, 50, 10_000):  # one resample a chunk, several, all at once
        monkeypatch.setattr(sweep, "_CHUNK_CELLS", cells)
        for sessions, resamples in ((7, 13), (3, 1000), (1, 5)):
            assert (
                resample_counts(sessions, resamples, 3) == at_once(sessions, resamples, 3)
            ).all()


def test_savings_curve_draws_an_estimate_just_outside_its_collapsed_interval(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Every session saving alike collapses the interval onto the estimate, and the last bits
    of two sums can put the estimate outside it: matplotlib refused the negative error bar
    ("'yerr' must not contain negative values") and the sweep ended in a traceback."""
    results = [_keep(k, 5.0, [5.0] * 4, 1, 5.0 + 1e-14, 5.0 + 2e-14) for k in (1, 2, 3)]
    results.append(_keep(4, 5.0, [5.0] * 4, 1, 5.0 - 2e-14, 5.0 - 1e-14))
    ax = _drawn(monkeypatch, savings_curve, results, recommend(results, max_risk=0.5))
    assert ax.get_lines()  # drawn


def test_switches_that_clear_more_are_not_taken_for_clearing_less() -> None:
    """`latched: true` applies clear_thinking on more calls, `keep_counts_excluded: true`
    keeps fewer of the results clear_tool_uses may clear: the false side of each is the
    conservative one, so a lower re-fetch risk alone never makes the true side "clear less"
    (a sweep of the samples recommended latched=true that way, clearing 53,719 tokens where
    latched=false cleared 53,633)."""
    (_, stack, *_) = load_policy_file(CLAUDE_CODE)
    grid = [parse_axis("clear_thinking.latched=true,false")]
    latched, unlatched = build_variants(stack, grid)

    def run(variant: Variant, hazards: int) -> Outcome:
        totals = PolicyTotals(variant.name, cleared_results=10, refetch_hazards=hazards)
        return Outcome(variant, totals, 1.0, 0.0)

    assert more_conservative(run(unlatched, 5), run(latched, 1))
    assert not more_conservative(run(latched, 1), run(unlatched, 5))
    scenarios = parse_policies({"policies": [{"name": "p", "kind": "clear_tool_uses"}]}, "p.yaml")
    api = next(s for s in scenarios if s.name == "p")
    counts, alone = build_variants(api, [parse_axis("keep_counts_excluded=true,false")])
    assert more_conservative(run(alone, 5), run(counts, 1))
    assert not more_conservative(run(counts, 1), run(alone, 5))


def test_variant_names_spell_values_as_a_policy_file_does() -> None:
    """A variant's name is what to write in the policy file: true, false and none, not
    Python's True, False and None (a file with `after_gap_minutes: None` is refused)."""
    (_, stack, *_) = load_policy_file(CLAUDE_CODE)
    grid = [
        parse_axis("clear_thinking.latched=true,False"),
        parse_axis("clear_thinking.after_gap_minutes=None,60"),
    ]
    names = [v.name for v in build_variants(stack, grid)]
    assert names == [
        "clear_thinking.latched=true,clear_thinking.after_gap_minutes=none",
        "clear_thinking.latched=true,clear_thinking.after_gap_minutes=60",
        "clear_thinking.latched=false,clear_thinking.after_gap_minutes=none",
        "clear_thinking.latched=false,clear_thinking.after_gap_minutes=60",
    ]
    assert [v.scenario.name for v in build_variants(stack, grid)] == names


def test_keep_all_is_the_most_conservative_keep() -> None:
    """clear_thinking's `keep: all` keeps every turn's thinking: no number of turns kept is
    more conservative. A sweep of keep=all,1,2,3 on the corpus recommended keep=3 as
    "within noise of the highest, keep=all ..., and clears less"."""
    scenarios = parse_policies({"policies": [{"name": "ct", "kind": "clear_thinking"}]}, "p.yaml")
    ct = next(s for s in scenarios if s.name == "ct")
    every, three = build_variants(ct, [parse_axis("keep=all,3")])

    def run(variant: Variant, hazards: int) -> Outcome:
        totals = PolicyTotals(variant.name, cleared_results=10, refetch_hazards=hazards)
        return Outcome(variant, totals, 1.0, 0.0)

    assert not more_conservative(run(three, 0), run(every, 5))
    assert more_conservative(run(every, 5), run(three, 0)) is False  # "all" is never a stand-in
    rec = recommend([run(every, 0), run(three, 0)], max_risk=0.5)
    assert rec.best is not None and rec.best.variant is every and rec.passed_over is None


def test_a_stand_in_chosen_for_its_risk_alone_does_not_clear_less() -> None:
    """With every swept value of no direction (ttl), a stand-in is one with a lower re-fetch
    risk: it clears as much, and the reason says what it has, not "clears less"."""
    (_, stack, *_) = load_policy_file(CLAUDE_CODE)
    five, hour = build_variants(stack, [parse_axis("ttl=5m,1h")])
    spread = Spread(sessions=4, resamples=4, seed=0)

    def run(variant: Variant, net: float, draws: list[float], hazards: int) -> Outcome:
        totals = PolicyTotals(variant.name, cleared_results=10, refetch_hazards=hazards)
        low, high = interval(np.array(draws))
        return Outcome(variant, totals, net + 1, net, low, high, np.array(draws), spread)

    best = run(five, 10.0, [10, 10, 10, 10], 3)
    safer = run(hour, 9.0, [11, 9, 9, 7], 2)
    rec = recommend([best, safer], max_risk=0.5)
    assert rec.best is safer and rec.passed_over is best
    assert rec.reason.startswith(
        "within noise of the highest, ttl=5m (difference +1.00 points, 95% interval "
        "-0.85..+2.85), and has a lower re-fetch risk; "
    )
