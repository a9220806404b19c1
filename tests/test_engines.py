"""`--engine ray` gives what `--engine local` gives: the same totals, the same tables row for
row, the same fidelity and the same skip report; Ray retries a task whose worker dies; a Ray
started for a run leaves no process behind. One local Ray (2 CPUs) serves the whole module:
the commands run in this process find it joined and use it."""

from __future__ import annotations

import json
import os
import random
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from array import array
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from click.testing import CliRunner
from conftest import CORPUS, REPO, SAMPLES
from polars.testing import assert_frame_equal

from mcsim.cli import cli
from mcsim.errors import McsimError, UsageError
from mcsim.ingest.engines.ray import RayEngine, ShardedSeenCalls, _reachable, started_ray
from mcsim.ingest.seen import SeenCalls

ray = pytest.importorskip("ray")  # in the test extra: skipped only outside the README's setup

INPUTS = {"corpus": CORPUS, "samples": SAMPLES}
# Each table's rows in one order whatever order the sessions arrived in.
KEYS = {
    "summary": ["policy"],
    "sessions": ["policy", "project", "session_id"],
    "calls": ["policy", "project", "session_id", "thread_id", "call_index"],
    "breaks": ["project", "session_id", "timestamp", "thread_id"],
}


@pytest.fixture(scope="module")
def local_ray() -> Iterator[None]:
    # the workers cannot import this test module: its job functions travel by value
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    with started_ray(None, 2):
        yield


def run(args: list[str], out: Path) -> dict[str, Any]:
    if args[0] == "inspect" and "--cache-dir" not in args:
        # a cache of its own: each run loads, none reads what another engine cached
        args = [*args, "--cache-dir", str(out.parent / f"cache-{out.name}")]
    result = CliRunner().invoke(cli, [*args, "--json", "--out", str(out)])
    assert result.exit_code == 0, result.output
    data: dict[str, Any] = json.loads(result.stdout)
    data.pop("out_dir", None)
    data.pop("out", None)
    return data


def same_tables(local: Path, distributed: Path, names: list[str]) -> None:
    for name in names:
        a = pl.read_parquet(local / f"{name}.parquet")
        b = pl.read_parquet(distributed / f"{name}.parquet")
        assert a.height > 0 or name == "breaks", name
        keys = [k for k in KEYS[name] if k in a.columns]
        assert keys, (name, a.columns)
        assert_frame_equal(a.sort(keys), b.sort(keys), check_exact=True)


@pytest.mark.slow
@pytest.mark.parametrize("which", sorted(INPUTS))
def test_inspect_is_the_same_on_both_engines(local_ray: None, tmp_path: Path, which: str) -> None:
    args = ["inspect", str(INPUTS[which])]
    local = run(args, tmp_path / "local")
    distributed = run([*args, "--engine", "ray"], tmp_path / "ray")
    assert distributed == local
    assert local["totals"]["calls"] > 0
    same_tables(tmp_path / "local", tmp_path / "ray", ["sessions", "calls", "breaks"])
    # the calls cached by the Ray tasks serve a second run the same results
    again = [*args, "--engine", "ray", "--cache-dir", str(tmp_path / "cache-ray")]
    assert run(again, tmp_path / "ray-again") == local
    same_tables(tmp_path / "local", tmp_path / "ray-again", ["sessions", "calls", "breaks"])


@pytest.mark.slow
@pytest.mark.parametrize("which", sorted(INPUTS))
def test_replay_is_the_same_on_both_engines(local_ray: None, tmp_path: Path, which: str) -> None:
    policies = str(REPO / "policies" / "all.yaml")

    def replay(engine: str, out: str) -> dict[str, Any]:
        # each engine calibrates into its own cache: both compute, neither reads the other's
        args = ["replay", str(INPUTS[which]), "--policy", policies, "--engine", engine]
        return run([*args, "--cache-dir", str(tmp_path / f"cache-{engine}")], tmp_path / out)

    local = replay("local", "local")
    distributed = replay("ray", "ray")
    assert distributed == local
    assert distributed["fidelity"] == local["fidelity"] and local["fidelity"]
    assert len(local["policies"]) == 8  # the seven setups of all.yaml and the baseline
    same_tables(tmp_path / "local", tmp_path / "ray", ["summary", "sessions", "calls", "breaks"])
    # the session cache filled by the Ray tasks serves a second run the same results
    assert replay("ray", "ray-again") == local


@pytest.mark.slow
def test_unreadable_and_broken_files_are_reported_alike(local_ray: None, tmp_path: Path) -> None:
    root = tmp_path / "projects"
    shutil.copytree(CORPUS, root)
    project = sorted(root.iterdir())[0]
    locked = project / "locked.jsonl"
    shutil.copy(sorted(project.glob("*.jsonl"))[0], locked)
    (project / "broken.jsonl").write_bytes(b'\x00\xff garbage\n{"type":"assistant","message":\n')
    locked.chmod(0)  # does not stop root, who may run the tests: then only the broken file
    unreadable = not os.access(locked, os.R_OK)
    local = run(["inspect", str(root)], tmp_path / "local")
    distributed = run(["inspect", str(root), "--engine", "ray"], tmp_path / "ray")
    assert distributed["skipped"] == local["skipped"]
    assert distributed == local
    files = {(e["file"], e["reason"]) for e in local["skipped"]["examples"]}
    assert (str(project / "broken.jsonl"), "invalid_json") in files
    if unreadable:
        assert (str(locked), "unreadable_file") in files
    assert local["skipped"]["by_reason"]["invalid_json"] == 2


@pytest.mark.slow
def test_copies_across_project_folders_count_once_alike(local_ray: None, tmp_path: Path) -> None:
    """A session copied into two more project folders, one copy billing other counts: the
    Ray engine's sharded seen-calls keep the same copy, count the same repeats and note the
    same conflicts as the local engine's."""
    root = tmp_path / "projects"
    shutil.copytree(CORPUS, root)
    (original,) = (root / "-home-dev-legacy-cli").glob("*.jsonl")
    for name in ("-zz-copy", "-zz-other-counts"):
        (root / name).mkdir()
    shutil.copy(original, root / "-zz-copy" / original.name)
    lines = []
    for text in original.read_text().splitlines():
        line = json.loads(text)
        usage = line.get("message", {}).get("usage") if line.get("type") == "assistant" else None
        if usage is not None:
            usage["cache_read_input_tokens"] = usage.get("cache_read_input_tokens", 0) + 7
        lines.append(json.dumps(line))
    (root / "-zz-other-counts" / original.name).write_text("\n".join(lines) + "\n")
    alone = run(["inspect", str(original)], tmp_path / "alone")
    corpus = run(["inspect", str(CORPUS)], tmp_path / "corpus")

    local = run(["inspect", str(root)], tmp_path / "local")
    distributed = run(["inspect", str(root), "--engine", "ray"], tmp_path / "ray")
    assert distributed == local
    assert local["totals"]["calls"] == corpus["totals"]["calls"]  # each copy counted once
    assert local["input"]["duplicate_calls_across_projects"] == 2 * alone["totals"]["calls"]
    assert local["skipped"]["notes_by_reason"]["conflicting_usage"] > 0
    same_tables(tmp_path / "local", tmp_path / "ray", ["sessions", "calls", "breaks"])


@pytest.mark.slow
def test_sharded_seen_calls_answer_as_seen_calls_do(local_ray: None) -> None:
    rng = random.Random(11)
    expected = SeenCalls()
    engine = RayEngine()
    with engine.seen_calls() as seen:
        assert isinstance(seen, ShardedSeenCalls) and len(seen.shards) == 2  # the CPUs
        known: list[int] = []
        for _ in range(30):  # units of 0 to 20 calls, some asking about earlier ones again
            fresh = [rng.getrandbits(64) for _ in range(rng.randrange(21))]
            asked = array("Q", fresh + rng.sample(known, min(4, len(known))))
            assert seen.find(asked) == expected.find(asked)
            counts = array("q", [rng.randrange(-(2**63), 2**63) for _ in fresh])
            seen.add(array("Q", fresh), counts)
            expected.add(array("Q", fresh), counts)
            known += fresh
        assert seen.find(array("Q", known)) == expected.find(array("Q", known))
        assert len(expected.find(array("Q", known))) == len(set(known)) > 200
    # The actors are gone with the block. ray.kill is asynchronous: a call sent at once may
    # reach the actor before the kill does (seen once in five runs), so ask until it fails.
    deadline = time.monotonic() + 30
    while True:
        try:
            ray.get(seen.shards[0].add_then_find.remote(*seen.pending[0], seen.pending[0][0]))
        except ray.exceptions.RayActorError:
            break
        assert time.monotonic() < deadline, "a shard still answers 30 s after the block"
        time.sleep(0.1)


def _job(spec: tuple[str, int]) -> int:
    """A unit job that kills its worker the first time it runs (Ray must run it again)."""
    marker, value = spec
    if value == 2 and not os.path.exists(marker):
        Path(marker).touch()
        os._exit(1)
    return value * 10


def _refuse(value: int) -> int:
    if value == 3:
        raise ValueError("refused 3")
    return value


@pytest.mark.slow
def test_a_task_whose_worker_dies_is_retried(local_ray: None, tmp_path: Path) -> None:
    marker = str(tmp_path / "died-once")
    jobs = [(marker, v) for v in range(6)]
    assert list(RayEngine(window=2).map_units(jobs, _job, 0)) == [0, 10, 20, 30, 40, 50]
    assert os.path.exists(marker)  # the worker did die once


@pytest.mark.slow
def test_a_job_error_is_raised_as_it_is_and_not_retried(local_ray: None) -> None:
    outputs = RayEngine().map_units(list(range(5)), _refuse, 0)
    assert [next(outputs), next(outputs), next(outputs)] == [0, 1, 2]
    with pytest.raises(ValueError, match=r"^refused 3$"):
        next(outputs)


@pytest.mark.slow
def test_engine_ray_without_ray_installed_is_a_one_line_error() -> None:
    # In a process of its own: this one's Ray is running (the module's fixture), and its
    # threads import as they go, so ray is not hidden from them.
    hide = "import sys; sys.modules['ray'] = None; from mcsim.cli import cli; cli()"
    args = [sys.executable, "-c", hide, "inspect", str(CORPUS), "--engine", "ray"]
    done = subprocess.run(args, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    assert done.stderr == "Error: --engine ray needs Ray: pip install 'mcsim[ray]'\n"
    assert done.stdout == ""


def test_ray_address_needs_engine_ray() -> None:
    result = CliRunner().invoke(cli, ["inspect", str(CORPUS), "--ray-address", "auto"])
    assert result.exit_code == 2
    assert result.output == "Error: --ray-address needs --engine ray\n"


def ray_processes(temp_dir: str) -> list[str]:
    """The command lines of the processes of a Ray whose files are under TEMP_DIR."""
    ps = subprocess.run(["ps", "-eo", "pid,args"], capture_output=True, text=True, check=True)
    return [line for line in ps.stdout.splitlines() if temp_dir in line]


def ray_environments(temp_dir: str) -> list[int]:
    """The processes whose environment names TEMP_DIR as Ray's ($RAY_TMPDIR): every process of
    a Ray started from a driver that had it (a worker renames itself; its environment stays)."""
    needle = f"\0RAY_TMPDIR={temp_dir}\0".encode()
    found = []
    for pid in os.listdir("/proc"):
        try:
            with open(f"/proc/{pid}/environ", "rb") as fh:
                if needle in b"\0" + fh.read():
                    found.append(int(pid))
        except (OSError, ValueError):
            continue
    return found


@pytest.mark.slow
def test_a_ray_started_for_the_run_leaves_no_process_behind(tmp_path: Path) -> None:
    temp_dir = tempfile.mkdtemp(prefix="mcsim-ray-", dir="/tmp")  # sockets need a short path
    try:
        env = {**os.environ, "RAY_TMPDIR": temp_dir}
        mcsim = [sys.executable, "-m", "mcsim", "inspect", str(CORPUS), "--engine", "ray"]
        done = subprocess.run([*mcsim, "--json"], env=env, capture_output=True, timeout=120)
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)["totals"]["calls"] > 0
        assert done.stderr == b""  # Ray's own logging stays out of the terminal
        # stopped, its agents too, by the time mcsim exits; its session folder removed
        assert ray_processes(temp_dir) == [] and ray_environments(temp_dir) == []
        assert os.listdir(temp_dir) == []
    finally:
        shutil.rmtree(temp_dir, ignore_errors=True)


@pytest.mark.slow
def test_a_killed_run_takes_its_ray_along(tmp_path: Path) -> None:
    """SIGKILL: the kernel stopped what the driver started, but Ray's agents lived on for up
    to 100 s, and its session folder for good. The run's reaper stops them at once."""
    temp_dir = tempfile.mkdtemp(prefix="mcsim-ray-", dir="/tmp")
    try:
        corpus = tmp_path / "corpus"
        for copy in range(20):  # long enough to be killed while it runs
            shutil.copytree(SAMPLES, corpus / f"copy{copy}")
        env = {**os.environ, "RAY_TMPDIR": temp_dir}
        mcsim = [sys.executable, "-m", "mcsim", "inspect", str(corpus), "--engine", "ray"]
        with subprocess.Popen([*mcsim, "--no-cache"], env=env, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL) as driver:  # fmt: skip
            deadline = time.monotonic() + 120
            while not any("ray::" in line for line in _commands(ray_environments(temp_dir))):
                assert driver.poll() is None, "the run ended before its Ray's workers started"
                assert time.monotonic() < deadline, "no Ray worker started"
                time.sleep(0.05)
            assert len(ray_environments(temp_dir)) >= 4  # GCS, raylet, agents, workers
            driver.kill()
        deadline = time.monotonic() + 15  # the reaper's grace period, twice, and some
        while (ray_environments(temp_dir) or os.listdir(temp_dir)) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _commands(ray_environments(temp_dir)) == []
        assert os.listdir(temp_dir) == []
    finally:
        for pid in ray_environments(temp_dir):
            os.kill(pid, 9)
        shutil.rmtree(temp_dir, ignore_errors=True)


def _commands(pids: list[int]) -> list[str]:
    commands = []
    for pid in pids:
        try:
            commands.append(Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace"))
        except OSError:
            continue
    return commands


@pytest.mark.slow
@pytest.mark.parametrize("layout", ["a checkout's parent", "another package named mcsim"])
def test_ray_workers_import_the_installed_mcsim_whatever_the_folder_holds(
    tmp_path: Path, layout: str
) -> None:
    """Ray puts the driver's current folder first on its workers' sys.path: a `mcsim` folder
    there was imported instead of the installed package (a 60-line traceback)."""
    here = tmp_path / "here"
    package = here / "mcsim" / "mcsim" if layout == "a checkout's parent" else here / "mcsim"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("raise SystemExit('the wrong mcsim was imported')\n")
    (here / "mcsim" / "pyproject.toml").write_text("")
    script = Path(sys.executable).with_name("mcsim")  # as installed: its folder, not this one
    args = [str(script), "inspect", str(SAMPLES), "--engine", "ray", "--json", "--no-cache"]
    done = subprocess.run(args, cwd=here, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["totals"]["calls"] == 69
    assert done.stderr == ""


@pytest.mark.slow
def test_ray_failing_to_start_is_one_line(tmp_path: Path) -> None:
    env = {**os.environ, "RAY_TMPDIR": str(tmp_path / "a-file")}
    (tmp_path / "a-file").write_text("")
    args = [sys.executable, "-m", "mcsim", "inspect", str(SAMPLES), "--engine", "ray"]
    done = subprocess.run(args, env=env, capture_output=True, text=True, timeout=120)
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr == f"Error: could not start Ray: {tmp_path / 'a-file'}: Not a directory\n"


@pytest.mark.slow
def test_a_task_ray_cannot_load_is_one_line(local_ray: None, tmp_path: Path) -> None:
    """A job of a module the workers do not have: Ray's own error, not the job's, in one line."""
    (tmp_path / "driver_only.py").write_text("def double(x):\n    return 2 * x\n")
    sys.path.insert(0, str(tmp_path))
    try:
        import driver_only  # type: ignore[import-not-found]

        with pytest.raises(McsimError) as caught:
            list(RayEngine().map_units([1, 2], driver_only.double, 0))
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("driver_only", None)
    assert str(caught.value) == (
        "a Ray task failed: ModuleNotFoundError: No module named 'driver_only'"
    )


@pytest.mark.slow
def test_a_local_ray_keeps_no_task_events(local_ray: None) -> None:
    """The processes of a Ray started for the run report no task events: the GCS kept one
    record per task and grew with the corpus (bench_scale.py: 54 to 77 MB from 0.5 to 2 GB,
    45 to 46 without)."""
    assert os.environ["RAY_task_events_report_interval_ms"] == "0"  # noqa: SIM112 (Ray's case)


@pytest.mark.slow
def test_an_address_nothing_answers_at_is_refused_at_once_in_one_line() -> None:
    # ray.init retried such an address for over two minutes, printing its own warnings.
    # In a process of its own: this one has joined the module's Ray already.
    with socket.socket() as probe:  # a port nothing listens on: bound, never listening
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
        args = [sys.executable, "-m", "mcsim", "inspect", str(CORPUS), "--engine", "ray",
                "--ray-address", f"127.0.0.1:{port}"]  # fmt: skip
        done = subprocess.run(args, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert (
        done.stderr
        == f"Error: cannot join the Ray cluster at 127.0.0.1:{port}: Connection refused\n"
    )
    assert done.stdout == ""


@pytest.mark.parametrize(
    "address", ["nohost", "host:", ":6379", "host:port", "host:70000", "ray://"]
)
def test_an_address_that_is_not_host_and_port_is_refused(address: str) -> None:
    with pytest.raises(UsageError) as caught:
        _reachable(address)
    assert str(caught.value) == (
        f"--ray-address {address}: not auto, local, HOST:PORT or ray://HOST:PORT"
    )


@pytest.mark.slow
def test_an_address_that_answers_passes() -> None:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        _reachable(f"127.0.0.1:{port}")
        _reachable(f"ray://127.0.0.1:{port}")
        _reachable(f"[127.0.0.1]:{port}")


@pytest.mark.slow
def test_ray_tasks_sign_with_the_drivers_key(
    local_ray: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The module's Ray workers took the tests' key from the environment when it started; the
    driver now has another (as a node of a cluster may). The tasks sign with the driver's, so
    a local run of the driver then trusts every entry they wrote."""
    monkeypatch.setenv("MCSIM_CACHE_KEY", "the-drivers-own-key-" + "d" * 40)
    cache = ["--cache-dir", str(tmp_path / "cache")]
    distributed = run(["inspect", str(CORPUS), *cache, "--engine", "ray"], tmp_path / "ray")
    assert "cache_entry_rebuilt" not in distributed["skipped"]["notes_by_reason"]
    entries = sorted((tmp_path / "cache").glob("*.analysed"))
    assert len(entries) == 7  # one per project folder, written by the tasks
    local = run(["inspect", str(CORPUS), *cache], tmp_path / "local")
    assert "cache_entry_rebuilt" not in local["skipped"]["notes_by_reason"]
    assert local == distributed
    monkeypatch.setenv("MCSIM_CACHE_KEY", "yet-another-key-" + "e" * 40)  # as the workers' own
    other = run(["inspect", str(CORPUS), *cache], tmp_path / "other")
    # each project's analysed sessions (no loaded calls are kept beside them)
    assert other["skipped"]["notes_by_reason"]["cache_entry_rebuilt"] == 7
