"""The Ray engine: each unit's job runs as a Ray task, retried by Ray when its worker dies.

Outputs come back with `ray.wait` and are yielded in job order; at most `window` tasks are
submitted and not yet yielded, so the driver's memory follows the units in flight, not the
corpus. An error raised by a job is raised here as it is (not retried: reading the same
file again gives the same error). `ray` is imported only here, only when asked for.
"""

from __future__ import annotations

import logging
import os
import signal
import warnings
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, TypeVar

from mcsim.errors import UsageError
from mcsim.processes import STOP

J = TypeVar("J")
R = TypeVar("R")

MAX_RETRIES = 3  # a task whose worker process dies is run again this many times
_WAIT_SECONDS = 0.2  # how often a wait returns to this process, to see a Ctrl-C


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
        cpus = int(self.ray.cluster_resources().get("CPU", 1))
        self.window = window if window is not None else max(4, 2 * cpus)
        self.max_retries = max_retries

    def map_units(self, jobs: Sequence[J], run: Callable[[J], R], total_bytes: int) -> Iterator[R]:
        ray = self.ray
        task = ray.remote(max_retries=self.max_retries, retry_exceptions=False)(run)
        index_of: dict[Any, int] = {}  # in-flight object ref -> job index
        ready: dict[int, R] = {}
        submitted = 0
        try:
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
        finally:
            with STOP.shielded():
                for ref in index_of:
                    ray.cancel(ref, force=True)


def _result(ray: Any, ref: Any) -> Any:
    try:
        return ray.get(ref)
    except ray.exceptions.RayTaskError as exc:
        cause = exc.cause
        if isinstance(cause, Exception):
            raise cause from None
        raise


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
    _init(ray, address, workers)
    try:
        yield RayEngine()
    finally:
        with STOP.shielded():
            ray.shutdown()


def _init(ray: Any, address: str | None, workers: int | None) -> None:
    # No usage statistics sent: nothing may need the network at run time.
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    handlers = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    options: dict[str, Any] = {
        "log_to_driver": False,  # the tasks' output stays in Ray's log files
        "logging_level": logging.ERROR,
        "configure_logging": True,
    }
    if address is None:
        options.update(num_cpus=workers or os.cpu_count() or 1, include_dashboard=False)
    try:
        ray.init(address=address, **options)
    except ConnectionError as exc:
        raise UsageError(f"cannot join the Ray cluster at {address}: {exc}") from None
    finally:
        # ray.init installs its own SIGTERM handler: Ctrl-C and SIGTERM stay the run's own
        for signum, handler in handlers.items():
            if handler is not None:
                signal.signal(signum, handler)
