"""The Codex CLI loader: real rollouts, and generated ones for the corner cases."""

from __future__ import annotations

import json
import runpy
from pathlib import Path

import pytest
from click.testing import CliRunner
from codex_lines import (
    PROJECT,
    counts,
    event,
    line,
    message,
    meta,
    reasoning,
    token_count,
    tool_call,
    tool_output,
    turn,
    write,
)
from lines import ts

from mcsim.cli import cli
from mcsim.ingest.loaders import Detail, sniff
from mcsim.ingest.pipeline import load_sessions
from mcsim.model import Call, CompactionKind, ItemKind, Usage

DATA = Path(__file__).parent / "data" / "codex"
REAL = DATA / "kvsankar-agent-history-real-codex-0.135.jsonl"
FIXTURE = DATA / "jazzyalex-agent-sessions-codex-0.146-schema-fixture.jsonl"
T0 = 1767225600.0  # 2026-01-01T00:00:00Z, the origin of lines.ts


def calls_of(*paths: Path, detail: Detail = Detail.SIZES) -> tuple[list[Call], object]:
    sessions, stats = load_sessions([str(p) for p in paths], detail=detail, workers=1)
    return [c for s in sessions for c in s.calls], stats


def plain(inp: int, read: int, out: int, write: int = 0) -> Usage:
    return Usage(
        input_tokens=inp,
        cache_write_5m_tokens=write,
        cache_write_1h_tokens=0,
        cache_read_tokens=read,
        output_tokens=out,
    )


def test_real_0135_session() -> None:
    sessions, stats = load_sessions([str(REAL)], detail=Detail.SIZES, workers=1)
    (session,) = sessions
    assert session.session_id == "019e9625-802f-7e91-840a-cfe88d14117a"
    assert session.cwd == "/tmp/agent-history-real-agent/codex/workspace"
    assert session.project == "-tmp-agent-history-real-agent-codex-workspace"
    (call,) = session.calls
    # line 10: input 22539 of which 20864 cached, output 10 -> 22539 - 20864 = 1675 uncached
    assert call.usage == plain(1675, 20864, 10)
    assert (call.model, call.provider) == ("gpt-5.5", "openai")
    assert call.source.line == 10
    # developer + user (line 3, 4) + user (line 6) are its prompt; the assistant answer its output
    assert [i.kind for i in call.items] == [ItemKind.USER_TEXT] * 3
    assert call.sent_s == pytest.approx(1780635503.506)  # 04:58:23.506Z, line 6
    assert call.timestamp_s == call.done_s == pytest.approx(1780635506.707)
    assert stats.skips.total == 0


def test_046_schema_fixture_reads_without_skips() -> None:
    calls, stats = calls_of(FIXTURE)
    # line 22: 16341 - 3584 = 12757 uncached; the info:null and all-zero counts are no calls
    assert [(c.model, c.usage) for c in calls] == [("gpt-5.6-luna", plain(12757, 3584, 81))]
    assert calls[0].compaction is not None  # context_compacted on line 19
    assert stats.skips.total == 0  # type: ignore[attr-defined]


def test_sniffed_as_codex(tmp_path: Path) -> None:
    assert sniff(REAL).name == "codex"  # type: ignore[union-attr]
    other = write(tmp_path / "x.jsonl", [{"type": "user", "sessionId": "s"}])
    assert sniff(other).name == "claude-code"  # type: ignore[union-attr]


def test_repeat_and_null_counts_and_items(tmp_path: Path) -> None:
    path = write(
        tmp_path / "rollout-a.jsonl",
        [
            meta(0, "S"),
            turn(0, "gpt-5.5"),
            token_count(0.5, None),  # rate limits only
            message(1, "user", "list files"),
            reasoning(2, "think"),
            tool_call(2, "shell", "c1", '{"command":["ls"]}'),
            token_count(3, counts(100, 80, 10, 4)),
            token_count(3.01, counts(100, 80, 10, 4)),  # a repeat: same totals
            tool_output(4, "c1", "a.py"),
            message(6, "assistant", "done"),
            token_count(7, counts(250, 180, 30, 4), counts(150, 100, 20)),
        ],
    )
    calls, _ = calls_of(path, detail=Detail.TEXT)
    # call 1: 100 - 80 = 20 uncached; call 2: 150 - 100 = 50 uncached
    assert [c.usage for c in calls] == [plain(20, 80, 10), plain(50, 100, 20)]
    first, second = calls
    assert [(i.kind, i.text) for i in first.items] == [(ItemKind.USER_TEXT, "list files")]
    assert [(i.kind, i.tool_name, i.tool_use_id) for i in second.items] == [
        (ItemKind.THINKING, None, None),
        (ItemKind.TOOL_USE, "shell", "c1"),
        (ItemKind.TOOL_RESULT, "shell", "c1"),
    ]
    assert second.items[0].text == "think"  # the summary, not the encrypted content
    assert (first.sent_s, first.done_s) == (T0 + 1, T0 + 3)
    assert (second.sent_s, second.done_s) == (T0 + 4, T0 + 7)


def test_counter_reset_after_resume(tmp_path: Path) -> None:
    path = write(
        tmp_path / "rollout-a.jsonl",
        [
            meta(0, "S"),
            turn(0, "gpt-5.5"),
            message(1, "user", "hi"),
            token_count(2, counts(100, 0, 10)),
            message(3, "user", "more"),
            token_count(4, counts(250, 100, 20), counts(150, 100, 10)),
            turn(3600, "gpt-5.5"),  # resumed an hour later: totals restart
            message(3601, "user", "hi again"),  # a call equal to the first one (fixlist 9)
            token_count(3602, counts(100, 0, 10)),
            message(3603, "user", "again"),
            token_count(3604, counts(160, 0, 15), counts(60, 0, 5)),
        ],
    )
    calls, stats = calls_of(path)
    # 150 - 100 = 50 uncached in the second; the third repeats the first's counts: 4 calls
    assert [c.usage for c in calls] == [
        plain(100, 0, 10),
        plain(50, 100, 10),
        plain(100, 0, 10),
        plain(60, 0, 5),
    ]
    assert "forked_history" not in stats.skips.notes  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("fork_cwd", "fork_time"),
    [
        ("/home/me/src/app", "2026-01-01T00-01-40"),
        ("/elsewhere", "2026-01-01T00-01-40"),
        # named before its source (a clock set back): still read after it (fixlist 7)
        ("/home/me/src/app", "2025-12-31T23-59-59"),
    ],
)
def test_fork_copies_are_counted_once(tmp_path: Path, fork_cwd: str, fork_time: str) -> None:
    parent = [
        meta(0, "P"),
        turn(0, "gpt-5.5"),
        message(1, "user", "one"),
        token_count(2, counts(100, 50, 10)),
        message(3, "user", "two"),
        token_count(4, counts(300, 200, 30), counts(200, 150, 20)),
    ]
    write(tmp_path / "a" / "rollout-2026-01-01T00-00-00-P.jsonl", parent)
    copied = [{**x, "timestamp": ts(100)} for x in parent]  # copies may get new times
    fork = [
        meta(100, "F", cwd=fork_cwd, forked_from_id="P"),
        *copied,
        message(101, "user", "three"),
        token_count(102, counts(700, 500, 40), counts(400, 300, 10)),
    ]
    write(tmp_path / "b" / f"rollout-{fork_time}-F.jsonl", fork)
    sessions, stats = load_sessions([str(tmp_path)], detail=Detail.SIZES, workers=1)
    calls = [c for s in sessions for c in s.calls]
    # 50 + 50 + 100 uncached, 50 + 150 + 300 read, 10 + 20 + 10 out: three calls, not five
    expected = [plain(50, 50, 10), plain(50, 150, 20), plain(100, 300, 10)]
    assert sorted(c.usage.output_tokens for c in calls) == [10, 10, 20]
    assert sorted(calls, key=lambda c: c.usage.cache_read_tokens)[0].usage == expected[0]
    assert sorted((c.usage for c in calls), key=lambda u: u.cache_read_tokens) == expected
    # one unit, even for a fork in another cwd: the source, read first, keeps its calls
    assert {s.session_id: len(s.calls) for s in sessions} == {"P": 2, "F": 1}
    assert {s.session_id: s.project for s in sessions} == {
        "P": PROJECT,
        "F": "-home-me-src-app" if fork_cwd == "/home/me/src/app" else "-elsewhere",
    }
    assert stats.duplicate_calls == 0  # the copies were recognised in the fork
    assert stats.skips.notes == {"forked_history": 1}


def test_missing_token_count_carries_items(tmp_path: Path) -> None:
    path = write(
        tmp_path / "rollout-a.jsonl",
        [
            meta(0, "S"),
            turn(0, "gpt-5.5"),
            message(0, "user", "fix it"),
            tool_call(1, "apply_patch", "c1", "patch"),  # its call's token_count is missing
            tool_output(2, "c1", "ok"),
            message(3, "assistant", "fixed"),
            token_count(4, counts(40, 0, 5)),
            message(5, "user", "thanks"),
            token_count(6, counts(90, 40, 7), counts(50, 40, 2)),
        ],
    )
    first, second = calls_of(path)[0]
    assert [i.kind for i in first.items] == [
        ItemKind.USER_TEXT,
        ItemKind.TOOL_USE,
        ItemKind.TOOL_RESULT,
    ]
    assert first.items[2].tool_name == "apply_patch"
    assert [i.kind for i in second.items] == [ItemKind.ASSISTANT_TEXT, ItemKind.USER_TEXT]
    assert second.usage == plain(10, 40, 2)  # 50 - 40


def test_model_switch_and_unknown_model(tmp_path: Path) -> None:
    path = write(
        tmp_path / "rollout-a.jsonl",
        [
            meta(0, "S"),
            message(1, "user", "a"),
            token_count(2, counts(10, 0, 1)),
            turn(3, "gpt-5.5"),
            token_count(4, counts(30, 0, 2), counts(20, 0, 1)),
            event(5, "thread_settings_applied", thread_settings={"model": "gpt-5.4"}),
            token_count(6, counts(60, 0, 3), counts(30, 0, 1)),
        ],
    )
    calls, stats = calls_of(path)
    assert [c.model for c in calls] == ["unknown", "gpt-5.5", "gpt-5.4"]
    assert stats.skips.notes["unknown_model"] == 1  # type: ignore[attr-defined]


def test_compaction_and_its_estimate(tmp_path: Path) -> None:
    estimate = {**counts(0, 0, 0), "total_tokens": 5000}
    path = write(
        tmp_path / "rollout-a.jsonl",
        [
            meta(0, "S"),
            turn(0, "gpt-5.5"),
            message(1, "user", "long work"),
            token_count(2, counts(9000, 0, 100)),
            line(3, "compacted", {"message": "summary", "replacement_history": []}),
            event(3, "context_compacted"),
            token_count(3.5, counts(9000, 0, 100), estimate),  # recompute: not a call
            message(4, "user", "go on"),
            token_count(5, counts(9600, 0, 120), counts(600, 0, 20)),
        ],
    )
    calls, _ = calls_of(path, detail=Detail.TEXT)
    assert [c.usage for c in calls] == [plain(9000, 0, 100), plain(600, 0, 20)]
    compaction = calls[1].compaction
    assert compaction is not None and compaction.kind is CompactionKind.BOUNDARY
    assert [i.text for i in calls[1].items] == ["summary", "go on"]


def test_bad_lines_are_reported_with_file_and_line(tmp_path: Path) -> None:
    bad = counts(10, 0, 1)
    bad["output_tokens"] = "many"  # type: ignore[assignment]
    path = write(
        tmp_path / "rollout-a.jsonl",
        [
            meta(0, "S"),
            turn(0, "gpt-5.5"),
            '{"timestamp": "2026-01-01T00:00:01Z", "type": "event_msg", "payl',
            token_count(2, bad),
            {"id": "old", "instructions": ""},  # a pre-envelope line
            line(3, "world_state", {}),  # a later line type: passed over, not a skip
            token_count(4, counts(10, 0, 1)),
        ],
    )
    calls, stats = calls_of(path)
    assert [c.usage for c in calls] == [plain(10, 0, 1)]
    found = [(e.line, e.reason) for e in stats.skips.examples]  # type: ignore[attr-defined]
    assert found == [(3, "invalid_json"), (4, "bad_field"), (5, "bad_field")]
    assert "payload.info.last_token_usage.output_tokens" in stats.skips.examples[1].detail  # type: ignore[attr-defined]


def test_cache_writes_are_inside_input(tmp_path: Path) -> None:
    usage = {**counts(1000, 600, 10), "cache_write_input_tokens": 300}
    path = write(
        tmp_path / "rollout-a.jsonl", [meta(0, "S"), turn(0, "gpt-5.6"), token_count(1, usage)]
    )
    (call,) = calls_of(path)[0]
    # 1000 input = 600 read + 300 written + 100 uncached; the prompt stays 1000
    assert call.usage == plain(100, 600, 10, write=300)
    assert call.usage.prompt_tokens == 1000


def test_inspect_totals_match_the_independent_count(tmp_path: Path) -> None:
    reference = runpy.run_path(str(Path(__file__).parent / "golden" / "codex_reference.py"))
    expected = reference["totals"](str(DATA))
    # worked by hand: 1675 + 12757 uncached, 20864 + 3584 read, 10 + 81 out, two calls
    assert expected == {
        "calls": 2,
        "input_tokens": 14432,
        "cache_read_tokens": 24448,
        "cache_write_5m_tokens": 0,
        "output_tokens": 91,
    }
    result = CliRunner().invoke(cli, ["inspect", str(DATA), "--json"])
    assert result.exit_code == 0, result.output
    totals = json.loads(result.output)["totals"]
    assert {k: totals[k] for k in expected} == expected


def test_project_groups_sessions_per_cwd(tmp_path: Path) -> None:
    write(
        tmp_path / "rollout-a.jsonl", [meta(0, "A"), turn(0, "m"), token_count(1, counts(5, 0, 1))]
    )
    write(
        tmp_path / "rollout-b.jsonl", [meta(0, "B"), turn(0, "m"), token_count(1, counts(7, 0, 1))]
    )
    sessions, _ = load_sessions([str(tmp_path)], workers=1)
    assert {s.project for s in sessions} == {PROJECT}


def _last_only(t: float, last: dict[str, int]) -> dict[str, object]:
    """A token_count without total_token_usage (fixlist 8)."""
    return line(t, "event_msg", {"type": "token_count", "info": {"last_token_usage": last}})


def test_equal_counts_without_totals_are_distinct_calls(tmp_path: Path) -> None:
    rows: list[dict[str, object]] = [meta(0, "S"), turn(0, "gpt-5")]
    for n in range(5):
        rows += [
            message(10 * n + 1, "user", f"q{n}"),
            _last_only(10 * n + 2, counts(3000, 2048, 20)),
        ]
    calls, stats = calls_of(write(tmp_path / "rollout-a.jsonl", rows))  # type: ignore[arg-type]
    # five requests with the same usage: 3000 - 2048 = 952 uncached, 2048 read, 20 out each
    assert [c.usage for c in calls] == [plain(952, 2048, 20)] * 5
    assert "forked_history" not in stats.skips.notes  # type: ignore[attr-defined]


def test_fork_without_the_source_session_meta_is_counted_once(tmp_path: Path) -> None:
    usage = [(1000, 0, 100), (2000, 500, 100), (3000, 1000, 100), (4000, 1500, 100)]
    totals = [(1000, 0, 100), (3000, 500, 200), (6000, 1500, 300), (10000, 3000, 400)]
    source = [meta(0, "A"), turn(1, "gpt-5")]
    for n, (u, tot) in enumerate(zip(usage, totals, strict=True)):
        source += [
            message(10 + 20 * n, "user", f"do {n}"),
            token_count(15 + 20 * n, counts(*tot), counts(*u)),
        ]
    write(tmp_path / "rollout-2026-01-01T00-00-00-A.jsonl", source)
    # B copies A's lines after its own session_meta but not A's session_meta, then adds two
    fork = [
        meta(600, "B", forked_from_id="A"),
        *source[1:8],  # the turn_context and A's first three calls
        message(610, "user", "fork 0"),
        token_count(615, counts(13000, 4500, 377), counts(7000, 3000, 77)),
        message(620, "user", "fork 1"),
        token_count(625, counts(20001, 7500, 454), counts(7001, 3000, 77)),
    ]
    write(tmp_path / "rollout-2026-01-01T00-10-00-B.jsonl", fork)
    # C forks B (copying B's lines without any session_meta) and adds one call
    write(
        tmp_path / "rollout-2026-01-01T00-20-00-C.jsonl",
        [
            meta(1200, "C", forked_from_id="B"),
            *fork[1:],
            message(1210, "user", "c"),
            token_count(1215, counts(30001, 13500, 554), counts(10000, 6000, 100)),
        ],
    )
    sessions, stats = load_sessions([str(tmp_path)], detail=Detail.SIZES, workers=1)
    # A's 4 calls, B's own 2, C's own 1: 7, not 4 + 5 + 6 = 15
    assert {s.session_id: len(s.calls) for s in sessions} == {"A": 4, "B": 2, "C": 1}
    assert [c.usage for c in sessions[1].calls] == [plain(4000, 3000, 77), plain(4001, 3000, 77)]
    copied = {e.file.rsplit("-", 1)[1]: e.detail for e in stats.skips.examples}  # type: ignore[attr-defined]
    assert copied == {
        "B.jsonl": "3 calls copied from another rollout",
        "C.jsonl": "5 calls copied from another rollout",
    }


@pytest.mark.parametrize("model", [{"name": "gpt-5"}, 5, ""])
def test_a_model_that_is_not_a_name_is_a_bad_field(tmp_path: Path, model: object) -> None:
    path = write(
        tmp_path / "rollout-a.jsonl",
        [
            meta(0, "S"),
            line(1, "turn_context", {"model": model}),
            message(2, "user", "a"),
            token_count(3, counts(100, 0, 10)),
        ],
    )
    calls, stats = calls_of(path)
    assert [(c.model, c.usage) for c in calls] == [("unknown", plain(100, 0, 10))]
    bad = stats.skips.examples[0]  # type: ignore[attr-defined]
    assert (bad.line, bad.reason) == (2, "bad_field")
    assert bad.detail.startswith("payload.model: not a model name (a non-empty string)")


def test_two_forks_with_equal_new_calls_keep_both(tmp_path: Path) -> None:
    """Two forks of one session each copy its three calls and make one new call with the
    same counts: 3 + 1 + 1 = 5 calls, not 4. A copy is a call of the history a fork carries
    (its source's), not any call with equal counts."""
    usage = [(1000, 0, 100), (2000, 500, 100), (3000, 1000, 100)]
    totals = [(1000, 0, 100), (3000, 500, 200), (6000, 1500, 300)]
    source = [meta(0, "P"), turn(1, "gpt-5")]
    for n, (u, tot) in enumerate(zip(usage, totals, strict=True)):
        source += [
            message(10 + 20 * n, "user", f"do {n}"),
            token_count(15 + 20 * n, counts(*tot), counts(*u)),
        ]
    write(tmp_path / "rollout-2026-01-01T00-00-00-P.jsonl", source)
    for n, fork in enumerate(("F1", "F2")):
        write(
            tmp_path / f"rollout-2026-01-01T00-1{n}-00-{fork}.jsonl",
            [
                meta(600 + 60 * n, fork, forked_from_id="P"),
                *source,  # the source's lines, its session_meta included
                message(610 + 60 * n, "user", "again"),
                token_count(615 + 60 * n, counts(10000, 4500, 377), counts(4000, 3000, 77)),
            ],
        )
    sessions, stats = load_sessions([str(tmp_path)], detail=Detail.SIZES, workers=1)
    assert {s.session_id: len(s.calls) for s in sessions} == {"P": 3, "F1": 1, "F2": 1}
    # each fork's own call: 4000 - 3000 = 1000 uncached, 3000 read, 77 out
    for fork in ("F1", "F2"):
        (own,) = next(s for s in sessions if s.session_id == fork).calls
        assert own.usage == plain(1000, 3000, 77)
    copied = {e.file.rsplit("-", 1)[1]: e.detail for e in stats.skips.examples}  # type: ignore[attr-defined]
    assert copied == {
        "F1.jsonl": "3 calls copied from another rollout",
        "F2.jsonl": "3 calls copied from another rollout",
    }


def test_forks_of_a_missing_source_share_its_history_once(tmp_path: Path) -> None:
    """Without the source's rollout, a fork's copies cannot be told by their source: the
    second fork's copies of the history the first already held are counted once."""
    history = [
        meta(0, "P"),
        turn(1, "gpt-5"),
        message(2, "user", "a"),
        token_count(3, counts(1000, 0, 10)),
    ]
    for n, fork in enumerate(("F1", "F2")):
        write(
            tmp_path / f"rollout-2026-01-01T00-1{n}-00-{fork}.jsonl",
            [
                meta(600, fork, forked_from_id="P"),
                *history,
                message(610, "user", f"new {n}"),
                token_count(615, counts(3000 + n, 1000, 20), counts(2000 + n, 1000, 10)),
            ],
        )
    sessions, _ = load_sessions([str(tmp_path)], detail=Detail.SIZES, workers=1)
    # F1 holds the shared call and its own; F2 only its own: 3 calls
    assert {s.session_id: len(s.calls) for s in sessions} == {"F1": 2, "F2": 1}


def test_times_that_run_backwards_are_clamped_and_noted(tmp_path: Path) -> None:
    path = write(
        tmp_path / "rollout-a.jsonl",
        [
            meta(0, "S"),
            turn(0, "gpt-5"),
            message(10, "user", "a"),
            token_count(20, counts(100, 0, 10)),
            message(5, "user", "b"),  # the clock was set back 15 s
            token_count(8, counts(300, 100, 20), counts(200, 100, 10)),
            message(40, "user", "c"),  # written after its token_count's time
            token_count(30, counts(600, 300, 30), counts(300, 200, 10)),
        ],
    )
    calls, stats = calls_of(path)
    # call 2 sent at 5 and counted at 8, before call 1's token_count at 20: taken as at 20;
    # call 3's request at 40 is after its token_count at 30: taken as at 30
    assert [(c.request_s - T0, c.timestamp_s - T0) for c in calls] == [
        (10.0, 20.0),
        (20.0, 20.0),
        (30.0, 30.0),
    ]
    assert stats.skips.notes == {"time_clamped": 2}  # type: ignore[attr-defined]
    assert [(e.line, e.detail) for e in stats.skips.examples] == [  # type: ignore[attr-defined]
        (6, "sent 15.000 s before the previous call's token_count: taken as sent then"),
        (8, "request 10.000 s after its token_count: taken as it"),
    ]
