"""Loaded calls cached on disk, so a second `inspect` of the same transcripts skips parsing.

`inspect` needs each unit's sessions at `Detail.CALLS` (calls, usage, times, compactions; no
conversation content), and parsing the JSON lines is most of its time: read back from their
entries, the 523 MB corpus replica's units cost 0.55 to 0.87 s of CPU instead of 2.7 to 3.4 s
(one process, two rounds on a loaded machine; stamping, checksums and checks included).
Entries work as the replay's do (mcsim.replay.session_cache): one file per unit, named by
the paths of its files, stamped with every file's size and modification time, so a
transcript that grows replaces its unit's entry; data only, checked column by column, a
damaged entry counted and rebuilt (mcsim.ingest.disk_cache). Entries hold ids, models,
counts, times and file names, never transcript text. The records read back equal the
loader's, field for field (tested).
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from itertools import repeat, starmap
from operator import attrgetter
from pathlib import Path
from typing import Any

from mcsim.ingest.disk_cache import (
    BOOL,
    INT,
    LIST,
    OPT_INT,
    OPT_STR,
    STR,
    Column,
    Damaged,
    Entry,
    Kind,
    Table,
    checked,
    columns,
    groups,
    note_rebuilt,
    strings,
)
from mcsim.ingest.loaders import Detail, LoadUnit
from mcsim.ingest.pipeline import Loaded, RawSource
from mcsim.model import (
    Call,
    Compaction,
    CompactionKind,
    Session,
    SourceRef,
    Thread,
    ThreadKind,
    Usage,
)

CALLS_VERSION = 2  # 2: Codex fork copies by lineage; interchange times clamped
CALLS_FORMAT = f"mcsim-calls/{CALLS_VERSION}"
_CALLS = Kind(3, CALLS_VERSION)

_NUMBER: frozenset[type] = frozenset({int, float})  # a time as the loader gave it
_OPT_NUMBER: frozenset[type] = frozenset({int, float, type(None)})
_THREAD_KIND: Column = {k.value: k for k in ThreadKind}
_COMPACTION_KIND: Column = {k.value: k for k in CompactionKind}
# In the field order of Session (its files, then the count of its threads), Thread (of its
# calls), Call (its usage's fields in its place, its source as file and line, its compaction
# and pruning as rows of the compaction table or None; no items: Detail.CALLS has none) and
# Compaction.
_SESSION_COLUMNS: Table = (STR, STR, OPT_STR, LIST, INT)
_THREAD_COLUMNS: Table = (STR, _THREAD_KIND, INT)
_USAGE_COLUMNS: Table = (INT, INT, INT, INT, INT, BOOL, BOOL, OPT_STR, OPT_STR, INT)
_CALL_COLUMNS: Table = (
    *(STR, OPT_STR, _NUMBER, STR, *_USAGE_COLUMNS, STR, INT),
    *(OPT_INT, _OPT_NUMBER, _OPT_NUMBER, OPT_INT, STR),
)
_COMPACTION_COLUMNS: Table = (_COMPACTION_KIND, _OPT_NUMBER, OPT_STR, OPT_INT, OPT_INT, LIST)
_USAGE_AT = 4  # where a call's usage starts among its columns
_AFTER_USAGE = _USAGE_AT + len(_USAGE_COLUMNS)
# A record's fields in their order (the order its class takes them in).
_usage_fields = attrgetter(*(f.name for f in fields(Usage)))
_compaction_fields = attrgetter(*(f.name for f in fields(Compaction)))


@dataclass(frozen=True)
class CachedCallsSource:
    """A pipeline source of sessions at `Detail.CALLS`, read from or written to the disk
    cache (`cache_dir`; None: no cache). A unit reloaded without calls seen elsewhere (the
    rare cross-unit duplicate) is loaded afresh and not cached."""

    cache_dir: Path | None

    def __call__(self, unit: LoadUnit, exclude: frozenset[int]) -> Loaded[Session]:
        load = RawSource(Detail.CALLS)
        if self.cache_dir is None or exclude:
            return load(unit, exclude)
        entry = Entry.of(self.cache_dir, unit, CALLS_FORMAT, _CALLS, "calls")
        why = None
        try:
            cached = entry.read(_sessions)
        except Damaged as exc:
            why = str(exc)
        else:
            if cached is not None:
                return Loaded(*cached)
        loaded = load(unit, exclude)
        entry.write(loaded.skips, _tables(loaded.sessions))
        if why is not None:
            note_rebuilt(loaded.skips, entry.path, why)
        return loaded


def _tables(sessions: list[Session]) -> list[list[list[Any]]]:
    threads = [t for s in sessions for t in s.threads]
    compactions: list[tuple[Any, ...]] = []

    def row(c: Compaction | None) -> int | None:
        if c is None:
            return None
        compactions.append(_compaction_fields(c))
        return len(compactions) - 1

    calls = [
        [
            c.message_id,
            c.request_id,
            c.timestamp_s,
            c.model,
            *_usage_fields(c.usage),
            c.source.file,
            c.source.line,
            row(c.compaction),
            c.sent_s,
            c.done_s,
            row(c.pruned),
            c.provider,
        ]
        for t in threads
        for c in t.calls
    ]
    return [
        columns(
            [[s.session_id, s.project, s.cwd, s.files, len(s.threads)] for s in sessions],
            _SESSION_COLUMNS,
        ),
        columns([[t.thread_id, t.kind, len(t.calls)] for t in threads], _THREAD_COLUMNS),
        columns(calls, _CALL_COLUMNS),
        columns(compactions, _COMPACTION_COLUMNS),
    ]


def _sessions(
    names: dict[str, str], sessions: Any, threads: Any, calls: Any, compactions: Any
) -> list[Session]:
    """The tables back as records, every file named as this run spells it (`names`)."""
    compaction = checked(compactions, _COMPACTION_COLUMNS)
    compaction[5] = [tuple(strings(ids)) for ids in compaction[5]]
    # A call's compaction: a row of the table, or None (KeyError for any other number).
    made: dict[int | None, Compaction | None] = {None: None}
    made.update(enumerate(starmap(Compaction, zip(*compaction, strict=True))))
    by_row = made.__getitem__
    call = checked(calls, _CALL_COLUMNS)
    rename = names.get
    # Column by column (checked() made them one length), each record made in one C-level
    # pass: 4.8% fewer instructions reading 150 units' entries than a row at a time.
    files = [rename(f, f) for f in call[_AFTER_USAGE]]
    records = list(
        map(
            Call,
            *call[:_USAGE_AT],
            starmap(Usage, zip(*call[_USAGE_AT:_AFTER_USAGE], strict=True)),
            repeat(()),
            map(SourceRef, files, call[_AFTER_USAGE + 1]),
            map(by_row, call[_AFTER_USAGE + 2]),
            call[_AFTER_USAGE + 3],
            call[_AFTER_USAGE + 4],
            map(by_row, call[_AFTER_USAGE + 5]),
            call[_AFTER_USAGE + 6],
        )
    )
    thread = checked(threads, _THREAD_COLUMNS)
    # Only threads with calls are loaded, and a session starts at its first call.
    thread[2] = groups(records, thread[2], least=1)
    session = checked(sessions, _SESSION_COLUMNS)
    session[3] = [tuple(rename(f, f) for f in strings(files)) for files in session[3]]
    session[4] = groups(list(starmap(Thread, zip(*thread, strict=True))), session[4], least=1)
    return list(starmap(Session, zip(*session, strict=True)))
