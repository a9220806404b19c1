"""Where the pipeline's units run: an `Engine` maps a function over the units' jobs and
yields the outputs in job order (the de-duplication downstream relies on that order).

    local.py   the default: in this process below 16 MB, else in forked worker processes
    ray.py     Ray tasks on a local Ray started for the run, or on a running cluster
               (optional: `pip install 'mcsim[ray]'`; ray is imported only when asked for)
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import Protocol, TypeVar

from mcsim.errors import UsageError
from mcsim.ingest.engines.local import LocalEngine
from mcsim.ingest.seen import SeenSet

J = TypeVar("J")
R = TypeVar("R")

ENGINES = ("local", "ray")


class Engine(Protocol):
    """Runs `run(job)` for every job and yields the outputs in job order. `run` and the jobs
    must be picklable for engines that run them elsewhere (module-level functions,
    functools.partial, dataclass instances). An error of `run` is raised as it is.
    `total_bytes`: what the jobs will read, which may decide how many processes run them."""

    def map_units(
        self, jobs: Sequence[J], run: Callable[[J], R], total_bytes: int
    ) -> Iterator[R]: ...

    def seen_calls(self) -> AbstractContextManager[SeenSet]:
        """An empty set of the calls counted, for one run's de-duplication across units; what
        it holds elsewhere (a Ray actor) is released when the block ends, on errors too."""
        ...


@contextmanager
def open_engine(
    name: str = "local", *, address: str | None = None, workers: int | None = None
) -> Iterator[Engine]:
    """The engine called NAME for the length of the block. For `ray`, ADDRESS is a running
    cluster's (`auto` finds it); without one a local Ray with WORKERS CPUs (default: all
    cores) is started, and stopped when the block ends, on errors too."""
    if name == "local":
        if address is not None:
            raise UsageError("--ray-address needs --engine ray")
        yield LocalEngine(workers)
    elif name == "ray":
        from mcsim.ingest.engines.ray import started_ray

        with started_ray(address, workers) as engine:
            yield engine
    else:
        raise UsageError(f"unknown engine {name!r} (choose from {', '.join(ENGINES)})")


__all__ = ["ENGINES", "Engine", "LocalEngine", "open_engine"]
