"""Each provider's prompt cache (mcsim.replay.providers): OpenAI's automatic prefix cache
in 128-token blocks from 1,024 tokens, with no write premium and no cache edits, beside
Anthropic's; the provider and retention a policy may name; numbers worked out by hand."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from codex_lines import counts, message, meta, token_count, tool_call, tool_output, turn, write
from simthreads import thread
from test_cache import CALLS, HEAD, serve
from test_mechanisms import BURST, EDITS, PRICES, layer

from mcsim.cli import cli
from mcsim.replay.cache import PromptCache
from mcsim.replay.calibrate import ReadClass
from mcsim.replay.providers import rules_for
from mcsim.replay.scenario import PolicyFileError, Scenario, load_policy_file
from mcsim.replay.simulate import simulate_thread

OPENAI = rules_for("openai")


def test_openai_reads_whole_128_token_blocks_and_bills_no_writes() -> None:
    cache = PromptCache(HEAD, OPENAI)
    # Prompts 11,000, 16,000, 21,000, 10 s apart. Call 0 reads nothing: 11,000 uncached.
    # Call 1 reads the 11,000 cached, in whole blocks: 85 x 128 = 10,880 (120 left over),
    # so 16,000 - 10,880 = 5,120 uncached. Call 2 reads 16,000 = 125 x 128 exactly.
    got = serve(cache, CALLS, [11_000, 16_000, 21_000], [0.0, 10.0, 20.0])
    assert got == [(11_000, 0, 0, 0), (5_120, 10_880, 0, 0), (5_000, 16_000, 0, 0)]
    # Anthropic's cache on the same calls: the recorded 3 uncached, the rest written or read.
    anthropic = serve(PromptCache(HEAD), CALLS, [11_000, 16_000, 21_000], [0.0, 10.0, 20.0])
    assert anthropic[1] == (3, 11_000, 4_997, 0)


def test_openai_rewrite_falls_back_to_the_head_in_blocks_and_short_prompts_stay_uncached() -> None:
    cache = PromptCache(HEAD, OPENAI)
    # A rewrite before call 2 (13,000 left): the 10,000-token head is read as 78 blocks,
    # 9,984 tokens; 13,000 - 9,984 = 3,016 uncached.
    got = serve(cache, CALLS, [11_000, 16_000, 13_000], [0.0, 10.0, 20.0], rewrote=[0, 0, 1])
    assert got[2] == (3_016, 9_984, 0, 0)
    # Below 1,024 tokens OpenAI caches nothing.
    assert serve(PromptCache(HEAD, OPENAI), CALLS[:1], [1_000], [0.0]) == [(1_000, 0, 0, 0)]


def test_openai_extended_retention_keeps_the_prefix_for_a_day() -> None:
    # The recording missed after three hours (in-memory retention is minutes); with the
    # 24-hour retention the 11,000 cached tokens are read (10,880 in whole blocks).
    calls = [CALLS[0], CALLS[1]._replace(read_class=ReadClass.TTL_MISS, cache_read_tokens=0)]
    sent = [0.0, 3 * 3_600.0]
    kept = serve(PromptCache(HEAD, OPENAI), calls, [11_000, 16_000], sent, ttls=["24h"] * 2)
    assert kept[1] == (5_120, 10_880, 0, 0)
    lost = serve(PromptCache(HEAD, OPENAI), calls, [11_000, 16_000], sent, ttls=["5m"] * 2)
    assert lost[1] == (16_000, 0, 0, 0)


def test_cache_edits_are_not_made_on_a_cache_that_has_none() -> None:
    # Cached microcompact (trigger 3, keep 1) on ten calls adding one result each decides a
    # deletion at call 4 (r1..r3) and one more at each of calls 5..9: six cache edits. On
    # Anthropic's cache call 4 sheds 15,000 tokens; on OpenAI's, none is made.
    anthropic = simulate_thread(thread(BURST), Scenario("p", (EDITS,)), PRICES)
    assert anthropic.newly_cleared_tokens[4] == 15_000 and anthropic.unavailable_edits == 0
    openai = simulate_thread(thread(BURST), Scenario("p", (EDITS,), provider="openai"), PRICES)
    assert sum(openai.newly_cleared_tokens) == 0 and openai.unavailable_edits == 6
    # A rewrite policy works on either: keep_last_n n=1 masks r1 at call 2 either way.
    masked = Scenario("p", (layer("keep_last_n", n=1),), provider="openai")
    assert simulate_thread(thread(BURST), masked, PRICES).newly_cleared_tokens[2] == 4_992


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ("ttl: 24h", "key 'ttl': 24h is not a retention every provider offers (5m, 1h) "
                     "(OpenAI's extended retention: set provider: openai)"),
        ("provider: anthropic\n    ttl: 24h", "key 'ttl': 24h is not a retention anthropic "
                                              "offers (5m, 1h)"),
        ("provider: gemini", "key 'provider': must be one of recorded, anthropic, openai, "
                             "not 'gemini'"),
    ],
)  # fmt: skip
def test_policy_files_name_a_provider_and_its_retentions(
    tmp_path: Path, settings: str, message: str
) -> None:
    path = tmp_path / "p.yaml"
    path.write_text(f"policies:\n  - name: p\n    kind: none\n    {settings}\n")
    with pytest.raises(PolicyFileError) as info:
        load_policy_file(path)
    assert message in str(info.value)
    path.write_text("policies:\n  - name: p\n    kind: none\n    provider: openai\n    ttl: 24h\n")
    assert load_policy_file(path)[-1].describe() == "none() @ttl=24h @provider=openai"


@pytest.mark.slow
def test_a_codex_session_replays_on_openais_cache_with_exact_fidelity(tmp_path: Path) -> None:
    # Three calls of a Codex session. Prompts 5,000, 9,000, 14,000; each reads the previous
    # prompt in whole blocks: 39 x 128 = 4,992, then 70 x 128 = 8,960 (recorded so).
    calls = [(5_000, 0), (9_000, 4_992), (14_000, 8_960)]
    lines = [meta(0, "S"), turn(0, "gpt-5"), message(1, "user", "go")]
    total_in = total_cached = 0
    for k, (prompt, cached) in enumerate(calls):
        t = 10.0 * (k + 1)
        if k:
            lines.append(tool_output(t - 1, f"c{k}", "x" * 100))
        lines.append(tool_call(t, "shell", f"c{k + 1}", '{"command":["ls"]}'))
        total_in, total_cached = total_in + prompt, total_cached + cached
        lines.append(token_count(t + 1, counts(total_in, total_cached, 10 * (k + 1)),
                                 counts(prompt, cached, 10)))  # fmt: skip
    write(tmp_path / "rollout-2026-01-01T00-00-00-S.jsonl", lines)
    out = tmp_path / "out"
    args = ["replay", str(tmp_path), "--policy", "claude-code", "--out", str(out), "--no-cache"]
    result_ = CliRunner().invoke(cli, [*args, "--json"])
    assert result_.exit_code == 0, result_.output
    doc = json.loads(result_.stdout)
    assert doc["providers"] == {"openai": 3}
    assert doc["fidelity"]["overall_error"] == 0.0
    # gpt-5: uncached $1.25, cached $0.125, output $10 per million. Recorded: uncached
    # 5,000 + 4,008 + 5,040 = 14,048, cached 13,952, output 30:
    # 0.01756 + 0.001744 + 0.0003 = $0.019604.
    assert doc["recorded"]["cost_usd"] == pytest.approx(0.019604)
    text_out = CliRunner().invoke(cli, [*args[:-1], "--no-cache", "--force"]).stdout
    assert "cache model openai (3 calls)" in text_out
    assert "OpenAI recordings carry no cache writes or TTL" in text_out


def test_after_a_rewrite_openai_reads_up_to_the_first_change_and_anthropic_the_head() -> None:
    # Call 2's prompt (13,000) was rewritten from its 12,000th token on: OpenAI's prefix cache
    # still holds the 12,000 tokens before the change, read as 93 whole blocks = 11,904;
    # 13,000 - 11,904 = 1,096 uncached. Anthropic's breakpoints fall back to the 10,000 head,
    # and the other 2,997 (less the 3 uncached) are written.
    prompts, sent = [11_000, 16_000, 13_000], [0.0, 10.0, 20.0]
    args = (CALLS, prompts, sent, ["5m"] * 3, [False, False, True], [0] * 3, [0] * 3)
    kept = [0, 0, 12_000]
    openai = PromptCache(HEAD, OPENAI).serve(*args, kept)
    assert [column[2] for column in openai] == [1_096, 11_904, 0, 0]
    anthropic = PromptCache(HEAD).serve(*args, kept)
    assert [column[2] for column in anthropic] == [3, 10_000, 2_997, 0]


def test_openai_blocks_are_counted_once_not_on_top_of_the_recordings_rounding() -> None:
    # The recording read 10,880 of an 11,000-token prompt (its own block rounding: -120).
    # Replayed after a clearing left 9,000 tokens cached, the read is 9,000 in whole blocks,
    # 70 x 128 = 8,960, not (9,000 - 120) rounded down again (8,832).
    calls = [CALLS[0], CALLS[1]._replace(read_delta=-120, cache_read_tokens=10_880)]
    got = serve(PromptCache(HEAD, OPENAI), calls, [9_000, 14_000], [0.0, 10.0])
    assert got[1] == (14_000 - 8_960, 8_960, 0, 0)


def test_a_sweep_refuses_a_retention_the_provider_does_not_offer(tmp_path: Path) -> None:
    args = ["sweep", "sample_transcripts", "--policy", "claude-code", "--name", "claude-code"]
    got = CliRunner().invoke(cli, [*args, "--grid", "ttl=1h,24h", "--out", str(tmp_path / "o")])
    assert got.exit_code == 2
    assert "--grid ttl: 24h is not a retention every provider offers (5m, 1h)" in got.output
    assert not (tmp_path / "o").exists()


@pytest.mark.slow
def test_the_summary_names_each_policys_cache_and_why_cache_edits_did_nothing(
    tmp_path: Path,
) -> None:
    policy = tmp_path / "p.yaml"
    policy.write_text(
        "policies:\n  - name: edits-on-openai\n    provider: openai\n"
        "    kind: cached_microcompact\n  - name: edits\n    kind: cached_microcompact\n"
    )
    out = tmp_path / "o"
    args = ["replay", "sample_transcripts", "--policy", str(policy), "--no-cache", "--out"]
    got = CliRunner().invoke(cli, [*args, str(out), "--json"])
    assert got.exit_code == 0, got.output
    doc = json.loads(got.stdout)
    by_name = {p["name"]: p for p in doc["policies"]}
    assert by_name["edits-on-openai"]["provider"] == "openai"
    assert by_name["edits"]["provider"] == "recorded"
    assert by_name["edits-on-openai"]["cleared_tokens"] == 0 < by_name["edits"]["cleared_tokens"]
    # As many edits were decided on OpenAI's cache as were made on Anthropic's (the policy
    # decides the same; only the cache differs): one per call that carried an edit.
    import polars as pl

    calls = pl.read_parquet(out / "calls.parquet")
    made = calls.filter((pl.col("policy") == "edits") & pl.col("cache_edit")).height
    text = CliRunner().invoke(cli, [*args, str(tmp_path / "o2")]).stdout
    assert f"edits-on-openai cleared nothing: its {made:,} cache edits were not made" in text
    assert "cache model anthropic (69 calls); on openai's cache: edits-on-openai" in text


def test_a_masking_policy_on_openai_reads_the_prefix_before_the_masked_result() -> None:
    # Ten calls: a 10,000 head, 1,000 of text, then one 5,000-token result a call. keep_last_n
    # n=1 masks r1 (recorded tokens 11,000 to 16,000) before call 2: its prompt is
    # 21,000 - 4,992 = 16,008, and the 11,000 tokens before r1 are unchanged: OpenAI reads
    # them as 85 blocks, 10,880; the other 5,128 are uncached.
    masked = Scenario("p", (layer("keep_last_n", n=1),), provider="openai")
    call = simulate_thread(thread(BURST), masked, PRICES).calls[2]
    assert call.prompt_tokens == 16_008
    assert (call.usage.cache_read_tokens, call.usage.input_tokens) == (10_880, 5_128)
