"""Load many transcripts: plan units, load them on all cores, de-duplicate across units.

Units (a project folder for Claude Code) are loaded in worker processes and streamed back
one at a time, so memory follows the largest unit rather than the corpus. Calls already seen
in an earlier unit are dropped (a resumed session copied into another project folder), and
counted.
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace

from mcsim.discovery import Discovery, discover
from mcsim.loaders import LoadResult, LoadUnit, get_loader, plan_units
from mcsim.model import Session, SkipReport

# Below this many bytes, starting processes costs more than it saves.
_PARALLEL_MIN_BYTES = 16 * 1024 * 1024

ProgressFn = Callable[[int, int], None]  # (bytes done, bytes total)


@dataclass
class LoadStats:
    """What a load read and what it could not use."""

    files: int = 0
    bytes: int = 0
    files_skipped_by_date: int = 0
    unrecognised_files: int = 0
    duplicate_calls: int = 0
    sessions_outside_dates: int = 0
    skips: SkipReport = field(default_factory=SkipReport)


def _load_unit(args: tuple[LoadUnit, bool]) -> LoadResult:
    unit, keep_text = args
    return get_loader(unit.loader).load(unit, keep_text)


def iter_sessions(
    paths: Sequence[str],
    *,
    since_s: float | None = None,
    until_s: float | None = None,
    keep_text: bool = False,
    workers: int | None = None,
    progress: ProgressFn | None = None,
    stats: LoadStats | None = None,
) -> Iterator[Session]:
    """Every session under PATHS, de-duplicated, filtered to those starting in [since, until].

    Raises InputNotFoundError before yielding anything when PATHS match nothing.
    """
    stats = stats if stats is not None else LoadStats()
    found = discover(paths, since_s)
    return _iter(found, since_s, until_s, keep_text, workers, progress, stats)


def _iter(
    found: Discovery,
    since_s: float | None,
    until_s: float | None,
    keep_text: bool,
    workers: int | None,
    progress: ProgressFn | None,
    stats: LoadStats,
) -> Iterator[Session]:
    units = plan_units(found.files)
    planned = sum(len(u.files) for u in units)
    stats.files = planned
    stats.files_skipped_by_date = found.skipped_by_date
    stats.unrecognised_files = len(found.files) - planned
    for path in sorted(set(found.files) - {f for u in units for f in u.files}):
        stats.skips.add(str(path), 0, "unrecognised_file", "not a known transcript format")
    total = sum(u.size_bytes for u in units)
    stats.bytes = total
    # Largest first balances the cores; the order is fixed, so results are deterministic.
    units.sort(key=lambda u: (-u.size_bytes, u.key))
    seen: set[tuple[str, str | None]] = set()
    done = 0
    for unit, result in _load_all(units, keep_text, workers, total):
        stats.skips.merge(result.skips)
        done += unit.size_bytes
        if progress is not None:
            progress(done, total)
        for session in result.sessions:
            kept = _drop_seen(session, seen, stats)
            if kept is None:
                continue
            start = kept.start_s
            assert start is not None
            if (since_s is not None and start < since_s) or (
                until_s is not None and start > until_s
            ):
                stats.sessions_outside_dates += 1
                continue
            yield kept


def _load_all(
    units: list[LoadUnit], keep_text: bool, workers: int | None, total_bytes: int
) -> Iterator[tuple[LoadUnit, LoadResult]]:
    n = workers if workers is not None else (os.cpu_count() or 1)
    n = min(n, len(units))
    if n <= 1 or total_bytes < _PARALLEL_MIN_BYTES:
        for unit in units:
            yield unit, _load_unit((unit, keep_text))
        return
    # fork: workers inherit the imported modules, so starting them costs milliseconds.
    ctx = multiprocessing.get_context("fork")
    with ctx.Pool(n) as pool:
        yield from zip(units, pool.imap(_load_unit, [(u, keep_text) for u in units]), strict=True)


def _drop_seen(
    session: Session, seen: set[tuple[str, str | None]], stats: LoadStats
) -> Session | None:
    """The session without calls an earlier unit already produced; None if nothing is left."""
    threads = []
    changed = False
    for thread in session.threads:
        calls = []
        for call in thread.calls:
            if call.key in seen:
                stats.duplicate_calls += 1
                changed = True
                continue
            seen.add(call.key)
            calls.append(call)
        if calls:
            threads.append(replace(thread, calls=tuple(calls)) if changed else thread)
    if not threads:
        return None
    return replace(session, threads=tuple(threads)) if changed else session


def load_sessions(
    paths: Sequence[str], *, keep_text: bool = False, workers: int | None = None
) -> tuple[list[Session], LoadStats]:
    """All sessions under PATHS as a list, with the load statistics (for scripts and tests)."""
    stats = LoadStats()
    sessions = list(iter_sessions(paths, keep_text=keep_text, workers=workers, stats=stats))
    return sessions, stats
