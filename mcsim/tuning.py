"""How the `mcsim` process is tuned for a replay, and why: each setting was measured.

`tune()` is what the command line calls first thing; a library caller that replays a large
corpus may call it too. Neither setting changes a result.
"""

from __future__ import annotations

import gc
import os


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
