"""Exact counts on odd logs: side-question replays, reused line uuids, conflicting copies,
implausible counts, and files or lines that are not what they seem."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from lines import SESSION, assistant, usage, user, write

from mcsim.cli import cli
from mcsim.ingest.loaders import jsonl
from mcsim.ingest.pipeline import load_sessions


def inspect_json(*paths: Path) -> dict:
    result = CliRunner().invoke(cli, ["inspect", *map(str, paths), "--json"])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    return json.loads(result.stdout)


# ---------------------------------------------------------------- side questions (/btw)
# ccusage's cases (ccusage/ccusage#913, PR #1155): a parent call, a side-question log that
# replays it with a new requestId and 50,000 cache reads, and the side question's own answer.


def _parent() -> dict:
    return assistant("p1", "u1", 10, "msg-parent", "req-parent", u=usage(0, 0, 20, out=10))


def _replay() -> dict:
    line = assistant(
        "s1", None, 10, "msg-parent", "req-sidechain-replay", u=usage(0, 0, 50_000, out=10)
    )
    return dict(line, isSidechain=True)


def _answer() -> dict:
    line = assistant(
        "s2", "s1", 11, "msg-sidechain-answer", "req-sidechain-answer", u=usage(0, 0, 700, out=30)
    )
    return dict(line, isSidechain=True)


def test_a_side_question_replay_counts_once(tmp_path: Path) -> None:
    write(tmp_path / "p" / f"{SESSION}.jsonl", [user("u1", None, 0), _parent()])
    write(
        tmp_path / "p" / SESSION / "subagents" / "agent-aside_question-1.jsonl",
        [_replay(), _answer()],
    )
    doc = inspect_json(tmp_path)
    assert doc["totals"]["calls"] == 2
    assert doc["totals"]["cache_read_tokens"] == 720
    assert doc["totals"]["output_tokens"] == 40
    assert doc["skipped"]["notes_by_reason"] == {"sidechain_replay": 1}


def test_the_parent_stands_when_its_replay_is_read_first(tmp_path: Path) -> None:
    # Replay and answer first in the file, then the parent, then a later line of the parent
    # with different cache counts (the first line's counts stand, and it is noted).
    late = assistant("p2", "p1", 10, "msg-parent", "req-parent", u=usage(0, 0, 5, out=5))
    write(
        tmp_path / "p" / f"{SESSION}.jsonl",
        [_replay(), _answer(), user("u1", None, 0), _parent(), late],
    )
    (session,), stats = load_sessions([str(tmp_path)])
    calls = {c.key: c for c in session.calls}
    assert set(calls) == {
        ("msg-parent", "req-parent"),
        ("msg-sidechain-answer", "req-sidechain-answer"),
    }
    assert calls[("msg-parent", "req-parent")].usage.cache_read_tokens == 20
    assert calls[("msg-parent", "req-parent")].usage.output_tokens == 10
    assert dict(stats.skips.notes) == {"sidechain_replay": 1, "conflicting_usage": 1}
    main = next(t for t in session.threads if t.thread_id == "main")
    assert [c.message_id for c in main.calls] == ["msg-parent"]


def test_two_main_thread_calls_sharing_a_message_id_both_count(tmp_path: Path) -> None:
    # Not a side question: some gateways reuse message ids; ccusage keeps both too.
    write(
        tmp_path / "p" / f"{SESSION}.jsonl",
        [
            user("u1", None, 0),
            assistant("a1", "u1", 1, "msg-x", "req-1", u=usage(0, 0, 100)),
            assistant("a2", "a1", 2, "msg-x", "req-2", u=usage(0, 0, 200)),
        ],
    )
    doc = inspect_json(tmp_path)
    assert doc["totals"]["calls"] == 2
    assert doc["totals"]["cache_read_tokens"] == 300


# ---------------------------------------------------------------- line uuids


def _conversation(session: str, ids: str) -> list[dict]:
    """user -> call -> user -> call, with fixed line uuids and per-conversation message ids."""
    return [
        user("u1", None, 0, session=session),
        assistant("a1", "u1", 1, f"m1{ids}", f"r1{ids}", u=usage(3, 1000, 0), session=session),
        user("u2", "a1", 2, session=session),
        assistant("a2", "u2", 3, f"m2{ids}", f"r2{ids}", u=usage(3, 50, 1000), session=session),
    ]


def test_uuids_reused_by_two_sessions_of_a_project_lose_no_call(tmp_path: Path) -> None:
    other = "99999999-2222-3333-4444-555555555555"
    write(tmp_path / "p" / f"{SESSION}.jsonl", _conversation(SESSION, "a"))
    write(tmp_path / "p" / f"{other}.jsonl", _conversation(other, "b"))
    sessions, stats = load_sessions([str(tmp_path)])
    assert sorted(len(s.calls) for s in sessions) == [2, 2]
    assert not stats.skips.notes  # different sessions: no collision within a thread


def test_uuids_reused_within_a_file_lose_no_call(tmp_path: Path) -> None:
    lines = _conversation(SESSION, "a")
    again = [
        user("u1", "a2", 10),  # the same uuids again, new calls, later in the file
        assistant("a1", "u1", 11, "m3", "r3", u=usage(3, 80, 1050)),
        user("u2", "a1", 12),
        assistant("a2", "u2", 13, "m4", "r4", u=usage(3, 60, 1130)),
    ]
    write(tmp_path / "p" / f"{SESSION}.jsonl", [*lines, *again])
    (session,), stats = load_sessions([str(tmp_path)])
    (main,) = session.threads
    assert [c.message_id for c in main.calls] == ["m1a", "m2a", "m3", "m4"]
    assert stats.skips.notes == {"uuid_collision": 4}


def test_a_progress_line_sharing_a_uuid_loses_no_call(tmp_path: Path) -> None:
    progress = {"type": "progress", "uuid": "a1", "parentUuid": "u1", "sessionId": SESSION}
    write(
        tmp_path / "p" / f"{SESSION}.jsonl",
        [user("u1", None, 0), progress, *_conversation(SESSION, "a")[1:]],
    )
    (session,), stats = load_sessions([str(tmp_path)])
    assert [c.message_id for c in session.calls] == ["m1a", "m2a"]
    assert stats.skips.notes == {"uuid_collision": 1}


def test_a_resumed_copy_is_not_a_collision(tmp_path: Path) -> None:
    # A resumed session copies earlier lines verbatim (same uuid, type, time and call).
    original = _conversation(SESSION, "a")
    write(tmp_path / "p" / f"{SESSION}.jsonl", original)
    write(
        tmp_path / "p" / "resumed.jsonl",
        [*original, assistant("a3", "a2", 9, "m3", "r3", u=usage(3, 70, 1050))],
    )
    (session,), stats = load_sessions([str(tmp_path)])
    assert [c.message_id for c in session.calls] == ["m1a", "m2a", "m3"]
    assert not stats.skips.notes


# ---------------------------------------------------------------- implausible numbers


@pytest.mark.parametrize(
    "value", [2**63, 2**63 - 1, 10**18, 1e300, 100_000_001, -1, 1.5, 2**64 + 1]
)
def test_implausible_token_counts_skip_the_line(tmp_path: Path, value: object) -> None:
    bad = assistant("a9", "a2", 9, "m9", "r9", u=usage(3, 0, 0, out=10))
    bad["message"]["usage"]["cache_read_input_tokens"] = value
    write(tmp_path / "p" / f"{SESSION}.jsonl", [*_conversation(SESSION, "a"), bad])
    doc = inspect_json(tmp_path)
    assert doc["totals"]["calls"] == 2
    assert doc["skipped"]["by_reason"] == {"bad_field": 1}
    (example,) = doc["skipped"]["examples"]
    assert example["line"] == 5
    assert "message.usage.cache_read_input_tokens" in example["detail"]


@pytest.mark.slow
def test_counts_that_overflow_when_summed_never_reach_the_outputs(tmp_path: Path) -> None:
    lines: list[dict] = [user("u1", None, 0)]
    for i in range(3):  # three of 2**62: each fits in 64 bits, their sum does not
        lines.append(assistant(f"a{i}", "u1", i + 1, f"m{i}", f"r{i}", u=usage(2**62, 0, 0)))
    write(tmp_path / "p" / f"{SESSION}.jsonl", lines)
    out = tmp_path / "run"
    result = CliRunner().invoke(
        cli,
        ["replay", str(tmp_path / "p"), "--policy", "policies/claude-code.yaml", "--out", str(out),
         "--no-cache"],
    )  # fmt: skip
    assert result.exit_code == 1, result.output  # nothing plausible to replay
    assert "no API calls could be read" in result.stderr
    assert inspect_json(tmp_path)["skipped"]["by_reason"] == {"bad_field": 3}


# ---------------------------------------------------------------- file and line shapes


def test_a_utf8_byte_order_mark_is_accepted(tmp_path: Path) -> None:
    path = write(tmp_path / "p" / f"{SESSION}.jsonl", _conversation(SESSION, "a"))
    path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())
    doc = inspect_json(tmp_path)
    assert doc["totals"]["calls"] == 2
    assert doc["skipped"]["total"] == 0


def test_a_line_without_type_carrying_a_whole_call_is_a_call(tmp_path: Path) -> None:
    untyped = assistant("a9", "a2", 9, "m9", "r9", u=usage(3, 40, 1050, out=7))
    del untyped["type"]
    write(tmp_path / "p" / f"{SESSION}.jsonl", [*_conversation(SESSION, "a"), untyped])
    doc = inspect_json(tmp_path)
    assert doc["totals"]["calls"] == 3
    assert doc["totals"]["cache_read_tokens"] == 1000 + 1050
    assert doc["skipped"]["total"] == 0


def test_skip_details_never_quote_the_content(tmp_path: Path) -> None:
    write(
        tmp_path / "p" / f"{SESSION}.jsonl",
        [*_conversation(SESSION, "a"), b'{"type": "user", "token": "sk-SECRET-123", broken'],
    )
    doc = inspect_json(tmp_path)
    (example,) = doc["skipped"]["examples"]
    assert example["reason"] == "invalid_json"
    assert "SECRET" not in example["detail"] and "bytes" in example["detail"]


def _lines(data: bytes, limit: int) -> list[tuple[int, bytes | None, int, bool]]:
    return [
        (n, bytes(raw) if raw is not None else None, size, last)
        for n, raw, size, last in jsonl.iter_lines(io.BytesIO(data), limit)
    ]


def test_lines_over_the_limit_are_passed_over_across_chunks(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(jsonl, "CHUNK_BYTES", 7)  # lines cross chunk boundaries everywhere
    data = b"\xef\xbb\xbfab\n" + b"x" * 40 + b"\n\ncd\r\n" + b"y" * 25 + b"\nlast"
    assert _lines(data, 20) == [
        (1, b"ab", 2, False),
        (2, None, 40, False),
        (3, b"", 0, False),
        (4, b"cd\r", 3, False),
        (5, None, 25, False),
        (6, b"last", 4, True),
    ]
    assert _lines(b"z" * 30, 20) == [(1, None, 30, True)]
    assert _lines(b"", 20) == []


def test_a_huge_line_is_skipped_as_too_long(tmp_path: Path) -> None:
    path = write(tmp_path / "p" / f"{SESSION}.jsonl", _conversation(SESSION, "a"))
    huge = {"type": "user", "uuid": "h", "message": {"content": "x" * (jsonl.MAX_LINE_BYTES + 10)}}
    with path.open("ab") as fh:
        fh.write(json.dumps(huge).encode() + b"\n")
    doc = inspect_json(tmp_path)
    assert doc["totals"]["calls"] == 2
    assert doc["skipped"]["by_reason"] == {"line_too_long": 1}
    assert doc["skipped"]["examples"][0]["line"] == 5


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_fifos_and_devices_are_skipped_and_counted(tmp_path: Path) -> None:
    project = tmp_path / "projects" / "p"
    write(project / f"{SESSION}.jsonl", _conversation(SESSION, "a"))
    os.mkfifo(project / "pipe.jsonl")
    (project / "zero.jsonl").symlink_to("/dev/zero")
    for args in ([str(tmp_path / "projects")], [str(project / "pipe.jsonl"), str(project)]):
        proc = subprocess.run(
            [sys.executable, "-m", "mcsim", "inspect", *args, "--json"],
            capture_output=True,
            timeout=120,  # a FIFO that is opened for reading blocks forever
        )
        assert proc.returncode == 0, proc.stderr
        doc = json.loads(proc.stdout)
        assert doc["totals"]["calls"] == 2
        assert doc["skipped"]["by_reason"] == {"not_regular_file": 2}
        details = sorted(e["detail"] for e in doc["skipped"]["examples"])
        assert details == ["a FIFO", "a character device"]


@pytest.mark.slow
def test_folder_and_file_names_that_are_not_utf8_reach_every_output(tmp_path: Path) -> None:
    root = tmp_path / "projects"
    project = Path(os.fsdecode(bytes(root) + b"/proj-\xff\xfe-x"))
    write(project / f"{SESSION}.jsonl", _conversation(SESSION, "a"))
    write(Path(os.fsdecode(bytes(project) + b"/agent-\xe9.jsonl")), [b"not json"])
    doc = inspect_json(root)
    assert doc["sessions"][0]["project"] == "proj-\\xff\\xfe-x"
    assert doc["skipped"]["examples"][0]["file"].endswith("/proj-\\xff\\xfe-x/agent-\\xe9.jsonl")
    policy = Path(__file__).resolve().parents[1] / "policies" / "claude-code.yaml"
    replay = ["replay", str(root), "--policy", str(policy), "--no-cache"]
    for args in (["inspect", str(root), "--out", str(tmp_path / "i")],
                 [*replay, "--out", str(tmp_path / "r")]):  # fmt: skip
        result = CliRunner().invoke(cli, args)
        assert result.exit_code == 0, result.output
    import polars as pl

    for run in ("i", "r"):
        sessions = pl.read_parquet(tmp_path / run / "sessions.parquet")
        assert set(sessions["project"]) == {"proj-\\xff\\xfe-x"}


@pytest.mark.slow
@pytest.mark.parametrize(
    "stamp",
    ["0001-01-01T00:00:00+01:00", "9999-12-31T23:59:59-01:00", "1969-12-31T23:59:59Z",
     "3000-01-01T00:00:00Z"],
)  # fmt: skip
def test_times_outside_the_plausible_years_skip_the_line(tmp_path: Path, stamp: str) -> None:
    bad = assistant("a9", "a2", 9, "m9", "r9", u=usage(3, 0, 0))
    bad["timestamp"] = stamp
    write(tmp_path / "p" / f"{SESSION}.jsonl", [*_conversation(SESSION, "a"), bad])
    doc = inspect_json(tmp_path)
    assert doc["totals"]["calls"] == 2
    (example,) = doc["skipped"]["examples"]
    assert (example["reason"], example["detail"]) == (
        "bad_field",
        "timestamp: outside the years 1970 to 2999",
    )
    out = tmp_path / "run"
    policy = Path(__file__).resolve().parents[1] / "policies" / "claude-code.yaml"
    result = CliRunner().invoke(
        cli,
        ["replay", str(tmp_path / "p"), "--policy", str(policy), "--out", str(out), "--no-cache"],
    )
    assert result.exit_code == 0, result.output


def test_a_naive_time_is_utc_whatever_the_machine_zone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lines = _conversation(SESSION, "a")
    lines[1]["timestamp"] = "2026-01-01T00:00:01"  # no zone: Claude Code writes UTC
    write(tmp_path / "p" / f"{SESSION}.jsonl", lines)
    monkeypatch.setenv("TZ", "America/New_York")
    import time

    time.tzset()
    try:
        doc = inspect_json(tmp_path)
    finally:
        monkeypatch.delenv("TZ")
        time.tzset()
    assert doc["sessions"][0]["start"] == "2026-01-01T00:00:01Z"


def test_until_the_last_day_a_date_can_hold(tmp_path: Path) -> None:
    write(tmp_path / "p" / f"{SESSION}.jsonl", _conversation(SESSION, "a"))
    result = CliRunner().invoke(cli, ["inspect", str(tmp_path), "--until", "9999-12-31", "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["totals"]["calls"] == 2


def test_a_file_is_read_as_large_as_it_was_when_opened(tmp_path: Path) -> None:
    path = tmp_path / "grows.jsonl"
    path.write_bytes(b"one\ntwo\n")
    with jsonl.open_regular(path) as fh:
        lines = jsonl.iter_lines(fh)
        first = bytes(next(lines)[1] or b"")
        with path.open("ab") as writer:  # a live session appends while mcsim reads
            writer.write(b"three\n" * 1000)
        rest = [bytes(raw) for _, raw, _, _ in lines if raw is not None]
    assert [first, *rest] == [b"one", b"two"]


def test_inline_sidechains_with_the_same_uuid_prefix_are_two_threads(tmp_path: Path) -> None:
    def root(uuid: str, msg: str, at: float) -> list[dict]:
        return [
            dict(user(uuid, None, at), isSidechain=True),
            dict(assistant(f"{uuid}-a", uuid, at + 1, msg, f"r-{msg}", u=usage(3, 900, 0)),
                 isSidechain=True),
        ]  # fmt: skip

    write(
        tmp_path / "p" / f"{SESSION}.jsonl",
        [*_conversation(SESSION, "a"), *root("abcdefgh-1111", "s1", 20),
         *root("abcdefgh-2222", "s2", 40)],
    )  # fmt: skip
    (session,), _ = load_sessions([str(tmp_path)])
    assert sorted(t.thread_id for t in session.threads) == [
        "main",
        "sidechain-abcdefgh-1111",
        "sidechain-abcdefgh-2222",
    ]


def test_numeric_request_ids_keep_calls_apart(tmp_path: Path) -> None:
    first = assistant("a1", "u1", 1, "m1", None, u=usage(3, 1000, 0))
    second = assistant("a2", "a1", 2, "m1", None, u=usage(3, 50, 1000))
    first["requestId"], second["requestId"] = 1, 2
    write(tmp_path / "p" / f"{SESSION}.jsonl", [user("u1", None, 0), first, second])
    doc = inspect_json(tmp_path)
    assert doc["totals"]["calls"] == 2
    assert doc["skipped"]["notes_by_reason"] == {}


def test_a_call_copied_into_another_project_with_other_counts_is_noted(tmp_path: Path) -> None:
    small = [user("u1", None, 0), assistant("a1", "u1", 1, "m1", "r1", u=usage(3, 0, 100))]
    # The same call in a larger project folder, with other counts: that copy is read first.
    big = [*_conversation(SESSION, "b"), assistant("a3", "a2", 1, "m1", "r1", u=usage(3, 0, 999))]
    write(tmp_path / "projA" / f"{SESSION}.jsonl", small)
    write(tmp_path / "projB" / f"{SESSION}.jsonl", big)
    doc = inspect_json(tmp_path)
    assert doc["totals"]["calls"] == 3
    assert doc["totals"]["cache_read_tokens"] == 1000 + 999
    assert doc["input"]["duplicate_calls_across_projects"] == 1
    assert doc["skipped"]["notes_by_reason"] == {"conflicting_usage": 1}
    (note,) = doc["skipped"]["examples"]
    assert note["file"].endswith("projA")
