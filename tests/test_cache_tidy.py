"""The session cache keeps itself tidy (one entry per file set, a size cap evicting the least
recently used first, `mcsim cache info/clear`), and reports can be redacted for sharing."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import REPO, SAMPLES

from mcsim.accounting.prices import default_table
from mcsim.cli import cli
from mcsim.errors import UsageError
from mcsim.ingest import disk_cache
from mcsim.ingest.disk_cache import enforce_cap, max_cache_bytes
from mcsim.replay.run import run_replay
from mcsim.replay.scenario import load_policy_file

SCENARIOS = load_policy_file(REPO / "policies" / "all.yaml")
PROJECTS = SAMPLES / "claude" / "projects"
PIPELINE = PROJECTS / "-home-dev-data-pipeline"


def _replay(path: Path, cache: Path) -> None:
    run_replay([str(path)], SCENARIOS, default_table(), cache_dir=cache, keep_rows=False,
               workers=1)  # fmt: skip


def _names(folder: Path) -> set[str]:
    return {p.name for p in folder.iterdir()}


def test_a_transcript_that_keeps_growing_keeps_one_entry(tmp_path: Path) -> None:
    project = tmp_path / "in" / "-home-dev-data-pipeline"
    shutil.copytree(PIPELINE, project)
    cache = tmp_path / "cache"
    _replay(project, cache)
    first = _names(cache)
    # for the one unit: its .sessions entry, its .tokens file and its replayed .results
    assert sorted(n.rsplit(".")[1] for n in first) == ["results", "sessions", "tokens"]
    for text in (
        b'{"type": "summary", "summary": "a"}\n',
        b'{"type": "summary", "summary": "b"}\n',
    ):
        with next(project.glob("*.jsonl")).open("ab") as fh:
            fh.write(text)
        _replay(project, cache)
        _replay(project, cache)  # a warm run on the grown file: still the same three files
        assert _names(cache) == first


def test_cache_clear_removes_only_mcsims_entries(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    _replay(SAMPLES, cache)
    entries = _names(cache)
    assert len(entries) == 6  # two projects: sessions, tokens and results each
    freed = sum((cache / n).stat().st_size for n in entries)
    (cache / "notes.txt").write_text("mine")
    lookalike = "0" * 64 + ".sessions"  # named like an entry, but not one of mcsim's
    (cache / lookalike).write_text("mine too")
    info = CliRunner().invoke(cli, ["cache", "info", "--cache-dir", str(cache)])
    assert info.exit_code == 0, info.output
    assert "entries: 6\n" in info.output
    assert f"size: {freed:,} bytes" in info.output  # the samples' entries are under 100 kB
    for suffix, kind in (
        ("sessions", "calibrated sessions"),
        ("tokens", "token estimates"),
        ("results", "replayed results"),
    ):  # two of each, one per project, with their size
        size = sum((cache / n).stat().st_size for n in entries if n.endswith(suffix))
        assert f"\n  {kind}: 2, {size:,} bytes\n" in info.output
    result = CliRunner().invoke(cli, ["cache", "clear", "--cache-dir", str(cache)])
    assert result.exit_code == 0, result.output
    assert result.output == f"removed 6 entries from {cache}, freed {freed:,} bytes\n"
    assert _names(cache) == {"notes.txt", lookalike}
    assert (cache / "notes.txt").read_text() == "mine"


def _suffix_order(name: str) -> int:
    return ["sessions", "results", "tokens"].index(name.rsplit(".")[1])


def test_the_cap_evicts_the_least_recently_used_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = tmp_path / "cache"
    _replay(PIPELINE, cache)
    pipeline = sorted(_names(cache), key=_suffix_order)  # its [sessions, results, tokens]
    _replay(SAMPLES, cache)
    shop = sorted(_names(cache) - set(pipeline), key=_suffix_order)
    assert len(shop) == 3
    # Last used, oldest first: pipeline's sessions, results and tokens, then shop's.
    for t, name in enumerate([*pipeline, *shop], start=1):
        os.utime(cache / name, (t * 1000, t * 1000))
    sizes = {n: (cache / n).stat().st_size for n in _names(cache)}
    total = sum(sizes.values())

    # room for all but the two oldest
    removed = enforce_cap(cache, total - sizes[pipeline[0]] - sizes[pipeline[1]])
    assert [f.path.name for f in removed] == pipeline[:2]
    assert _names(cache) == {pipeline[2], *shop}

    # Reading an entry makes it recently used: a replay of the pipeline project alone reads
    # its tokens (its sessions and results were evicted) and writes those again, all three
    # now; with a cap one byte under everything, shop's sessions entry (t=4000) is now the
    # least recently used.
    monkeypatch.setenv("MCSIM_CACHE_MAX_SIZE", str(total - 1))
    _replay(PIPELINE, cache)
    assert _names(cache) == {*pipeline, *shop[1:]}


@pytest.mark.parametrize(
    ("value", "expected"),
    [("", 2_000_000_000), ("12", 12), ("500MB", 500_000_000), ("2g", 2_000_000_000),
     ("1.5GiB", 1_610_612_736), ("3 KB", 3_000),
     ("9" * 400, int("9" * 400)), ("1" + "0" * 400 + "TB", 10**412)],  # past a float's range
)  # fmt: skip
def test_the_cap_is_read_from_the_environment(
    monkeypatch: pytest.MonkeyPatch, value: str, expected: int
) -> None:
    monkeypatch.setenv("MCSIM_CACHE_MAX_SIZE", value)
    assert max_cache_bytes() == expected


def test_a_cap_that_is_not_a_size_is_one_line_before_any_work(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MCSIM_CACHE_MAX_SIZE", "lots")
    with pytest.raises(UsageError, match="MCSIM_CACHE_MAX_SIZE: 'lots' is not a size"):
        _replay(SAMPLES, tmp_path / "cache")
    assert not (tmp_path / "cache").exists()


@pytest.mark.slow
def test_a_redacted_report_names_no_user(tmp_path: Path) -> None:
    project = tmp_path / "in" / "-Users-alice-src-app"
    project.mkdir(parents=True)
    for source in PIPELINE.glob("*.jsonl"):
        text = source.read_text().replace(
            '"cwd":"/home/dev/data-pipeline"', '"cwd":"/Users/alice/src/app"'
        )
        assert '"cwd":"/Users/alice/src/app"' in text
        (project / source.name).write_text(text)
    run = tmp_path / "run"
    args = ["replay", str(tmp_path / "in"), "--policy", str(REPO / "policies" / "all.yaml")]
    result = CliRunner().invoke(cli, [*args, "--no-cache", "--out", str(run)])
    assert result.exit_code == 0, result.output
    pages = [run / "report.html", run / "report.md"]

    result = CliRunner().invoke(cli, ["report", str(run), "--redact"])
    assert result.exit_code == 0, result.output
    for page in pages:
        text = page.read_text()
        assert "alice" not in text.lower()
        assert "-Users-user1-src-app" in text

    result = CliRunner().invoke(cli, ["report", str(run)])
    assert result.exit_code == 0, result.output
    for page in pages:
        assert "-Users-alice-src-app" in page.read_text()


def test_a_folder_under_the_cap_is_checked_without_opening_its_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Every run ends with the cap: most end under it, and then listing the folder suffices
    # (opening every entry for its magic bytes was 0.28 s of a warm replay of the replica).
    cache = tmp_path / "cache"
    _replay(SAMPLES, cache)
    sizes = sum(p.stat().st_size for p in cache.iterdir())
    lookalike = cache / ("0" * 64 + ".sessions")  # named like an entry, but not one of mcsim's
    lookalike.write_bytes(b"x" * 10)

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("a folder under the cap needs no file opened")

    with monkeypatch.context() as patched:
        patched.setattr(disk_cache, "open_regular", refuse)
        assert enforce_cap(cache, sizes + 10) == []
    # Over the cap only by counting the lookalike: the files are opened, and nothing goes.
    assert enforce_cap(cache, sizes) == []
    assert len(list(cache.iterdir())) == 7
    removed = enforce_cap(cache, sizes - 1)  # one of mcsim's must go, never the lookalike
    assert len(removed) == 1 and lookalike.exists()


def test_the_size_under_the_cap_is_what_the_listed_files_hold(tmp_path: Path) -> None:
    # The check every run ends with sums the folder's listing (os.scandir, no path per file):
    # the same files, and the same sizes, as `cache_files` without opening them.
    cache = tmp_path / "cache"
    _replay(SAMPLES, cache)
    (cache / ("1" * 64 + ".results")).mkdir()  # a folder named like an entry
    (cache / ("2" * 64 + ".tokens")).symlink_to(next(cache.glob("*.sessions")))  # a link
    (cache / ".mcsim-tmp-abc").write_bytes(b"x" * 7)  # an unfinished write: mcsim's
    (cache / "notes.txt").write_text("mine")
    listed = disk_cache.cache_files(cache, verify=False)
    assert len(listed) == 7  # the six entries and the unfinished write
    assert disk_cache._named_bytes(cache) == sum(f.size for f in listed)
    assert disk_cache._named_bytes(tmp_path / "none") == 0
