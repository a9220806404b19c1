"""The replay's verdict and its baseline: one line that says which policy to ship, in dollars,
at what risk and how sure; the baseline every "vs baseline" figure is against, named, and the
same in replay, sweep and report whatever TTL the policy file sets."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from click.testing import CliRunner

from mcsim.cli import cli
from mcsim.replay.results import PolicyTotals, SessionReplay
from mcsim.replay.run import ReplayReport
from mcsim.replay.scenario import Scenario, baseline, parse_policies
from mcsim.replay.verdict import verdict, weigh

# The bundled corpus's recorded spend (tests/data/corpus/README.md, "Reference figures"):
# with no pruning and the cache as recorded the replay reproduces it (fidelity 0.000%).
CORPUS_COST_USD = 14.0820


def _run(*args: str) -> dict[str, Any]:
    result = CliRunner().invoke(cli, [*args, "--json"])
    assert result.exit_code == 0, result.output
    doc: dict[str, Any] = json.loads(result.stdout)
    return doc


@pytest.fixture(scope="module")
def runs(corpus: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    """The corpus replayed under the `all` and `ttl-1h` presets, and claude-code swept over
    ttl, sharing one cache."""
    cache = str(tmp_path_factory.mktemp("cache"))
    out = tmp_path_factory.mktemp("runs")
    docs = {
        preset: _run("replay", str(corpus), "--policy", preset, "--cache-dir", cache, "--out",
                     str(out / preset))
        for preset in ("all", "ttl-1h")
    }  # fmt: skip
    docs["sweep"] = _run("sweep", str(corpus), "--policy", "claude-code", "--name",
                         "claude-code", "--grid", "ttl=5m,1h", "--cache-dir", cache, "--out",
                         str(out / "sweep"))  # fmt: skip
    docs["out"] = {"path": str(out)}
    return docs


def _policy(doc: dict[str, Any], name: str) -> dict[str, Any]:
    return next(p for p in doc["policies"] if p["name"] == name)


@pytest.mark.slow
def test_the_baseline_is_the_cache_as_recorded_whatever_ttl_the_file_sets(
    runs: dict[str, dict[str, Any]],
) -> None:
    for preset in ("all", "ttl-1h"):
        base = runs[preset]["baseline"]
        assert base["name"] == "baseline"
        assert base["cost_usd"] == pytest.approx(CORPUS_COST_USD, abs=1e-4)
        assert base["description"].startswith("no pruning, cache as recorded (TTL ")
        assert sum(base["recorded_ttls"].values()) == runs[preset]["recorded"]["calls"]
    # ttl-1h's defaults set a 1-hour TTL: that no-pruning run is shown beside, named.
    assert runs["all"]["baseline"]["others"] == []
    (other,) = runs["ttl-1h"]["baseline"]["others"]
    assert (other["name"], other["cache"]) == ("baseline:ttl=1h", "TTL 1h")
    assert _policy(runs["ttl-1h"], "baseline:ttl=1h")["cost_usd"] == other["cost_usd"]
    # The same policy under the same settings: the same figures in both files and the sweep.
    one, two = _policy(runs["all"], "claude-code-1h"), _policy(runs["ttl-1h"], "claude-code-1h")
    for key in ("cost_usd", "savings_vs_baseline_pct", "net_savings_vs_baseline_pct",
                "net_saved_usd", "net_savings_low_pct", "net_savings_high_pct"):  # fmt: skip
        assert one[key] == two[key], key
    swept = next(v for v in runs["sweep"]["variants"] if v["params"] == {"ttl": "1h"})
    assert swept["cost_usd"] == pytest.approx(one["cost_usd"], rel=1e-12)
    assert swept["net_savings_vs_baseline_pct"] == pytest.approx(
        one["net_savings_vs_baseline_pct"], rel=1e-12
    )
    assert swept["net_saved_usd"] == pytest.approx(one["net_saved_usd"], rel=1e-12)
    assert runs["sweep"]["baseline"]["description"] == runs["all"]["baseline"]["description"]


@pytest.mark.slow
def test_summary_parquet_names_the_baseline_and_the_dollars(
    runs: dict[str, dict[str, Any]],
) -> None:
    summary = pl.read_parquet(Path(runs["out"]["path"]) / "ttl-1h" / "summary.parquet")
    assert set(summary["baseline"]) == {runs["ttl-1h"]["baseline"]["description"]}
    caches = dict(zip(summary["policy"], summary["cache"], strict=True))
    assert caches == {"recorded": "cache as recorded", "baseline": "cache as recorded",
                      "baseline:ttl=1h": "TTL 1h", "claude-code-1h": "TTL 1h",
                      "claude-code-5m": "TTL 5m"}  # fmt: skip
    recorded = summary.filter(pl.col("policy") == "recorded")["cost_usd"][0]
    for row in summary.iter_rows(named=True):
        assert row["saved_usd"] == pytest.approx(recorded - row["cost_usd"])
        net = row["cost_usd"] + row["refetch_cost_usd"]
        assert row["net_saved_usd"] == pytest.approx(recorded - net)
    assert summary["verdict"].sum() == 1


@pytest.mark.slow
def test_the_verdict_is_stated_alike_in_the_terminal_json_and_run_json(
    runs: dict[str, dict[str, Any]], corpus: Path, tmp_path: Path
) -> None:
    doc = runs["all"]
    chosen = doc["verdict"]
    best = _policy(doc, chosen["policy"])
    assert best["verdict"] and sum(p["verdict"] for p in doc["policies"]) == 1
    assert chosen["net_saved_usd"] == best["net_saved_usd"]
    assert chosen["net_savings_vs_baseline_pct"] == best["net_savings_vs_baseline_pct"]
    assert chosen["net_savings_interval_pct"] == [best["net_savings_low_pct"],
                                                  best["net_savings_high_pct"]]  # fmt: skip
    # Never beaten on both net savings and risk by a policy that cleared something.
    for p in doc["policies"]:
        if p["cleared_tokens"] and p["name"] != best["name"]:
            better = p["net_savings_vs_baseline_pct"] >= best["net_savings_vs_baseline_pct"]
            safer = p["refetch_risk"] <= best["refetch_risk"]
            assert not (better and safer), p["name"]
    run = json.loads((Path(runs["out"]["path"]) / "all" / "run.json").read_text())
    assert run["verdict"] == chosen
    text = CliRunner().invoke(
        cli, ["replay", str(corpus), "--policy", "all", "--no-cache", "--out", str(tmp_path / "r")]
    )
    assert chosen["text"] in text.stdout.splitlines()


# ---------------------------------------------------------------- the rule and its words


def _report(policies: dict[str, list[tuple[float, float, int, int, float]]]) -> ReplayReport:
    """A finished report of sessions costing $10 each as recorded and without pruning;
    per policy and session: (cost, re-fetch cost, cleared results, hazards, cache-edit
    re-read cost). Every policy clears 1,000 tokens a session."""
    names = list(policies)
    layers = parse_policies(
        {"policies": [{"name": n, "kind": "keep_last_n"} for n in names]}, "test"
    )[1:]
    report = ReplayReport([baseline(), *layers])
    sessions = len(next(iter(policies.values())))
    for i in range(sessions):
        totals = [PolicyTotals("baseline", cost_usd=10.0)]
        for name in names:
            cost, refetch, cleared, hazards, reread = policies[name][i]
            totals.append(PolicyTotals(name, cost_usd=cost, refetch_cost_usd=refetch,
                                       cleared_results=cleared, refetch_hazards=hazards,
                                       cleared_tokens=1_000, edit_reread_usd=reread))  # fmt: skip
        recorded = PolicyTotals("recorded", cost_usd=10.0)
        report.add(SessionReplay(
            session_id=f"s{i}", project="p", start_s=i, end_s=i, calls=1, recorded=recorded,
            policies=totals, fidelity_error_tokens=0, fidelity_weight_tokens=0,
            calibration_fallbacks=0,
        ))  # fmt: skip
    report.finish()
    return report


def test_a_policy_that_clearly_saves_is_named_with_its_dollars_risk_and_interval() -> None:
    # "a" saves $1 (+$0.5 re-fetches) on each of 4 sessions: +5% net on every resample.
    report = _report({"a": [(9.0, 0.5, 10, 2, 0.0)] * 4, "b": [(9.8, 0.0, 10, 1, 0.0)] * 4})
    v = verdict(report)
    assert v.best is not None and v.best.variant.name == "a" and v.saves_clearly
    assert v.saved_usd == pytest.approx(40 - 38)
    assert v.text == (
        "verdict: a saves $2.00 of the $40.00 recorded, net of re-fetches (+5.00% vs baseline, "
        "95% interval +5.00..+5.00 over 4 sessions); re-fetch risk 20%"
    )
    assert verdict(report) is v  # drawn once per report


def test_savings_within_noise_of_nothing_are_not_called_clear() -> None:
    # +10% net on two sessions, -2% on two: some resamples save nothing.
    report = _report({"a": [(9.0, 0.0, 10, 1, 0.0)] * 2 + [(10.2, 0.0, 10, 1, 0.0)] * 2})
    v = verdict(report)
    assert v.best is not None and not v.saves_clearly
    assert v.best.low_pct <= 0 < v.best.net_savings_pct
    assert v.text.startswith("verdict: no policy saves clearly; the best, a, saves $1.60 ")


def test_the_cache_edit_range_and_the_risk_limit_are_said_next_to_the_figure() -> None:
    # "a": $1 saved a session as modelled, $0.80 of it billed again if deleted tokens are
    # read: +10% net, or 1 - (9 + 0.8) / 10 = +2% under the other reading.
    # "c" saves more but re-fetches 60% of what it clears: over the 50% limit.
    report = _report({"a": [(9.0, 0.0, 10, 1, 0.8)] * 3, "c": [(8.0, 0.0, 10, 6, 0.0)] * 3})
    v = verdict(report)
    assert v.best is not None and v.best.variant.name == "a"
    assert v.best.reread_net_pct == pytest.approx(2.0)
    assert v.text.endswith(
        "; not weighed, re-fetch risk over 50%: c; rests on cache edits, whose billing "
        "Anthropic does not document: +10.00% net if deleted tokens are billed no more "
        "(modelled), +2.00% if they are still billed as cache reads"
    )
    assert v.as_json()["net_savings_if_edits_reread_pct"] == pytest.approx(2.0)
    # At a lower limit nothing qualifies, and the line says which comes closest.
    assert weigh(report, 0.05).text == (
        "verdict: no policy keeps re-fetch risk at or under 5% (the lowest: a, 10%)"
    )


def test_a_policy_that_costs_more_or_clears_nothing_is_said_so() -> None:
    dearer = _report({"a": [(10.5, 0.0, 10, 1, 0.0)] * 2})
    assert verdict(dearer).text.startswith(
        "verdict: no policy saves; the best, a, costs $1.00 more than the $20.00 recorded"
    )
    # Under a dollar, four decimals: a fifth of a cent more is not "$0.00 more".
    cent = _report({"a": [(10.0011, 0.0, 10, 1, 0.0)] * 2})
    assert verdict(cent).text.startswith(
        "verdict: no policy saves; the best, a, costs $0.0022 more than the $20.00 recorded"
    )
    idle = _report({"a": [(10.0, 0.0, 0, 0, 0.0)] * 2})
    idle.policies["a"].cleared_tokens = 0
    assert verdict(idle).text == (
        "verdict: no policy cleared anything, so none saves (the notes say why)"
    )
    only = ReplayReport([baseline(), Scenario("baseline:ttl=1h", baseline().layers, "1h")])
    assert verdict(only).text == "verdict: no policy to weigh (only baselines ran)"


def test_a_policy_whose_risk_no_result_could_assess_is_not_weighed_as_safe() -> None:
    """Task, MCP or other tools whose results mcsim cannot key: the risk is unknown, not 0%.
    "b" saves the most, but nothing it cleared could be assessed."""
    report = _report({"a": [(9.0, 0.0, 10, 2, 0.0)] * 3, "b": [(8.0, 0.0, 10, 0, 0.0)] * 3})
    report.policies["b"].refetch_unassessed = 30  # all 30 of its cleared results
    v = verdict(report)
    assert v.best is not None and v.best.variant.name == "a"
    assert v.text.endswith("; not weighed, re-fetch risk not assessed: b")
    alone = _report({"b": [(8.0, 0.0, 10, 0, 0.0)] * 3})
    alone.policies["b"].refetch_unassessed = 30
    assert verdict(alone).text == (
        "verdict: no policy keeps re-fetch risk at or under 50% that it can assess: no "
        "policy's cleared results could be checked"
    )
