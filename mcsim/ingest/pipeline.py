"""Load many transcripts on all cores: plan units, map a function over their sessions.

Units (a project folder for Claude Code) are loaded in worker processes, and the per-session
work (`fn`) runs there too, so only its small result crosses back to the parent: shipping
whole sessions between processes costs as much as parsing them. Results stream back one
unit at a time, so memory follows the largest unit rather than the corpus.

Calls are de-duplicated inside a unit by the loader. A call that also appears in an earlier
unit (a resumed session copied into another project folder: rare) is detected from the keys
each result carries; that unit is then loaded again in the parent without the calls already
seen, so the first unit in the fixed order wins and nothing is counted twice. The calls seen
are kept where the engine keeps them (`Engine.seen_calls`): in this process on the local
engine, sharded across actors on Ray, so that no step gathers the corpus's calls on the driver.

A unit's results may be kept (`memo`: mcsim.replay.result_cache): while its files are as they
were, the unit is neither loaded nor fn run again; once they changed (a transcript grew), it
is loaded again but fn runs only on the sessions whose content changed. `in_worker` runs where
fn does, on each result on its way back: work the parent would otherwise do alone, while the
workers wait on it.
"""

from __future__ import annotations

import fnmatch
import hashlib
from array import array
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Generic, NamedTuple, Protocol, TypeVar

from mcsim.errors import UsageError
from mcsim.ingest.discovery import discover
from mcsim.ingest.engines import Engine, LocalEngine
from mcsim.ingest.loaders import Detail, LoadUnit, get_loader, plan_units
from mcsim.model import Session, SkipReport
from mcsim.processes import STOP
from mcsim.text import from_fs

ProgressFn = Callable[[int, int], None]  # (bytes done, bytes total)


def day_range(since: datetime | None, until: datetime | None) -> tuple[float | None, float | None]:
    """--since and --until as the `since_s` and `until_s` every load takes: the first moment
    of the one day and the last of the other, in seconds (UTC)."""
    if since and until and since > until:
        raise UsageError("--since is after --until")
    start = None if since is None else since.replace(tzinfo=UTC).timestamp()
    # In seconds, not dates: the day after 9999-12-31 is past what a date can hold.
    end = None if until is None else until.replace(tzinfo=UTC).timestamp() + 86_400 - 1e-6
    return start, end


CallKey = tuple[str, str | None]
T = TypeVar("T")


@dataclass
class LoadStats:
    """What a load read and what it could not use."""

    files: int = 0
    bytes: int = 0
    files_skipped_by_date: int = 0
    unrecognised_files: int = 0
    duplicate_calls: int = 0
    sessions_outside_dates: int = 0
    files_skipped_by_project: int = 0
    # skipped-line examples left out because their file only holds sessions outside the dates
    examples_outside_dates: int = 0
    skips: SkipReport = field(default_factory=SkipReport)
    inputs: list[tuple[str, int]] = field(default_factory=list)  # (path, bytes) of every file


class HasCalls(Protocol):
    """What the pipeline needs of a session, raw (Session) or calibrated (CalSession)."""

    @property
    def call_keys(self) -> list[CallKey]: ...

    @property
    def call_counts(self) -> list[int]: ...

    @property
    def start_s(self) -> float | None: ...

    @property
    def files(self) -> tuple[str, ...]: ...


S = TypeVar("S", bound=HasCalls)


@dataclass
class Loaded(Generic[S]):
    """A unit's sessions from a `SessionSource`, with its skip report. `keep` writes them
    where the source keeps what it loads (its cache; None: nowhere): the pipeline calls it
    only when no memo keeps the unit's results, which a later run reads instead, so a unit
    costs one cache entry, not two (docs/performance.md#targets)."""

    sessions: list[S]
    skips: SkipReport
    excluded_calls: int = 0
    keep: Callable[[], None] | None = None


class SessionSource(Protocol[S]):
    """Turns a unit into sessions, leaving out calls already seen elsewhere (picklable)."""

    def __call__(self, unit: LoadUnit, exclude: frozenset[int]) -> Loaded[S]: ...


@dataclass(frozen=True)
class RawSource:
    """Sessions straight from the unit's loader, at the given detail."""

    detail: Detail

    def __call__(self, unit: LoadUnit, exclude: frozenset[int]) -> Loaded[Session]:
        loaded = get_loader(unit.loader).load(unit, self.detail)
        if not exclude:
            return Loaded(loaded.sessions, loaded.skips)
        kept, dropped = without_calls(loaded.sessions, exclude)
        return Loaded(kept, loaded.skips, dropped)


def call_digest(key: CallKey) -> int:
    """A call's key in 64 bits: what a run keeps of every call it has seen, to count each
    once across units. A tuple of two id strings costs about 10 times more memory (the driver
    grew with the corpus: docs/performance.md#measured-reasons); with 1.5 million calls (20 GB)
    the chance that two calls share a digest is about 1e-7."""
    message, request = key
    text = message if request is None else f"{message}\0{request}"
    data = text.encode("utf-8", "surrogatepass") + (b"\1" if request is None else b"\2")
    return int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "little")


def without_calls(sessions: list[Session], keys: frozenset[int]) -> tuple[list[Session], int]:
    """The sessions without the calls whose `call_digest` is in `keys` (sessions left empty
    are dropped)."""
    kept = []
    dropped = 0
    for session in sessions:
        threads = []
        for thread in session.threads:
            calls = tuple(c for c in thread.calls if call_digest(c.key) not in keys)
            dropped += len(thread.calls) - len(calls)
            if calls:
                threads.append(replace(thread, calls=calls))
        if threads:
            kept.append(replace(session, threads=tuple(threads)))
    return kept, dropped


class SessionResult(NamedTuple, Generic[T]):
    """What one session of a unit came to: all a job needs to send, whether fn ran or not."""

    start_s: float
    files: tuple[str, ...]
    digests: array[int]  # its calls' `call_digest`s
    counts: array[int]  # ... and their counts
    result: T  # fn's


class SessionOutcome(NamedTuple, Generic[T]):
    """A session's calls' `call_digest`s and counts (packed: cheaper to send and to read back
    than the id strings, and hashed in the worker, not in the parent), and fn's result."""

    digests: array[int]
    counts: array[int]
    result: T


@dataclass
class UnitResults(Generic[T]):
    """Every session of a unit as `SessionResult`, with the unit's skip report: what a memo keeps.
    `keys`: each session's `UnitMemo.key`. `current`: kept for the unit's files as they are
    now; if not (a transcript grew), only the results of sessions whose key is unchanged are
    taken, and the unit is loaded again."""

    sessions: list[SessionResult[T]]
    skips: SkipReport
    keys: list[str] = field(default_factory=list)
    current: bool = True


class Lookup(NamedTuple, Generic[T]):
    """What a memo found for a unit (`UnitMemo.get`): its results (kept for other states of
    its files: not `current`), or None; the memo files that could not be used, with why (the
    caller notes them once the unit is loaded); and the state of the unit's files as looked
    up, before the load (what `put` keeps the results under)."""

    results: UnitResults[T] | None
    unusable: list[tuple[Path, str]]
    state: str


class UnitMemo(Protocol[T]):
    """fn's results kept per unit (picklable), so that a unit whose files and fn are as they
    were is not loaded again (mcsim.replay.result_cache)."""

    def get(self, unit: LoadUnit) -> Lookup[T]:
        """What is kept for the unit (`Lookup`)."""
        ...

    def key(self, session: Any) -> str:
        """A hash of everything of SESSION that fn reads: a session of the same key has the
        same result."""
        ...

    def kept_bytes(self, unit: LoadUnit) -> int | None:
        """The size of the results kept for the unit (looked up, not read), what serving it
        reads; None when none are kept: the unit will be loaded and fn run."""
        ...

    def put(self, unit: LoadUnit, state: str, results: UnitResults[T]) -> None:
        """Keep the unit's results for its files in STATE (from `get`): a file written to
        while the unit was replayed (a live session) then makes the next run miss."""
        ...


@dataclass(frozen=True)
class _Job(Generic[S, T]):
    """Everything a worker needs for one unit (picklable: fn must be a module-level callable)."""

    unit: LoadUnit
    source: SessionSource[S]
    fn: Callable[[S], T]
    since_s: float | None
    until_s: float | None
    exclude: frozenset[int] = frozenset()  # call digests
    memo: UnitMemo[T] | None = None
    in_worker: Callable[[T], T] | None = None


@dataclass
class _UnitOutput(Generic[T]):
    results: list[SessionOutcome[T]]
    skips: SkipReport
    outside_dates: int = 0
    excluded_calls: int = 0
    examples_outside_dates: int = 0
    served: bool = False  # by the memo: the unit was neither loaded nor fn run


def _run_job(job: _Job[S, T]) -> _UnitOutput[T]:
    memo = job.memo if not job.exclude else None  # a reload without some calls: not kept
    kept_results, unusable, state = memo.get(job.unit) if memo is not None else Lookup(None, [], "")
    if kept_results is not None and kept_results.current:
        inside, outside = [], []
        for done_session in kept_results.sessions:
            if _outside(job, done_session.start_s):
                outside.append(done_session.files)
            else:
                inside.append(done_session)
        out = _output(inside, outside, kept_results.skips, job.in_worker)
        out.served = True
        return out
    # Kept for other states of the unit's files (a transcript grew): the results of its
    # sessions that did not change are taken as they are, by their key (none without keys).
    earlier = {}
    if kept_results is not None:
        earlier = dict(
            zip(kept_results.keys, (d.result for d in kept_results.sessions), strict=False)
        )
    loaded = job.source(job.unit, job.exclude)
    done: list[SessionResult[T]] = []
    keys: list[str] = []
    outside = []  # the files of each session outside the dates
    for session in loaded.sessions:
        STOP.check()  # in a worker STOP is not installed: only the serial run checks
        start = session.start_s
        assert start is not None  # loaders only produce sessions with calls
        if _outside(job, start):
            outside.append(session.files)
            continue
        digests = array("Q", map(call_digest, session.call_keys))
        key = memo.key(session) if memo is not None else ""
        result = earlier.pop(key) if key in earlier else job.fn(session)
        counts = array("q", session.call_counts)
        done.append(
            SessionResult(
                start_s=start, files=session.files, digests=digests, counts=counts, result=result
            )
        )
        keys.append(key)
    # Kept only whole (a result for every session), and never with a note of a rebuilt cache
    # entry: the next run would repeat it. `put` writes at once: the notes below are not kept.
    if memo is not None and not outside and not loaded.skips.notes["cache_entry_rebuilt"]:
        memo.put(job.unit, state, UnitResults(done, loaded.skips, keys))
    elif loaded.keep is not None:
        loaded.keep()
    for path, why in unusable:
        loaded.skips.note(from_fs(str(path)), 0, "cache_entry_rebuilt", why)
    out = _output(done, outside, loaded.skips, job.in_worker)
    out.excluded_calls = loaded.excluded_calls
    return out


def _outside(job: _Job[Any, Any], start: float) -> bool:
    """Whether a session starting at `start` is outside the job's --since/--until."""
    return (job.since_s is not None and start < job.since_s) or (
        job.until_s is not None and start > job.until_s
    )


def _output(
    done: list[SessionResult[T]],
    outside: list[tuple[str, ...]],
    skips: SkipReport,
    in_worker: Callable[[T], T] | None,
) -> _UnitOutput[T]:
    """A unit's output: the results of its sessions within the dates (each through
    `in_worker`), and its skip report without the examples of files that hold only sessions
    outside them (`outside`: the files of each of those sessions)."""
    results = [
        SessionOutcome(d.digests, d.counts, d.result if in_worker is None else in_worker(d.result))
        for d in done
    ]
    out = _UnitOutput(results, skips, len(outside))
    inside = {f for d in done for f in d.files}
    out.examples_outside_dates = _drop_examples(skips, {f for o in outside for f in o} - inside)
    return out


def _drop_examples(skips: SkipReport, files: set[str]) -> int:
    """Leave out the skipped-line examples from FILES (those whose sessions are all outside
    --since/--until); the counts by reason still cover every line read. A file without any
    session (wholly broken, say) cannot be dated, so its examples stay. How many were left out."""
    if not files:
        return 0
    kept = [e for e in skips.examples if e.file not in files]
    dropped = len(skips.examples) - len(kept)
    skips.examples = kept
    return dropped


def _identity(session: Session) -> Session:
    return session


def map_sessions(
    paths: Sequence[str],
    fn: Callable[[S], T],
    *,
    source: SessionSource[S] | None = None,
    since_s: float | None = None,
    until_s: float | None = None,
    workers: int | None = None,
    progress: ProgressFn | None = None,
    stats: LoadStats | None = None,
    project: str | None = None,
    engine: Engine | None = None,
    memo: UnitMemo[T] | None = None,
    in_worker: Callable[[T], T] | None = None,
    on_first_load: Callable[[], None] | None = None,
) -> Iterator[T]:
    """fn(session) for every session under PATHS that starts within [since_s, until_s].

    `project` is an fnmatch glob (case-sensitive) on the project folder name: units of other
    projects are not read at all.

    `source` turns each unit into sessions (default: the raw loaded sessions with item
    sizes). `fn` and `source` run in worker processes, so they must be picklable (module-level
    functions, functools.partial, or dataclass instances). `engine` runs the units (default:
    a LocalEngine with `workers` processes; `workers` is ignored when an engine is given).
    `memo` keeps each unit's results, and gives them back while the unit's files are as
    they were: fn is not run again (nor is the unit loaded). `in_worker` runs where fn does,
    on each result on its way here (after the memo keeps it): work the receiver would
    otherwise do on a single core. `on_first_load` is called once the run knows it has a unit to
    load (to get ready for what follows, e.g. import what draws the charts): at once when
    the largest unit has no results kept (a first run), else when the first unit the memo
    did not serve arrives; never on a run the memo serves whole.
    Raises InputNotFoundError before anything else when PATHS match nothing.
    """
    stats = stats if stats is not None else LoadStats()
    found = discover(paths, since_s)
    units = plan_units(found.files)
    files = set(found.files)
    if project is not None:
        other = {f for u in units if not project_matches(u, project) for f in u.files}
        units = [u for u in units if project_matches(u, project)]
        stats.files_skipped_by_project = len(other)
        files -= other
    planned = {f for u in units for f in u.files}
    stats.files = len(planned)
    stats.files_skipped_by_date = found.skipped_by_date
    stats.unrecognised_files = len(files) - len(planned)
    for path in sorted(files - planned):
        stats.skips.add(from_fs(str(path)), 0, "unrecognised_file", "not a known transcript format")
    for path, what in found.not_regular:
        stats.skips.add(from_fs(str(path)), 0, "not_regular_file", what)
    stats.bytes = sum(u.size_bytes for u in units)
    stats.inputs = sorted((from_fs(str(f)), _size(f)) for f in planned)
    # Largest first balances the cores; the order is fixed, so results are deterministic.
    units.sort(key=lambda u: (-u.size_bytes, u.key))
    src: SessionSource[Any] = source if source is not None else RawSource(Detail.SIZES)
    jobs = [_Job(u, src, fn, since_s, until_s, memo=memo, in_worker=in_worker) for u in units]
    engine = engine if engine is not None else LocalEngine(workers)
    return _collect(jobs, engine, progress, stats, on_first_load)


def project_matches(unit: LoadUnit, pattern: str) -> bool:
    """Whether a unit's project folder name (Session.project) matches an fnmatch glob,
    case-sensitively on every platform."""
    return fnmatch.fnmatchcase(from_fs(Path(unit.key).name), pattern)


def _collect(
    jobs: list[_Job[Any, T]],
    engine: Engine,
    progress: ProgressFn | None,
    stats: LoadStats,
    on_first_load: Callable[[], None] | None = None,
) -> Iterator[T]:
    total = stats.bytes
    done = 0
    first = jobs[0] if jobs else None  # the largest unit: its results come first
    if (
        on_first_load is not None
        and first is not None
        and (first.memo is None or first.memo.kept_bytes(first.unit) is None)
    ):
        on_first_load()  # it will be loaded: the run has work to do from the start
        on_first_load = None
    with engine.seen_calls() as seen:  # every call so far (its call_digest), with its counts
        outputs = engine.map_units(jobs, _run_job, _work(jobs))
        for job, output in zip(jobs, outputs, strict=True):
            STOP.check()
            if on_first_load is not None and not output.served:
                on_first_load()
                on_first_load = None
            digests = _joined(o.digests for o in output.results)
            repeated = seen.find(digests)
            if repeated:
                first_pass = output.skips
                _note_conflicts(job, repeated, stats, first_pass)
                output = _run_job(replace(job, exclude=frozenset(repeated)))
                # The reload reads no cache: the entries the first pass found unusable (and
                # rebuilt) are noted from its report, or they would go uncounted.
                for e in first_pass.examples:
                    if e.reason == "cache_entry_rebuilt":
                        output.skips.note(e.file, e.line, e.reason, e.detail)
                stats.duplicate_calls += output.excluded_calls
                digests = _joined(o.digests for o in output.results)
            stats.skips.merge(output.skips)
            stats.sessions_outside_dates += output.outside_dates
            stats.examples_outside_dates += output.examples_outside_dates
            done += job.unit.size_bytes
            if progress is not None:
                progress(done, total)
            # The re-run's calls, not the first run's without the repeats: leaving calls out
            # moves a session's start, which may take it into or out of --since/--until.
            seen.add(digests, _joined((o.counts for o in output.results), "q"))
            for outcome in output.results:
                yield outcome.result


def _work(jobs: list[_Job[Any, Any]]) -> int:
    """The bytes the jobs will read: a unit's transcripts, or what its memo keeps for it when
    it keeps any. A warm `inspect` reads kept analyses a fraction of its transcripts' size,
    which one process reads faster than workers that then send the results to it (the local
    engine's threshold, engines/local.py; docs/performance.md#warm-runs)."""
    total = 0
    for job in jobs:
        kept = job.memo.kept_bytes(job.unit) if job.memo is not None else None
        total += job.unit.size_bytes if kept is None else kept
    return total


def _joined(parts: Iterable[array[int]], typecode: str = "Q") -> array[int]:
    out = array(typecode)
    for part in parts:
        out.extend(part)
    return out


def _note_conflicts(
    job: _Job[Any, Any], repeated: dict[int, int], stats: LoadStats, first_pass: SkipReport
) -> None:
    """Note each call of the job's unit that an earlier unit also holds with other counts
    (the earlier one stands): a copy must bill what its original billed. `repeated`: the
    earlier counts of the unit's calls an earlier unit holds. The unit is read once more
    here for the calls' ids (the workers send only digests): copies across project folders
    are rare. That read goes through the source's cache: an entry it finds unusable is kept
    again and counted, unless the unit's first pass (`first_pass`, its report) counted it."""
    loaded = job.source(job.unit, frozenset())
    if loaded.skips.notes["cache_entry_rebuilt"]:
        if loaded.keep is not None:
            loaded.keep()
        noted = {e.file for e in first_pass.examples if e.reason == "cache_entry_rebuilt"}
        for e in loaded.skips.examples:
            if e.reason == "cache_entry_rebuilt" and e.file not in noted:
                stats.skips.note(e.file, e.line, e.reason, e.detail)
    for session in loaded.sessions:
        for key, count in zip(session.call_keys, session.call_counts, strict=True):
            earlier = repeated.get(call_digest(key))
            if earlier is not None and earlier != count:
                stats.skips.note(
                    from_fs(job.unit.key),
                    0,
                    "conflicting_usage",
                    f"call {key[0][:40]} bills other counts than its copy in an earlier "
                    "project folder, which stands",
                )


def iter_sessions(
    paths: Sequence[str],
    *,
    detail: Detail = Detail.SIZES,
    since_s: float | None = None,
    until_s: float | None = None,
    workers: int | None = None,
    progress: ProgressFn | None = None,
    stats: LoadStats | None = None,
) -> Iterator[Session]:
    """Every session under PATHS, de-duplicated, filtered to those starting in [since, until]."""
    return map_sessions(
        paths,
        _identity,
        source=RawSource(detail),
        since_s=since_s,
        until_s=until_s,
        workers=workers,
        progress=progress,
        stats=stats,
    )


def load_sessions(
    paths: Sequence[str], *, detail: Detail = Detail.SIZES, workers: int | None = None
) -> tuple[list[Session], LoadStats]:
    """All sessions under PATHS as a list, with the load statistics (for scripts and tests)."""
    stats = LoadStats()
    sessions = list(iter_sessions(paths, detail=detail, workers=workers, stats=stats))
    return sessions, stats


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0
