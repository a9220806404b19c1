"""Run directories: what --out and --force may write or replace, checked before any work;
atomic swaps that never replace a run that appeared meanwhile; no temporary folder left."""

from __future__ import annotations

import json
import os
import shutil
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import REPO, SAMPLES

from mcsim import output
from mcsim.charts import ChartData, ChartProcess
from mcsim.cli import cli
from mcsim.errors import OutputExistsError, OutputRefusedError
from mcsim.output import RUN_FORMAT, write_run_dir

POLICY = REPO / "policies" / "claude-code.yaml"
MARKER = json.dumps({"format": RUN_FORMAT})


@pytest.fixture
def no_work(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every refusal must come before the transcripts are read."""

    def forbidden(*args: object, **kwargs: object) -> None:
        raise AssertionError("the input was read before the output was checked")

    monkeypatch.setattr("mcsim.replay.run_replay", forbidden)
    monkeypatch.setattr("mcsim.recorded.inspect_usage", forbidden)


def refused(args: list[str]) -> str:
    """The one-line error of a command that must exit 2 before reading anything."""
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 2, result.output
    assert result.stdout == ""
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("Error: ")
    return result.stderr.removeprefix("Error: ").rstrip("\n")


def replay(*args: str) -> list[str]:
    return ["replay", *args, "--policy", str(POLICY), "--no-cache"]


def snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


@pytest.fixture
def inputs(tmp_path: Path) -> Path:
    """A copy of the samples that also carries a valid run.json: only the input rule can
    refuse to replace it."""
    folder = tmp_path / "inputs"
    shutil.copytree(SAMPLES / "claude", folder / "claude")
    (folder / "run.json").write_text(MARKER)
    return folder


@pytest.mark.usefixtures("no_work")
def test_an_input_folder_is_never_replaced(inputs: Path, tmp_path: Path) -> None:
    before = snapshot(inputs)
    projects = inputs / "claude" / "projects"
    assert refused(replay(str(inputs), "--out", str(inputs), "--force")) == (
        f"{inputs}: is an input ({inputs}); choose another --out"
    )
    assert refused(replay(str(projects), "--out", str(inputs), "--force")) == (
        f"{inputs}: holds the input {projects}; choose another --out"
    )
    # Symlinks are followed: the link names the input folder.
    link = tmp_path / "link"
    link.symlink_to(inputs)
    assert refused(replay(str(projects), "--out", str(link), "--force")) == (
        f"{link}: holds the input {projects}; choose another --out"
    )
    # A glob's matches are its inputs.
    pattern = str(inputs / "claude" / "*" / "*")
    message = refused(["inspect", pattern, "--out", str(inputs), "--force"])
    assert message.startswith(f"{inputs}: holds the input {projects}/")
    assert snapshot(inputs) == before


@pytest.mark.usefixtures("no_work")
def test_default_roots_are_inputs_when_no_paths_are_given(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    claude = home / ".claude"
    (claude / "projects").mkdir(parents=True)
    (claude / "run.json").write_text(MARKER)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("CLAUDE_CONFIG_DIR", raising=False)
    assert refused(["inspect", "--out", str(claude), "--force"]) == (
        f"{claude}: holds the input {claude / 'projects'}; choose another --out"
    )
    assert refused(["inspect", "--out", str(home), "--force"]) == (
        f"{home}: is a home directory; choose another --out"
    )
    assert (claude / "run.json").read_text() == MARKER


@pytest.mark.usefixtures("no_work")
def test_current_directory_its_parents_and_root_are_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cwd = tmp_path / "work"
    cwd.mkdir()
    (cwd / "run.json").write_text(MARKER)
    monkeypatch.chdir(cwd)
    expected = {
        ".": ".: is the current directory",
        str(cwd): f"{cwd}: is the current directory",
        "..": "..: is a parent of the current directory",
        str(tmp_path): f"{tmp_path}: is a parent of the current directory",
        "/": "/: is the root directory",
    }
    for out, message in expected.items():
        for force in ([], ["--force"]):
            got = refused(replay(str(SAMPLES), "--out", out, *force))
            assert got == f"{message}; choose another --out"
    assert (cwd / "run.json").read_text() == MARKER


@pytest.mark.usefixtures("no_work")
@pytest.mark.parametrize(
    "run_json",
    [None, "not json", "[1, 2]", '{"format": "other-tool/1"}', '{"name": "mcsim"}'],
)
def test_force_replaces_only_a_folder_with_mcsims_run_json(
    tmp_path: Path, run_json: str | None
) -> None:
    out = tmp_path / "mine"
    out.mkdir()
    (out / "notes.txt").write_text("keep")
    if run_json is not None:
        (out / "run.json").write_text(run_json)
    before = snapshot(out)
    for force in ([], ["--force"]):
        assert refused(replay(str(SAMPLES), "--out", str(out), *force)) == (
            f"{out}: not empty and not a run directory written by mcsim (no mcsim run.json); "
            "--force replaces only those"
        )
    assert snapshot(out) == before


@pytest.mark.usefixtures("no_work")
def test_a_file_or_a_place_where_nothing_can_be_made_is_refused(tmp_path: Path) -> None:
    a_file = tmp_path / "file.txt"
    a_file.write_text("x")
    for force in ([], ["--force"]):
        assert refused(replay(str(SAMPLES), "--out", str(a_file), *force)) == (
            f"{a_file}: exists and is not a directory"
        )
    assert refused(["inspect", str(SAMPLES), "--out", str(a_file / "run")]) == (
        f"{a_file / 'run'}: {a_file} is not a directory"
    )
    dangling = tmp_path / "dangling"
    dangling.symlink_to(tmp_path / "nowhere")
    assert refused(["inspect", str(SAMPLES), "--out", str(dangling)]) == (
        f"{dangling}: exists and is not a directory"
    )
    assert a_file.read_text() == "x"


@pytest.mark.usefixtures("no_work")
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc is Linux's")
def test_an_unwritable_place_is_refused_with_the_os_reason() -> None:
    # /proc takes no new folder, not even from root (for whom os.access always says yes).
    out = "/proc/mcsim-test/run"
    message = refused(replay(str(SAMPLES), "--out", out))
    assert message.startswith(f"{out}: cannot write in /proc: ")
    assert len(message) > len(f"{out}: cannot write in /proc: ")  # the OS reason


@pytest.mark.usefixtures("no_work")
@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="root writes anywhere")
def test_a_read_only_folder_is_refused(tmp_path: Path) -> None:
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        out = locked / "new" / "run"
        assert refused(["inspect", str(SAMPLES), "--out", str(out)]) == (
            f"{out}: cannot write in {locked}: Permission denied"
        )
    finally:
        locked.chmod(0o700)
    assert list(locked.iterdir()) == []


def test_an_empty_folder_is_used_and_an_older_runs_folder_replaced(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    result = CliRunner().invoke(cli, ["inspect", str(SAMPLES), "--out", str(empty)])
    assert result.exit_code == 0, result.output
    assert json.loads((empty / "run.json").read_text())["format"] == RUN_FORMAT
    old = tmp_path / "old"
    old.mkdir()
    (old / "run.json").write_text('{"mcsim_version": "0.0.9"}')  # before the format marker
    (old / "sweep.parquet").write_text("old")
    result = CliRunner().invoke(cli, ["inspect", str(SAMPLES), "--out", str(old), "--force"])
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in old.iterdir()) == sorted(p.name for p in empty.iterdir())
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]


def a_run(text: str) -> dict[str, Callable[[Path], object]]:
    """The writers of a small run: mcsim's run.json and a table holding `text`."""
    return {"run.json": lambda p: p.write_text(MARKER), "table.txt": lambda p: p.write_text(text)}


def test_a_run_that_appeared_meanwhile_is_not_replaced(tmp_path: Path) -> None:
    out = tmp_path / "run"

    def race(path: Path) -> None:
        # The other run checks, writes and renames into place while this one writes.
        write_run_dir(out, a_run("second"), force=False)
        path.write_text("first")

    with pytest.raises(OutputExistsError) as caught:
        write_run_dir(out, {"table.txt": race}, force=False)
    assert str(caught.value) == (
        f"{out}: already holds a run, written while this one ran (use --force to replace it)"
    )
    assert (out / "table.txt").read_text() == "second"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run"]


def test_force_replaces_a_run_that_appeared_meanwhile_but_no_other_folder(
    tmp_path: Path,
) -> None:
    out = tmp_path / "run"

    def race(path: Path) -> None:
        write_run_dir(out, a_run("second"), force=False)
        path.write_text("first")

    write_run_dir(out, {"table.txt": race}, force=True)
    assert snapshot(out) == {"table.txt": b"first"}

    other = tmp_path / "other"

    def someone_else(path: Path) -> None:
        other.mkdir()
        (other / "notes.txt").write_text("theirs")

    with pytest.raises(OutputRefusedError, match="no longer a run directory written by mcsim"):
        write_run_dir(other, {"table.txt": someone_else}, force=True)
    assert snapshot(other) == {"notes.txt": b"theirs"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["other", "run"]


def test_an_interrupted_swap_puts_the_old_run_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "run"
    write_run_dir(out, a_run("old"), force=False)

    def interrupted(tmp: Path, out_dir: Path) -> None:
        assert not out_dir.exists()  # the old run is aside
        raise KeyboardInterrupt

    monkeypatch.setattr(output, "_rename", interrupted)
    with pytest.raises(KeyboardInterrupt):
        write_run_dir(out, a_run("new"), force=True)
    assert (out / "table.txt").read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run"]


class FakeBackground:
    """Records whether the run folder still existed when it was told to stop."""

    def __init__(self) -> None:
        self.folder: Path | None = None
        self.closed_with_folder: bool | None = None

    def __call__(self, folder: Path) -> FakeBackground:
        self.folder = folder
        return self

    def wait(self) -> None:
        raise AssertionError("an interrupted write does not wait for its charts")

    def close(self) -> None:
        assert self.folder is not None
        self.closed_with_folder = self.folder.exists()


def test_background_writing_is_stopped_before_the_folder_is_removed(tmp_path: Path) -> None:
    background = FakeBackground()

    def interrupted(path: Path) -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        write_run_dir(tmp_path / "run", {"table.txt": interrupted}, False, background)
    assert background.closed_with_folder is True
    assert list(tmp_path.iterdir()) == []


def test_a_chart_process_drawing_into_a_failed_run_is_stopped(tmp_path: Path) -> None:
    charts = ChartProcess()
    data = ChartData(["recorded", "a"], savings=[("a", 12.5, 3.0)])

    def draw(folder: Path) -> ChartProcess:
        charts.start(data, folder, ["savings.png"])
        return charts

    def fail(path: Path) -> None:
        raise RuntimeError("disk full")

    try:
        with pytest.raises(RuntimeError, match="disk full"):
            write_run_dir(tmp_path / "run", {"table.txt": fail}, False, draw)
        assert not charts._proc.is_alive()  # it can write nothing more
        assert list(tmp_path.iterdir()) == []
    finally:
        charts.close()
