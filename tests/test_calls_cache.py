"""inspect's cache of loaded calls: the records read back are the loader's, field for field;
a damaged, foreign or outdated entry is rebuilt; a warm `mcsim inspect` prints what a cold one
prints. Its entries of analysed sessions (`.analysed`, which a warm run reads instead of the
calls) are held to the same checks."""

from __future__ import annotations

import json
import os
import random
import shutil
from dataclasses import fields
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from conftest import CORPUS, REPO, SAMPLES, keep_loaded_calls, signed_copy
from lines import SESSION, assistant, usage, user, write

from mcsim.cli import cli
from mcsim.ingest import calls_cache
from mcsim.ingest.calls_cache import CachedCallsSource
from mcsim.ingest.discovery import discover
from mcsim.ingest.disk_cache import BAD_SIGNATURE, Entry
from mcsim.ingest.loaders import Detail, LoadUnit, plan_units
from mcsim.ingest.pipeline import Loaded, RawSource
from mcsim.model import Call, Compaction, Item, Session, SourceRef, Thread, Usage

CODEX = REPO / "tests" / "data" / "codex"


def _units(*paths: Path) -> list[LoadUnit]:
    return plan_units(discover([str(p) for p in paths], None).files)


def _same(a: Loaded[Session], b: Loaded[Session]) -> None:
    assert a.sessions == b.sessions
    assert a.skips == b.skips
    assert a.excluded_calls == b.excluded_calls


def test_records_read_back_equal_the_loaders(tmp_path: Path) -> None:
    # The corpus (every Claude Code layout, compactions, prunings, broken lines), the
    # samples and real Codex rollouts: every field of every record, and the skip reports.
    units = _units(CORPUS, SAMPLES, CODEX)
    assert {u.loader for u in units} == {"claude-code", "codex"}
    source = CachedCallsSource(tmp_path)
    calls = compactions = 0
    for unit in units:
        loaded = RawSource(Detail.CALLS)(unit, frozenset())
        first = source(unit, frozenset())
        _same(first, loaded)
        assert first.keep is not None
        first.keep()  # written
        again = source(unit, frozenset())  # read back
        _same(again, loaded)
        for call in (c for s in again.sessions for c in s.calls):
            calls += 1
            compactions += (call.compaction is not None) + (call.pruned is not None)
    assert len(list(tmp_path.glob("*.calls"))) == len(units)
    assert calls == 355 + 69 + 2  # the corpus, the samples, the rollouts
    assert compactions > 0


def test_every_record_field_has_a_column() -> None:
    # The layout is read from the records' own fields: a field added to a record is kept.
    tables = dict(calls_cache._CODEC.layout())
    stored = {
        "": Session, "threads": Thread, "threads.calls": Call, "threads.calls.usage": Usage,
        "threads.calls.items": Item, "threads.calls.source": SourceRef,
        "threads.calls.compaction": Compaction, "threads.calls.pruned": Compaction,
    }  # fmt: skip
    assert tables.keys() == stored.keys()
    for path, cls in stored.items():
        held = [f.name for f in fields(cls) if f.name not in ("usage", "source")]  # (one each)
        assert tables[path] == held


def _inspect(*args: str) -> dict[str, Any]:
    result = CliRunner().invoke(cli, ["inspect", *args, "--json"])
    assert result.exit_code == 0, result.output
    doc: dict[str, Any] = json.loads(result.stdout)
    return doc


def test_a_warm_inspect_prints_what_a_cold_one_prints(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    paths = [str(CORPUS), str(SAMPLES), str(CODEX)]
    without = _inspect(*paths, "--no-cache")
    cold = _inspect(*paths, "--cache-dir", str(cache))
    entries = sorted(cache.glob("*.analysed"))
    assert len(entries) == len(_units(CORPUS, SAMPLES, CODEX))
    assert not list(cache.glob("*.calls"))  # the analysed sessions stand for them
    stamps = [e.stat().st_mtime_ns for e in entries]
    warm = _inspect(*paths, "--cache-dir", str(cache))
    assert without == cold == warm
    assert without["totals"]["calls"] == 355 + 69 + 2
    assert sorted(cache.glob("*.analysed")) == entries  # read, not written again
    assert all(e.stat().st_mtime_ns >= s for e, s in zip(entries, stamps, strict=True))
    # where no analysed sessions are kept, the loaded calls are read back in their place
    calls = keep_loaded_calls(cache, CORPUS, SAMPLES, CODEX)
    assert len(calls) == len(entries)
    for entry in entries:
        entry.unlink()
    stamps = [e.stat().st_mtime_ns for e in calls]
    assert _inspect(*paths, "--cache-dir", str(cache)) == without
    assert sorted(cache.glob("*.calls")) == calls  # read, not written again
    assert all(e.stat().st_mtime_ns >= s for e, s in zip(calls, stamps, strict=True))


def test_cache_info_and_clear_count_inspects_entries(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    _inspect(str(SAMPLES), "--cache-dir", str(cache))
    keep_loaded_calls(cache, SAMPLES)
    (cache / "notes.txt").write_text("mine")
    info = CliRunner().invoke(cli, ["cache", "info", "--cache-dir", str(cache)])
    assert "entries: 4\n" in info.stdout  # per project folder: its analysis, its calls
    assert "  analysed sessions (inspect): 2, " in info.stdout
    assert "  loaded calls (inspect): 2, " in info.stdout
    cleared = CliRunner().invoke(cli, ["cache", "clear", "--cache-dir", str(cache)])
    assert cleared.stdout.startswith("removed 4 entries")
    assert [p.name for p in cache.iterdir()] == ["notes.txt"]


@pytest.fixture()
def filled(tmp_path: Path) -> tuple[Path, Path, dict[str, Any]]:
    """A copy of the corpus, a cache filled from it, and the figures without a cache."""
    samples = tmp_path / "corpus"
    shutil.copytree(CORPUS, samples)
    cache = tmp_path / "cache"
    expected = _inspect(str(samples), "--no-cache")
    assert _inspect(str(samples), "--cache-dir", str(cache)) == expected
    keep_loaded_calls(cache, samples)
    return samples, cache, expected


def _without_rebuilt(doc: dict[str, Any]) -> tuple[dict[str, Any], list[Any]]:
    """The document without its cache_entry_rebuilt notes, and those notes' examples."""
    doc = json.loads(json.dumps(doc))
    skipped = doc["skipped"]
    notes = skipped["notes_by_reason"]
    count = notes.pop("cache_entry_rebuilt", 0)
    rebuilt = [e for e in skipped["examples"] if e["reason"] == "cache_entry_rebuilt"]
    assert len(rebuilt) == count
    skipped["examples"] = [e for e in skipped["examples"] if e["reason"] != "cache_entry_rebuilt"]
    return doc, [(e["file"], e["detail"]) for e in rebuilt]


def _read_first(cache: Path, kind: str) -> None:
    """Make the next run read the entries of KIND: the loaded calls are read only where no
    analysed sessions are kept (a warm run reads those first)."""
    if kind == "calls":
        for entry in cache.glob("*.analysed"):
            entry.unlink()


@pytest.mark.parametrize("kind", ["calls", "analysed"])
def test_damaged_entries_are_rebuilt_and_the_figures_stay(
    filled: tuple[Path, Path, dict[str, Any]], kind: str
) -> None:
    samples, cache, expected = filled
    entry = sorted(cache.glob(f"*.{kind}"))[0]
    original = entry.read_bytes()
    rng = random.Random(7)
    damages = [original[:40], b"", original[: len(original) // 2]]
    for position in rng.sample(range(len(original)), 12):
        damaged = bytearray(original)
        damaged[position] ^= rng.randrange(1, 256)
        damages.append(bytes(damaged))
    for damaged in damages:
        entry.write_bytes(damaged)
        _read_first(cache, kind)
        doc, rebuilt = _without_rebuilt(_inspect(str(samples), "--cache-dir", str(cache)))
        assert doc == expected
        ((file, why),) = rebuilt
        assert file == str(entry)
        assert why in ("truncated", BAD_SIGNATURE, "not an mcsim cache file")
        assert entry.read_bytes() == original


@pytest.mark.parametrize("kind", ["calls", "analysed"])
def test_a_damaged_entry_of_a_unit_reloaded_without_its_repeated_calls_is_counted(
    tmp_path: Path, kind: str
) -> None:
    # A session copied into a second project folder: that unit is loaded again without the
    # calls the first holds (pipeline._collect), and that second pass reads no cache. The
    # entry the first pass found damaged (and rebuilt) must still be counted as rebuilt.
    samples = tmp_path / "corpus"
    shutil.copytree(CORPUS, samples)
    copy = samples / "-copy"
    copy.mkdir()
    shutil.copy(
        samples / "-Users-chip-dev-ai-music" / "d3ad4cdc-5657-435d-98fa-0035d53e383d.jsonl", copy
    )
    cache = tmp_path / "cache"
    expected = _inspect(str(samples), "--no-cache")
    assert expected["input"]["duplicate_calls_across_projects"] > 0
    assert _inspect(str(samples), "--cache-dir", str(cache)) == expected
    keep_loaded_calls(cache, samples)
    _read_first(cache, kind)
    entries = sorted(cache.glob(f"*.{kind}"))
    assert len(entries) == len(_units(samples))
    for entry in entries:
        damaged = bytearray(entry.read_bytes())
        damaged[len(damaged) // 2] ^= 1
        entry.write_bytes(damaged)
    doc, rebuilt = _without_rebuilt(_inspect(str(samples), "--cache-dir", str(cache)))
    assert doc == expected
    assert sorted(file for file, _ in rebuilt) == [str(e) for e in entries]
    assert {why for _, why in rebuilt} == {BAD_SIGNATURE}


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["calls", "analysed"])
def test_an_entry_of_another_unit_or_kind_is_rebuilt(
    filled: tuple[Path, Path, dict[str, Any]], tmp_path: Path, kind: str
) -> None:
    samples, cache, expected = filled
    first, second, *_ = sorted(cache.glob(f"*.{kind}"))
    second.write_bytes(first.read_bytes())  # the other unit's, its signature for its name
    _read_first(cache, kind)
    doc, rebuilt = _without_rebuilt(_inspect(str(samples), "--cache-dir", str(cache)))
    assert doc == expected and rebuilt == [(str(second), BAD_SIGNATURE)]
    signed_copy(first, second)  # signed for this name: the entry's own key tells
    _read_first(cache, kind)
    doc, rebuilt = _without_rebuilt(_inspect(str(samples), "--cache-dir", str(cache)))
    assert doc == expected and rebuilt == [(str(second), "written for another unit")]
    # a replay's entry under an inspect name
    replay_cache = tmp_path / "replay-cache"
    result = CliRunner().invoke(
        cli,
        ["replay", str(samples), "--policy", "claude-code", "--cache-dir", str(replay_cache),
         "--out", str(tmp_path / "run"), "--json"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    signed_copy(sorted(replay_cache.glob("*.sessions"))[0], first)
    _read_first(cache, kind)
    doc, rebuilt = _without_rebuilt(_inspect(str(samples), "--cache-dir", str(cache)))
    assert doc == expected and rebuilt == [(str(first), "another kind of mcsim cache file")]


def test_a_grown_transcript_replaces_its_units_entry(tmp_path: Path) -> None:
    project = tmp_path / "projects" / "-p"
    lines: list[Any] = [
        user("u1", None, 0),
        assistant("a1", "u1", 5, "msg_1", "req_1", u=usage(100, 2000, 0, 50)),
    ]
    path = write(project / f"{SESSION}.jsonl", lines)
    cache = tmp_path / "cache"
    first = _inspect(str(path), "--cache-dir", str(cache))
    assert first["totals"]["calls"] == 1
    (analysed,) = cache.glob("*.analysed")
    (entry,) = keep_loaded_calls(cache, path)
    with path.open("a") as fh:  # Claude Code appends as the session goes on
        fh.write(json.dumps(user("u2", "a1", 60)) + "\n")
        fh.write(
            json.dumps(assistant("a2", "u2", 65, "msg_2", "req_2", u=usage(100, 50, 2000, 40)))
            + "\n"
        )
    os.utime(path, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns + 1))
    grown = _inspect(str(path), "--cache-dir", str(cache))
    assert grown == _inspect(str(path), "--no-cache")
    assert grown["totals"]["calls"] == 2
    assert list(cache.glob("*.analysed")) == [analysed]  # replaced, not added
    assert keep_loaded_calls(cache, path) == [entry]  # replaced, not added
    assert _inspect(str(path), "--cache-dir", str(cache)) == grown


def test_a_unit_whose_analysis_is_not_kept_keeps_its_loaded_calls(tmp_path: Path) -> None:
    # A unit's analysed sessions are kept only whole: where --since leaves one of its
    # sessions out, its loaded calls are kept instead, and the next such run reads them.
    other = "22222222-3333-4444-5555-666666666666"
    project = tmp_path / "projects" / "-p"
    write(project / f"{SESSION}.jsonl", [assistant("a1", None, 5, "msg_1", u=usage(out=50))])
    late = 3 * 86_400  # 2026-01-04
    write(
        project / f"{other}.jsonl",
        [assistant("b1", None, late, "msg_2", "req_2", u=usage(out=70), session=other)],
    )
    cache = tmp_path / "cache"
    dated = [str(project.parent), "--since", "2026-01-02"]
    first = _inspect(*dated, "--cache-dir", str(cache))
    assert first == _inspect(*dated, "--no-cache")
    assert first["totals"]["output_tokens"] == 70
    assert not list(cache.glob("*.analysed"))
    (entry,) = cache.glob("*.calls")
    inode = entry.stat().st_ino
    again = _inspect(*dated, "--cache-dir", str(cache))
    assert again == first
    assert list(cache.glob("*.calls")) == [entry] and entry.stat().st_ino == inode  # read
    # a run without dates keeps the whole unit's analysis, and reads the calls to make it
    assert _inspect(str(project.parent), "--cache-dir", str(cache))["totals"]["calls"] == 2
    assert len(list(cache.glob("*.analysed"))) == 1


def test_a_transcript_rewritten_with_its_size_and_time_put_back_is_read_again(
    tmp_path: Path,
) -> None:
    # An edit in place (a count corrected, a line redacted to the same length) with the
    # modification time set back (os.utime, cp -p, an editor keeping times): only the change
    # time (ctime, which no call can set) tells.
    line = assistant("a1", None, 5, "msg_1", "req_1", u=usage(100, 2000, 0, 50))
    path = write(tmp_path / "projects" / "-p" / f"{SESSION}.jsonl", [line])
    cache = tmp_path / "cache"
    before = path.stat()
    assert _inspect(str(path), "--cache-dir", str(cache))["totals"]["output_tokens"] == 50
    path.write_text(path.read_text().replace('"output_tokens": 50', '"output_tokens": 70'))
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert path.stat().st_size == before.st_size
    rewritten = _inspect(str(path), "--cache-dir", str(cache))
    assert rewritten == _inspect(str(path), "--no-cache")
    assert rewritten["totals"]["output_tokens"] == 70


def test_files_are_named_as_this_run_spells_them(
    filled: tuple[Path, Path, dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    samples, cache, _ = filled  # filled through absolute paths
    monkeypatch.chdir(samples.parent)
    relative = _inspect("corpus", "--cache-dir", str(cache))
    assert relative == _inspect("corpus", "--no-cache")
    # skipped lines name their files, breaks the files of their calls
    files = [e["file"] for e in relative["skipped"]["examples"] + relative["breaks"]]
    assert len(files) > 10 and all(f.startswith("corpus/") for f in files)


def _read_back(tmp_path: Path, filled_with: list[LoadUnit], read_with: list[LoadUnit]) -> None:
    """Fill a cache through one spelling of the units, read it through another: what comes
    back is what the loader makes of the second spelling."""
    source = CachedCallsSource(tmp_path / "cache")
    for unit in filled_with:
        source(unit, frozenset())
    for unit in read_with:
        _same(source(unit, frozenset()), RawSource(Detail.CALLS)(unit, frozenset()))


def test_a_project_folder_linked_under_another_name_is_named_by_the_link(tmp_path: Path) -> None:
    # The project is the folder's name as spelled (a link to ~/.claude/projects/-x named -y
    # is project -y), so an entry filled through the folder is not the link's.
    real = tmp_path / "-home-dev-real"
    shutil.copytree(SAMPLES / "claude" / "projects" / "-home-dev-shop-api", real)
    link = tmp_path / "-home-dev-link"
    link.symlink_to(real, target_is_directory=True)
    _read_back(tmp_path, _units(real), _units(link))
    assert {s.project for s in RawSource(Detail.CALLS)(_units(link)[0], frozenset()).sessions} == {
        "-home-dev-link"
    }


def test_a_rollout_without_session_meta_keys_its_calls_whatever_the_spelling(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Without a session_meta line a rollout's calls are keyed by its file: a relative and an
    # absolute spelling of it share a cache entry, so they must key them alike.
    rollout = CODEX / "kvsankar-agent-history-real-codex-0.135.jsonl"
    folder = tmp_path / "rollouts"
    folder.mkdir()
    lines = rollout.read_text().splitlines(keepends=True)
    (folder / "rollout-2026-06-05T04-58-20-x.jsonl").write_text("".join(lines[1:]))
    monkeypatch.chdir(tmp_path)
    _read_back(tmp_path, _units(folder), _units(Path("rollouts")))


def test_a_cache_folder_that_is_a_file_is_no_cache(tmp_path: Path) -> None:
    # $MCSIM_CACHE_DIR naming a file (or a folder under one): nothing can be read or
    # written there, so nothing is noted as rebuilt, run after run.
    (tmp_path / "file").write_text("mine")
    for folder in (tmp_path / "file", tmp_path / "file" / "cache"):
        source = CachedCallsSource(folder)
        for unit in _units(SAMPLES):
            _same(source(unit, frozenset()), RawSource(Detail.CALLS)(unit, frozenset()))
    assert (tmp_path / "file").read_text() == "mine"


def test_a_file_that_could_not_be_read_is_read_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A permission restored (chmod leaves the modification time alone) or a disk back: the
    # file's stamp has not changed, so an entry made without it would stand for good.
    (unit,) = _units(SAMPLES / "claude" / "projects" / "-home-dev-shop-api")
    source = CachedCallsSource(tmp_path / "cache")

    def denied(path: Path) -> Any:
        raise PermissionError(13, "Permission denied", str(path))

    with monkeypatch.context() as m:
        m.setattr("mcsim.ingest.loaders.fields.open_regular", denied)
        failed = source(unit, frozenset())
    assert failed.skips.counts["unreadable_file"] == len(unit.files)
    _same(source(unit, frozenset()), RawSource(Detail.CALLS)(unit, frozenset()))


def test_files_that_became_loops_of_links_after_planning(tmp_path: Path) -> None:
    # Replaced between planning and loading: the loader notes them unreadable; the cache
    # must not crash on them (pathlib raises RuntimeError, not OSError, on a loop).
    project = tmp_path / "-home-dev-shop-api"
    shutil.copytree(SAMPLES / "claude" / "projects" / "-home-dev-shop-api", project)
    (unit,) = _units(project)
    source = CachedCallsSource(tmp_path / "cache")
    for looped in (unit.files[-1], unit.files[0].parent):
        shutil.rmtree(looped) if looped.is_dir() else looped.unlink()
        looped.symlink_to(looped)
        loaded = source(unit, frozenset())
        _same(loaded, RawSource(Detail.CALLS)(unit, frozenset()))
        assert loaded.skips.counts["unreadable_file"] > 0


def test_analysed_sessions_are_kept_per_price_table(tmp_path: Path) -> None:
    # A --prices file edited in place (the same path and version, other prices) is another
    # table: its figures are not served from the entries of the first.
    cache = tmp_path / "cache"
    prices = tmp_path / "prices.json"
    table = json.loads((REPO / "mcsim" / "accounting" / "prices" / "anthropic.json").read_text())
    prices.write_text(json.dumps(table))
    listed = _inspect(str(SAMPLES), "--prices", str(prices), "--cache-dir", str(cache))
    for model in table["models"]:
        model["output"] *= 2
    prices.write_text(json.dumps(table))
    dearer = _inspect(str(SAMPLES), "--prices", str(prices), "--cache-dir", str(cache))
    assert dearer == _inspect(str(SAMPLES), "--prices", str(prices), "--no-cache")
    assert dearer["totals"]["cost_usd"] > listed["totals"]["cost_usd"]
    shipped = _inspect(str(SAMPLES), "--cache-dir", str(cache))
    assert shipped == _inspect(str(SAMPLES), "--no-cache")
    units = len(_units(SAMPLES))
    assert len(list(cache.glob("*.analysed"))) == 3 * units  # one per unit and table
    assert not list(cache.glob("*.calls"))  # each table's first run loads the transcripts
    # served again, each from its own entry
    assert _inspect(str(SAMPLES), "--prices", str(prices), "--cache-dir", str(cache)) == dearer
    assert _inspect(str(SAMPLES), "--cache-dir", str(cache)) == shipped


@pytest.mark.parametrize("by", ["session", "day"])
def test_a_warm_inspect_writes_the_tables_a_cold_one_writes(tmp_path: Path, by: str) -> None:
    # With the per-call records (calls.parquet, or --by day) the entries hold them too.
    cache = tmp_path / "cache"
    written = []
    for run in ("no-cache", "cold", "warm"):
        out = tmp_path / run
        where = ["--no-cache"] if run == "no-cache" else ["--cache-dir", str(cache)]
        doc = _inspect(str(CORPUS), str(SAMPLES), "--by", by, "--out", str(out), *where)
        tables = {p.name: p.read_bytes() for p in sorted(out.glob("*.parquet"))}
        written.append((doc["totals"], doc["groups"], doc["skipped"], tables))
    assert len(written[0][3]) == 3
    assert written[0] == written[1] == written[2]
    assert len(list(cache.glob("*.analysed"))) == len(_units(CORPUS, SAMPLES))


def _inspect_telling(folder: Path, cache: Path, told: list[int]) -> Any:
    """`inspect_usage` of FOLDER with CACHE on two local workers, appending to TOLD what the
    engine is told the units will read."""
    from mcsim.accounting.prices import default_table
    from mcsim.accounting.recorded import inspect_usage
    from mcsim.ingest.engines import LocalEngine

    class Told(LocalEngine):
        def map_units(self, jobs: Any, run: Any, total_bytes: int) -> Any:
            told.append(total_bytes)
            return super().map_units(jobs, run, total_bytes)

    return inspect_usage([str(folder)], default_table(), cache_dir=cache, engine=Told(2))


def test_a_warm_inspect_reads_its_entries_in_one_process(tmp_path: Path) -> None:
    # The engine is told what the units will read: their transcripts on a first run, the
    # analysed sessions kept for them on the next, which the local engine reads in this
    # process below its threshold (starting workers costs more than those few bytes).
    told: list[int] = []
    cache = tmp_path / "cache"
    reports = [_inspect_telling(CORPUS, cache, told) for _ in range(2)]
    entries = sorted(cache.glob("*.analysed"))
    assert len(entries) == len(_units(CORPUS))
    assert told == [reports[0].stats.bytes, sum(e.stat().st_size for e in entries)]
    assert told[1] < told[0] / 5
    assert reports[0].sessions == reports[1].sessions


def test_entries_older_than_their_transcripts_count_as_the_transcripts(tmp_path: Path) -> None:
    # Every transcript touched after the run that kept its unit (a restored backup, a sync):
    # the entries no longer serve, the run reloads every unit, and the engine must be told
    # the transcripts' size (else a run that reads them all would take itself for a small one
    # and run in one process).
    told: list[int] = []
    corpus = tmp_path / "projects"
    shutil.copytree(CORPUS, corpus)
    cache = tmp_path / "cache"
    first = _inspect_telling(corpus, cache, told)
    _inspect_telling(corpus, cache, told)
    later = max(e.stat().st_mtime for e in cache.glob("*.analysed")) + 10
    for transcript in corpus.rglob("*.jsonl"):
        os.utime(transcript, (later, later))
    again = _inspect_telling(corpus, cache, told)
    assert told[0] == first.stats.bytes
    assert told[1] < told[0] / 5  # served from the entries
    assert told[2] == told[0]  # every unit loaded again
    assert again.sessions == first.sessions


def test_a_damaged_entry_read_only_to_name_conflicting_copies_is_counted_and_rebuilt(
    tmp_path: Path,
) -> None:
    # A session copied into a second project folder with other counts for one call: that
    # unit's analysis is served, but pipeline._note_conflicts reads the unit once more, through
    # the cache, for the calls' ids. A damaged `.calls` entry met there is a damaged entry
    # like any other: counted once in the run that meets it, and rebuilt, so the next run
    # neither meets it nor counts it again.
    samples = tmp_path / "corpus"
    shutil.copytree(CORPUS, samples)
    copy = samples / "-copy"
    copy.mkdir()
    name = "d3ad4cdc-5657-435d-98fa-0035d53e383d.jsonl"
    text = (samples / "-Users-chip-dev-ai-music" / name).read_text().splitlines(keepends=True)
    i = next(n for n, line in enumerate(text) if '"input_tokens":1' in line)
    text[i] = text[i].replace('"input_tokens":1', '"input_tokens":2', 1)  # same size
    (copy / name).write_text("".join(text))
    cache = tmp_path / "cache"
    expected = _inspect(str(samples), "--no-cache")
    assert expected["skipped"]["notes_by_reason"]["conflicting_usage"] >= 1
    assert _inspect(str(samples), "--cache-dir", str(cache)) == expected
    keep_loaded_calls(cache, samples)  # as a dated run leaves them
    (unit,) = _units(copy)
    entry = Entry.of(cache, unit, calls_cache.CALLS_FORMAT, calls_cache._CALLS, "calls")
    original = entry.path.read_bytes()
    damaged = bytearray(original)
    damaged[len(damaged) // 2] ^= 1
    entry.path.write_bytes(damaged)
    doc, rebuilt = _without_rebuilt(_inspect(str(samples), "--cache-dir", str(cache)))
    assert doc == expected
    assert rebuilt == [(str(entry.path), BAD_SIGNATURE)]
    assert entry.path.read_bytes() == original
    doc, rebuilt = _without_rebuilt(_inspect(str(samples), "--cache-dir", str(cache)))
    assert doc == expected and rebuilt == []
