"""Replay charts kept in the cache folder: a run whose chart data is the same copies the
kept PNG instead of drawing it; other data, another mcsim or a matplotlibrc is another entry; a
damaged or foreign entry is drawn again; the process that draws imports matplotlib only once
the run has something to replay or draw."""

from __future__ import annotations

import importlib.util
import os
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from conftest import REPO, SAMPLES

import mcsim.outputs.chart_cache as chart_cache
from mcsim.accounting.prices import default_table
from mcsim.cli import cli
from mcsim.ingest.disk_cache import Kind, write_entry
from mcsim.outputs.chart_cache import ChartCache, chart_key
from mcsim.outputs.charts import CHARTS, ChartData, ChartProcess
from mcsim.replay.run import run_replay
from mcsim.replay.scenario import load_policy_file

ALL = REPO / "policies" / "all.yaml"
PNG = b"\x89PNG\r\n\x1a\n"
MAGIC = b"\x89mcsim\r\n"


def _replay(out: Path, *options: str) -> None:
    args = ["replay", str(SAMPLES), "--policy", str(ALL), "--out", str(out), "--json", *options]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output


def _charts(folder: Path) -> dict[str, bytes]:
    return {name: (folder / name).read_bytes() for name in CHARTS}


def _kept(cache: Path) -> dict[str, bytes]:
    """The kept charts by key (the first 64 bytes of each payload): their PNGs."""
    kept = {}
    for entry in cache.glob("*.chart"):
        payload = ChartCache(cache).get(entry.stem)
        assert payload is not None and payload.startswith(PNG)
        kept[entry.stem] = payload
    return kept


@pytest.fixture(scope="module")
def drawn(tmp_path_factory: pytest.TempPathFactory) -> dict[str, bytes]:
    """The charts of the samples under all.yaml, drawn without any cache."""
    out = tmp_path_factory.mktemp("drawn") / "run"
    _replay(out, "--no-cache")
    return _charts(out)


@pytest.fixture(scope="module")
def first_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A run of the samples under all.yaml into an empty cache folder: `run` holds its
    output, `cache` what it kept. Made once: a test takes a copy of it (`cold`)."""
    folder = tmp_path_factory.mktemp("first")
    _replay(folder / "run", "--cache-dir", str(folder / "cache"))
    return folder


def cold(first_run: Path, cache: Path) -> Path:
    """`cache` as a first run left it (a copy of `first_run`'s, times kept): what each test
    made with a run of its own before."""
    shutil.copytree(first_run / "cache", cache)
    return cache


@pytest.mark.slow
def test_a_second_run_copies_the_kept_charts(
    tmp_path: Path, drawn: dict[str, bytes], first_run: Path
) -> None:
    cache = cold(first_run, tmp_path / "cache")
    kept = _kept(cache)
    assert sorted(kept.values()) == sorted(drawn.values())  # one entry per chart, as drawn
    # Each entry's PNG replaced by another: a run that copies them writes those, one that
    # draws would write the charts again.
    planted = {}
    for key, png in kept.items():
        planted[key] = png + b"planted"
        ChartCache(cache).put(key, planted[key])
    _replay(tmp_path / "warm", "--cache-dir", str(cache))
    warm = _charts(tmp_path / "warm")
    assert sorted(warm.values()) == sorted(planted.values())
    assert _charts(first_run / "run") == drawn


@pytest.mark.slow
def test_other_data_is_drawn_and_kept_beside(
    tmp_path: Path, drawn: dict[str, bytes], first_run: Path
) -> None:
    cache = cold(first_run, tmp_path / "cache")
    _replay(tmp_path / "one", "--cache-dir", str(cache), "--until", "2026-03-03")
    _replay(tmp_path / "none", "--no-cache", "--until", "2026-03-03")
    assert _charts(tmp_path / "one") == _charts(tmp_path / "none") != drawn
    # The savings chart of each run, and the three charts of its calls, are other data.
    assert len(list(cache.glob("*.chart"))) == 8
    _replay(tmp_path / "again", "--cache-dir", str(cache))
    assert _charts(tmp_path / "again") == drawn


@pytest.mark.slow
@pytest.mark.parametrize("damage", ["flipped", "cut", "another key", "not a png", "empty"])
def test_an_entry_that_cannot_be_used_is_drawn_again(
    tmp_path: Path, drawn: dict[str, bytes], first_run: Path, damage: str
) -> None:
    cache = cold(first_run, tmp_path / "cache")
    entries = sorted(cache.glob("*.chart"))
    entry, other = entries[0], entries[1]
    if damage == "flipped":
        data = bytearray(entry.read_bytes())
        data[len(data) // 2] ^= 0x40
        entry.write_bytes(bytes(data))
    elif damage == "cut":
        entry.write_bytes(entry.read_bytes()[:-100])
    elif damage == "another key":  # a whole, verified entry of another chart under this name
        shutil.copyfile(other, entry)
    elif damage == "not a png":
        before = entry.read_bytes()
        ChartCache(cache).put(entry.stem, b"GIF89a")  # checked on the way in: not written
        assert entry.read_bytes() == before
        write_entry(entry, chart_cache._CHART, entry.stem.encode() + b"GIF89a")
    else:
        entry.write_bytes(b"")
    assert ChartCache(cache).get(entry.stem) is None
    assert not entry.exists()  # removed when found unusable
    _replay(tmp_path / "warm", "--cache-dir", str(cache))
    assert _charts(tmp_path / "warm") == drawn
    assert ChartCache(cache).get(entry.stem) is not None  # drawn, and kept again


def _data() -> ChartData:
    return ChartData(["recorded", "p"], savings=[("p", 1.0, 0.5, 2.0)])


def test_the_key_covers_the_chart_its_data_and_how_it_is_drawn(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    base = chart_key("savings.png", _data())
    assert chart_key("savings.png", _data()) == base  # equal data, another object
    assert chart_key("context_size.png", _data()) != base
    other = _data()
    other.savings[0] = ("p", 1.0, 0.5, 2.000001)
    assert chart_key("savings.png", other) != base

    def again() -> str | None:
        return chart_key("savings.png", _data())

    monkeypatch.setattr(chart_cache, "code_hash", lambda: "another mcsim")
    assert again() != base
    monkeypatch.undo()
    assert again() == base
    monkeypatch.chdir(tmp_path)
    assert again() == base  # a folder without a matplotlibrc
    (tmp_path / "matplotlibrc").write_text("lines.linewidth: 3\n")
    style = again()
    assert style != base
    (tmp_path / "matplotlibrc").write_text("lines.linewidth: 4\n")
    assert again() not in (base, style)
    monkeypatch.setenv("MATPLOTLIBRC", str(tmp_path / "elsewhere"))
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "matplotlibrc").write_text("axes.grid: True\n")
    assert again() not in (base, style)


@pytest.mark.slow
def test_cache_info_and_clear_count_the_charts(tmp_path: Path, first_run: Path) -> None:
    cache = cold(first_run, tmp_path / "cache")
    runner = CliRunner()
    info = runner.invoke(cli, ["cache", "info", "--cache-dir", str(cache)])
    assert info.exit_code == 0 and "  charts: 4, " in info.output, info.output
    assert all(f.read_bytes().startswith(MAGIC) for f in cache.glob("*.chart"))
    cleared = runner.invoke(cli, ["cache", "clear", "--cache-dir", str(cache)])
    assert cleared.exit_code == 0, cleared.output
    assert list(cache.iterdir()) == []


def test_the_run_says_when_it_has_units_to_replay(tmp_path: Path) -> None:
    """`on_first_load` (what warms the chart process) is called once: before any result when the
    largest unit has no results kept (a first run: matplotlib's import then overlaps the
    whole replay), else when the first unit the result cache did not serve arrives; never on
    a run it served whole."""
    scenarios = load_policy_file(ALL)
    events: list[str] = []
    folder = tmp_path / "in"
    shutil.copytree(SAMPLES, folder)

    def replay(cache: Path | None) -> list[str]:
        events.clear()
        run_replay([str(folder)], scenarios, default_table(), cache_dir=cache, workers=1,
                   on_first_load=lambda: events.append("first load"),
                   sink=lambda result: events.append("result"))  # fmt: skip
        return events

    assert replay(None) == ["first load", "result", "result"]  # the samples' two projects
    cache = tmp_path / "cache"
    assert replay(cache) == ["first load", "result", "result"]
    assert replay(cache) == ["result", "result"]

    # The largest project's results are kept, for its files as they were: the run learns it
    # has work when that project's results arrive, replayed again.
    def size(project: Path) -> int:
        return sum(p.stat().st_size for p in project.rglob("*.jsonl"))

    smaller, larger = sorted((folder / "claude" / "projects").iterdir(), key=size)
    with next(larger.glob("*.jsonl")).open("a") as fh:
        fh.write("\n")
    assert replay(cache) == ["first load", "result", "result"]
    with next(smaller.glob("*.jsonl")).open("a") as fh:
        fh.write("\n")
    assert replay(cache) == ["result", "first load", "result"]


@pytest.mark.slow
def test_the_cap_holds_with_the_charts_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, first_run: Path
) -> None:
    cache = cold(first_run, tmp_path / "cache")
    sizes = {f.name: f.stat().st_size for f in cache.iterdir()}
    charts = sum(size for name, size in sizes.items() if name.endswith(".chart"))
    assert 0 < charts < sum(sizes.values())
    # Room for all but the charts: the next run's charts (other data) push out the oldest.
    monkeypatch.setenv("MCSIM_CACHE_MAX_SIZE", str(sum(sizes.values())))
    _replay(tmp_path / "two", "--cache-dir", str(cache), "--until", "2026-03-03")
    assert sum(f.stat().st_size for f in cache.iterdir()) <= sum(sizes.values())
    monkeypatch.setenv("MCSIM_CACHE_MAX_SIZE", "10")  # below one entry: the run leaves none
    _replay(tmp_path / "three", "--cache-dir", str(cache), "--until", "2026-03-04")
    assert list(cache.iterdir()) == []


def test_the_key_follows_the_settings_of_each_run_in_one_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A library caller's second run, from a folder with a matplotlibrc, draws with it (the
    chart process reads it then): its charts are other entries."""
    monkeypatch.chdir(tmp_path)
    base = chart_key("savings.png", _data())
    (tmp_path / "matplotlibrc").write_text("axes.facecolor: yellow\n")
    assert chart_key("savings.png", _data()) != base
    monkeypatch.setattr(sys, "version", "another Python")  # another Unicode table for labels
    assert chart_key("savings.png", _data()) != base


def test_the_key_covers_the_png_writers_version(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """matplotlib has Pillow write its PNGs: another Pillow may compress the same pixels into
    other bytes."""
    base = chart_key("savings.png", _data())
    pil = tmp_path / "PIL"
    pil.mkdir()
    (pil / "__init__.py").write_text("")
    (pil / "_version.py").write_text('__version__ = "0.0.1"\n')
    find_spec = importlib.util.find_spec

    def other_pillow(name: str, *args: Any) -> Any:
        if name == "PIL":
            return importlib.util.spec_from_file_location("PIL", pil / "__init__.py")
        return find_spec(name, *args)

    monkeypatch.setattr(importlib.util, "find_spec", other_pillow)
    assert chart_key("savings.png", _data()) != base


@pytest.mark.parametrize("rc", ["too large", "fifo", "/dev/zero", "folder"])
def test_a_matplotlibrc_mcsim_cannot_read_keeps_no_chart(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, rc: str
) -> None:
    """matplotlib reads a matplotlibrc of any size, or hangs on a FIFO or /dev/zero: one mcsim
    cannot read whole is no key (the charts are drawn); a folder matplotlib skips."""
    monkeypatch.chdir(tmp_path)
    base = chart_key("savings.png", _data())
    path = tmp_path / "matplotlibrc"
    if rc == "too large":
        path.write_text("axes.facecolor: yellow\n" + "#\n" * chart_cache._RC_MAX_BYTES)
    elif rc == "fifo":
        os.mkfifo(path)
    elif rc == "/dev/zero":
        path.symlink_to("/dev/zero")
    else:
        path.mkdir()
        (path / "matplotlibrc").write_text("axes.facecolor: yellow\n")
    assert chart_key("savings.png", _data()) == (base if rc == "folder" else None)


@pytest.mark.slow
def test_charts_are_drawn_under_a_matplotlibrc_too_large_to_hash(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, drawn: dict[str, bytes], first_run: Path
) -> None:
    cache = cold(first_run, tmp_path / "cache")
    here = tmp_path / "here"
    here.mkdir()
    monkeypatch.chdir(here)
    rc = "axes.facecolor: yellow\n" + "#\n" * chart_cache._RC_MAX_BYTES
    (here / "matplotlibrc").write_text(rc)
    _replay(tmp_path / "styled", "--cache-dir", str(cache))
    _replay(tmp_path / "styled-drawn", "--no-cache")
    styled = _charts(tmp_path / "styled")
    assert styled == _charts(tmp_path / "styled-drawn")
    assert all(styled[name] != drawn[name] for name in CHARTS)
    assert len(list(cache.glob("*.chart"))) == 4  # none kept under settings not read


@pytest.mark.slow
def test_a_run_with_every_chart_kept_needs_no_chart_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, drawn: dict[str, bytes], first_run: Path
) -> None:
    """The chart process ended (killed) before the run asked it anything: a run that copies
    every chart still writes them all; one that must draw fails, saying so."""
    cache = cold(first_run, tmp_path / "cache")
    started = ChartProcess.__init__

    def killed(self: ChartProcess) -> None:
        started(self)
        self._proc.kill()
        self._proc.join()

    monkeypatch.setattr(ChartProcess, "__init__", killed)
    _replay(tmp_path / "warm", "--cache-dir", str(cache))
    assert _charts(tmp_path / "warm") == drawn
    args = ["replay", str(SAMPLES), "--policy", str(ALL), "--out", str(tmp_path / "drawn")]
    result = CliRunner().invoke(cli, [*args, "--no-cache"])
    assert result.exit_code != 0 and "could not draw the charts" in result.output, result.output
    assert not (tmp_path / "drawn").exists() and not list(tmp_path.glob(".drawn.*"))


@pytest.mark.parametrize(
    "planted", ["fifo", "folder", "link to /dev/zero", "dangling link", "another kind"]
)
def test_a_planted_entry_is_no_chart(tmp_path: Path, planted: str) -> None:
    """Never read as a chart, never a crash; what can be removed is, and the chart is kept
    in its place (a folder of that name stays: the chart is then not kept)."""
    cache = ChartCache(tmp_path)
    key = chart_key("savings.png", _data())
    assert key is not None
    entry = tmp_path / f"{key}.chart"
    if planted == "fifo":
        os.mkfifo(entry)
    elif planted == "folder":
        entry.mkdir()
    elif planted == "link to /dev/zero":
        entry.symlink_to("/dev/zero")
    elif planted == "dangling link":
        entry.symlink_to(tmp_path / "nowhere")
    else:  # replayed results, valid and checksummed, renamed
        write_entry(entry, Kind(4, 1), key.encode() + PNG)
    assert cache.get(key) is None
    cache.put(key, PNG + b"drawn")
    assert cache.get(key) == (None if planted == "folder" else PNG + b"drawn")


@pytest.mark.slow
def test_a_run_with_every_chart_kept_never_imports_matplotlib(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, drawn: dict[str, bytes], first_run: Path
) -> None:
    """matplotlib makes its config folder as it is imported: the chart process imports it only
    for a run that replays a unit or draws a chart (all served, other dates: drawn)."""
    cache = cold(first_run, tmp_path / "cache")
    for run, options in [("warm", ()), ("until", ("--until", "2026-03-03"))]:
        config = tmp_path / f"mpl-{run}"
        monkeypatch.setenv("MPLCONFIGDIR", str(config))
        _replay(tmp_path / run, "--cache-dir", str(cache), *options)
        assert config.exists() == (run == "until"), run
    assert _charts(tmp_path / "warm") == drawn
    assert _charts(tmp_path / "until") != drawn
