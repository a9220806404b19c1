"""The session cache: data only, checksummed, rebuilt when damaged, never transcript text.

Every run here is compared with a run without the cache: the figures (every session's and
policy's totals, exactly) must be the same whatever state the cache folder is in.
"""

from __future__ import annotations

import multiprocessing
import os
import pickle
import random
import struct
import time
from pathlib import Path
from typing import Any

import orjson
import pytest
from conftest import REPO, SAMPLES, forbid_tokenizing, signed_copy
from lines import SESSION, assistant, tool_result, tool_use, usage, user, write

from mcsim.accounting.prices import default_table
from mcsim.ingest.codec import record_fields
from mcsim.ingest.disk_cache import BAD_SIGNATURE, signature
from mcsim.ingest.loaders import Detail
from mcsim.ingest.pipeline import load_sessions
from mcsim.model import ItemKind
from mcsim.replay.calibrate import calibrate_session
from mcsim.replay.run import ReplayReport, run_replay
from mcsim.replay.scenario import load_policy_file
from mcsim.replay.session_cache import _CODEC as CODEC
from mcsim.replay.tokens import TokenEstimator

SCENARIOS = load_policy_file(REPO / "policies" / "all.yaml")
MAGIC = b"\x89mcsim\r\n"
# The documented header: magic, signature (an HMAC of the file's name and the rest), then kind,
# format version, payload size.
BODY = struct.Struct("<BHQ")
HEADER_BYTES = len(MAGIC) + 32 + BODY.size


def _replay(paths: list[Path], cache: Path | None) -> ReplayReport:
    """A replay with CACHE holding calibrated sessions only: the replayed results a run also
    keeps there (test_result_cache.py) are removed before and after, so that the run reads
    the sessions layer these tests are about."""
    _drop_results(cache)
    try:
        return run_replay([str(p) for p in paths], SCENARIOS, default_table(), cache_dir=cache,
                          keep_rows=False, workers=1)  # fmt: skip
    finally:
        _drop_results(cache)


def _drop_results(cache: Path | None) -> None:
    if cache is not None and cache.is_dir():
        for entry in cache.glob("*.results"):
            entry.unlink(missing_ok=True)  # (two runs at once may both remove it)


def _figures(report: ReplayReport) -> tuple[Any, ...]:
    return report.recorded, report.policies, report.sessions


def _rebuilt(report: ReplayReport) -> list[tuple[str, str]]:
    """(cache file, why) of every rebuilt entry the run noted."""
    skips = report.stats.skips
    found = [(e.file, e.detail) for e in skips.examples if e.reason == "cache_entry_rebuilt"]
    assert skips.notes["cache_entry_rebuilt"] == len(found)
    return found


@pytest.fixture(scope="module")
def expected() -> tuple[Any, ...]:
    return _figures(_replay([SAMPLES], None))


@pytest.fixture()
def cache(tmp_path: Path) -> Path:
    """A cache filled by one run on the samples: one entry and one tokens file per project."""
    folder = tmp_path / "cache"
    assert _rebuilt(_replay([SAMPLES], folder)) == []
    assert len(list(folder.glob("*.sessions"))) == len(list(folder.glob("*.tokens"))) == 2
    return folder


def _entry(cache: Path, suffix: str = "sessions") -> Path:
    return sorted(cache.glob(f"*.{suffix}"))[0]


@pytest.mark.slow
def test_every_flipped_byte_is_noticed_and_the_entry_rebuilt(
    cache: Path, expected: tuple[Any, ...]
) -> None:
    entry = _entry(cache)
    original = entry.read_bytes()
    rng = random.Random(1234)
    for position in rng.sample(range(len(original)), 60):
        damaged = bytearray(original)
        damaged[position] ^= rng.randrange(1, 256)
        entry.write_bytes(damaged)
        report = _replay([SAMPLES], cache)
        assert _figures(report) == expected, position
        ((file, why),) = _rebuilt(report)
        assert file == str(entry)
        if position < len(MAGIC):
            assert why == "not an mcsim cache file"
        else:  # a larger payload size in the header reads as a cut file
            assert why in (BAD_SIGNATURE, "truncated"), position
        assert entry.read_bytes() == original  # rewritten as it was


def test_a_damaged_tokens_file_is_rebuilt(cache: Path, expected: tuple[Any, ...]) -> None:
    # Token estimates are read only when a unit is calibrated again.
    for entry in cache.glob("*.sessions"):
        entry.unlink()
    tokens = _entry(cache, "tokens")
    original = tokens.read_bytes()
    damaged = bytearray(original)
    damaged[len(original) // 2] ^= 0x40
    tokens.write_bytes(damaged)
    report = _replay([SAMPLES], cache)
    assert _figures(report) == expected
    assert _rebuilt(report) == [(str(tokens), BAD_SIGNATURE)]
    assert tokens.read_bytes() == original


@pytest.mark.parametrize("keep", [0, 5, 8, 40, HEADER_BYTES, -1], ids=lambda k: f"keep{k}")
def test_truncated_and_empty_entries_are_rebuilt(
    cache: Path, expected: tuple[Any, ...], keep: int
) -> None:
    entry = _entry(cache)
    original = entry.read_bytes()
    entry.write_bytes(original[:keep])
    report = _replay([SAMPLES], cache)
    assert _figures(report) == expected
    assert _rebuilt(report) == [(str(entry), "truncated")]
    assert entry.read_bytes() == original


def test_an_entry_larger_than_the_cap_is_not_read(
    cache: Path, expected: tuple[Any, ...], monkeypatch: pytest.MonkeyPatch
) -> None:
    # A file of many GB planted under an entry's name would take all the memory there is,
    # read whole; no entry larger than the cap outlives the run that wrote it. (8 MiB here,
    # over a cap of a few KB.)
    entry = _entry(cache)
    original = entry.read_bytes()
    with entry.open("r+b") as fh:
        fh.truncate(8 << 20)
    monkeypatch.setenv("MCSIM_CACHE_MAX_SIZE", str(len(original) * 4))
    report = _replay([SAMPLES], cache)
    assert _figures(report) == expected
    assert _rebuilt(report) == [(str(entry), "larger than the cache's cap")]
    assert entry.read_bytes() == original


class _Planted:
    """Unpickling this creates `marker`: what a pickle planted in the cache could do."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Any, ...]:
        return (open, (str(self.marker), "w"))


def test_a_planted_pickle_is_never_run(
    cache: Path, tmp_path: Path, expected: tuple[Any, ...]
) -> None:
    probe = tmp_path / "probe"
    pickle.loads(pickle.dumps(_Planted(probe))).close()
    assert probe.exists()  # the planted payload is live
    marker = tmp_path / "marker"
    planted = pickle.dumps(_Planted(marker))
    files = sorted(cache.iterdir())  # both entries and both tokens files
    for file in files:
        file.write_bytes(planted)
    report = _replay([SAMPLES], cache)
    assert not marker.exists()
    assert _figures(report) == expected
    assert sorted(_rebuilt(report)) == [(str(f), "not an mcsim cache file") for f in files]
    assert all(f.read_bytes().startswith(MAGIC) for f in files)


def _forged(entry: Path, version: int, payload: bytes) -> None:
    """Write `payload` under a valid header, as the module docstring lays it out."""
    kind = entry.read_bytes()[len(MAGIC) + 32]
    body = BODY.pack(kind, version, len(payload)) + payload
    entry.write_bytes(MAGIC + signature(entry.name, body) + body)


def test_an_older_format_is_rebuilt(cache: Path, expected: tuple[Any, ...]) -> None:
    entry = _entry(cache)
    version = BODY.unpack_from(entry.read_bytes(), len(MAGIC) + 32)[1]
    _forged(entry, version - 1, b"[]")
    report = _replay([SAMPLES], cache)
    assert _figures(report) == expected
    assert _rebuilt(report) == [(str(entry), "older format")]
    assert BODY.unpack_from(entry.read_bytes(), len(MAGIC) + 32)[1] == version


def _set(doc: list[Any], path: tuple[int, ...], value: Any) -> None:
    for key in path[:-1]:
        doc = doc[key]
    doc[path[-1]] = value


def _column(table: str, column: str, *row: int) -> tuple[int, ...]:
    """Where a column (or one of its values) is in a payload: [[name, stamp], files, the skip
    report's tables, the sessions' tables], laid out by mcsim.ingest.codec."""
    return (3, *CODEC.at(table, column), *row)


@pytest.mark.parametrize(
    ("path", "value"),
    [
        (_column("threads.calls.segments", "kind", 0), "bogus_kind"),  # a segment's kind
        (_column("threads.calls.segments", "tokens", 0), "12"),  # its tokens as text
        (_column("threads.calls", "ttl", 0), "2h"),  # a call's TTL
        (_column("threads.calls", "read_class", 0), 9),  # a call's read class
        # a call's segment count: the groups no longer add up
        (_column("threads.calls", "segments", 0), 10**6),
        (_column("threads", "calls", 0), 0),  # a thread without calls
        (_column("threads.calls", "timestamp_s"), []),  # a column shorter than the others
        ((3, 0), [[]]),  # a table without its columns
        ((2, 0, 1, 0), {"invalid_json": "1"}),  # a skip count as text
        ((2, 0, 0, 0), "12"),  # the lines read as text
    ],
)
def test_a_verified_payload_of_the_wrong_shape_is_rebuilt(
    cache: Path, expected: tuple[Any, ...], path: tuple[int, ...], value: Any
) -> None:
    entry = _entry(cache)
    original = entry.read_bytes()
    version = BODY.unpack_from(original, len(MAGIC) + 32)[1]
    doc = orjson.loads(original[HEADER_BYTES + 8 :])  # (after the JSON part's size)
    _set(doc, path, value)
    data = orjson.dumps(doc)
    _forged(entry, version, struct.pack("<Q", len(data)) + data)
    report = _replay([SAMPLES], cache)
    assert _figures(report) == expected
    assert _rebuilt(report) == [(str(entry), "unexpected content")]
    assert entry.read_bytes() == original


def _fill(folders: list[Path], barrier: Any) -> None:
    for folder in folders:
        barrier.wait()  # both processes write the same empty cache at the same time
        _replay([SAMPLES], folder)


def test_two_runs_filling_one_cache_at_once_leave_it_valid(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, expected: tuple[Any, ...]
) -> None:
    folders = [tmp_path / f"cache{i}" for i in range(3)]
    ctx = multiprocessing.get_context("fork")
    barrier = ctx.Barrier(2)
    procs = [ctx.Process(target=_fill, args=(folders, barrier), daemon=True) for _ in range(2)]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(timeout=120)
    assert [p.exitcode for p in procs] == [0, 0]
    forbid_tokenizing(monkeypatch, "entries left by concurrent runs must all be read")
    for folder in folders:
        report = _replay([SAMPLES], folder)
        assert _rebuilt(report) == []
        assert _figures(report) == expected
        assert sorted(p.suffix for p in folder.iterdir()) == [".sessions"] * 2 + [".tokens"] * 2


def test_stale_temporary_files_are_swept_and_none_is_left_on_failure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "cache"
    folder.mkdir()
    stale, live = folder / ".mcsim-tmp-killedrun", folder / ".mcsim-tmp-otherrun"
    theirs = folder / ".tmp-draft.txt"  # --cache-dir may name a folder with a user's files
    stale.write_bytes(b"half an entry")
    live.write_bytes(b"being written")
    theirs.write_bytes(b"mine")
    two_hours_ago = time.time() - 7200
    for old in (stale, theirs):
        os.utime(old, (two_hours_ago, two_hours_ago))
    _replay([SAMPLES], folder)
    assert sorted(p.name for p in folder.glob(".*tmp-*")) == [
        ".mcsim-tmp-otherrun",
        ".tmp-draft.txt",
    ]

    def interrupted(src: str, dst: str) -> None:
        raise KeyboardInterrupt

    live.unlink()
    other = tmp_path / "other"
    monkeypatch.setattr(os, "replace", interrupted)
    with pytest.raises(KeyboardInterrupt):
        _replay([SAMPLES], other)
    assert list(other.iterdir()) == []


def test_no_transcript_text_reaches_the_cache(tmp_path: Path) -> None:
    command = "curl -sH 'Authorization: Bearer sk-test-7Hq2xZ' https://api.example.org/v1/items"
    write(
        tmp_path / "in" / "p" / f"{SESSION}.jsonl",
        [
            user("u1", None, 0, "list the items, prompt-text-marker"),
            assistant("a1", "u1", 1, "m1", "r1", u=usage(3, 2_000, 0),
                      content=[tool_use("t1", "Bash", command=command)]),
            user("u2", "a1", 2, tool_result("t1", "result-text-marker " * 50)),
            assistant("a2", "u2", 3, "m2", "r2", u=usage(3, 500, 2_000),
                      content=[tool_use("t2", "Bash", command=command)]),
            user("u3", "a2", 4, tool_result("t2", "again")),
            assistant("a3", "u3", 5, "m3", "r3", u=usage(3, 100, 2_500)),
        ],
    )  # fmt: skip
    # The repeated command is still recognised as one (a re-fetch hazard needs the match).
    (session,), _ = load_sessions([str(tmp_path / "in")], detail=Detail.TEXT)
    calls = calibrate_session(session, TokenEstimator()).calls
    uses = [s.resource for c in calls for s in c.segments if s.kind is ItemKind.TOOL_USE]
    assert len(uses) == 2 and uses[0] == uses[1] is not None

    folder = tmp_path / "cache"
    assert len(_replay([tmp_path / "in", SAMPLES], folder).sessions) == 3
    stored = b"".join(p.read_bytes() for p in folder.iterdir())
    secrets = ["sk-test-7Hq2xZ", "Authorization", "curl", "prompt-text-marker", "result-text"]
    samples = ["git status", "make lint", "pytest -q"]  # Bash commands of the samples
    assert [s for s in secrets + samples if s.encode() in stored] == []


def test_a_warm_run_accounts_for_the_same_lines(cache: Path) -> None:
    cold = _replay([SAMPLES], None).stats.skips
    warm = _replay([SAMPLES], cache).stats.skips
    lines = sum(
        1 for f in SAMPLES.rglob("*.jsonl") for line in f.read_bytes().splitlines() if line.strip()
    )
    assert warm.lines_read == cold.lines_read == lines
    assert (warm.counts, warm.repaired, warm.notes) == (cold.counts, cold.repaired, cold.notes)


def test_an_entry_under_another_units_name_is_rebuilt(
    tmp_path: Path, expected: tuple[Any, ...]
) -> None:
    cache = tmp_path / "cache"
    _replay([SAMPLES], cache)
    first, second = sorted(cache.glob("*.sessions"))
    second.write_bytes(first.read_bytes())  # the other unit's, its signature for its name
    report = _replay([SAMPLES], cache)
    assert _figures(report) == expected
    assert _rebuilt(report) == [(str(second), BAD_SIGNATURE)]
    signed_copy(first, second)  # signed for this name: the entry's own key tells
    report = _replay([SAMPLES], cache)
    assert _figures(report) == expected
    assert _rebuilt(report) == [(str(second), "written for another unit")]


def test_every_record_field_has_a_checked_column() -> None:
    # The layout is read from the records' own fields: every field of every record a
    # calibrated session is made of is a column, or the table of the records it holds.
    from mcsim.replay.calibrate import CalCall, CalSession, CalThread, Segment

    tables = dict(CODEC.layout())
    for path, cls in (("", CalSession), ("threads", CalThread), ("threads.calls", CalCall),
                      ("threads.calls.segments", Segment)):  # fmt: skip
        assert tables[path] == record_fields(cls)
    assert len(tables) == 4
