"""Messy input never crashes a run and is never dropped silently."""

from __future__ import annotations

import json
import random
from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner
from lines import SESSION, assistant, usage, user, write

from mcsim.cli import cli
from mcsim.ingest.pipeline import load_sessions


def inspect_json(*paths: Path) -> tuple[int, dict]:
    result = CliRunner().invoke(cli, ["inspect", *map(str, paths), "--json"])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    return result.exit_code, json.loads(result.stdout) if result.stdout.strip() else {}


def good_session() -> list:
    return [
        user("u1", None, 0),
        assistant("a1", "u1", 1, "m1", "r1", u=usage(3, 1000, 0, out=10)),
        user("u2", "a1", 2),
        assistant("a2", "u2", 3, "m2", "r2", u=usage(3, 50, 1000, out=20)),
    ]


def test_every_kind_of_bad_line_is_counted_with_file_and_line(tmp_path: Path) -> None:
    wrong_usage = assistant("a9", "a2", 9, "m9", "r9", u=usage(inp="12"))  # type: ignore[arg-type]
    null_message = dict(user("u9", "a2", 9), message=None)
    bad_time = assistant("a8", "a2", 9, "m8", "r8")
    bad_time["timestamp"] = "yesterday"
    lines = [
        *good_session(),
        b'{"type": "user", "message": {',  # invalid JSON                      line 5
        b"[1, 2, 3]",  # not an object                                         line 6
        b'"just a string"',  # not an object                                   line 7
        {"type": "brand-new-kind", "uuid": "x"},  # unknown type               line 8
        wrong_usage,  # usage field of the wrong type                          line 9
        null_message,  # null message                                          line 10
        bad_time,  # unparseable timestamp                                     line 11
        {"uuid": "no-type"},  # no type at all                                 line 12
    ]
    path = write(tmp_path / "p" / f"{SESSION}.jsonl", lines)
    with path.open("ab") as fh:
        fh.write(b'{"type": "assistant", "mess')  # truncated last line (no newline)   line 13
    code, doc = inspect_json(tmp_path)
    assert code == 0
    assert doc["totals"]["calls"] == 2
    skipped = doc["skipped"]
    assert skipped["by_reason"] == {
        "bad_field": 4,
        "invalid_json": 1,
        "not_object": 2,
        "truncated_line": 1,
        "unknown_type": 1,
    }
    assert skipped["invalid_lines"] == 2
    where = {(e["line"], e["reason"]) for e in skipped["examples"]}
    assert where == {
        (5, "invalid_json"),
        (6, "not_object"),
        (7, "not_object"),
        (8, "unknown_type"),
        (9, "bad_field"),
        (10, "bad_field"),
        (11, "bad_field"),
        (12, "bad_field"),
        (13, "truncated_line"),
    }
    details = {e["line"]: e["detail"] for e in skipped["examples"]}
    assert "message.usage.input_tokens" in details[9]
    assert details[10].startswith("message")
    assert details[11].startswith("timestamp")


def test_invalid_utf8_is_repaired_and_counted(tmp_path: Path) -> None:
    raw = json.dumps(user("u1", None, 0, "caf\u00e9"), ensure_ascii=False).encode()
    line = raw.replace(b"\xc3\xa9", b"\xff")
    assert line != raw
    write(tmp_path / "p" / f"{SESSION}.jsonl", [line, good_session()[1]])
    code, doc = inspect_json(tmp_path)
    assert code == 0
    assert doc["totals"]["calls"] == 1
    assert doc["skipped"]["repaired_by_reason"] == {"invalid_utf8": 1}


def test_empty_file_and_huge_line(tmp_path: Path) -> None:
    (tmp_path / "p").mkdir()
    (tmp_path / "p" / "empty.jsonl").write_bytes(b"")
    snapshot = {
        "type": "file-history-snapshot",
        "messageId": "x",
        "snapshot": {"blob": "x" * 30_000_000},
    }
    write(tmp_path / "p" / f"{SESSION}.jsonl", [snapshot, *good_session()])
    code, doc = inspect_json(tmp_path)
    assert code == 0
    assert doc["totals"]["calls"] == 2
    assert doc["skipped"]["total"] == 0


def test_nothing_readable_exits_1_and_missing_path_exits_2(tmp_path: Path) -> None:
    write(tmp_path / "p" / "junk.jsonl", [b"not json", b"{broken"])
    result = CliRunner().invoke(cli, ["inspect", str(tmp_path)])
    assert result.exit_code == 1
    assert "no API calls could be read" in result.stderr
    result = CliRunner().invoke(cli, ["inspect", str(tmp_path / "nope")])
    assert result.exit_code == 2
    assert result.stderr.strip() == f"Error: {tmp_path / 'nope'}: no such file or folder"


MUTATIONS = 10_000


def _mutate(rng: random.Random, obj: dict) -> bytes:
    """One line, damaged in one of the ways real files are."""
    choice = rng.randrange(8)
    raw = orjson.dumps(obj)
    if choice == 0:  # cut anywhere
        return raw[: rng.randrange(1, len(raw))]
    if choice == 1:  # random byte flips, possibly invalid UTF-8
        data = bytearray(raw)
        for _ in range(rng.randint(1, 4)):
            data[rng.randrange(len(data))] = rng.randrange(256)
        return bytes(data).replace(b"\n", b" ")
    if choice == 2:  # a field nulled, wherever it is
        return orjson.dumps(_replace_somewhere(rng, obj, None))
    if choice == 3:  # a field given the wrong type
        return orjson.dumps(_replace_somewhere(rng, obj, rng.choice(["x", -5, 1.5, [], {}, True])))
    if choice == 4:
        return orjson.dumps(rng.choice([[obj], "text", 42, None]))
    if choice == 5:
        return orjson.dumps(dict(obj, type=rng.choice(["weird", 7, None])))
    if choice == 6:
        return raw + b"}}"
    return raw


def _replace_somewhere(rng: random.Random, obj: object, value: object) -> object:
    if isinstance(obj, dict) and obj:
        key = rng.choice(list(obj))
        if rng.random() < 0.5 or not isinstance(obj[key], dict | list):
            return {**obj, key: value}
        return {**obj, key: _replace_somewhere(rng, obj[key], value)}
    if isinstance(obj, list) and obj:
        i = rng.randrange(len(obj))
        return [*obj[:i], _replace_somewhere(rng, obj[i], value), *obj[i + 1 :]]
    return value


@pytest.mark.slow
def test_ten_thousand_mutated_corpus_lines(corpus: Path, tmp_path: Path) -> None:
    rng = random.Random(7)
    source = [
        orjson.loads(line)
        for f in sorted(corpus.rglob("*.jsonl"))
        for line in f.read_bytes().splitlines()
        if len(line) < 200_000
    ]
    out = tmp_path / "mutated" / "-proj"
    out.mkdir(parents=True)
    unparseable = 0
    for i in range(MUTATIONS // 500):
        lines = [_mutate(rng, rng.choice(source)) for _ in range(500)]
        for line in lines:
            try:
                orjson.loads(line)
            except orjson.JSONDecodeError:
                try:  # the loader repairs invalid UTF-8 that is otherwise valid JSON
                    orjson.loads(line.decode("utf-8", "replace"))
                except orjson.JSONDecodeError:
                    unparseable += 1
        (out / f"part-{i:02d}.jsonl").write_bytes(b"\n".join(lines) + b"\n")
    sessions, stats = load_sessions([str(tmp_path / "mutated")])
    counts = stats.skips.counts
    assert counts["invalid_json"] + counts["truncated_line"] == unparseable
    assert unparseable > 1000  # the mutations really did break lines
    result = CliRunner().invoke(cli, ["inspect", str(tmp_path / "mutated"), "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["skipped"]["invalid_lines"] == unparseable
    assert doc["totals"]["calls"] == sum(len(s.calls) for s in sessions) > 0


def test_examples_are_capped_but_counts_stay_exact() -> None:
    from mcsim.model import SkipReport

    worker = SkipReport(max_examples=3)
    for line in range(5):
        worker.add("f.jsonl", line, "invalid_json")
    parent = SkipReport(max_examples=3)
    parent.add("g.jsonl", 1, "not_object")
    parent.merge(worker)
    assert parent.counts == {"invalid_json": 5, "not_object": 1}
    assert [(e.file, e.line) for e in parent.examples] == [
        ("g.jsonl", 1),
        ("f.jsonl", 0),
        ("f.jsonl", 1),
    ]
    assert parent.examples_omitted == 2 + 1  # two never kept by the worker, one cut here


def test_skipped_line_count_reads_as_english() -> None:
    from mcsim.ingest.pipeline import LoadStats
    from mcsim.outputs.terminal import load_notes

    stats = LoadStats()
    stats.skips.add("f.jsonl", 3, "synthetic")
    assert load_notes(stats)[0] == "skipped 1 line (synthetic 1):"
    stats.skips.add("f.jsonl", 4, "invalid_json")
    assert load_notes(stats)[0] == "skipped 2 lines (invalid_json 1, synthetic 1):"
    stats = LoadStats(files_skipped_by_project=1, duplicate_calls=1)
    assert load_notes(stats) == [
        "note: 1 file of projects not matching --project was not read",
        "note: 1 call appeared in more than one project folder and was counted once",
    ]
    stats = LoadStats(files_skipped_by_project=2, duplicate_calls=3)
    assert load_notes(stats) == [
        "note: 2 files of projects not matching --project were not read",
        "note: 3 calls appeared in more than one project folder and were counted once",
    ]


def test_blank_lines_and_crlf_endings_are_not_errors(tmp_path: Path) -> None:
    good = [orjson.dumps(line) for line in good_session()]
    write(tmp_path / "p" / f"{SESSION}.jsonl", [good[0] + b"\r", b"   ", b"", *good[1:], b"\t\r"])
    code, doc = inspect_json(tmp_path)
    assert code == 0
    assert doc["totals"]["calls"] == 2
    assert doc["skipped"]["total"] == 0


@pytest.mark.slow
def test_an_input_without_calls_is_the_same_error_in_every_command(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    titles = tmp_path / "titles"  # only a session-title line: read, but no call
    write(titles / "p" / f"{SESSION}.jsonl", [{"type": "summary", "summary": "t", "leafUuid": "x"}])
    policy = Path(__file__).resolve().parents[1] / "policies" / "claude-code.yaml"
    for folder, counts in ((empty, "0 files, 0 lines read, 0 skipped"),
                           (titles, "1 file, 1 line read, 0 skipped")):  # fmt: skip
        commands = {
            "account": ["inspect", str(folder), "--out", str(tmp_path / "i")],
            "replay": ["replay", str(folder), "--policy", str(policy),
                       "--out", str(tmp_path / "r")],
            "sweep": ["sweep", str(folder), "--policy", str(policy), "--name", "claude-code",
                      "--out", str(tmp_path / "s"),
                      "--grid", "cached_microcompact.keep_recent=1,2"],
        }  # fmt: skip
        for what, args in commands.items():
            for extra in ([], ["--json"]):
                result = CliRunner().invoke(cli, [*args, *extra])
                assert result.exit_code == 1, result.output
                if not extra:  # no table of zeros before the error (--json: its document)
                    assert result.stdout == "", result.stdout
                none = "; no transcript file (*.jsonl) was found there" if folder == empty else ""
                assert result.stderr.splitlines()[-1] == (
                    f"Error: no API calls could be read from the input ({counts}); "
                    f"nothing to {what}{none}"
                )
        assert not [p.name for p in tmp_path.iterdir() if p.name not in ("empty", "titles")]
