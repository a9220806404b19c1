"""The Ray engine: each unit's job runs as a Ray task, retried by Ray when its worker dies.

Outputs come back with `ray.wait` and are yielded in job order; at most `window` tasks are
submitted and not yet yielded, so the driver's memory follows the units in flight, not the
corpus. An error raised by a job is raised here as it is (not retried: reading the same
file again gives the same error). `ray` is imported only here, only when asked for.

The calls a run has counted (to count each call once across units: pipeline.py) are held by
actors, not by the driver, where they grew by 16 bytes a call (1.6 GB at 100 million calls):
`ShardedSeenCalls`.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import secrets
import signal
import socket
import subprocess
import sys
import tempfile
import warnings
from array import array
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

from mcsim.errors import McsimError, UsageError
from mcsim.ingest import cache_key
from mcsim.ingest.engines.ray_reaper import MARK
from mcsim.ingest.seen import SeenCalls
from mcsim.ingest.storage import first_line
from mcsim.processes import STOP

J = TypeVar("J")
R = TypeVar("R")

MAX_RETRIES = 3  # a task whose worker process dies is run again this many times
_WAIT_SECONDS = 0.2  # how often a wait returns to this process, to see a Ctrl-C
# Actors holding the calls seen: one per CPU up to this many. Each costs the driver a round
# trip per unit, more than the local engine's whole lookup (docs/performance.md#measured-reasons),
# while 4 hold 100 million calls in 400 MB each.
MAX_SHARDS = 4


def import_ray() -> Any:
    """The ray module, or a one-line usage error saying how to install it."""
    try:
        with warnings.catch_warnings():
            # ray's own imports warn about their dependencies' deprecations on some versions
            warnings.simplefilter("ignore", DeprecationWarning)
            import ray
    except ImportError:
        raise UsageError("--engine ray needs Ray: pip install 'mcsim[ray]'") from None
    return ray


class RayEngine:
    """Runs jobs as tasks on the Ray this process is connected to (`ray.init` done)."""

    def __init__(self, window: int | None = None, max_retries: int = MAX_RETRIES) -> None:
        self.ray = import_ray()
        self.cpus = max(1, int(self.ray.cluster_resources().get("CPU", 1)))
        self.window = window if window is not None else max(4, 2 * self.cpus)
        self.max_retries = max_retries

    def map_units(self, jobs: Sequence[J], run: Callable[[J], R], total_bytes: int) -> Iterator[R]:
        ray = self.ray
        keyed = _with_key(run, cache_key.loaded())
        task = ray.remote(max_retries=self.max_retries, retry_exceptions=False)(keyed)
        index_of: dict[Any, int] = {}  # in-flight object ref -> job index
        ready: dict[int, R] = {}
        submitted = 0
        # Tasks still in flight when this ends early (an error, a stop) are not cancelled:
        # ray.cancel(force=True) raced with a task finishing and aborted the driver in Ray
        # 2.60 ("Check failed: Tried to complete task that was not pending", seen in a test
        # run). At most `window` tasks run on; a Ray started for the run stops with it, and a
        # joined cluster ends the job's tasks when the driver leaves.
        for index in range(len(jobs)):
            while submitted < len(jobs) and submitted - index < self.window:
                index_of[task.remote(jobs[submitted])] = submitted
                submitted += 1
            while index not in ready:
                STOP.check()
                done, _ = ray.wait(list(index_of), num_returns=1, timeout=_WAIT_SECONDS)
                for ref in done:
                    ready[index_of.pop(ref)] = _result(ray, ref)
            yield ready.pop(index)

    @contextmanager
    def seen_calls(self) -> Iterator[ShardedSeenCalls]:
        """The counted calls in one actor per CPU of the cluster (at most MAX_SHARDS), killed
        when the block ends (on errors and Ctrl-C too)."""
        seen = ShardedSeenCalls(self.ray, min(self.cpus, MAX_SHARDS))
        try:
            yield seen
        finally:
            with STOP.shielded():
                seen.kill()


class ShardedSeenCalls:
    """The calls a run has counted, sharded across `n` Ray actors: shard k holds the digests
    with `digest % n == k`, each in a SeenCalls. The driver keeps only one unit's calls.

    Keyed by the call digest, not by the session id (a shuffle keyed by session, the obvious
    design): every copy of a call has its key, by definition, while copies are
    not sure to share a session id. Claude Code's Session.session_id is each line's
    sessionId, else the file's name (the parent folder's for a subagents/ file:
    loaders/claude_code.py), so a copy in a file whose lines carry no sessionId, or another
    one, is another session. Codex's is the file's first session_meta id, else the file's
    name (loaders/codex.py): a fork has its own id and holds copies of its source's calls.
    Keyed by session, two copies could meet in different shards and both be counted.

    A unit's question is one call to each shard, all in parallel: add the previous unit's
    calls, then find this unit's. The calls a unit adds are known only once its repeats are
    found and it is re-run without them, and one actor runs one caller's calls in order, so
    each find sees every earlier unit's calls, as the local engine's SeenCalls does: the
    earliest unit's copy stands on both engines. The last unit's calls are never sent: no
    unit after it asks. An actor is not restarted: the calls it held would be lost.
    """

    def __init__(self, ray: Any, n: int) -> None:
        import numpy as np

        self.ray = ray
        self.n = n
        actor = ray.remote(num_cpus=0, max_restarts=0)(_Shard)
        self.shards = [actor.remote() for _ in range(n)]
        self.empty = (np.empty(0, np.uint64), np.empty(0, np.int64))
        self.pending: list[tuple[Any, Any]] = [self.empty] * n  # (digests, counts) not sent

    def find(self, digests: array[int]) -> dict[int, int]:
        import numpy as np

        if not len(digests):
            return {}
        keys = np.frombuffer(digests, dtype=np.uint64)
        parts = self._split(keys, keys)
        refs = [
            shard.add_then_find.remote(*self.pending[k], parts[k])
            for k, shard in enumerate(self.shards)
        ]
        self.pending = [self.empty] * self.n
        found: dict[int, int] = {}
        try:
            for part in self.ray.get(refs):
                found.update(part)
        except self.ray.exceptions.RayActorError as exc:
            raise McsimError(f"a Ray actor holding calls seen died: {first_line(exc)}") from None
        return found

    def add(self, digests: array[int], counts: array[int]) -> None:
        import numpy as np

        keys = np.frombuffer(digests, dtype=np.uint64)
        values = np.frombuffer(counts, dtype=np.int64)
        parts = zip(self._split(keys, keys), self._split(keys, values), strict=True)
        self.pending = [
            (np.concatenate((old_keys, new_keys)), np.concatenate((old_values, new_values)))
            for (old_keys, old_values), (new_keys, new_values) in zip(
                self.pending, parts, strict=True
            )
        ]

    def _split(self, keys: Any, values: Any) -> list[Any]:
        """`values` by the shard of the matching `keys`."""
        shard = keys % self.n
        return [values[shard == k] for k in range(self.n)]

    def kill(self) -> None:
        if self.ray.is_initialized():  # a shut down Ray has killed them
            for shard in self.shards:
                self.ray.kill(shard)


class _Shard:
    """A Ray actor: the calls seen whose digest falls in its shard."""

    def __init__(self) -> None:
        self.seen = SeenCalls()

    def add_then_find(self, add_keys: Any, add_counts: Any, find_keys: Any) -> dict[int, int]:
        if len(add_keys):
            self.seen.add(array("Q", add_keys.tobytes()), array("q", add_counts.tobytes()))
        return self.seen.find(array("Q", find_keys.tobytes())) if len(find_keys) else {}


def _with_key(run: Callable[[J], R], key: bytes | None) -> Callable[[J], tuple[bool, Any]]:
    """`run` as a task: it signs and checks cache entries with the driver's key (None: the
    driver used no cache; the task's own, should it need one), so the nodes of a cluster
    trust what the others wrote whatever key each has of its own; and it returns (True,
    output) or (False, the job's error), so that an error Ray raises is Ray's own (a task
    that cannot be loaded on its worker, a worker that died past its retries)."""

    def keyed(job: J) -> tuple[bool, Any]:
        cache_key.give(key)
        try:
            return True, run(job)
        except Exception as exc:
            return False, exc

    return keyed


def _result(ray: Any, ref: Any) -> Any:
    """A task's output; its job's own error raised as it is; Ray's failures in one line."""
    try:
        done, output = ray.get(ref)
    except ray.exceptions.RayError as exc:
        raise McsimError(f"a Ray task failed: {_reason(exc)}") from None
    if not done:
        raise output
    return output


_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def _reason(exc: BaseException) -> str:
    """Why Ray failed, in one line: the last line of its error (or its cause's), where a
    traceback Ray quotes ends with the error itself; Ray's colours left out."""
    cause = getattr(exc, "cause", None)
    text = _ANSI.sub("", str(cause if isinstance(cause, BaseException) else exc))
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else type(exc).__name__


def import_installed() -> None:
    """Ray's `worker_process_setup_hook` for the Ray mcsim starts or joins: nothing to do,
    importing this module is the point. Ray puts the driver's current folder first on its
    workers' sys.path before their first task, so a folder named `mcsim` there (a checkout,
    or its parent) was imported instead of the installed package, which failed or, worse,
    ran other code. The hook runs before that, with the worker's own sys.path: `mcsim` is
    then the installed package, and its modules are found through it, whatever sys.path
    holds later."""


@contextmanager
def started_ray(address: str | None, workers: int | None) -> Iterator[RayEngine]:
    """A RayEngine for the block. Joins the cluster at ADDRESS (`auto`: the running one),
    or starts a local Ray with WORKERS CPUs; a Ray this process had already joined (a
    library caller's, a test's) is used and left alone. Ray started or joined here is
    stopped or left when the block ends, on errors and Ctrl-C too."""
    ray = import_ray()
    if ray.is_initialized():
        yield RayEngine()
        return
    with _reaped(address) as folder:
        _init(ray, address, workers, folder)
        try:
            yield RayEngine()
        finally:
            with STOP.shielded():
                ray.shutdown()


# The longest a run waits, once Ray is shut down, for the reaper to stop what is left of it
# (its grace period twice, and the removal of its folder).
_REAPER_WAIT_SECONDS = 10.0


@contextmanager
def _reaped(address: str | None) -> Iterator[str | None]:
    """For a Ray this run starts (no ADDRESS), on Linux: a temporary folder of its own for its
    files (yielded), and a reaper (`ray_reaper.py`, in a session of its own) that stops what
    is left of that Ray and removes the folder once this run ends, however it ends: at the
    end of the block, or when the kernel closes the reaper's input because the run was
    killed. The Ray's processes are told by a mark in their environment, set while Ray
    starts (`_init`). None: Ray's own folder, and no reaper (a cluster joined is not ours)."""
    if address is not None or not os.path.isdir("/proc"):
        yield None
        return
    # Ray's sockets live in this folder: under /tmp (or $RAY_TMPDIR), as Ray's own, for a path
    # short enough for them.
    root = os.environ.get("RAY_TMPDIR") or "/tmp"
    try:
        folder = tempfile.mkdtemp(prefix="mcsim-ray-", dir=root)
    except OSError as exc:
        raise McsimError(f"could not start Ray: {root}: {exc.strerror or exc}") from None
    token = secrets.token_hex(16)
    script = str(Path(__file__).with_name("ray_reaper.py"))
    reaper = subprocess.Popen(
        [sys.executable, "-I", script, token, folder],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,  # the terminal's Ctrl-C and the run's group stay away from it
    )
    os.environ[MARK] = token  # for the processes Ray starts (`_init` takes it out again)
    try:
        yield folder
    finally:
        os.environ.pop(MARK, None)
        with STOP.shielded():
            assert reaper.stdin is not None
            reaper.stdin.close()
            with contextlib.suppress(subprocess.TimeoutExpired):
                reaper.wait(timeout=_REAPER_WAIT_SECONDS)


# How long a cluster's address may take to answer before the run says it cannot be joined.
CONNECT_TIMEOUT_S = 10.0


def _reachable(address: str) -> None:
    """Refuse an address nothing answers at, at once and in one line: ray.init retried an
    unreachable one for more than two minutes, printing its own warnings meanwhile."""
    where = address.removeprefix("ray://")
    host, colon, port = where.rpartition(":")
    host = host.removeprefix("[").removesuffix("]")  # [::1]:6379
    if not colon or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise UsageError(f"--ray-address {address}: not auto, local, HOST:PORT or ray://HOST:PORT")
    try:
        socket.create_connection((host, int(port)), timeout=CONNECT_TIMEOUT_S).close()
    except OSError as exc:
        why = exc.strerror or str(exc) or type(exc).__name__  # a timeout has no strerror
        raise UsageError(f"cannot join the Ray cluster at {address}: {why}") from None


def _init(ray: Any, address: str | None, workers: int | None, folder: str | None) -> None:
    """Start a local Ray (no ADDRESS; its files in FOLDER, if given) or join the cluster at
    ADDRESS; any failure is one line."""
    # No usage statistics sent: nothing may need the network at run time.
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    handlers = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    options: dict[str, Any] = {
        "log_to_driver": False,  # the tasks' output stays in Ray's log files
        "logging_level": logging.ERROR,
        "configure_logging": True,
        "runtime_env": {"worker_process_setup_hook": f"{__name__}.{import_installed.__name__}"},
    }
    if folder is not None:
        options["_temp_dir"] = folder
    if address is None:
        options.update(num_cpus=workers or os.cpu_count() or 1, include_dashboard=False)
        # No task events: they serve only the dashboard and the state API, which a Ray started
        # for one run has not, and the GCS kept one record per task, so it grew with the
        # corpus (54 to 76 MB from 0.5 to 2 GB, bench_scale.py). Read by the processes
        # ray.init starts; a cluster joined keeps its own setting.
        os.environ.setdefault("RAY_task_events_report_interval_ms", "0")
    if address is not None and address not in ("auto", "local"):  # Ray's own words
        _reachable(address)
    try:
        ray.init(address=address, **options)
    except ConnectionError as exc:
        raise UsageError(f"cannot join the Ray cluster at {address}: {first_line(exc)}") from None
    except Exception as exc:  # Ray's own failures to start (ports, files, its processes)
        where = "start Ray" if address is None else f"join the Ray cluster at {address}"
        raise McsimError(f"could not {where}: {first_line(exc)}") from None
    finally:
        os.environ.pop(MARK, None)  # Ray's processes have it; the run's later children not
        # ray.init installs its own SIGTERM handler: Ctrl-C and SIGTERM stay the run's own
        for signum, handler in handlers.items():
            if handler is not None:
                signal.signal(signum, handler)
