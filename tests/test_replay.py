"""`mcsim replay` end to end, on the real corpus and the bundled samples."""

from __future__ import annotations

import json
import math
import random
import re
import shutil
from pathlib import Path

import polars as pl
import pytest
from click.testing import CliRunner
from conftest import REPO, SAMPLES, forbid_tokenizing
from hypothesis import given, settings
from hypothesis import strategies as st
from polars.testing import assert_frame_equal

from mcsim.accounting.recorded import ExactSums
from mcsim.cli import cli
from mcsim.replay.run import PolicyTotals

ALL = REPO / "policies" / "all.yaml"


@pytest.fixture(scope="module")
def corpus_run(corpus: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, Path]:
    out = tmp_path_factory.mktemp("run") / "corpus"
    cache = tmp_path_factory.mktemp("cache")
    result = CliRunner().invoke(
        cli,
        [
            "replay",
            str(corpus),
            "--policy",
            str(ALL),
            "--out",
            str(out),
            "--json",
            "--cache-dir",
            str(cache),
        ],
    )
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout), out


def test_fidelity_on_the_corpus(corpus_run: tuple[dict, Path]) -> None:
    doc, _ = corpus_run
    assert doc["fidelity"]["overall_error"] <= 0.01
    assert doc["fidelity"]["worst_session_error"] <= 0.05
    assert doc["fidelity"]["sessions_over_threshold"] == []
    assert doc["recorded"]["cost_usd"] == pytest.approx(14.0820, abs=1e-4)
    base = doc["policies"][0]
    assert base["name"] == "baseline"
    assert base["cost_usd"] == pytest.approx(doc["recorded"]["cost_usd"], rel=0.01)


def _largest_recorded_prompt(corpus: Path) -> int:
    """Independently of mcsim: the largest input + cache write + cache read in the corpus."""
    largest = 0
    for path in corpus.rglob("*.jsonl"):
        for line in path.read_text(errors="replace").splitlines():
            try:
                usage = json.loads(line)["message"]["usage"]
                prompt = sum(
                    usage.get(k) or 0
                    for k in (
                        "input_tokens",
                        "cache_creation_input_tokens",
                        "cache_read_input_tokens",
                    )
                )
            except (ValueError, KeyError, TypeError):
                continue
            largest = max(largest, prompt)
    return largest


def test_pruning_policies_clear_tokens_and_naive_masking_breaks_more(
    corpus_run: tuple[dict, Path], corpus: Path
) -> None:
    doc, _ = corpus_run
    p = {x["name"]: x for x in doc["policies"]}
    for name in [
        "claude-code",
        "api-defaults",
        "swe-agent-n5-polling",
        "masking-study-n10",
        "naive-keep-6",
        "claude-code-1h",
    ]:
        assert p[name]["cleared_tokens"] > 0, name
    # Claude Code's API configuration triggers at 180k: no corpus prompt gets there.
    assert p["claude-code-api"]["cleared_tokens"] == 0
    largest = _largest_recorded_prompt(corpus)
    assert p["baseline"]["max_prompt_tokens"] == p["claude-code-api"]["max_prompt_tokens"]
    assert p["baseline"]["max_prompt_tokens"] == largest < 180_000
    assert all(x["max_prompt_tokens"] <= largest for x in doc["policies"])
    # Its rewrites drop the reads more often; announced by the policy itself, they are drops
    # (policy_clearing), not breaks, as Claude Code's detector counts.
    assert p["naive-keep-6"]["cache_drops"] > p["baseline"]["cache_drops"]
    assert p["naive-keep-6"]["drops_by_cause"]["policy_clearing"] > 0
    assert p["naive-keep-6"]["breaks_by_cause"].get("policy_clearing", 0) == 0
    assert p["naive-keep-6"]["cost_usd"] > p["baseline"]["cost_usd"]
    assert p["claude-code"]["cost_usd"] < p["baseline"]["cost_usd"]
    for x in doc["policies"]:
        assert set(x) >= {
            "name",
            "cost_usd",
            "savings_vs_recorded_pct",
            "savings_vs_baseline_pct",
            "cleared_tokens",
            "cache_breaks",
            "cache_drops",
            "cache_hit_ratio",
        }


def test_run_directory(corpus_run: tuple[dict, Path]) -> None:
    doc, out = corpus_run
    assert doc["out_dir"] == str(out)
    names = sorted(p.name for p in out.iterdir())
    assert names == [
        "break_timeline.png",
        "breaks.parquet",
        "calls.parquet",
        "context_size.png",
        "cumulative_cost.png",
        "run.json",
        "savings.png",
        "sessions.parquet",
        "summary.parquet",
    ]
    summary = pl.read_parquet(out / "summary.parquet")
    assert summary["policy"].to_list()[:2] == ["recorded", "baseline"]
    assert summary["schema_version"].unique().to_list() == [9]
    calls = pl.read_parquet(out / "calls.parquet")
    per_policy = calls.group_by("policy").agg(pl.col("cost_usd").sum(), pl.len())
    cost = dict(zip(per_policy["policy"], per_policy["cost_usd"], strict=True))
    for row in summary.iter_rows(named=True):
        assert cost[row["policy"]] == pytest.approx(row["cost_usd"])
    assert set(per_policy["len"].to_list()) == {355}
    run = json.loads((out / "run.json").read_text())
    assert (
        run["policy_file_sha256"]
        and run["price_table"] == "anthropic-list-2026-08+openai-list-2026-12"
    )
    assert len(run["files"]) == 11 and all(f["bytes"] > 0 for f in run["files"])
    for png in out.glob("*.png"):
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.slow
def test_identical_inputs_give_identical_parquet(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MCSIM_CACHE_DIR", str(tmp_path / "cache"))
    for name in ("a", "b"):
        result = CliRunner().invoke(
            cli, ["replay", str(SAMPLES), "--policy", str(ALL), "--out", str(tmp_path / name)]
        )
        assert result.exit_code == 0, result.output
    files = {
        name: sorted(
            p.relative_to(tmp_path / name).as_posix()
            for p in (tmp_path / name).rglob("*.parquet")
            if p.is_file()
        )
        for name in ("a", "b")
    }
    assert files["a"] == files["b"] and len(files["a"]) == 1 + 3 * 9  # 9 runs (all.yaml)
    for table in files["a"]:
        assert (tmp_path / "a" / table).read_bytes() == (tmp_path / "b" / table).read_bytes()


@pytest.mark.slow
def test_second_run_reads_the_cache_and_tokenizes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    args = [
        "replay",
        str(SAMPLES),
        "--policy",
        str(ALL),
        "--json",
        "--cache-dir",
        str(tmp_path / "cache"),
    ]
    first = CliRunner().invoke(cli, [*args, "--out", str(tmp_path / "one")])
    assert first.exit_code == 0
    assert len(list((tmp_path / "cache").glob("*.sessions"))) == 2  # one per project folder

    forbid_tokenizing(monkeypatch, "a cached replay must not tokenize")
    second = CliRunner().invoke(cli, [*args, "--out", str(tmp_path / "two")])
    assert second.exit_code == 0, second.output
    assert json.loads(second.stdout)["policies"] == json.loads(first.stdout)["policies"]
    assert_frame_equal(
        pl.read_parquet(tmp_path / "one" / "calls.parquet"),
        pl.read_parquet(tmp_path / "two" / "calls.parquet"),
    )


def test_bad_policy_file_exits_2_before_writing(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("policies: [{name: a, kind: keep_last_n, n: -1}]\n")
    out = tmp_path / "out"
    result = CliRunner().invoke(
        cli, ["replay", str(SAMPLES), "--policy", str(bad), "--out", str(out)]
    )
    assert result.exit_code == 2
    assert result.stderr.strip() == (
        f"Error: {bad}: policy 'a': key 'n': must be a whole number from 1 to 1_000_000_000, not -1"
    )
    assert not out.exists()
    missing = CliRunner().invoke(cli, ["replay", str(SAMPLES)])
    assert missing.exit_code == 2 and "--policy" in missing.stderr


@pytest.mark.slow
def test_existing_run_dir_is_refused(tmp_path: Path) -> None:
    out = tmp_path / "run"
    out.mkdir()
    (out / "summary.parquet").write_text("old")
    args = ["replay", str(SAMPLES), "--policy", str(ALL), "--out", str(out), "--no-cache"]
    result = CliRunner().invoke(cli, [*args, "--force"])
    assert result.exit_code == 2 and "not a run directory written by mcsim" in result.stderr
    # A run of an mcsim from before run.json had a format marker.
    (out / "run.json").write_text('{"mcsim_version": "0.0.9"}')
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 2 and "already holds a run" in result.stderr
    assert (out / "summary.parquet").read_text() == "old"
    assert CliRunner().invoke(cli, [*args, "--force"]).exit_code == 0
    assert json.loads((out / "run.json").read_text())["format"] == "mcsim-run/1"


def test_samples_summary_table(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        cli,
        ["replay", str(SAMPLES), "--policy", str(ALL), "--out", str(tmp_path / "r"), "--no-cache"],
    )
    assert result.exit_code == 0
    lines = result.stdout.splitlines()
    headers = ["policy", "cost $", "saved $", "vs recorded", "vs baseline", "net saved $",
               "net vs baseline", "re-fetch risk", "cleared", "hit %", "breaks",
               "unexpected"]  # fmt: skip
    assert re.split(r"\s{2,}", lines[0].strip()) == headers
    assert lines[2].startswith("recorded") and lines[3].startswith("baseline")
    assert (
        "fidelity (no-pruning replay vs recording, reads+writes): overall 0.000%" in result.stdout
    )
    # saved $ is the recorded cost less the policy's; net saved $ less its re-fetches too.
    rows = {line.split()[0]: line.split() for line in lines[2:11]}
    recorded = float(rows["recorded"][1])
    claude = rows["claude-code"]
    assert float(claude[2]) == pytest.approx(recorded - float(claude[1]), abs=1e-4)
    assert float(claude[5]) < float(claude[2])  # its re-fetches are paid
    # Every policy of all.yaml saves nothing net of re-fetches on the samples.
    assert lines[11].startswith("verdict: no policy saves")
    assert lines[12].startswith("baseline: no pruning, cache as recorded (TTL ")


def test_policies_lists_every_kind() -> None:
    result = CliRunner().invoke(cli, ["policies", "--json"])
    kinds = {k["kind"]: k for k in json.loads(result.stdout)["kinds"]}
    assert set(kinds) == {
        "none",
        "time_based_microcompact",
        "cached_microcompact",
        "clear_tool_uses",
        "clear_thinking",
        "keep_last_n",
    }
    params = {p["name"]: p["default"] for p in kinds["time_based_microcompact"]["params"]}
    assert params == {"gap_threshold_minutes": 60.0, "keep_recent": 5}


def _one_project(corpus: Path, folder: Path) -> Path:
    """A copy of one corpus project (3 transcripts) to modify."""
    folder.mkdir(parents=True)
    for f in (corpus / "-archives-m-claude").glob("*.jsonl"):
        shutil.copy(f, folder / f.name)
    return folder


@pytest.mark.slow
def test_replay_counts_and_reports_skipped_lines(corpus: Path, tmp_path: Path) -> None:
    project = _one_project(corpus, tmp_path / "in" / "p")
    broken = project / "f225835b-3612-4093-903f-bd4538fb7cb9.jsonl"
    with broken.open("ab") as fh:
        fh.write(b'{"bad json\n[1, 2]\n')
    args = ["replay", str(tmp_path / "in"), "--policy", str(ALL), "--no-cache"]
    result = CliRunner().invoke(cli, [*args, "--out", str(tmp_path / "r"), "--json"])
    assert result.exit_code == 0, result.output
    skipped = json.loads(result.stdout)["skipped"]
    assert skipped["by_reason"] == {"invalid_json": 1, "not_object": 1}
    assert [(e["line"], e["reason"]) for e in skipped["examples"]] == [
        (102, "invalid_json"),
        (103, "not_object"),
    ]
    text = CliRunner().invoke(cli, [*args, "--out", str(tmp_path / "t")]).stdout
    assert "skipped 2 lines (invalid_json 1, not_object 1):" in text
    largest = _largest_recorded_prompt(project)  # the project has no sub-agent
    assert (
        "note: claude-code-api cleared nothing: the prompt never exceeded 180,000 tokens "
        f"(largest {largest:,})\n"
    ) in text


@pytest.mark.slow
def test_a_policy_that_cleared_nothing_says_why_in_its_own_terms(tmp_path: Path) -> None:
    from lines import SESSION, assistant, tool_result, tool_use, usage, user, write

    # Two calls 25 minutes apart (the tool result is written just before the second): prompts
    # 3 + 12,000 = 12,003 and 3 + 12,342 = 12,345 tokens, the second a cold write.
    write(
        tmp_path / "in" / "p" / f"{SESSION}.jsonl",
        [
            user("u1", None, 0),
            assistant(
                "a1", "u1", 0, "m1", "r1", u=usage(write=12_000), content=[tool_use("t1", "Read")]
            ),
            user("u2", "a1", 1_500, tool_result("t1", "file text")),
            assistant("a2", "u2", 1_500, "m2", "r2", u=usage(write=12_342)),
        ],
    )
    policy = tmp_path / "p.yaml"
    policy.write_text(
        "policies:\n"
        "  - {name: api, kind: clear_tool_uses}\n"
        "  - {name: gap, kind: time_based_microcompact}\n"
    )
    notes = [
        "api cleared nothing: the prompt never exceeded 100,000 tokens (largest 12,345)",
        "gap cleared nothing: never fired: no idle gap reached 60 min (longest 25 min on a "
        "main thread)",
    ]
    args = ["replay", str(tmp_path / "in"), "--policy", str(policy), "--no-cache"]
    text = CliRunner().invoke(cli, [*args, "--out", str(tmp_path / "t")])
    assert text.exit_code == 0, text.output
    assert [line for line in text.stdout.splitlines() if "cleared nothing" in line] == [
        f"note: {note}" for note in notes
    ]
    doc = CliRunner().invoke(cli, [*args, "--out", str(tmp_path / "j"), "--json"])
    assert json.loads(doc.stdout)["notes"][1:] == notes
    assert CliRunner().invoke(cli, ["report", str(tmp_path / "t")]).exit_code == 0
    report = (tmp_path / "t" / "report.md").read_text()
    assert all(f"\n{note}.\n" in report for note in notes)


@pytest.mark.slow
def test_a_warm_run_names_skipped_lines_by_its_own_paths(
    corpus: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = _one_project(corpus, tmp_path / "in" / "p")
    with (project / "f225835b-3612-4093-903f-bd4538fb7cb9.jsonl").open("ab") as fh:
        fh.write(b'{"bad json\n')
    monkeypatch.chdir(tmp_path)
    args = ["--policy", str(ALL), "--cache-dir", str(tmp_path / "cache"), "--json"]
    files = []
    for name, path in (("cold", "in"), ("warm", str(tmp_path / "in"))):
        result = CliRunner().invoke(cli, ["replay", path, *args, "--out", str(tmp_path / name)])
        assert result.exit_code == 0, result.output
        examples = json.loads(result.stdout)["skipped"]["examples"]
        files.append({e["file"] for e in examples if e["reason"] == "invalid_json"})
    assert files == [
        {"in/p/f225835b-3612-4093-903f-bd4538fb7cb9.jsonl"},
        {str(project / "f225835b-3612-4093-903f-bd4538fb7cb9.jsonl")},
    ]


@pytest.mark.slow
def test_a_grown_transcript_is_parsed_again_but_only_new_text_is_tokenized(
    corpus: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = _one_project(corpus, tmp_path / "in" / "p")
    args = ["replay", str(tmp_path / "in"), "--policy", str(ALL), "--json"]
    args += ["--cache-dir", str(tmp_path / "cache")]
    first = CliRunner().invoke(cli, [*args, "--out", str(tmp_path / "one")])
    assert first.exit_code == 0, first.output
    # The transcript grows (as Claude Code appends): a new cache key, so the unit is parsed
    # and calibrated again; its text was all seen before, so nothing is tokenized.
    grown = project / "f225835b-3612-4093-903f-bd4538fb7cb9.jsonl"
    with grown.open("ab") as fh:
        fh.write(b'{"type": "summary", "summary": "later"}\n')

    forbid_tokenizing(monkeypatch, "text seen before must not be tokenized again")
    second = CliRunner().invoke(cli, [*args, "--out", str(tmp_path / "two")])
    assert second.exit_code == 0, second.output
    # The grown unit's new entry replaced its old one (same files, new stamp inside).
    assert len(list((tmp_path / "cache").glob("*.sessions"))) == 1
    assert json.loads(second.stdout)["policies"] == json.loads(first.stdout)["policies"]


def test_savings_of_equal_costs_summed_in_another_order_are_zero() -> None:
    from mcsim.accounting.recorded import savings_pct

    parts = [0.1, 0.2, 0.3, 1e-3, 7.77]
    forward, backward = sum(parts), sum(reversed(parts))
    assert forward != backward  # 8.371 in two orders: the last bits differ
    assert savings_pct(forward, backward) == 0.0 and savings_pct(backward, forward) == 0.0
    assert savings_pct(9.0, 10.0) == pytest.approx(10.0)  # a real saving stays
    assert savings_pct(11.0, 10.0) == pytest.approx(-10.0)
    assert savings_pct(5.0, 0.0) == 0.0


def test_tokens_add_and_total_every_kind() -> None:
    """One vector type for every token count: added kind by kind (not joined, as tuples are),
    summed over calls' usage, and the PolicyTotals of a run merged by it."""
    from mcsim.model import Tokens, Usage
    from mcsim.replay.results import PolicyTotals

    n = len(Tokens._fields)
    a = Tokens._make(10 ** (i + 1) for i in range(n))
    b = Tokens._make(i + 1 for i in range(n))
    assert list(a + b) == [10 ** (i + 1) + i + 1 for i in range(n)]
    usages = [Usage(*b), Usage(*a)]
    assert Tokens.total(usages) == a + b == Tokens.total([a, b])
    assert usages[1].tokens == a and a.prompt_tokens == 10 + 100 + 1000 + 10000
    run = PolicyTotals("p", tokens=a)
    run.merge(PolicyTotals("p", tokens=b))
    assert run.tokens == a + b


def test_one_session_over_the_fidelity_threshold_reads_in_the_singular(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from mcsim.accounting.prices import default_table
    from mcsim.outputs.replay_tables import replay_text
    from mcsim.replay.run import ReplayReport, run_replay
    from mcsim.replay.scenario import load_policy_file

    report = run_replay([str(SAMPLES)], load_policy_file(ALL), default_table(), cache_dir=None,
                        workers=1)  # fmt: skip
    monkeypatch.setattr(ReplayReport, "sessions_over_threshold", lambda self: self.sessions[:1])
    assert "LOW: 1 session over 5%" in replay_text(report)
    monkeypatch.setattr(ReplayReport, "sessions_over_threshold", lambda self: self.sessions[:2])
    assert "LOW: 2 sessions over 5%" in replay_text(report)


def test_a_fidelity_threshold_under_one_percent_is_shown_as_given(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A fraction since --fidelity-threshold refuses values over 1: 0.005 read "over 0%"."""
    from mcsim.accounting.prices import default_table
    from mcsim.outputs.replay_tables import replay_text
    from mcsim.replay.run import ReplayReport, run_replay
    from mcsim.replay.scenario import load_policy_file

    report = run_replay([str(SAMPLES)], load_policy_file(ALL), default_table(), cache_dir=None,
                        workers=1, fidelity_threshold=0.005)  # fmt: skip
    monkeypatch.setattr(ReplayReport, "sessions_over_threshold", lambda self: self.sessions[:1])
    assert "LOW: 1 session over 0.5%" in replay_text(report)


def test_one_session_converted_reads_in_the_singular(tmp_path: Path) -> None:
    project = SAMPLES / "claude" / "projects" / "-home-dev-data-pipeline"  # one session
    out = tmp_path / "out"
    result = CliRunner().invoke(cli, ["convert", str(project), "--to", "interchange",
                                      "--out", str(out)])  # fmt: skip
    assert result.exit_code == 0, result.output
    assert re.fullmatch(
        rf"converted 1 session \(\d+ calls\) into 1 file under {re.escape(str(out))}; "
        r"0 input lines skipped\n",
        result.stdout,
    ), result.stdout


@pytest.mark.parametrize("threshold", [5.0, -0.01, float("nan")])
def test_the_library_refuses_a_fidelity_threshold_that_is_not_a_fraction(threshold: float) -> None:
    """As the command line does: 5 (meant as 5%) would be 500% and label no session."""
    from mcsim.accounting.prices import default_table
    from mcsim.errors import UsageError
    from mcsim.replay.run import run_replay
    from mcsim.replay.scenario import load_policy_file

    with pytest.raises(UsageError, match=r"^fidelity_threshold: .* is not a fraction from 0 to 1"):
        run_replay([str(SAMPLES)], load_policy_file(ALL), default_table(), cache_dir=None,
                   workers=1, fidelity_threshold=threshold)  # fmt: skip


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.floats(min_value=0, max_value=1e6, allow_nan=False) | st.sampled_from([1e-300, 0.1]),
        min_size=2,
        max_size=40,
    ),
    st.randoms(use_true_random=False),
)
def test_run_totals_do_not_depend_on_the_order_sessions_arrive_in(
    costs: list[float], rng: random.Random
) -> None:
    """A run's totals are its sessions' merged in the order units arrive (largest first):
    any order gives the same floats, the correctly rounded sum of the figures."""
    shuffled = costs[:]
    rng.shuffle(shuffled)
    totals = []
    for order in (costs, shuffled, costs[::-1]):
        run = PolicyTotals("p")
        for cost in order:
            run.merge(PolicyTotals("p", cost_usd=cost, refetch_cost_usd=cost / 3))
        totals.append((run.cost_usd, run.refetch_cost_usd))
    assert totals[0] == totals[1] == totals[2]
    assert totals[0] == (math.fsum(costs), math.fsum(c / 3 for c in costs))


def test_exact_sums_start_again_from_a_total_set_otherwise() -> None:
    sums, parts = ExactSums(), [0.1, 0.2, 0.3]
    total = 0.0
    for part in parts:
        total = sums.add("usd", total, part)
    assert total == math.fsum(parts) == 0.6  # where 0.1 + 0.2 + 0.3 == 0.6000000000000001
    total += 1e-17  # set by other means: the next sum starts from it
    assert sums.add("usd", total, 1.0) == total + 1.0
    assert sums.add("usd", 5.0, 0.0) == 5.0  # nothing added
    assert math.isnan(sums.add("usd", 1.0, math.nan))  # as float addition, past the finite
    assert sums.add("usd", math.inf, 1.0) == math.inf
    assert sums.add("usd", 1e308, 1e308) == math.inf
