"""Loaded calls cached on disk, so that a later `inspect` of the same transcripts whose
analysed sessions were not kept skips parsing them.

`inspect` needs each unit's sessions at `Detail.CALLS` (calls, usage, times, compactions; no
conversation content), and parsing the JSON lines is most of its time: read back from their
entries, the 523 MB corpus replica's units cost 0.55 to 0.87 s of CPU instead of 2.7 to 3.4 s
(one process, two rounds on a loaded machine; stamping, checksums and checks included). A
unit's calls are kept only where its analysed sessions are not (mcsim.accounting.recorded:
`AnalysisCache` keeps a unit only whole, so not when --since or --until left a session of it
out): a run with the same price table reads those instead, and one with another table loads
the transcripts again, which a first run, writing one entry per unit instead of two, saves
(docs/performance.md#targets).
Entries work as the replay's do (mcsim.replay.session_cache): one file per unit, named by
the paths of its files, stamped with every file's size and modification time, so a
transcript that grows replaces its unit's entry; data only, checked column by column, a
damaged entry counted and rebuilt (mcsim.ingest.disk_cache), laid out from the records'
own fields (mcsim.ingest.codec). Entries hold ids, models, counts, times and file names,
never transcript text (`Detail.CALLS` loads no items). The records read back equal the
loader's, field for field (tested).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from mcsim.ingest.codec import Codec
from mcsim.ingest.disk_cache import Damaged, Entry, Kind, note_rebuilt
from mcsim.ingest.loaders import Detail, LoadUnit
from mcsim.ingest.pipeline import Loaded, RawSource
from mcsim.model import Session

CALLS_VERSION = 4  # 2: Codex fork copies by lineage; interchange times clamped; 3: the codec;
# 4: the JSON part's size before it (disk_cache.Entry)
CALLS_FORMAT = f"mcsim-calls/{CALLS_VERSION}"
_CALLS = Kind(3, CALLS_VERSION)
# A table per record type of a session (its threads, calls, their usage, items, sources,
# compactions and pruning). Only threads with calls are loaded, and a session starts at its
# first call. A file's name is as this run spells it; a time, as the loader gave it.
_CODEC = Codec(
    Session,
    at_least_one={"Session.threads", "Thread.calls"},
    any_number={"Call.timestamp_s", "Call.sent_s", "Call.done_s", "Compaction.timestamp_s"},
)
_RENAMED = ("Session.files", "SourceRef.file")


@dataclass(frozen=True)
class CachedCallsSource:
    """A pipeline source of sessions at `Detail.CALLS`, read from the disk cache
    (`cache_dir`; None: no cache), or loaded and handed back with what writes them there
    (`Loaded.keep`, which the pipeline calls only when no analysed sessions are kept for the
    unit: a later run with the same price table reads those instead, and a first `inspect`
    then creates one file per unit, not two). A unit reloaded without calls seen elsewhere
    (the rare cross-unit duplicate) is loaded afresh and not cached."""

    cache_dir: Path | None

    def __call__(self, unit: LoadUnit, exclude: frozenset[int]) -> Loaded[Session]:
        load = RawSource(Detail.CALLS)
        if self.cache_dir is None or exclude:
            return load(unit, exclude)
        entry = Entry.of(self.cache_dir, unit, CALLS_FORMAT, _CALLS, "calls")
        why = None
        try:
            cached = entry.read(_CODEC, _RENAMED)
        except Damaged as exc:
            why = str(exc)
        else:
            if cached is not None:
                return Loaded(cached.records, cached.skips)
        loaded = load(unit, exclude)
        skips = loaded.skips
        if why is not None:  # kept without the note: the next run must not repeat it
            skips = copy.deepcopy(skips)
            note_rebuilt(loaded.skips, entry.path, why)
        loaded.keep = partial(entry.write, skips, _CODEC, loaded.sessions)
        return loaded
