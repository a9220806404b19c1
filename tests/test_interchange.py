"""The interchange format: convert, load back, same sessions and figures; the schema; bad lines;
token counts instead of text; the SDK example of docs/interchange.md."""

from __future__ import annotations

import json
import math
import re
import sys
import types
from dataclasses import fields, replace
from pathlib import Path
from typing import Any

import jsonschema
import polars as pl
import pytest
from click.testing import CliRunner
from conftest import REPO, forbid_tokenizing
from polars.testing import assert_frame_equal

from mcsim.accounting.prices import default_table
from mcsim.accounting.recorded import inspect_usage
from mcsim.cli import cli
from mcsim.ingest import pipeline
from mcsim.ingest.loaders import Detail, sniff
from mcsim.ingest.loaders.interchange import SCHEMA_FILE
from mcsim.ingest.pipeline import load_sessions
from mcsim.model import Session
from mcsim.outputs.replay_tables import summary_frame
from mcsim.outputs.tables import write_parquet
from mcsim.replay.calibrate import calibrate_session
from mcsim.replay.presets import resolve_policy
from mcsim.replay.run import run_replay
from mcsim.replay.scenario import load_policy_file
from mcsim.replay.tokens import TokenEstimator

CODEX = REPO / "tests" / "data" / "codex"
SCHEMA = json.loads(SCHEMA_FILE.read_text())


@pytest.fixture(scope="module")
def converted(tmp_path_factory: pytest.TempPathFactory, corpus: Path) -> Path:
    out = tmp_path_factory.mktemp("conv") / "out"
    result = CliRunner().invoke(
        cli, ["convert", str(corpus), str(CODEX), "--to", "interchange", "--out", str(out)]
    )
    assert result.exit_code == 0, result.output
    # 8 Claude Code sessions (355 calls) and 2 Codex rollouts (2 calls)
    assert result.stdout.strip() == (
        f"converted 10 sessions (357 calls) into 10 files under {out}; 1 input line skipped"
    )
    return out


def _by_key(sessions: list[Session]) -> dict[tuple[str, str], Session]:
    return {(s.project, s.session_id): s for s in sessions}


def test_round_trip_gives_identical_sessions(converted: Path, corpus: Path) -> None:
    before, _ = load_sessions([str(corpus), str(CODEX)], detail=Detail.TEXT, workers=1)
    after, stats = load_sessions([str(converted)], detail=Detail.TEXT, workers=1)
    assert stats.skips.total == 0 and not stats.skips.notes and not stats.skips.repaired
    a, b = _by_key(before), _by_key(after)
    assert a.keys() == b.keys() and len(a) == 10
    compared = 0
    for key, orig in a.items():
        back = b[key]
        for f in fields(Session):
            if f.name not in ("threads", "files"):
                assert getattr(orig, f.name) == getattr(back, f.name), (key, f.name)
        assert [(t.thread_id, t.kind) for t in orig.threads] == [
            (t.thread_id, t.kind) for t in back.threads
        ]
        for t1, t2 in zip(orig.threads, back.threads, strict=True):
            assert len(t1.calls) == len(t2.calls)
            for c1, c2 in zip(t1.calls, t2.calls, strict=True):
                # everything but where the call was read from
                assert replace(c1, source=c2.source) == c2, (key, c1.message_id)
                compared += 1
    assert compared == 357
    # the files name the interchange file; the calls' sources point into it
    some = next(iter(b.values()))
    assert some.files[0].startswith(str(converted))
    assert some.calls[0].source.file == some.files[0]


def test_every_converted_line_validates_against_the_schema(converted: Path) -> None:
    jsonschema.Draft202012Validator.check_schema(SCHEMA)
    validator = jsonschema.Draft202012Validator(SCHEMA)
    files = sorted(converted.rglob("*.jsonl"))
    assert len(files) == 10
    kinds: set[str] = set()
    for path in files:
        assert sniff(path) is not None and sniff(path).name == "interchange"  # type: ignore[union-attr]
        for text in path.read_text().splitlines():
            obj = json.loads(text)
            validator.validate(obj)
            kinds.add(obj["type"])
    assert kinds == {"session", "thread", "item", "call", "compaction"}


def _inspect(runner: CliRunner, *paths: str) -> dict[str, Any]:
    result = runner.invoke(cli, ["inspect", *paths, "--json"])
    assert result.exit_code == 0, result.output
    doc: dict[str, Any] = json.loads(result.stdout)
    return doc


def test_inspect_totals_are_the_same(runner: CliRunner, converted: Path, corpus: Path) -> None:
    before = _inspect(runner, str(corpus), str(CODEX))
    after = _inspect(runner, str(converted))
    assert after["totals"] == before["totals"]
    assert after["totals"]["calls"] == 357
    strip = [{k: v for k, v in b.items() if k not in ("file", "line")} for b in before["breaks"]]
    assert [{k: v for k, v in b.items() if k not in ("file", "line")} for b in after["breaks"]] == (
        strip
    )
    assert len(strip) == 11  # the corpus's 12 drops but the announced one after the compaction
    assert sorted(after["sessions"], key=lambda s: s["session_id"]) == sorted(
        before["sessions"], key=lambda s: s["session_id"]
    )


def _replay(runner: CliRunner, paths: list[str], out: Path, cache: Path) -> dict[str, Any]:
    policy = str(REPO / "policies" / "all.yaml")
    args = ["replay", *paths, "--policy", policy, "--json", "--out", str(out)]
    result = runner.invoke(cli, [*args, "--cache-dir", str(cache)])
    assert result.exit_code == 0, result.output
    doc: dict[str, Any] = json.loads(result.stdout)
    return doc


@pytest.mark.slow
def test_replay_results_are_the_same(
    runner: CliRunner, converted: Path, corpus: Path, tmp_path: Path
) -> None:
    docs = []
    for name, paths in (("a", [str(corpus), str(CODEX)]), ("b", [str(converted)])):
        docs.append(_replay(runner, paths, tmp_path / name, tmp_path / "cache"))
    before, after = docs
    assert len(before["policies"]) == 8  # seven setups and the baseline
    for key in ("policies", "recorded", "fidelity", "sessions"):
        assert after[key] == before[key], key
    for p in after["policies"]:
        assert p["cleared_tokens"] == next(
            q["cleared_tokens"] for q in before["policies"] if q["name"] == p["name"]
        )
    # The tables too, to the last bit: the converted files have other sizes, so their units
    # are loaded in another order, and a run's totals must not follow it.
    summary = [(tmp_path / name / "summary.parquet").read_bytes() for name in "ab"]
    assert summary[0] == summary[1]
    for table in ("sessions.parquet", "calls.parquet", "breaks.parquet"):
        a, b = (pl.read_parquet(tmp_path / name / table) for name in "ab")
        assert_frame_equal(a, b, check_exact=True)
        assert a.height > 0, table


# ---------------------------------------------------------------- hand-written files

HEADER = {
    "type": "session",
    "format": "mcsim-interchange",
    "version": 1,
    "session_id": "hand",
    "project": "-hand",
}


def _usage(inp: int, read: int, write: int, out: int) -> dict[str, int]:
    return {
        "input_tokens": inp,
        "cache_read_tokens": read,
        "cache_write_5m_tokens": write,
        "output_tokens": out,
    }


def _write(path: Path, lines: list[Any]) -> Path:
    path.write_text("".join((x if isinstance(x, str) else json.dumps(x)) + "\n" for x in lines))
    return path


def _hand_file(tmp_path: Path) -> Path:
    model = "claude-sonnet-4-5-20250929"
    main = {"thread": "main"}
    return _write(
        tmp_path / "hand.jsonl",
        [
            HEADER,
            {"type": "thread", "thread": "main", "kind": "main"},
            {"type": "item", **main, "kind": "user_text", "text": "fix it", "tokens": 1000},
            {
                "type": "call",
                **main,
                "id": "m1",
                "request_id": "r1",
                "model": model,
                "timestamp": "2026-11-01T10:00:00Z",
                "usage": _usage(3, 0, 1200, 50),
            },
            {"type": "item", **main, "kind": "assistant_text", "tokens": 50},
            {
                "type": "item",
                **main,
                "kind": "tool_use",
                "tool_name": "Read",
                "tool_use_id": "t1",
                "text": '{"file_path": "/a.py"}',
                "tokens": 20,
            },
            {
                "type": "item",
                **main,
                "kind": "tool_result",
                "tool_name": "Read",
                "tool_use_id": "t1",
                "tokens": 400,
            },
            {
                "type": "call",
                **main,
                "id": "m2",
                "model": model,
                "timestamp": 1793527230.0,  # 2026-11-01T10:00:30Z as Unix seconds
                "usage": _usage(3, 1203, 467, 30),
            },
        ],
    )


def _five_projects(folder: Path) -> None:
    """Five projects of one session each, in files of decreasing size (units load largest
    first), with costs whose float sum changes with the order they are added in."""
    for n, fresh in enumerate([100_003, 7, 11, 13, 17]):
        project = folder / f"p{n}"
        project.mkdir(parents=True)
        header = {**HEADER, "session_id": f"s{n}", "project": f"p{n}", "cwd": "/" * (500 - 100 * n)}
        call = {"id": f"m{n}", "model": "claude-sonnet-4-5-20250929"}
        call |= {"timestamp": f"2026-11-0{n + 1}T10:00:00Z", "usage": _usage(fresh, 0, 0, 0)}
        _write(
            project / f"s{n}.jsonl",
            [
                header,
                {"type": "thread", "thread": "main", "kind": "main"},
                {"type": "item", "thread": "main", "kind": "user_text", "tokens": 10},
                {"type": "call", "thread": "main", **call},
            ],
        )


def test_totals_do_not_follow_the_order_units_are_loaded_in(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Units are loaded largest first, so the same sessions in files of other sizes (converted)
    arrive in another order: the totals of inspect and replay are the same floats either way,
    the exact sum of the sessions' costs rounded once."""
    _five_projects(tmp_path / "in")
    paths = [str(tmp_path / "in")]

    scenarios = load_policy_file(resolve_policy("claude-code").path)

    def run(name: str) -> tuple[float, bytes, list[float]]:
        report = inspect_usage(paths, default_table(), cache_dir=None)
        # summary.parquet as `mcsim replay` writes it, without the command's chart process
        out = tmp_path / name / "summary.parquet"
        out.parent.mkdir()
        replayed = run_replay(paths, scenarios, default_table(), cache_dir=None)
        write_parquet(summary_frame(replayed), out)
        costs = [s.cost_usd for s in report.sessions]  # by time: as loaded, largest first
        return report.cost_usd, out.read_bytes(), costs

    cost, summary, costs = run("largest-first")
    assert len(costs) == 5 and sum(costs) != sum(costs[::-1])  # as floats, the order shows
    assert cost == math.fsum(costs)
    plan = pipeline.plan_units
    monkeypatch.setattr(pipeline, "plan_units", lambda files: plan(files)[::-1])
    assert run("smallest-first") == (cost, summary, costs)
    recorded = pl.read_parquet(tmp_path / "largest-first" / "summary.parquet").row(0, named=True)
    assert (recorded["policy"], recorded["cost_usd"]) == ("recorded", cost)


def test_token_counts_are_used_instead_of_estimates(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _hand_file(tmp_path)
    sessions, stats = load_sessions([str(path)], detail=Detail.TEXT, workers=1)
    assert stats.skips.total == 0
    (session,) = sessions
    first, second = session.calls
    assert [i.tokens for i in first.items] == [1000]
    # chars: the text's length, else 4 per token
    assert [i.chars for i in second.items] == [200, 22, 1600]
    assert second.timestamp_s - first.timestamp_s == 30.0
    forbid_tokenizing(monkeypatch, "given token counts must not be estimated")
    cal = calibrate_session(session, TokenEstimator())
    c1, c2 = cal.calls
    # call 1: prompt 3 + 1200 = 1203; the item is 1000, the head (system, tools) 203
    assert [s.tokens for s in c1.segments] == [1000]
    # call 2: prompt 3 + 1203 + 467 = 1673, growth 470 = 50 + 20 + 400: sizes as given
    assert [s.tokens for s in c2.segments] == [50, 20, 400]
    assert c2.adjustment_tokens == 0


@pytest.mark.slow
def test_hand_written_file_inspects_and_replays(runner: CliRunner, tmp_path: Path) -> None:
    path = _hand_file(tmp_path)
    doc = _inspect(runner, str(path))
    # Sonnet 4.5 per million: input $3, 5m write $3.75, read $0.30, output $15.
    # call 1: 3*3 + 1200*3.75 + 50*15 = 5259 µ$; call 2: 3*3 + 1203*0.30 + 467*3.75 + 30*15
    # = 9 + 360.9 + 1751.25 + 450 = 2571.15 µ$; total 7830.15 µ$, printed to the µ$: 0.00783
    assert doc["totals"]["calls"] == 2
    assert doc["totals"]["cost_usd"] == pytest.approx(0.00783, abs=1e-9)
    replayed = _replay(runner, [str(path)], tmp_path / "run", tmp_path / "cache")
    assert replayed["recorded"]["cost_usd"] == pytest.approx(0.00783, abs=1e-9)


BAD_LINES: list[tuple[Any, str]] = [
    ('{"type": "item", "thread": "main", "kind": "user_text", "text": "x"', "invalid_json"),
    (
        {"type": "item", "thread": "main", "kind": "speech", "text": "x"},
        "bad_field: kind: unknown value 'speech'",
    ),
    (
        {"type": "item", "thread": "main", "kind": "user_text", "tokens": -5},
        "bad_field: tokens: not a non-negative integer (-5)",
    ),
    (
        {
            "type": "call",
            "thread": "main",
            "id": "m9",
            "model": "claude-sonnet-4-5",
            "timestamp": "2026-11-01T10:01:00Z",
            "usage": {"input_tokens": 1, "cache_read_tokens": 0, "cache_write_5m_tokens": 0},
        },
        "bad_field: usage.output_tokens: missing",
    ),
    (
        {
            "type": "call",
            "thread": "main",
            "id": "m9",
            "model": "claude-sonnet-4-5",
            "timestamp": "2026-11-01T10:01:00Z",
            "usage": {**_usage(1, 0, 0, 1), "cache_read_tokens": "12"},
        },
        "bad_field: usage.cache_read_tokens: not a number (str)",
    ),
    (
        {"type": "item", "thread": "side", "kind": "user_text", "text": "x"},
        "bad_field: thread: 'side' is not declared by a thread line",
    ),
]


def test_bad_lines_are_skipped_with_file_line_and_field(tmp_path: Path) -> None:
    good = _hand_file(tmp_path).read_text().splitlines()
    lines: list[Any] = [*good[:4], *(bad for bad, _ in BAD_LINES), *good[4:]]
    path = _write(tmp_path / "bad.jsonl", lines)
    sessions, stats = load_sessions([str(path)], detail=Detail.SIZES, workers=1)
    assert len(sessions) == 1 and len(sessions[0].calls) == 2  # the good lines all count
    assert stats.skips.total == 6
    assert stats.skips.counts == {"invalid_json": 1, "bad_field": 5}
    shown = [f"{e.line}: {e.reason}: {e.detail}" for e in stats.skips.examples]
    for n, (_, expected) in enumerate(BAD_LINES, start=5):  # after the first four lines
        assert any(s.startswith(f"{n}: {expected}") for s in shown), (n, expected, shown)
    assert all(e.file == str(path) for e in stats.skips.examples)


def test_bad_lines_are_refused_by_the_schema_too() -> None:
    validator = jsonschema.Draft202012Validator(SCHEMA)
    for bad, _ in BAD_LINES[1:5]:
        assert not validator.is_valid(bad), bad
    assert validator.is_valid({"type": "item", "thread": "main", "kind": "image", "chars": 9})
    assert not validator.is_valid({**HEADER, "version": 2})


def test_unknown_version_is_refused(tmp_path: Path) -> None:
    path = _write(
        tmp_path / "v2.jsonl",
        [{**HEADER, "version": 2}, *(_hand_file(tmp_path).read_text().splitlines()[1:])],
    )
    sessions, stats = load_sessions([str(path)], workers=1)
    assert sessions == []
    assert stats.skips.examples[0].detail.startswith("version: 2 is not a version")


NOT_HEADER = (
    'session: line 1 is not the session header ({"type": "session", "format": '
    '"mcsim-interchange", ...}), which must come first; the file is not read'
)


@pytest.mark.parametrize("header_at", [None, 1])  # no header; the header on line 2
def test_a_file_without_its_header_first_is_reported_once(
    tmp_path: Path, header_at: int | None
) -> None:
    hand = _hand_file(tmp_path).read_text().splitlines()  # 8 lines, the header first
    body = hand[1:]
    if header_at is not None:
        body.insert(header_at, hand[0])
    path = _write(tmp_path / "headless.jsonl", body)
    loader = sniff(path)
    assert loader is not None and loader.name == "interchange"  # not read as Claude Code's
    sessions, stats = load_sessions([str(path)], workers=1)
    assert sessions == []
    unread = len(body) - 1  # 6 without the header, 7 with it on line 2
    assert unread == (6 if header_at is None else 7)
    assert stats.skips.counts == {"bad_field": 1, "file_not_read": unread}
    shown = [(e.line, e.reason, e.detail) for e in stats.skips.examples]
    assert shown == [
        (1, "bad_field", NOT_HEADER),
        (
            2,
            "file_not_read",
            f"this line and the {unread - 1} after it: the header (line 1) was refused",
        ),
    ]


@pytest.mark.parametrize(
    ("header", "detail"),
    [
        ({**HEADER, "version": "1"}, 'version: "1" is a string, not the integer 1'),
        ({**HEADER, "version": 2}, "version: 2 is not a version this mcsim reads (1)"),
        ({**HEADER, "session_id": ""}, "session_id: empty"),
    ],
)
def test_a_refused_header_is_reported_once(
    tmp_path: Path, header: dict[str, Any], detail: str
) -> None:
    lines = [header, *_hand_file(tmp_path).read_text().splitlines()[1:]]
    sessions, stats = load_sessions([str(_write(tmp_path / "v.jsonl", lines))], workers=1)
    assert sessions == []
    assert stats.skips.counts == {"bad_field": 1, "file_not_read": 8 - 1}  # 8 lines
    first = stats.skips.examples[0]
    assert (first.line, first.detail) == (1, f"{detail}; the file is not read")
    assert len(stats.skips.examples) == 2  # the reason, then one line for the 7 unread


def test_schema_and_loader_agree_on_edge_lines(tmp_path: Path) -> None:
    validator = jsonschema.Draft202012Validator(SCHEMA)
    hand = [json.loads(x) for x in _hand_file(tmp_path).read_text().splitlines()]
    call = hand[3]
    null_1h = {**call, "usage": {**call["usage"], "cache_write_1h_tokens": None}}
    null_input = {**call, "usage": {**call["usage"], "input_tokens": None}}
    far = {**call, "timestamp": "9999-01-01T00:00:00Z"}
    weird = {"type": "weird"}
    assert validator.is_valid(null_1h) and validator.is_valid(weird)
    assert not validator.is_valid(null_input) and not validator.is_valid(far)
    for bad in (null_input, far):  # each refused by the loader too
        path = _write(tmp_path / "one.jsonl", [*hand[:3], bad])
        sessions, stats = load_sessions([str(path)], workers=1)
        assert sessions == [] and stats.skips.counts == {"bad_field": 1}
    path = _write(tmp_path / "ok.jsonl", [*hand[:3], weird, null_1h])
    sessions, stats = load_sessions([str(path)], detail=Detail.SIZES, workers=1)
    assert stats.skips.total == 0
    (only,) = sessions[0].calls
    assert only.usage.cache_write_1h_tokens == 0 and only.usage.cache_write_5m_tokens == 1200
    # text and tokens both given: the 1000 tokens are used; "fix it" gives the 6 chars
    assert [(i.tokens, i.chars) for i in only.items] == [(1000, 6)]


def test_convert_refuses_an_existing_folder_and_force_replaces_its_own(
    runner: CliRunner, tmp_path: Path
) -> None:
    (tmp_path / "in").mkdir()
    src = _hand_file(tmp_path / "in")
    out = tmp_path / "out"
    args = ["convert", str(src), "--to", "interchange", "--out", str(out)]
    assert runner.invoke(cli, args).exit_code == 0
    assert (out / "-hand" / "hand.jsonl").is_file()
    again = runner.invoke(cli, args)
    assert again.exit_code != 0 and "--force" in again.output
    forced = runner.invoke(cli, [*args, "--force", "--json"])
    assert forced.exit_code == 0, forced.output
    doc = json.loads(forced.stdout)
    assert (doc["sessions"], doc["calls"], doc["files_written"]) == (1, 2, 1)
    assert doc["skipped"]["total"] == 0
    other = tmp_path / "other"
    other.mkdir()
    (other / "notes.txt").write_text("mine")
    refused = runner.invoke(
        cli, ["convert", str(src), "--to", "interchange", "--out", str(other), "--force"]
    )
    assert refused.exit_code != 0 and (other / "notes.txt").read_text() == "mine"
    bad_to = runner.invoke(cli, ["convert", str(src), "--to", "parquet", "--out", str(out)])
    assert bad_to.exit_code == 2


def test_convert_force_keeps_files_it_did_not_write(runner: CliRunner, tmp_path: Path) -> None:
    (tmp_path / "in").mkdir()
    src = _hand_file(tmp_path / "in")
    out = tmp_path / "out"
    args = ["convert", str(src), "--to", "interchange", "--out", str(out)]
    assert runner.invoke(cli, args).exit_code == 0
    run = json.loads((out / "run.json").read_text())
    assert run["written"] == ["-hand/hand.jsonl"]  # the one file it wrote
    # a .jsonl copied beside the converted file, and one in a folder of its own
    (out / "-hand" / "my-rollout.jsonl").write_text("mine 1\n")
    (out / "otherproj").mkdir()
    (out / "otherproj" / "handwritten.jsonl").write_text("mine 2\n")
    refused = runner.invoke(cli, [*args, "--force"])
    assert refused.exit_code == 2
    assert "holds -hand/my-rollout.jsonl, not a file mcsim convert wrote" in refused.output
    assert (out / "-hand" / "my-rollout.jsonl").read_text() == "mine 1\n"
    (out / "-hand" / "my-rollout.jsonl").unlink()
    refused = runner.invoke(cli, [*args, "--force"])
    assert refused.exit_code == 2 and "holds otherproj, not a file" in refused.output
    assert (out / "otherproj" / "handwritten.jsonl").read_text() == "mine 2\n"
    (out / "otherproj" / "handwritten.jsonl").unlink()
    (out / "otherproj").rmdir()
    assert runner.invoke(cli, [*args, "--force"]).exit_code == 0
    # a run.json of convert that does not list what it wrote: refused
    del run["written"]
    (out / "run.json").write_text(json.dumps(run))
    refused = runner.invoke(cli, [*args, "--force"])
    assert refused.exit_code == 2 and "does not list the files" in refused.output
    assert (out / "-hand" / "hand.jsonl").is_file()


def test_convert_refuses_an_out_inside_an_input(runner: CliRunner, tmp_path: Path) -> None:
    (tmp_path / "in").mkdir()
    _hand_file(tmp_path / "in")
    inside = tmp_path / "in" / "x"
    result = runner.invoke(
        cli, ["convert", str(tmp_path / "in"), "--to", "interchange", "--out", str(inside)]
    )
    assert result.exit_code == 2
    assert f"{inside}: is inside the input {tmp_path / 'in'}; choose another --out" in (
        result.output
    )
    assert sorted(p.name for p in (tmp_path / "in").iterdir()) == ["hand.jsonl"]


@pytest.mark.parametrize(
    ("pattern", "searched"),
    [("in/*.jsonl", "in"), ("in/**/*.jsonl", "in"), ("*/*.jsonl", "."), ("i[n]/*.jsonl", ".")],
)
def test_convert_refuses_an_out_inside_the_folder_a_glob_searches(
    runner: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, pattern: str, searched: str
) -> None:
    """A quoted glob: its matches are files, but the folder it searches (up to its first part
    with a pattern) is the input, whose next run would read the converted files back."""
    work = tmp_path / "work"
    (work / "in").mkdir(parents=True)
    monkeypatch.chdir(work)
    _hand_file(work / "in")
    args = ["convert", pattern, "--to", "interchange", "--out"]
    result = runner.invoke(cli, [*args, "in/converted"])
    assert result.exit_code == 2, result.output
    assert result.output == (
        f"Error: in/converted: is inside the input {searched}; choose another --out\n"
    )
    assert sorted(p.name for p in (work / "in").iterdir()) == ["hand.jsonl"]
    done = runner.invoke(cli, [*args, str(tmp_path / "elsewhere")])  # beside it: written
    assert done.exit_code == 0, done.output
    assert (tmp_path / "elsewhere" / "-hand" / "hand.jsonl").is_file()


def test_convert_refuses_the_cache_folder_as_replay_does(
    runner: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "in").mkdir()
    src = _hand_file(tmp_path / "in")
    cache = tmp_path / "c" / "cache"
    monkeypatch.setenv("MCSIM_CACHE_DIR", str(cache))
    for out, why in (
        (cache / "converted", f"is inside the session cache folder {cache}"),
        (cache, f"is the session cache folder ({cache})"),
        (cache.parent, f"holds the session cache folder {cache}"),
    ):
        result = runner.invoke(cli, ["convert", str(src), "--to", "interchange", "--out", str(out)])
        assert result.exit_code == 2, result.output
        assert result.output == f"Error: {out}: {why}; choose another --out\n"
        args = ["replay", str(src), "--policy", "claude-code", "--out", str(out)]
        assert runner.invoke(cli, args).output == result.output  # the same rule, the same line
    assert not cache.parent.exists()


# ---------------------------------------------------------------- the docs' SDK example


def _docs_example() -> str:
    text = (REPO / "docs" / "interchange.md").read_text()
    match = re.search(r"```python\n(import json, time, anthropic\n.*?)```", text, re.S)
    assert match is not None
    return match.group(1)


def _ns(**kw: Any) -> types.SimpleNamespace:
    return types.SimpleNamespace(**kw)


def test_docs_sdk_example_writes_a_file_mcsim_loads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    code = _docs_example()
    assert 18 <= len(code.splitlines()) <= 31  # about 30 lines, blank ones included
    responses = [
        _ns(
            id="msg_1",
            _request_id="req_1",
            model="claude-sonnet-4-5-20250929",
            usage=_ns(
                input_tokens=12,
                cache_read_input_tokens=0,
                cache_creation_input_tokens=2000,
                cache_creation=_ns(ephemeral_5m_input_tokens=1500, ephemeral_1h_input_tokens=500),
                output_tokens=80,
            ),
            content=[
                _ns(type="thinking", thinking="look at the test"),
                _ns(type="tool_use", id="tu_1", name="Read", input={"path": "t.py"}),
            ],
        ),
        _ns(
            id="msg_2",
            _request_id="req_2",
            model="claude-sonnet-4-5-20250929",
            usage=_ns(
                input_tokens=7,
                cache_read_input_tokens=2012,
                cache_creation_input_tokens=300,
                cache_creation=None,  # an older API reply: no split
                output_tokens=40,
            ),
            content=[_ns(type="text", text="Fixed.")],
        ),
    ]
    calls: list[dict[str, Any]] = []

    class Messages:
        def create(self, **kwargs: Any) -> Any:
            calls.append(kwargs)
            return responses[len(calls) - 1]

    fake = types.ModuleType("anthropic")
    fake.Anthropic = lambda: _ns(messages=Messages())  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "anthropic", fake)
    monkeypatch.chdir(tmp_path)
    exec(
        code,
        {
            "MODEL": "claude-sonnet-4-5",
            "TOOLS": [],
            "run_tool": lambda block: "def test(): assert True",
        },
    )
    assert len(calls) == 2
    sessions, stats = load_sessions([str(tmp_path / "session.jsonl")], detail=Detail.TEXT)
    assert stats.skips.total == 0
    (session,) = sessions
    first, second = session.calls
    assert (first.message_id, first.request_id, second.request_id) == ("msg_1", "req_1", "req_2")
    u1, u2 = first.usage, second.usage
    assert (u1.input_tokens, u1.cache_write_5m_tokens, u1.cache_write_1h_tokens) == (12, 1500, 500)
    assert (u1.cache_read_tokens, u1.output_tokens) == (0, 80)
    assert (u2.input_tokens, u2.cache_read_tokens, u2.cache_write_5m_tokens) == (7, 2012, 300)
    assert (u2.cache_write_1h_tokens, u2.output_tokens) == (0, 40)
    assert [i.kind.value for i in first.items] == ["user_text"]
    # the second call reads back the thinking and the tool use, then the tool's result
    assert [(i.kind.value, i.text) for i in second.items] == [
        ("thinking", "look at the test"),
        ("tool_use", '{"path": "t.py"}'),
        ("tool_result", "def test(): assert True"),
    ]
    assert second.items[2].tool_use_id == "tu_1" and second.items[2].tool_name == "Read"
    assert first.sent_s is not None and first.sent_s <= first.timestamp_s
