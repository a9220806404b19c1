"""Run directories: what --out and --force may write or replace, checked before any work;
atomic swaps that never replace a run that appeared meanwhile; no temporary folder left."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import polars as pl
import pytest
from click.testing import CliRunner
from conftest import REPO, SAMPLES

from mcsim.cli import cli
from mcsim.errors import McsimError, OutputExistsError, OutputRefusedError
from mcsim.ingest.loaders import jsonl
from mcsim.outputs import inspect_tables
from mcsim.outputs import run_dir as output
from mcsim.outputs.charts import ChartData, ChartProcess
from mcsim.outputs.run_dir import RUN_FORMAT, write_run_dir

POLICY = REPO / "policies" / "claude-code.yaml"
MARKER = json.dumps({"format": RUN_FORMAT})


@pytest.fixture
def no_work(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every refusal must come before the transcripts are read."""

    def forbidden(*args: object, **kwargs: object) -> None:
        raise AssertionError("the input was read before the output was checked")

    monkeypatch.setattr("mcsim.replay.run.run_replay", forbidden)
    monkeypatch.setattr("mcsim.accounting.recorded.inspect_usage", forbidden)


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
    (out / "summary.parquet").write_text("keep")  # a name mcsim writes: only run.json decides
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
    return {
        "run.json": lambda p: p.write_text(MARKER),
        "summary.parquet": lambda p: p.write_text(text),
    }


def test_a_run_that_appeared_meanwhile_is_not_replaced(tmp_path: Path) -> None:
    out = tmp_path / "run"

    def race(path: Path) -> None:
        # The other run checks, writes and renames into place while this one writes.
        write_run_dir(out, a_run("second"), force=False)
        path.write_text("first")

    with pytest.raises(OutputExistsError) as caught:
        write_run_dir(out, {"summary.parquet": race}, force=False)
    assert str(caught.value) == (
        f"{out}: already holds a run, written while this one ran (use --force to replace it)"
    )
    assert (out / "summary.parquet").read_text() == "second"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run"]


def test_force_replaces_a_run_that_appeared_meanwhile_but_no_other_folder(
    tmp_path: Path,
) -> None:
    out = tmp_path / "run"

    def race(path: Path) -> None:
        write_run_dir(out, a_run("second"), force=False)
        path.write_text("first")

    write_run_dir(out, {"summary.parquet": race}, force=True)
    assert snapshot(out) == {"summary.parquet": b"first"}

    other = tmp_path / "other"

    def someone_else(path: Path) -> None:
        other.mkdir()
        (other / "notes.txt").write_text("theirs")

    with pytest.raises(OutputRefusedError, match="no longer a run directory written by mcsim"):
        write_run_dir(other, {"summary.parquet": someone_else}, force=True)
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
    assert (out / "summary.parquet").read_text() == "old"
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
        write_run_dir(tmp_path / "run", {"summary.parquet": interrupted}, False, background)
    assert background.closed_with_folder is True
    assert list(tmp_path.iterdir()) == []


def test_a_chart_process_drawing_into_a_failed_run_is_stopped(tmp_path: Path) -> None:
    charts = ChartProcess()
    data = ChartData(["recorded", "a"], savings=[("a", 12.5, 10.0, 3.0)])

    def draw(folder: Path) -> ChartProcess:
        charts.start(data, folder, ["savings.png"])
        return charts

    def fail(path: Path) -> None:
        raise RuntimeError("disk full")

    try:
        with pytest.raises(RuntimeError, match="disk full"):
            write_run_dir(tmp_path / "run", {"summary.parquet": fail}, False, draw)
        assert not charts._proc.is_alive()  # it can write nothing more
        assert list(tmp_path.iterdir()) == []
    finally:
        charts.close()


CORPUS = REPO / "tests" / "data" / "corpus" / "claude" / "projects"
FORGED = '{"mcsim_version": "0"}'  # what any folder can hold: the mark alone proves nothing


def sweep(*args: str) -> list[str]:
    return ["sweep", *args, "--policy", str(POLICY), "--name", "claude-code", "--grid",
            "ttl=5m,1h", "--no-cache"]  # fmt: skip


def one_of_each(folder: Path, name: str, kind: str) -> None:
    """Put an entry of `kind` named `name` into `folder`."""
    path = folder / name
    if kind == "file":
        path.write_text("{}")
    elif kind == "folder":
        path.mkdir()
    elif kind.startswith("dataset:"):  # a replay's table folder holding one more entry
        part = path / "policy_index=0" / "part-0.parquet"
        part.parent.mkdir(parents=True)
        part.write_text("table")
        extra = path / kind.removeprefix("dataset:")
        extra.parent.mkdir(parents=True, exist_ok=True)
        extra.write_text("notes")
    elif kind == "link":
        (folder.parent / "target").write_text(MARKER)
        path.symlink_to(folder.parent / "target")
    elif kind == "fifo":
        os.mkfifo(path)
    else:
        path.symlink_to("/dev/zero")


@pytest.mark.usefixtures("no_work")
@pytest.mark.parametrize(
    ("name", "kind", "named"),
    [
        ("f225835b.jsonl", "file", "f225835b.jsonl"),
        ("policy.yaml", "file", "policy.yaml"),
        (".hidden", "file", ".hidden"),
        ("notes", "folder", "notes"),
        ("summary.parquet", "folder", "summary.parquet (a directory)"),
        ("calls.parquet", "dataset:notes.txt", "calls.parquet/notes.txt"),
        (
            "calls.parquet",
            "dataset:policy_index=0/notes.txt",
            "calls.parquet/policy_index=0/notes.txt",
        ),
        ("breaks.parquet", "dataset:policy=a/part-0.parquet", "breaks.parquet/policy=a"),
        ("savings.png", "link", "savings.png (a symbolic link)"),
        ("run.json", "link", "run.json (a symbolic link)"),
        ("run.json", "zero", "run.json (a symbolic link)"),
        pytest.param(
            "run.json",
            "fifo",
            "run.json (a FIFO)",
            marks=pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs"),
        ),
    ],
)
def test_force_replaces_no_folder_holding_anything_mcsim_does_not_write(
    tmp_path: Path, name: str, kind: str, named: str
) -> None:
    out = tmp_path / "run"
    out.mkdir()
    (out / "sessions.parquet").write_text("table")
    if name != "run.json":
        (out / "run.json").write_text(MARKER)
    one_of_each(out, name, kind)
    before = sorted(p.name for p in out.iterdir())
    for args in (
        ["inspect", str(SAMPLES), "--out", str(out)],
        replay(str(SAMPLES), "--out", str(out)),
    ):
        for force in ([], ["--force"]):
            assert refused([*args, *force]) == (
                f"{out}: holds {named}, not a file mcsim writes; --force replaces only a run "
                "directory mcsim wrote"
            )
    assert sorted(p.name for p in out.iterdir()) == before
    assert (out / "sessions.parquet").read_text() == "table"


@pytest.mark.usefixtures("no_work")
def test_a_forged_run_json_beside_transcripts_does_not_let_force_delete_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    projects = tmp_path / "P"
    shutil.copytree(CORPUS, projects)
    out = projects / "-archives-m-claude"
    (out / "run.json").write_text(FORGED)
    before = snapshot(projects)
    message = (
        f"{out}: holds f225835b-3612-4093-903f-bd4538fb7cb9.jsonl, not a file mcsim writes; "
        "--force replaces only a run directory mcsim wrote"
    )
    for command in (["inspect", str(projects)], replay(str(projects)), sweep(str(projects))):
        assert refused([*command, "--out", str(out), "--force"]) == message
    # With no PATHS: a project folder under ~/.claude/projects, an input's child, not a parent.
    home = tmp_path / "home"
    shutil.copytree(projects, home / ".claude" / "projects")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("CLAUDE_CONFIG_DIR", raising=False)
    mine = home / ".claude" / "projects" / "-archives-m-claude"
    assert refused(["inspect", "--out", str(mine), "--force"]) == message.replace(
        str(out), str(mine)
    )
    # A transcript reached through a symlink: its folder is no input, yet it holds one.
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "session.jsonl").write_bytes(next(CORPUS.glob("*/*.jsonl")).read_bytes())
    (elsewhere / "run.json").write_text(MARKER)
    linked = tmp_path / "linked" / "project"
    linked.mkdir(parents=True)
    (linked / "session.jsonl").symlink_to(elsewhere / "session.jsonl")
    assert refused(["inspect", str(linked.parent), "--out", str(elsewhere), "--force"]) == (
        f"{elsewhere}: holds session.jsonl, not a file mcsim writes; --force replaces only a "
        "run directory mcsim wrote"
    )
    assert snapshot(projects) == before
    assert sorted(p.name for p in elsewhere.iterdir()) == ["run.json", "session.jsonl"]


def test_force_leaves_the_runs_own_policy_and_price_files(tmp_path: Path) -> None:
    run = tmp_path / "run"
    assert CliRunner().invoke(cli, ["inspect", str(SAMPLES), "--out", str(run)]).exit_code == 0
    policy = run / "policy.yaml"
    shutil.copy(POLICY, policy)
    prices = run / "prices.json"
    shutil.copy(REPO / "mcsim" / "accounting" / "prices" / "anthropic.json", prices)
    before = snapshot(run)
    result = CliRunner().invoke(cli, ["replay", str(SAMPLES), "--policy", str(policy), "--out",
                                      str(run), "--force", "--no-cache"])  # fmt: skip
    assert (result.exit_code, result.stderr) == (2, (
        f"Error: {run}: holds policy.yaml, not a file mcsim writes; --force replaces only a "
        "run directory mcsim wrote\n"
    ))  # fmt: skip
    policy.unlink()
    result = CliRunner().invoke(
        cli, ["inspect", str(SAMPLES), "--prices", str(prices), "--out", str(run), "--force"]
    )
    assert (result.exit_code, result.stderr) == (2, (
        f"Error: {run}: holds prices.json, not a file mcsim writes; --force replaces only a "
        "run directory mcsim wrote\n"
    ))  # fmt: skip
    del before["policy.yaml"]
    assert snapshot(run) == before


@pytest.mark.slow
def test_every_file_the_commands_write_is_one_force_may_replace(tmp_path: Path) -> None:
    """RUN_FILES names every file each command writes into a run directory, and nothing else;
    a run with its report is then replaced whole by --force."""
    a, b, c = tmp_path / "inspect", tmp_path / "replay", tmp_path / "sweep"
    for args in (
        ["inspect", str(SAMPLES), "--out", str(a)],
        replay(str(SAMPLES), "--out", str(b)),
        sweep(str(SAMPLES), "--out", str(c)),
        ["report", str(b)],
        ["report", str(c)],
    ):
        result = CliRunner().invoke(cli, args)
        assert result.exit_code == 0, result.output
    written = {folder: {p.name for p in folder.iterdir()} for folder in (a, b, c)}
    assert set().union(*written.values()) == output.RUN_FILES
    # Files, except the replay's tables: datasets of one file per policy (and the recording).
    datasets = {p.name for p in b.iterdir() if p.is_dir()}
    assert datasets == output.DATASETS == {"calls.parquet", "sessions.parquet", "breaks.parquet"}
    policies = pl.read_parquet(b / "summary.parquet")["policy"].to_list()
    for name in datasets:
        parts = sorted(p.relative_to(b / name).as_posix() for p in (b / name).rglob("*.parquet"))
        assert parts == [f"policy_index={i}/part-0.parquet" for i in range(len(policies))]
    assert all(
        p.is_file() and not p.is_symlink()
        for f in (a, b, c)
        for p in f.iterdir()
        if f is not b or p.name not in datasets
    )
    for folder in (b, c):
        result = CliRunner().invoke(cli, ["inspect", str(SAMPLES), "--out", str(folder), "--force"])
        assert result.exit_code == 0, result.output
        assert {p.name for p in folder.iterdir()} == written[a]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["inspect", "replay", "sweep"]


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_run_json_is_read_without_blocking_and_within_a_bound(tmp_path: Path) -> None:
    """A FIFO would block the read forever, /dev/zero never end; a huge file is not read."""
    fifo, zero, huge, good = (tmp_path / name for name in ("fifo", "zero", "huge", "good"))
    for folder in (fifo, zero, huge, good):
        folder.mkdir()
    os.mkfifo(fifo / "run.json")
    (zero / "run.json").symlink_to("/dev/zero")
    with (huge / "run.json").open("wb") as fh:  # sparse: no disk used
        fh.write(MARKER.encode())
        fh.truncate(output.RUN_JSON_MAX_BYTES + 1)
    (good / "run.json").write_text(MARKER)
    assert [output.is_run_dir(f) for f in (fifo, zero, huge, good)] == [False, False, False, True]
    with pytest.raises(OSError) as caught:
        jsonl.read_regular(huge / "run.json", output.RUN_JSON_MAX_BYTES)
    assert caught.value.strerror == "larger than 256 MiB"
    with pytest.raises(OSError) as caught:
        jsonl.read_regular(fifo / "run.json", output.RUN_JSON_MAX_BYTES)
    assert caught.value.strerror == "a FIFO, not a regular file"


FULL = Path("/dev/full")  # every write to it fails with ENOSPC, as on a full disk
needs_full = pytest.mark.skipif(not FULL.exists(), reason="needs /dev/full")


def old_run(tmp_path: Path) -> tuple[Path, dict[str, bytes]]:
    out = tmp_path / "run"
    assert CliRunner().invoke(cli, ["inspect", str(SAMPLES), "--out", str(out)]).exit_code == 0
    return out, snapshot(out)


def failed(args: list[str]) -> str:
    """The one-line error of a command that fails with exit 1."""
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 1, result.output
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("Error: ")
    return result.stderr.removeprefix("Error: ").rstrip("\n")


@needs_full
def test_a_full_disk_is_one_line_and_leaves_the_old_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out, before = old_run(tmp_path)
    args = ["inspect", str(SAMPLES), "--out", str(out), "--force"]

    def full_disk(path: Path, doc: object) -> None:
        FULL.write_bytes(b"{}" * 65536)

    monkeypatch.setattr(inspect_tables, "write_json", full_disk)
    assert failed(args) == f"{out}: could not write the run (No space left on device)"
    monkeypatch.undo()

    class FullDiskFrame:
        """A table polars fails to encode: its ComputeError, not an OSError (here the one
        polars raises writing a table to a full disk itself)."""

        def __init__(self, frame: object) -> None:
            self.frame = frame

        def write_parquet(self, target: object) -> None:
            pl.DataFrame({"a": range(100_000)}).write_parquet(FULL)

    sessions_frame = inspect_tables.sessions_frame
    monkeypatch.setattr(
        inspect_tables, "sessions_frame", lambda r: FullDiskFrame(sessions_frame(r))
    )
    message = failed(args)
    assert message.startswith(f"{out}: could not write the run (parquet: ")
    assert message.endswith("No space left on device (os error 28))")
    assert snapshot(out) == before
    monkeypatch.undo()

    # Tables are encoded in memory and written by mcsim: a full disk is the system's reason.
    write_parquet = inspect_tables.write_parquet

    def to_full_disk(frame: object, path: Path) -> None:
        write_parquet(frame, FULL)

    monkeypatch.setattr(inspect_tables, "write_parquet", to_full_disk)
    assert failed(args) == f"{out}: could not write the run (No space left on device)"
    assert snapshot(out) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run"]


def test_a_file_size_limit_fails_the_run_in_one_line(tmp_path: Path) -> None:
    """A real failing write (RLIMIT_FSIZE: EFBIG, what a quota or a full disk looks like),
    in a child process with the limit, as no test may mount a small file system."""
    out, before = old_run(tmp_path)
    limited = (
        "import resource, sys; resource.setrlimit(resource.RLIMIT_FSIZE, (2048, 2048)); "
        "from mcsim.cli import main; sys.argv[0] = 'mcsim'; main()"
    )
    for args in (["inspect", str(SAMPLES)], replay(str(SAMPLES))):
        proc = subprocess.run(
            [sys.executable, "-c", limited, *args, "--out", str(out), "--force"],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert proc.returncode == 1, proc.stderr
        assert proc.stderr.startswith(f"Error: {out}: could not write the run (")
        # The reason is the system's or polars' report of it (which varies with the write).
        assert proc.stderr.count("\n") == 1 and proc.stderr.endswith(")\n")
        assert snapshot(out) == before
        assert sorted(p.name for p in tmp_path.iterdir()) == ["run"]


def test_charts_that_cannot_be_drawn_fail_the_run_in_one_line(tmp_path: Path) -> None:
    charts = ChartProcess()
    data = ChartData(["recorded", "a"], savings=[("a", 12.5, 10.0, 3.0)])
    out = tmp_path / "run"

    def draw(folder: Path) -> ChartProcess:
        charts.start(data, folder / "gone", ["savings.png"])  # its folder does not exist
        return charts

    try:
        with pytest.raises(McsimError) as caught:
            write_run_dir(out, a_run("new"), False, draw)
        assert str(caught.value) == (
            f"{out}: could not write the run (could not draw the charts: No such file or directory)"
        )
        assert caught.value.exit_code == 1
        assert list(tmp_path.iterdir()) == []
    finally:
        charts.close()


@pytest.mark.usefixtures("no_work")
def test_a_name_too_long_is_refused_in_one_line(tmp_path: Path) -> None:
    out = tmp_path / ("x" * 300) / "run"
    assert refused(["inspect", str(SAMPLES), "--out", str(out)]) == f"{out}: File name too long"
    assert refused(replay(str(SAMPLES), "--out", str(out), "--force")) == (
        f"{out}: File name too long"
    )


def test_a_deleted_working_directory_does_not_stop_a_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    gone = tmp_path / "gone"
    gone.mkdir()
    monkeypatch.chdir(gone)
    gone.rmdir()
    out = tmp_path / "run"
    result = CliRunner().invoke(cli, ["inspect", str(SAMPLES), "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in out.iterdir()) == [
        "breaks.parquet", "calls.parquet", "run.json", "sessions.parquet"
    ]  # fmt: skip
    assert refused(["inspect", str(SAMPLES), "--out", "rel"]) == (
        "rel: is relative, and the current directory no longer exists; choose another --out"
    )


@pytest.mark.usefixtures("no_work")
def test_a_tilde_in_out_is_the_home_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(tmp_path)
    for args in (["--out", "~"], ["--out=~"], ["--out", "~/"]):
        assert refused(["inspect", str(SAMPLES), *args, "--force"]) == (
            f"{home}: is a home directory; choose another --out"
        )
    assert not (tmp_path / "~").exists()


def test_a_tilde_path_in_out_is_written_under_home(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    result = CliRunner().invoke(cli, ["inspect", str(SAMPLES), "--out=~/runs/a"])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "runs" / "a" / "run.json").is_file()


@pytest.mark.usefixtures("no_work")
def test_the_session_cache_folder_is_never_a_run_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / "x.sessions").write_bytes(b"entry")
    expected = {
        cache: f"{cache}: is the session cache folder ({cache})",
        cache / "run": f"{cache / 'run'}: is inside the session cache folder {cache}",
        tmp_path: f"{tmp_path}: holds the session cache folder {cache}",
    }
    monkeypatch.delenv("MCSIM_CACHE_DIR", raising=False)
    for out, message in expected.items():
        args = ["replay", str(SAMPLES), "--policy", str(POLICY), "--out", str(out), "--force"]
        assert refused([*args, "--cache-dir", str(cache)]) == f"{message}; choose another --out"
        swept = sweep(str(SAMPLES), "--out", str(out), "--cache-dir", str(cache))
        swept.remove("--no-cache")
        assert refused(swept) == f"{message}; choose another --out"
    monkeypatch.setenv("MCSIM_CACHE_DIR", str(cache))
    args = ["replay", str(SAMPLES), "--policy", str(POLICY), "--out", str(cache)]
    assert refused(args) == f"{cache}: is the session cache folder ({cache}); choose another --out"
    assert snapshot(cache) == {"x.sessions": b"entry"}
