"""How the `mcsim` process is tuned for a replay, and why: each setting was measured.

`tune()` is what the command line calls first thing; a library caller that replays a large
corpus may call it too. `importing_tables` is how a replay that writes tables
(outputs/runs.py) imports what they need while it runs. None of it changes a result.
"""

from __future__ import annotations

import contextlib
import gc
import os
import threading
from collections.abc import Callable
from typing import Any


def tune() -> None:
    """Set the allocator's and the garbage collector's behaviour for a replay.

    * polars allocates with jemalloc, which keeps freed pages for ten seconds by default: a
      replay writing its tables batch after batch then grew by about 1 MB per batch and
      peaked 40 MB higher at 2 GB of transcripts. Given back at once, the pages were taken
      again a moment later, page by page: a warm replay of 2 GB faulted 389,000 pages in
      (1.9 s of system time; 125,000 and 0.55 s at 0.5 GB). Kept a quarter of a second:
      70,000 and 1.1 s (48,000 and 0.35 s), the driver's peak 170 MB instead of 161. jemalloc
      reads this when polars loads, so it must be set before polars is imported.
    * A replay unpickles and builds millions of small objects that are never cyclic garbage;
      with the default thresholds the collector kept rescanning them (about a tenth of a warm
      replay's time). Fewer collections, as mypy does.
    """
    os.environ.setdefault("_RJEM_MALLOC_CONF", "dirty_decay_ms:250,muzzy_decay_ms:250")
    gc.set_threshold(200_000, 30, 30)


def importing_tables(sink: Callable[[Any], object]) -> Callable[[Any], object]:
    """`sink`, which also starts importing polars and numpy in a thread when the first
    session's result arrives: the tables need them once the replay is done, and importing
    them only then left the run doing nothing else meanwhile
    (docs/performance.md#measured-reasons). Not earlier: forked workers must not inherit a
    process with polars' threads, and by the first result they are all started."""
    started = False

    def take(result: Any) -> object:
        nonlocal started
        if not started:
            started = True
            threading.Thread(target=_import_tables, daemon=True).start()
        return sink(result)

    return take


def _import_tables() -> None:
    with contextlib.suppress(Exception):  # the tables import them again, and fail there
        import numpy  # noqa: F401
        import polars  # noqa: F401
