"""The local engine: units loaded in this process, or in forked worker processes when the
input is large enough to pay for them. Each process gathers the cache entries its jobs write
into packs (mcsim.ingest.cache_packs.batched): a first run makes a file or two, not one per
unit."""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Callable, Iterator, Sequence
from contextlib import nullcontext
from typing import Any, TypeVar

from mcsim.ingest.cache_packs import batched
from mcsim.ingest.seen import SeenCalls
from mcsim.processes import STOP, Parent, end_with

# Below this many bytes to read (transcripts, or the results a cache keeps of them),
# starting processes costs more than it saves.
_PARALLEL_MIN_BYTES = 16 * 1024 * 1024

J = TypeVar("J")
R = TypeVar("R")


class LocalEngine:
    """`workers` processes (default: all cores); one, or a small input, runs in this process."""

    def __init__(self, workers: int | None = None) -> None:
        self.workers = workers

    def map_units(self, jobs: Sequence[J], run: Callable[[J], R], total_bytes: int) -> Iterator[R]:
        n = self.workers if self.workers is not None else (os.cpu_count() or 1)
        n = min(n, len(jobs))
        if n <= 1 or total_bytes < _PARALLEL_MIN_BYTES:
            with batched():
                for job in jobs:
                    yield run(job)
            return
        yield from _forked(list(jobs), run, n)

    def seen_calls(self) -> nullcontext[SeenCalls]:
        """The counted calls in this process (16 bytes a call: ingest/seen.py)."""
        return nullcontext(SeenCalls())


def _forked(jobs: list[J], run: Callable[[J], R], n: int) -> Iterator[R]:
    """Every job's output, in job order, computed by `n` forked workers.

    Not multiprocessing.Pool: its three helper threads in the parent burned about a third of
    a core on a 2-core machine, taken from the workers. Here the workers inherit the jobs
    (nothing is pickled on the way in), take the next index from a shared counter, and send
    each output back on their own pipe; the parent only reads and reorders.
    """
    # Imported here: 15 ms of every run's start, and a small input never forks.
    import multiprocessing
    import multiprocessing.connection

    ctx = multiprocessing.get_context("fork")  # inherit the modules: workers start in ms
    counter = ctx.Value("i", 0)
    parent = Parent.current()
    procs: list[Any] = []
    conns: list[Any] = []
    try:
        for _ in range(n):  # in the `try`: a stop while workers start ends those started
            parent_end, child_end = ctx.Pipe(duplex=False)
            proc = ctx.Process(
                target=_work, args=(jobs, run, counter, child_end, parent), daemon=True
            )
            procs.append(proc)
            proc.start()
            child_end.close()
            conns.append(parent_end)
        ready: dict[int, R] = {}
        live = list(conns)
        for index in range(len(jobs)):
            while index not in ready:
                if not live:
                    codes = [p.exitcode for p in procs]
                    raise RuntimeError(f"a worker process ended early (exit codes {codes})")
                arrived: list[Any] = multiprocessing.connection.wait(live)
                for conn in arrived:
                    try:
                        k, output = conn.recv()
                    except EOFError:
                        live.remove(conn)
                        continue
                    if isinstance(output, BaseException):
                        raise output
                    ready[k] = output
            yield ready.pop(index)
        for conn in live:  # each worker ends its pipe once it has written its cache entries
            with contextlib.suppress(EOFError):
                conn.recv()
    finally:
        with STOP.shielded():
            # SIGKILL, not SIGTERM: a SIGTERM that reaches a worker before CPython's after-fork
            # hook runs is dropped by it (it clears the signals caught so far), and the worker,
            # blocked sending an output this process no longer reads, never ended: the run hung
            # in `join` (a stop as the workers started, on a loaded machine). A worker has
            # nothing to clean up: SIGTERM's default action ended it as abruptly.
            started = [proc for proc in procs if proc.pid is not None]
            for proc in started:
                proc.kill()
            for proc in started:
                proc.join()


def _work(jobs: list[J], run: Callable[[J], R], counter: Any, conn: Any, parent: Parent) -> None:
    """A worker: run jobs by increasing index until none is left."""
    # Ctrl-C is the parent's to handle: it stops the workers, without a traceback from each.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # the parent's handler came with the fork
    end_with(parent)
    with batched():
        while True:
            with counter.get_lock():
                k = counter.value
                counter.value += 1
            if k >= len(jobs):
                break
            try:
                output: R | BaseException = run(jobs[k])
            except Exception as exc:  # re-raised in the parent, which stops the run
                output = exc
            conn.send((k, output))
    conn.close()
