"""The calls a run has counted, to count each call once across units (pipeline.py).

A dict of 64-bit call digests took about 100 bytes a call in the driver (one int object for
the key, one for the value, the slot): 7 MB per GB of transcripts, growing with the corpus,
which memory must not do (docs/design.md#performance). Here the newest calls stay in a dict of
at most `BUFFER`; older ones move into sorted numpy arrays, 16 bytes a call, merged like a
log-structured tree (a run absorbs the next one once that is as large), so at most
log2(calls / BUFFER) runs are searched. A corpus under BUFFER calls (about 900 MB of Claude
Code transcripts) never imports numpy, whose import is a sizeable share of a warm `inspect`,
and the dict stays a few MB (docs/performance.md#measured-reasons).
"""

from __future__ import annotations

from array import array
from typing import Any, Protocol

BUFFER = 1 << 16  # calls kept in the dict before they move into a sorted run


class SeenSet(Protocol):
    """The calls a run has counted, as the pipeline asks about them: `SeenCalls` in this
    process for the local engine; the Ray engine shards them across actors
    (engines/ray.py, ShardedSeenCalls), so that the driver's memory does not grow with them."""

    def find(self, digests: array[int]) -> dict[int, int]:
        """The earlier counts of those of `digests` (packed `array("Q")`) already seen."""
        ...

    def add(self, digests: array[int], counts: array[int]) -> None:
        """Calls not seen before, with their counts (`array("q")`), found by the next `find`."""
        ...


class SeenCalls:
    """call digest -> a hash of the call's counts (model.Session.call_counts)."""

    def __init__(self) -> None:
        self._new: dict[int, int] = {}
        self._runs: list[tuple[Any, Any]] = []  # (sorted uint64 digests, int64 counts)

    def find(self, digests: array[int]) -> dict[int, int]:
        """The earlier counts of those of `digests` (packed `array("Q")`) already seen:
        usually none, which is told without a Python step per call."""
        new = self._new
        found = {} if new.keys().isdisjoint(digests) else {d: new[d] for d in digests if d in new}
        if self._runs and len(digests):
            import numpy as np

            keys = np.frombuffer(digests, dtype=np.uint64)
            for run_keys, run_counts in self._runs:
                at = np.searchsorted(run_keys, keys)
                at[at == len(run_keys)] = 0
                for i in np.flatnonzero(run_keys[at] == keys).tolist():
                    found[int(keys[i])] = int(run_counts[at[i]])
        return found

    def add(self, digests: array[int], counts: array[int]) -> None:
        """Calls not seen before (`find` gave none of them)."""
        self._new.update(zip(digests, counts, strict=True))
        if len(self._new) >= BUFFER:
            self._flush()

    def _flush(self) -> None:
        import numpy as np

        keys = np.fromiter(self._new, dtype=np.uint64, count=len(self._new))
        counts = np.fromiter(self._new.values(), dtype=np.int64, count=len(self._new))
        self._new = {}
        order = np.argsort(keys)
        keys, counts = keys[order], counts[order]
        while self._runs and len(self._runs[-1][0]) <= len(keys):
            older_keys, older_counts = self._runs.pop()
            keys = np.concatenate((older_keys, keys))
            counts = np.concatenate((older_counts, counts))
            order = np.argsort(keys, kind="stable")
            keys, counts = keys[order], counts[order]
        self._runs.append((keys, counts))
