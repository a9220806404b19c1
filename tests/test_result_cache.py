"""Replayed results kept in the cache folder: a warm `mcsim replay` writes what a run without
the cache writes, byte for byte, without loading or replaying anything; another policy file,
price table or mcsim is another entry; a changed transcript, a damaged, foreign or misshapen
entry is replayed again (and noted when damaged)."""

from __future__ import annotations

import json
import os
import random
import shutil
import struct
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import orjson
import pytest
from click.testing import CliRunner
from conftest import CORPUS, REPO, SAMPLES, signed_copy
from lines import SESSION, assistant, tool_result, tool_use, usage, user, write

import mcsim.replay.run
from mcsim.accounting.prices import default_table
from mcsim.cli import cli
from mcsim.ingest import cache_packs
from mcsim.ingest.disk_cache import BAD_SIGNATURE, signature
from mcsim.ingest.loaders.claude_code import ClaudeCodeLoader
from mcsim.replay import result_cache
from mcsim.replay.run import ReplayReport, run_replay
from mcsim.replay.scenario import load_policy_file

ALL = REPO / "policies" / "all.yaml"
SCENARIOS = load_policy_file(ALL)
MAGIC = b"\x89mcsim\r\n"
BODY = struct.Struct("<BHQ")  # kind, format version, payload size (disk_cache.py)
HEADER_BYTES = len(MAGIC) + 32 + BODY.size
CODEX = REPO / "tests" / "data" / "codex"


def _replay(cache: Path | None, *paths: Path, **options: Any) -> ReplayReport:
    paths = paths or (SAMPLES,)
    options.setdefault("keep_rows", True)
    return run_replay([str(p) for p in paths], options.pop("scenarios", SCENARIOS),
                      default_table(), cache_dir=cache, workers=1, **options)  # fmt: skip


def _figures(report: ReplayReport) -> Any:
    rows = report.call_rows()
    return (
        report.recorded,
        report.policies,
        [replace(s, call_rows=None) for s in report.results],
        report.sessions,
        {name: list(column) for name, column in rows.numbers.items()},
        {name: [rows.values[name][c] if c >= 0 else None for c in rows.codes[name]]
         for name in rows.codes},
        report.stats.skips,
    )  # fmt: skip


def _rebuilt(report: ReplayReport) -> list[tuple[str, str]]:
    skips = report.stats.skips
    found = [(e.file, e.detail) for e in skips.examples if e.reason == "cache_entry_rebuilt"]
    assert skips.notes["cache_entry_rebuilt"] == len(found)
    return found


def _no_loading_or_replaying(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a warm run must serve every unit from its results")

    monkeypatch.setattr(ClaudeCodeLoader, "load", refuse)
    monkeypatch.setattr(mcsim.replay.run, "replay_session", refuse)


@pytest.fixture(scope="module")
def expected() -> Any:
    return _figures(_replay(None))


@pytest.fixture()
def cache(tmp_path: Path) -> Path:
    folder = tmp_path / "cache"
    assert _rebuilt(_replay(folder)) == []
    assert len(list(folder.glob("*.results"))) == 2  # one per project folder of the samples
    return folder


def _entry(cache: Path) -> Path:
    return sorted(cache.glob("*.results"))[0]


def test_a_warm_run_is_served_from_the_results_and_gives_the_same_figures(
    cache: Path, expected: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    _no_loading_or_replaying(monkeypatch)
    report = _replay(cache)
    assert _figures(report) == expected
    assert len(report.sessions) == 2  # one session in each project folder of the samples


def _run(*args: str) -> dict[str, Any]:
    result = CliRunner().invoke(cli, ["replay", *args, "--json"])
    assert result.exit_code == 0, result.output
    doc: dict[str, Any] = json.loads(result.stdout)
    doc.pop("out_dir")
    return doc


def _entries(cache: Path, suffix: str) -> dict[str, Path]:
    """The cache's entries of a kind, by name: the file or the pack each is in."""
    found = {p.name: p for p in cache.glob(f"*{suffix}")}
    for pack in cache.glob("*.pack"):
        table = cache_packs.read_table(pack)
        assert table is not None
        found.update((name, pack) for name in table[1] if name.endswith(suffix))
    return found


def _files(folder: Path) -> dict[str, bytes]:
    found = {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}
    run = json.loads(found.pop("run.json"))
    run.pop("created")
    found["run.json"] = json.dumps(run).encode()
    return found


@pytest.mark.slow
def test_a_warm_replay_writes_what_a_replay_without_the_cache_writes(tmp_path: Path) -> None:
    # The corpus (every layout, compactions, prunings, broken lines), the samples and Codex
    # rollouts, under every example policy: every table, chart and figure, byte for byte.
    cache = tmp_path / "cache"
    paths = [str(CORPUS), str(SAMPLES), str(CODEX), "--policy", str(ALL)]
    none = _run(*paths, "--no-cache", "--out", str(tmp_path / "none"))
    cold = _run(*paths, "--cache-dir", str(cache), "--out", str(tmp_path / "cold"))
    results = _entries(cache, ".results")  # (in packs: more than one process's worth)
    assert len(results) == len(_entries(cache, ".sessions")) > 10
    holders = set(results.values())
    stamps = {p: p.stat().st_mtime_ns for p in cache.iterdir()}
    warm = _run(*paths, "--cache-dir", str(cache), "--out", str(tmp_path / "warm"))
    assert none == cold == warm
    touched = {p: p.stat().st_mtime_ns for p in cache.iterdir()}
    assert touched.keys() == stamps.keys()  # nothing written
    assert all(touched[p] != stamps[p] for p in holders)  # read (touched)
    assert _files(tmp_path / "none") == _files(tmp_path / "cold") == _files(tmp_path / "warm")


def test_dates_are_applied_to_served_results(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = tmp_path / "cache"
    everything = _replay(cache, CORPUS)
    starts = sorted(s.start_s for s in everything.sessions)
    since, until = starts[3], starts[-4]
    dated = _replay(None, CORPUS, since_s=since, until_s=until)
    assert 0 < len(dated.sessions) < len(everything.sessions)
    assert dated.stats.sessions_outside_dates > 0
    _no_loading_or_replaying(monkeypatch)
    served = _replay(cache, CORPUS, since_s=since, until_s=until)
    assert _figures(served) == _figures(dated)
    assert served.stats.sessions_outside_dates == dated.stats.sessions_outside_dates
    assert served.stats.examples_outside_dates == dated.stats.examples_outside_dates


def test_a_run_that_left_sessions_out_by_date_keeps_no_results(tmp_path: Path) -> None:
    # Sessions outside the dates are never replayed: such a unit's results are incomplete.
    cache = tmp_path / "cache"
    starts = sorted(s.start_s for s in _replay(None).sessions)
    _replay(cache, since_s=starts[-1])
    assert len(list(cache.glob("*.sessions"))) == 2
    assert len(list(cache.glob("*.results"))) == 1  # the project whose sessions all count


def test_another_setup_is_another_entry_and_both_are_kept(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    first = _replay(cache)
    other = load_policy_file(REPO / "policies" / "claude-code.yaml")
    second = _replay(cache, scenarios=other)
    assert [s.name for s in second.scenarios] != [s.name for s in first.scenarios]
    assert len(list(cache.glob("*.results"))) == 4
    assert _figures(_replay(cache)) == _figures(first)
    assert _figures(_replay(cache, scenarios=other)) == _figures(second)
    assert len(list(cache.glob("*.results"))) == 4


def test_the_setup_key_covers_what_results_depend_on() -> None:
    prices = default_table()
    scenarios = tuple(SCENARIOS)
    key = result_cache.setup_key(scenarios, prices, True)
    first = scenarios[1]
    changed = [
        (replace(first, ttl="1h"), *scenarios[2:]),
        (replace(first, main_thread_only=not first.main_thread_only), *scenarios[2:]),
        (replace(first, exclude_tools=frozenset({"Read"})), *scenarios[2:]),
        (replace(first, layers=scenarios[2].layers), *scenarios[2:]),
        (replace(first, name="renamed"), *scenarios[2:]),
        (replace(first, provider="openai"), *scenarios[2:]),
    ]
    keys = {result_cache.setup_key((scenarios[0], *s), prices, True) for s in changed}
    keys.add(result_cache.setup_key(scenarios, prices, False))
    models = dict(prices.models)
    name = next(iter(models))
    models[name] = replace(models[name], family=models[name].family + "x")
    keys.add(result_cache.setup_key(scenarios, replace(prices, models=models), True))
    assert key not in keys and len(keys) == len(changed) + 2


def _printed_with_hash_seeds(code: str) -> set[str]:
    """What `code` prints in processes of three string hash seeds."""
    printed = set()
    for seed in ("1", "2", "3"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                             check=True, env=env)  # fmt: skip
        printed.add(run.stdout)
    return printed


def test_the_setup_key_is_the_same_in_every_process() -> None:
    # Tool lists are sets, whose order changes with the string hash seed of each process.
    code = (
        "from mcsim.replay.result_cache import setup_key;"
        "from mcsim.replay.scenario import load_policy_file;"
        "from mcsim.accounting.prices import default_table;"
        f"print(setup_key(tuple(load_policy_file({str(ALL)!r})), default_table(), True))"
    )
    keys = _printed_with_hash_seeds(code)
    assert keys == {result_cache.setup_key(tuple(SCENARIOS), default_table(), True) + "\n"}


def test_mcsims_code_is_part_of_the_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache = tmp_path / "cache"
    _replay(cache)
    monkeypatch.setattr(result_cache, "code_hash", lambda: "another mcsim")
    _replay(cache)
    assert len(list(cache.glob("*.results"))) == 4
    source = Path(result_cache.__file__).resolve().parent.parent
    assert len(list(source.rglob("*.py"))) > 50  # the whole package, hashed


def _add_a_call(transcript: Path) -> None:
    with transcript.open("a") as fh:
        fh.write(json.dumps(assistant("zz", None, 50_000, "m-new", "r-new",
                                      u=usage(7, 0, 0))) + "\n")  # fmt: skip


def test_a_changed_transcript_is_replayed_again_and_its_entry_replaced(tmp_path: Path) -> None:
    folder = tmp_path / "in"
    shutil.copytree(SAMPLES, folder)
    cache = tmp_path / "cache"
    _replay(cache, folder)
    _add_a_call(sorted(folder.rglob("*.jsonl"))[0])
    grown = _replay(cache, folder)
    assert _figures(grown) == _figures(_replay(None, folder))
    assert grown.recorded.calls == _replay(None, SAMPLES).recorded.calls + 1
    assert len(list(cache.glob("*.results"))) == 2


_A, _B = "aaaaaaaa-0000-4000-8000-000000000001", "bbbbbbbb-0000-4000-8000-000000000002"


def _two_sessions(folder: Path) -> list[Path]:
    """A project folder (one unit) of two sessions, each in its file, with tool results."""
    files = []
    for n, session in enumerate((_A, _B)):
        at = 1_000 * n
        files.append(write(folder / "p" / f"{session}.jsonl", [
            user(f"u{n}1", None, at, "read it", session=session),
            assistant(f"a{n}1", f"u{n}1", at + 1, f"m{n}1", f"r{n}1", session=session,
                      u=usage(3, 2_000, 0), content=[tool_use(f"t{n}", "Read", file_path="x")]),
            user(f"u{n}2", f"a{n}1", at + 2, tool_result(f"t{n}", "line\n" * 400),
                 session=session),
            assistant(f"a{n}2", f"u{n}2", at + 3, f"m{n}2", f"r{n}2", session=session,
                      u=usage(3, 900, 2_000)),
        ]))  # fmt: skip
    return files


def _counting(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The sessions replay_session is called on, from now on."""
    replayed: list[str] = []
    replay = mcsim.replay.run.replay_session

    def count(session: Any, **kwargs: Any) -> Any:
        replayed.append(session.session_id)
        return replay(session, **kwargs)

    monkeypatch.setattr(mcsim.replay.run, "replay_session", count)
    return replayed


def _grow(files: list[Path]) -> str:
    """The live session goes on: a turn appended to the second session's file."""
    with files[1].open("a") as fh:
        fh.write(json.dumps(user("u23", "a12", 1_004, "more", session=_B)) + "\n")
        fh.write(json.dumps(assistant("a23", "u23", 1_005, "m23", "r23", session=_B,
                                      u=usage(3, 50, 2_900))) + "\n")  # fmt: skip
    return _B


def _edit(files: list[Path]) -> str:
    """The same ids and times, another tool result in the first session."""
    files[0].write_text(files[0].read_text().replace("line\\n" * 400, "other\\n" * 900))
    return _A


@pytest.mark.parametrize("change", [_grow, _edit])
def test_a_changed_project_replays_only_its_changed_sessions(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, change: Any
) -> None:
    folder = tmp_path / "in"
    files = _two_sessions(folder)
    cache = tmp_path / "cache"
    replayed = _counting(monkeypatch)
    _replay(cache, folder)
    assert sorted(replayed) == [_A, _B]
    changed = change(files)
    replayed.clear()
    report = _replay(cache, folder)
    assert replayed == [changed]  # the other session's results are taken as they were
    monkeypatch.undo()
    assert _figures(report) == _figures(_replay(None, folder))
    replayed = _counting(monkeypatch)
    assert _figures(_replay(cache, folder)) == _figures(report)
    assert replayed == []  # the unit's entry now stands for its files as they are
    assert len(list(cache.glob("*.results"))) == 1


@pytest.mark.slow
def test_a_session_key_is_the_same_in_every_process(tmp_path: Path) -> None:
    _two_sessions(tmp_path / "in")
    code = (
        "from mcsim.replay.run import CalibratedSource;"
        "from mcsim.ingest.loaders import plan_units;"
        "from mcsim.replay.session_cache import content_key;"
        "from pathlib import Path;"
        f"(unit,) = plan_units(sorted(Path({str(tmp_path / 'in')!r}).rglob('*.jsonl')));"
        "print(*(content_key(s) for s in CalibratedSource(None)(unit, frozenset()).sessions))"
    )
    keys = _printed_with_hash_seeds(code)
    assert len(keys) == 1 and len(set(keys.pop().split())) == 2


def test_a_transcript_written_to_during_its_replay_is_replayed_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Claude Code appends to a live session while mcsim replays it: the entry must stand for
    # the files as they were loaded, so the next run sees the new lines, as --no-cache does.
    folder = tmp_path / "in"
    shutil.copytree(SAMPLES, folder)
    cache = tmp_path / "cache"
    grow = sorted(folder.rglob("*.jsonl"))
    replay = mcsim.replay.run.replay_session

    def append_then_replay(*args: Any, **kwargs: Any) -> Any:
        while grow:  # once, while the first unit is being replayed
            _add_a_call(grow.pop())
        return replay(*args, **kwargs)

    monkeypatch.setattr(mcsim.replay.run, "replay_session", append_then_replay)
    _replay(cache, folder)
    monkeypatch.undo()
    assert _figures(_replay(cache, folder)) == _figures(_replay(None, folder))


def test_every_flipped_byte_is_noticed_and_the_entry_rebuilt(cache: Path, expected: Any) -> None:
    entry = _entry(cache)
    original = entry.read_bytes()
    rng = random.Random(99)
    for position in rng.sample(range(len(original)), 40):
        damaged = bytearray(original)
        damaged[position] ^= rng.randrange(1, 256)
        entry.write_bytes(damaged)
        report = _replay(cache)
        assert _figures(report)[:-1] == expected[:-1], position
        ((file, why),) = _rebuilt(report)
        assert file == str(entry)
        assert why in ("not an mcsim cache file", BAD_SIGNATURE, "truncated"), position
        assert entry.read_bytes() == original  # rewritten as it was


def _forged(entry: Path, payload: bytes) -> None:
    original = entry.read_bytes()
    kind, version, _ = BODY.unpack_from(original, len(MAGIC) + 32)
    body = BODY.pack(kind, version, len(payload)) + payload
    entry.write_bytes(MAGIC + signature(entry.name, body) + body)


def _parts(entry: Path) -> tuple[list[Any], bytes]:
    payload = entry.read_bytes()[HEADER_BYTES:]
    (size,) = struct.unpack_from("<Q", payload)
    return orjson.loads(payload[8 : 8 + size]), payload[8 + size :]


def _joined(doc: list[Any], blob: bytes) -> bytes:
    data = orjson.dumps(doc)
    return struct.pack("<Q", len(data)) + data + blob


def _at(table: str, column: str, *rest: int) -> tuple[int, ...]:
    """Where a column (or a value in it) is in the JSON part of a payload: [[name, stamp],
    files, the skip report's tables, the sessions' tables] (`result_cache.Kept`, laid out by
    mcsim.ingest.codec); the samples' entries hold one session each, row 0."""
    return (3, *result_cache._CODEC.at(table, column), *rest)


def _column(doc: list[Any], table: str, column: str) -> list[Any]:
    _, t, c = _at(table, column)
    found: list[Any] = doc[3][t][c]
    return found


@pytest.mark.parametrize(
    ("path", "value"),
    [
        (_at("", "start", 0), "0"),  # a session's start as text
        (_at("", "digests", 0, 0), -1),  # a call digest that is not 64 unsigned bits
        (_at("", "digests", 0, 0), 1.5),  # ... nor an integer
        (_at("result.recorded", "cost_usd", 0), 1),  # a cost that is not a float
        (_at("result.policies", "calls"), [1]),  # a column shorter than the others
        (_at("result.policies", "breaks_by_cause", 0), {"ttl_expired": "2"}),  # a count as text
        (_at("result.policies", "figures", 0), [{"gap": "long"}]),  # a figure as text
        (_at("result", "calibration_fallbacks"), []),  # fidelity without its fallbacks
        (_at("result", "ttls", 0), {"1h": "3"}),  # calls by recorded TTL as text
        (_at("result.policies", "edit_reread_usd", 0), 1),  # a re-read cost not a float
        # a session's threads, a table of their own (rows.ThreadRows)
        (_at("result.call_rows.threads", "calls", 0), 0),  # a thread without its calls
        (_at("result.call_rows.threads", "kind", 0), 7),  # a thread kind not a string
        (_at("result.call_rows", "rows", 0), 1),  # fewer rows than the threads' calls
        (_at("result.call_rows", "model", 0), []),  # model runs that do not cover the rows
        (_at("breaks", "call_index", 0), "1"),  # a break's call index as text
        (_at("", "breaks", 0), 0),  # a session's breaks missing from its count
        ((3, 0), [1]),  # a table without its columns
        ((2, 0, 0, 0), "12"),  # the lines read as text
        # numbers no replay reaches, which the tables, charts or dates could not take
        (_at("result.recorded.tokens", "input_tokens", 0), 2**64 - 1),  # past 64 bits
        (_at("result.policies", "unpriced_calls", 0), 2**63),  # a count past them
        (_at("result.policies", "breaks_by_cause", 0), {"ttl_expired": -(2**63)}),
        (_at("result.recorded", "cost_usd", 0), 1e308),  # a cost whose sum is infinite
        (_at("", "start", 0), 1e300),  # a start past the year 2999
        (_at("result", "start_s", 0), -1.0),  # ... before 1970
        (_at("result", "end_s", 0), 1e300),  # an end past the year 2999
        (_at("breaks", "timestamp", 0), 1e300),  # a break past it
        (_at("breaks", "drop_tokens", 0), 2**63),  # a break's tokens past 64 bits
    ],
)
def test_a_verified_payload_of_the_wrong_shape_is_rebuilt(
    cache: Path, expected: Any, path: tuple[int, ...], value: Any
) -> None:
    entry = _entry(cache)
    original = entry.read_bytes()
    doc, blob = _parts(entry)
    target: Any = doc
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    _forged(entry, _joined(doc, blob))
    report = _replay(cache)
    assert _figures(report)[:-1] == expected[:-1]
    assert _rebuilt(report) == [(str(entry), "unexpected content")]
    assert entry.read_bytes() == original


def _fewer_counts(doc: list[Any]) -> None:
    _column(doc, "", "counts")[0].pop()  # a call's counts missing: the calls would not pair up


def _negative_run(doc: list[Any], field: str) -> None:
    columns = _column(doc, "result.call_rows", field)[0]  # the counts still add up, one < 0
    columns[-1][0] += 1
    for column in columns[:-1]:
        column.append(column[0])
    columns[-1].append(-1)


def _negative_thread(doc: list[Any]) -> None:
    # one thread more, of -1 calls, and a call more on the first: the counts still add up
    _column(doc, "result.call_rows", "threads")[0] += 1
    kinds = _column(doc, "result.call_rows.threads", "kind")
    calls = _column(doc, "result.call_rows.threads", "calls")
    calls[0] += 1
    _column(doc, "result.call_rows.threads", "thread_id").append("another")
    kinds.append(kinds[0])
    calls.append(-1)


def _cause_past_the_rows(doc: list[Any]) -> None:
    rows = _column(doc, "result.call_rows", "rows")[0]
    _column(doc, "result.call_rows", "causes")[0] = [[rows], ["ttl_expired"]]  # (row, cause)


def _some_figures(doc: list[Any]) -> tuple[list[Any], int]:
    figures = _column(doc, "result.policies", "figures")
    return figures, next(i for i, f in enumerate(figures) if f)


def _other_figures(doc: list[Any]) -> None:
    figures, i = _some_figures(doc)
    figures[i] = figures[i] * 2  # figures of more policies than the scenario has


def _figures_without_their_names(doc: list[Any]) -> None:
    figures, i = _some_figures(doc)
    figures[i] = [{} for _ in figures[i]]


def _policy_renamed(doc: list[Any]) -> None:
    _column(doc, "result.policies", "name")[1] = "another policy"


def _policy_missing(doc: list[Any]) -> None:
    _column(doc, "result", "policies")[0] -= 1  # the last, with its tokens
    for table, column in (("result.policies", "name"), ("result.policies.tokens", "input_tokens")):
        for values in doc[3][_at(table, column)[1]]:
            values.pop()


def _rows_of_other_runs(doc: list[Any]) -> None:
    policies = _column(doc, "result.call_rows", "policies")
    policies[0] = policies[0][::-1]


@pytest.mark.parametrize(
    "forge",
    [
        _fewer_counts,
        _negative_thread,
        lambda d: _negative_run(d, "model"),
        lambda d: _negative_run(d, "ttl"),
        _cause_past_the_rows,
        _other_figures,
        _figures_without_their_names,
        _policy_renamed,
        _policy_missing,
        _rows_of_other_runs,
    ],
    ids=["counts", "threads", "models", "ttls", "cause", "figures", "names", "renamed",
         "missing", "rows"],
)  # fmt: skip
def test_a_verified_payload_that_does_not_fit_this_setup_is_rebuilt(
    cache: Path, expected: Any, forge: Any
) -> None:
    # Well-typed but not what this run's replay could have made: a crash later on (numpy's
    # repeat, a strict zip of the report, the rows' table) unless refused here.
    entry = _entry(cache)
    original = entry.read_bytes()
    doc, blob = _parts(entry)
    forge(doc)
    _forged(entry, _joined(doc, blob))
    report = _replay(cache)
    assert _figures(report)[:-1] == expected[:-1]
    assert _rebuilt(report) == [(str(entry), "unexpected content")]
    assert entry.read_bytes() == original


@pytest.mark.parametrize("cut", [1, 8, 1000])
def test_packed_rows_cut_short_or_too_long_are_rebuilt(
    cache: Path, expected: Any, cut: int
) -> None:
    entry = _entry(cache)
    doc, blob = _parts(entry)
    for changed in (blob[:-cut], blob + bytes(cut)):
        _forged(entry, _joined(doc, changed))
        report = _replay(cache)
        assert _figures(report)[:-1] == expected[:-1]
        assert _rebuilt(report) == [(str(entry), "unexpected content")]


def test_a_damaged_entry_is_noted_once_even_when_a_run_cannot_rewrite_it(
    cache: Path, expected: Any
) -> None:
    # A run that leaves sessions out by date keeps no results, so it cannot rewrite the
    # damaged entry: noting it on every such run would report one damage many times.
    entries = sorted(cache.glob("*.results"))
    for entry in entries:
        entry.write_bytes(entry.read_bytes()[:-1])
    starts = sorted(s.start_s for s in _replay(None).sessions)
    dated = _figures(_replay(None, since_s=starts[-1]))
    first = _replay(cache, since_s=starts[-1])  # one project's session is left out
    assert _figures(first)[:-1] == dated[:-1]
    assert sorted(file for file, _ in _rebuilt(first)) == [str(e) for e in entries]
    again = _replay(cache, since_s=starts[-1])
    assert _figures(again) == dated
    assert _figures(_replay(cache)) == expected  # and the entry is written again


def test_an_entry_under_another_units_name_is_rebuilt(cache: Path, expected: Any) -> None:
    first, second = sorted(cache.glob("*.results"))
    second.write_bytes(first.read_bytes())  # the other unit's, its signature for its name
    report = _replay(cache)
    assert _figures(report)[:-1] == expected[:-1]
    assert _rebuilt(report) == [(str(second), BAD_SIGNATURE)]
    signed_copy(first, second)  # signed for this name: the entry's own key tells
    report = _replay(cache)
    assert _figures(report)[:-1] == expected[:-1]
    assert _rebuilt(report) == [(str(second), "written for another unit")]


def test_a_damaged_sessions_entry_is_noted_and_no_result_keeps_the_note(
    tmp_path: Path, expected: Any
) -> None:
    cache = tmp_path / "cache"
    _replay(cache)
    for entry in cache.glob("*.results"):
        entry.unlink()
    sessions = sorted(cache.glob("*.sessions"))[0]
    sessions.write_bytes(b"\x89mcsim\r\n" + bytes(40))
    report = _replay(cache)
    assert [why for _, why in _rebuilt(report)] == ["truncated"]
    assert len(list(cache.glob("*.results"))) == 1  # the noted unit's results are not kept
    again = _replay(cache)
    assert _rebuilt(again) == []
    assert _figures(again) == expected
    assert len(list(cache.glob("*.results"))) == 2


def test_results_that_do_not_survive_json_are_not_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, expected: Any
) -> None:
    real = mcsim.replay.run.replay_session

    def infinite_figure(*args: Any, **kwargs: Any) -> Any:
        result = real(*args, **kwargs)
        result.recorded.figures = [{"gap": float("inf")}]
        return result

    cache = tmp_path / "cache"
    monkeypatch.setattr(mcsim.replay.run, "replay_session", infinite_figure)
    _replay(cache)
    assert list(cache.glob("*.results")) == []
    assert len(list(cache.glob("*.sessions"))) == 2


def test_cache_info_and_clear_count_the_results(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    _replay(cache)
    runner = CliRunner()
    info = runner.invoke(cli, ["cache", "info", "--cache-dir", str(cache)])
    assert info.exit_code == 0 and "entries: 6" in info.output, info.output
    cleared = runner.invoke(cli, ["cache", "clear", "--cache-dir", str(cache)])
    assert "removed 6 entries" in cleared.output, cleared.output
    assert list(cache.iterdir()) == []


def test_no_transcript_text_reaches_the_results(tmp_path: Path) -> None:
    folder = tmp_path / "in" / "p"
    write(
        folder / f"{SESSION}.jsonl",
        [
            user("u1", None, 0, "prompt-text-marker"),
            assistant("a1", "u1", 1, "m1", "r1", u=usage(3, 2_000, 0)),
            user("u2", "a1", 2, "second-prompt-marker"),
            assistant("a2", "u2", 3, "m2", "r2", u=usage(3, 500, 2_000)),
        ],
    )
    cache = tmp_path / "cache"
    _replay(cache, tmp_path / "in")
    (entry,) = cache.glob("*.results")
    assert b"marker" not in entry.read_bytes()
