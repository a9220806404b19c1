"""Process lifecycle: child processes that end with their parent, and signals that stop a
run cleanly.

A run starts worker processes (pipeline.py) and a chart process (charts.py). Killed, the parent
runs no clean-up, and a child left alive holds its stdout (the pipe of `mcsim ... | cat` would
never end): so every child ends with its parent (`end_with`). Stopped by Ctrl-C or SIGTERM,
the parent must clean up like after an error (workers stopped, the chart process stopped, the
temporary run folder removed) and exit 130 or 143: `STOP` turns either signal into `Stopped`
raised in the main thread, which the command line catches.
"""

from __future__ import annotations

import _thread
import ctypes
import os
import signal
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Parent:
    """The process a child process must not outlive, noted by it as it starts the child."""

    pid: int
    main_thread: bool  # started from the main thread, which lives as long as the process

    @classmethod
    def current(cls) -> Parent:
        return cls(os.getpid(), threading.current_thread() is threading.main_thread())


_PR_SET_PDEATHSIG = 1  # from <linux/prctl.h>
_PARENT_POLL_SECONDS = 0.5


def end_with(parent: Parent) -> None:
    """Make this child process end when `parent` does, even when it is killed.

    A killed parent runs no clean-up, and a child left alive holds the parent's stdout: the
    pipe of `mcsim ... | cat` would never end. Linux kills the child itself (PR_SET_PDEATHSIG),
    but when the thread that started the child ends, not the process: so only for children
    of the main thread. Elsewhere a thread watches the parent's pid. Either way the parent
    may have died already, before this ran.
    """
    if not (parent.main_thread and _kill_me_with_parent_thread()):
        threading.Thread(target=_watch_parent, args=(parent.pid,), daemon=True).start()
    if os.getppid() != parent.pid:
        os._exit(1)


def _kill_me_with_parent_thread() -> bool:
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return int(libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False


def _watch_parent(pid: int) -> None:
    while os.getppid() == pid:  # an orphan is adopted by another process
        time.sleep(_PARENT_POLL_SECONDS)
    os._exit(1)


class Stopped(BaseException):
    """SIGINT or SIGTERM, raised in the main thread so that every `finally` runs: workers and
    the chart process stopped, the temporary run folder removed. Not an Exception, so nothing
    that handles errors swallows it; not a KeyboardInterrupt, which click turns into exit 1."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


class _Stop:
    """SIGINT and SIGTERM raise `Stopped` in the main thread, once.

    Later signals are ignored, so the clean-up the first one starts runs to its end. A signal
    handled while polars' own KeyboardInterrupt is on its way up is only noted: raised in a
    `finally` it would cut the clean-up short. A stop raised in Python code that native code
    calls back (polars does, io.open did) can be lost:
    * reported as unraisable: it is raised again a moment later, from ordinary code;
    * swallowed silently: `signum` stays set, and `check`, called where the run does ordinary
      work (each file, each unit, each table written), raises it again;
    * turned into another error: `main` sees `signum` and reports the stop.
    Clean-up code runs `shielded`: a stop raised again meanwhile waits for the next check.
    """

    def __init__(self) -> None:
        self.pid: int | None = None
        self.signum: int | None = None
        self.again = False  # a stop reported as unraisable is to be raised again
        self.shields = 0
        self.previous_hook = sys.unraisablehook

    def install(self) -> None:
        self.pid = os.getpid()
        signal.signal(signal.SIGINT, self.on_signal)
        signal.signal(signal.SIGTERM, self.on_signal)
        sys.unraisablehook = self.on_unraisable

    def installed(self) -> bool:
        return self.pid == os.getpid()

    def check(self) -> None:
        """Raise the stop again if one was signalled and the run still goes on (native code
        swallowed it: seen in io.open, 4 stops in 28 lost). Only for ordinary work, never
        clean-up code, which a stop must not cut short."""
        if self.signum is not None and self.installed():
            raise Stopped(self.signum)

    @contextmanager
    def shielded(self) -> Iterator[None]:
        """Clean-up that a stop raised again must not interrupt (removing a temporary
        folder, stopping child processes)."""
        self.shields += 1
        try:
            yield
        finally:
            self.shields -= 1

    def stopped(self, signum: int) -> Stopped:
        self.signum = self.signum or signum
        return Stopped(self.signum)

    def on_signal(self, signum: int, frame: Any) -> None:
        if not self.installed():  # a forked child that has not yet set its own handlers
            os._exit(128 + signum)
        if self.signum is not None:
            if self.again and not self.shields:
                self.again = False
                raise Stopped(self.signum)
            return
        if isinstance(sys.exc_info()[1], KeyboardInterrupt):
            self.signum = signum
            return
        raise self.stopped(signum)

    def on_unraisable(self, info: Any) -> None:
        if isinstance(info.exc_value, Stopped):
            self.again = True
            threading.Thread(target=self._again, daemon=True).start()
        else:
            self.previous_hook(info)

    def _again(self) -> None:
        # Once the code that swallowed it has returned: raised any sooner (signal.raise_signal
        # here, in the hook) it is swallowed again. Should it be, it comes back here.
        time.sleep(_AGAIN_SECONDS)
        if self.again and self.signum is not None:
            _thread.interrupt_main(signal.Signals(self.signum))


_AGAIN_SECONDS = 0.1
STOP = _Stop()


def give_back_memory() -> None:
    """Return the C heap's free pages to the system (glibc's malloc_trim; nothing elsewhere).

    Freed memory stays in the process otherwise: replaying 2 GB, each batch of rows a run
    writes (outputs/rows_sink.py) left about 2 MB more resident than the one before, though
    nothing of it was alive, and memory must not grow with the corpus
    (docs/design.md#performance). Takes about a millisecond."""
    try:
        libc = ctypes.CDLL(None)
        trim = libc.malloc_trim
    except (OSError, AttributeError):  # not glibc
        return
    trim(0)
