"""A stopped or killed mcsim leaves nothing behind: no process, no open pipe, no folder.

Real processes: `python -m mcsim replay` on a corpus large enough for worker processes, then a
signal at a chosen moment (workers loading, or the run folder being written), found by polling.
Children are found through /proc (Linux). And the stop survives what native code does to it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import REPO, SAMPLES

from mcsim.ingest.engines import local

pytestmark = pytest.mark.slow
needs_proc = pytest.mark.skipif(
    not Path("/proc/self/stat").exists(), reason="finds child processes through /proc"
)

TIMEOUT_S = 60.0  # generous: a loaded 2-core machine; a pass takes a fraction of it
COPIES = 30  # of the samples: above the size at which the load forks workers


def poll(condition: Callable[[], bool]) -> bool:
    """Whether `condition` came true within TIMEOUT_S."""
    deadline = time.monotonic() + TIMEOUT_S
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def stat(pid: int) -> list[str] | None:
    """Fields 3.. of /proc/PID/stat (state, ppid, ...), or None when the process is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text.rsplit(")", 1)[1].split()


def children(pid: int) -> dict[int, str]:
    """The live child processes of `pid`, with their start times (pids get reused)."""
    found = {}
    for entry in os.listdir("/proc"):
        fields = stat(int(entry)) if entry.isdigit() else None
        if fields and int(fields[1]) == pid and fields[0] != "Z":
            found[int(entry)] = fields[19]
    return found


def alive(processes: dict[int, str]) -> list[int]:
    """Those still running (a zombie has ended; its parent, maybe init, has not reaped it)."""
    return [
        pid
        for pid, started in processes.items()
        if (fields := stat(pid)) and fields[19] == started and fields[0] != "Z"
    ]


@pytest.fixture(scope="module")
def big(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The samples many times over, with their own message and request ids (copies of one
    call would be dropped as duplicates)."""
    root = tmp_path_factory.mktemp("big")
    files = [(f.relative_to(SAMPLES), f.read_text()) for f in SAMPLES.rglob("*.jsonl")]
    for copy in range(COPIES):
        for relative, text in files:
            path = root / f"copy{copy}" / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            ids = text.replace('"msg_', f'"msg_{copy}_').replace('"req_', f'"req_{copy}_')
            path.write_text(ids)
    size = sum(f.stat().st_size for f in root.rglob("*.jsonl"))
    assert size > local._PARALLEL_MIN_BYTES
    return root


def loading(proc: subprocess.Popen[bytes], out: Path) -> bool:
    """Two workers and the chart process are running."""
    return len(children(proc.pid)) >= 3


def writing(proc: subprocess.Popen[bytes], out: Path) -> bool:
    """Files are being written into the temporary run folder."""
    for folder in out.parent.glob(f".{out.name}.*"):
        try:
            if any(folder.iterdir()):  # the check's probe folder is always empty
                return True
        except FileNotFoundError:  # renamed into place meanwhile
            pass
    return False


@dataclass(frozen=True)
class Stopped:
    """A replay stopped by a signal, once its pipes ended."""

    code: int | None
    children: dict[int, str]  # when the signal was sent
    left: list[int]  # those of them still running
    stdout: bytes
    stderr: bytes


def stop_replay(big: Path, out: Path, moment: Callable[..., bool], signum: int) -> Stopped:
    """Start `mcsim replay` into `out`, send `signum` at `moment`, read both pipes to their end
    (every write end closed, in any process) and see which children are left. A killed replay
    waits for nothing: its children get time to end by themselves."""
    policy = REPO / "policies" / "all.yaml"
    args = ["replay", str(big), "--policy", str(policy), "--out", str(out), "--workers", "2"]
    command = [sys.executable, "-m", "mcsim", *args, "--no-cache"]
    kids: dict[int, str] = {}
    pipe = subprocess.PIPE
    with subprocess.Popen(command, cwd=out.parent, stdout=pipe, stderr=pipe) as proc:
        try:
            assert poll(lambda: moment(proc, out) or proc.poll() is not None), moment.__name__
            assert proc.poll() is None, f"the replay ended before {moment.__name__}"
            kids = children(proc.pid)
            os.kill(proc.pid, signum)
            stdout, stderr = proc.communicate(timeout=TIMEOUT_S)
            if signum == signal.SIGKILL:
                poll(lambda: not alive(kids))
            return Stopped(proc.returncode, kids, alive(kids), stdout, stderr)
        finally:  # when an assertion failed: leave nothing running
            for pid in alive(kids):
                os.kill(pid, signal.SIGKILL)
            if proc.poll() is None:
                proc.kill()


@needs_proc
def test_sigkill_takes_workers_and_chart_process_along(big: Path, tmp_path: Path) -> None:
    stopped = stop_replay(big, tmp_path / "run", loading, signal.SIGKILL)
    assert stopped.code == -signal.SIGKILL
    assert len(stopped.children) == 3
    assert stopped.left == []
    assert stopped.stdout == b""
    # Its spool folder is left (nothing of it ran); the next run that spools there removes it
    # (its lock went with the killed run), once it is a minute old.
    (left,) = tmp_path.iterdir()
    assert left.name.startswith(".mcsim-rows-run.")
    old = time.time() - 120
    os.utime(left, (old, old))
    args = [sys.executable, "-m", "mcsim", "inspect", str(SAMPLES), "--out", str(tmp_path / "b")]
    assert subprocess.run(args, capture_output=True, timeout=TIMEOUT_S).returncode == 0
    assert [p.name for p in tmp_path.iterdir()] == ["b"]


@needs_proc
@pytest.mark.parametrize("moment", [loading, writing])
@pytest.mark.parametrize(("signum", "code"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_sigterm_and_sigint_clean_up_and_exit_with_the_signals_code(
    big: Path, tmp_path: Path, moment: Callable[..., bool], signum: int, code: int
) -> None:
    stopped = stop_replay(big, tmp_path / "run", moment, signum)
    assert (stopped.code, stopped.stderr, stopped.stdout) == (code, b"Aborted.\n", b"")
    assert stopped.children  # at least the chart process
    assert stopped.left == []  # stopped and waited for before the exit
    assert list(tmp_path.iterdir()) == []  # no run, no temporary folder


def awaiting_charts(proc: subprocess.Popen[bytes], out: Path) -> bool:
    """Every table and run.json written: the run waits for its charts (a moment more, so it is
    blocked in that wait)."""
    if not any((folder / "run.json").exists() for folder in out.parent.glob(f".{out.name}.*")):
        return False
    time.sleep(0.5)
    return True


@needs_proc
def test_sigint_stops_a_run_whose_chart_process_hangs(big: Path, tmp_path: Path) -> None:
    """matplotlib reads a matplotlibrc that is a FIFO, and waits on it for good. polars takes
    SIGINT over once imported, restarting the system call it interrupts: a wait blocked in
    one never saw the Ctrl-C."""
    here = tmp_path / "here"
    here.mkdir()
    os.mkfifo(here / "matplotlibrc")
    stopped = stop_replay(big, here / "run", awaiting_charts, signal.SIGINT)
    assert (stopped.code, stopped.stderr, stopped.stdout) == (130, b"Aborted.\n", b"")
    assert stopped.left == []
    assert list(here.iterdir()) == [here / "matplotlibrc"]  # no run, no temporary folder


CHILD_OF_A_THREAD_OR_WITHOUT_PRCTL = """
import os, sys, threading, time, multiprocessing
from mcsim import processes

def child(parent, conn):
    processes.end_with(parent)
    conn.send("ready")
    while True:
        conn.send(conn.recv())

def start(box):
    box.append(threading.get_native_id())
    ctx = multiprocessing.get_context("fork")
    mine, theirs = ctx.Pipe()
    box.append((ctx.Process(target=child, args=(processes.Parent.current(), theirs)), mine))
    box[-1][0].start()
    assert mine.recv() == "ready"  # the starting thread ends after the child's end_with

box = []
if sys.argv[1] == "thread":
    thread = threading.Thread(target=start, args=(box,))
    thread.start()
    thread.join()
    while os.path.exists(f"/proc/self/task/{box[0]}"):  # its end is the kernel's cue
        time.sleep(0.01)
else:
    processes._kill_me_with_parent_thread = lambda: False  # as where prctl is missing
    start(box)
process, conn = box[1]
conn.send("ping")
assert conn.recv() == "ping"  # outlived the thread that started it
print(process.pid, flush=True)
time.sleep(600)
"""


@needs_proc
@pytest.mark.parametrize("how", ["thread", "no-prctl"])
def test_a_child_started_from_a_thread_or_without_prctl_still_ends_with_its_parent(
    how: str,
) -> None:
    script = textwrap.dedent(CHILD_OF_A_THREAD_OR_WITHOUT_PRCTL)
    command = [sys.executable, "-c", script, how]
    kids: dict[int, str] = {}
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE) as parent:
        try:
            assert parent.stdout is not None and parent.stderr is not None
            line = parent.stdout.readline()
            assert line.strip().isdigit(), parent.stderr.read()
            kids = children(parent.pid)
            assert list(kids) == [int(line)]
            parent.kill()
            parent.wait()
            assert poll(lambda: not alive(kids)), "the orphaned child lives on"
        finally:
            for pid in alive(kids):
                os.kill(pid, signal.SIGKILL)
            if parent.poll() is None:
                parent.kill()


STOPPED_INSIDE = """
import signal, sys
import mcsim.accounting.recorded
from mcsim.cli import main

def inspect_usage(*args, **kwargs):
{body}

mcsim.accounting.recorded.inspect_usage = inspect_usage
sys.argv = ["mcsim", "inspect", sys.argv[1], "--out", sys.argv[2]]
main()
"""
POLARS_CTRL_C = """
    raise KeyboardInterrupt  # what polars raises when it sees Ctrl-C first
"""
SWALLOWED = """
    class Swallowing:
        def __del__(self):
            signal.raise_signal(signal.SIGTERM)
            for _ in range(1000):
                pass  # the stop is raised here, where Python can only report it
    Swallowing()
    for _ in range(10**8):
        pass  # it is delivered again, here
    sys.exit(99)
"""


SWALLOWED_THEN_ANOTHER_ERROR = """
    class Swallowing:
        def __del__(self):
            signal.raise_signal(signal.SIGTERM)
            for _ in range(1000):
                pass  # reported as unraisable, as polars did while building a table
    Swallowing()
    raise TypeError("'<unprintable str object>' is not a Polars data type")  # and then this
"""


# What polars raised when the stop came while it imported numpy's C API (pyo3's panic is a
# BaseException, not an Exception): seen once in a dozen replays stopped while writing.
NATIVE_PANIC = """
    class PanicException(BaseException):
        pass
    try:
        signal.raise_signal(signal.SIGINT)
        for _ in range(1000):
            pass
    except BaseException as stop:  # taken by native code, which panics with it
        raise PanicException(f"Failed to access NumPy array API capsule: {stop!r}") from None
"""


@pytest.mark.parametrize(
    ("body", "code"),
    [
        (POLARS_CTRL_C, 130),
        (SWALLOWED, 143),
        (SWALLOWED_THEN_ANOTHER_ERROR, 143),
        (NATIVE_PANIC, 130),
    ],
    ids=["polars-keyboard-interrupt", "swallowed-stop", "swallowed-then-another-error", "panic"],
)
def test_a_stop_raised_or_swallowed_by_native_code_still_stops(
    tmp_path: Path, body: str, code: int
) -> None:
    script = STOPPED_INSIDE.format(body=textwrap.indent(textwrap.dedent(body), "    "))
    out = tmp_path / "run"
    command = [sys.executable, "-c", script, str(SAMPLES), str(out)]
    done = subprocess.run(command, capture_output=True, timeout=TIMEOUT_S)
    assert (done.returncode, done.stderr) == (code, b"Aborted.\n")
    assert done.stdout == b""
    assert list(tmp_path.iterdir()) == []


SWALLOWED_STOP = """
import signal, sys
from mcsim import processes
from mcsim.ingest.pipeline import load_sessions

processes.STOP.install()
try:
    raise processes.STOP.stopped(signal.SIGINT)
except BaseException:
    pass  # as native code that calls back into Python can swallow it
try:
    load_sessions([sys.argv[1]], workers=1)
except processes.Stopped as stopped:
    print("stopped", stopped.signum)
else:
    print("ran on")
"""


def test_a_swallowed_stop_resurfaces_at_the_next_file() -> None:
    proc = subprocess.run(
        [sys.executable, "-c", SWALLOWED_STOP, str(SAMPLES)], capture_output=True, timeout=120
    )
    assert proc.stdout.decode().strip() == f"stopped {int(signal.SIGINT)}", proc.stderr


DEAF_WORKERS = """
import signal
from mcsim.ingest.engines.local import _forked

def run(job):
    # As a worker whose SIGTERM came before CPython's after-fork hook, which clears the signals
    # caught so far: it never acts on it.
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    return b"x" * (1 << 20)  # more than a pipe holds: sending it blocks until it is read

outputs = _forked(list(range(6)), run, 2)
assert len(next(outputs)) == 1 << 20
outputs.close()  # the consumer stops (a stop, an error): the workers must end, unread
print("ended", flush=True)
"""


def test_workers_that_miss_their_sigterm_still_end_with_the_run() -> None:
    """The flaky stop while loading: a SIGTERM sent to a worker as it started was lost, and
    the run waited for good for a worker blocked sending its output. The workers are
    killed, not asked to stop."""
    done = subprocess.run(
        [sys.executable, "-c", DEAF_WORKERS], capture_output=True, text=True, timeout=TIMEOUT_S
    )
    assert (done.returncode, done.stdout, done.stderr) == (0, "ended\n", "")
