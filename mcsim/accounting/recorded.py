"""Account recorded usage exactly: tokens by kind, cost, cache efficiency and cache breaks.

`analyse_session` is pure (a Session and a price table in, records out); `inspect_usage`
streams sessions from PATHS through it. This is what `mcsim inspect` shows, and the ground
truth later replays are compared with.
"""

from __future__ import annotations

import contextlib
import hashlib
from array import array
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta, tzinfo
from functools import partial
from pathlib import Path
from typing import NamedTuple, Protocol

from mcsim.accounting.breaks import BreakCause, CacheBreak, detect_breaks_columns, split_drops
from mcsim.accounting.prices import BilledUsage, CallCost, PriceTable
from mcsim.frozen import quick_init
from mcsim.ingest.calls_cache import CachedCallsSource
from mcsim.ingest.codec import Codec
from mcsim.ingest.disk_cache import (
    Damaged,
    Entry,
    Kind,
    code_hash,
    enforce_cap,
    entry_size,
    max_cache_bytes,
    remove_entry,
)
from mcsim.ingest.engines import Engine
from mcsim.ingest.loaders import LoadUnit
from mcsim.ingest.pipeline import (
    LoadStats,
    Lookup,
    ProgressFn,
    SessionResult,
    UnitResults,
    map_sessions,
)
from mcsim.ingest.spool import Spool, Spooled
from mcsim.model import (
    NO_TOKENS,
    Call,
    CompactionKind,
    Session,
    SourceRef,
    Thread,
    ThreadKind,
    Tokens,
    Usage,
)

TTL_SECONDS = {"5m": 300.0, "1h": 3600.0, "24h": 86400.0}  # 24h: OpenAI extended retention


def savings_pct(cost_usd: float, reference_usd: float) -> float:
    """How much cheaper `cost_usd` is than `reference_usd`, in percent (negative: dearer).

    Two totals of the same calls summed in another order differ in the last bits; a
    difference under a billionth of the reference is that, not a saving, and is 0."""
    if not reference_usd:
        return 0.0
    difference = reference_usd - cost_usd
    if abs(difference) <= 1e-9 * abs(reference_usd):
        return 0.0
    return 100 * difference / reference_usd


_ULP = 1 << 1074  # 2**-1074, the smallest float: every finite float is a whole number of them


class ExactSums:
    """Float totals added exactly, by name: the same figures added in any order give the same
    floats, to the last bit.

    A run's totals are added session by session as units arrive, largest unit first, so the
    order follows file sizes: the same sessions converted to another format (other sizes)
    gave totals a few ulps apart (6e-14 in a percentage). Each total is kept as a whole
    number of 2**-1074 (exact for every finite float) and rounded once when added to (about
    a microsecond; a figure of 0 costs nothing)."""

    __slots__ = ("_exact", "_rounded")

    def __init__(self) -> None:
        self._exact: dict[str, int] = {}
        self._rounded: dict[str, float] = {}

    def add(self, name: str, total: float, value: float) -> float:
        """`total + value` exactly rounded, where `total` is what this last returned for
        NAME (any other value, set since by other means, starts the sum again from it)."""
        if not value:
            return total
        exact = self._exact.get(name) if self._rounded.get(name) == total else None
        try:
            if exact is None:
                exact = _whole(total)
            exact += _whole(value)
            rounded = exact / _ULP  # int / int: correctly rounded
        except (OverflowError, ValueError):  # inf or nan, or past the largest float
            self._exact.pop(name, None)
            return total + value
        self._exact[name], self._rounded[name] = exact, rounded
        return rounded


def _whole(value: float) -> int:
    """`value` as a whole number of 2**-1074 (OverflowError, ValueError: inf, nan)."""
    numerator, denominator = value.as_integer_ratio()  # the denominator: a power of two
    return numerator << (1075 - denominator.bit_length())


def recorded_ttl(usage: Usage, previous: str | None) -> str:
    """The TTL a call wrote with: from the 5m/1h split; 5m when the split is absent; the
    thread's previous TTL when the split is present but nothing was written."""
    if usage.cache_write_1h_tokens > 0:
        return "1h"
    if usage.cache_write_5m_tokens > 0 or not usage.has_ttl_split:
        return "5m"
    return previous or "5m"


class RecordedCall(BilledUsage, Protocol):
    """What `account_thread` reads of a recorded call, besides what pricing reads: when it
    was sent and logged, its model and cache read, the TTL it wrote with, whether a
    compaction came before it, and the pruning the recording shows before it (a
    CompactionKind value). A calibrated call (mcsim.replay.calibrate.CalCall) is one; a loaded
    call is read through `LoadedCall`."""

    @property
    def timestamp_s(self) -> float: ...
    @property
    def request_s(self) -> float: ...
    @property
    def model(self) -> str: ...
    @property
    def cache_read_tokens(self) -> int: ...
    @property
    def ttl(self) -> str: ...
    @property
    def compaction(self) -> bool: ...
    @property
    def pruned(self) -> str | None: ...


class LoadedCall(NamedTuple):
    """A loaded call (model.Call) as `account_thread` reads it, with the TTL it wrote with."""

    timestamp_s: float
    request_s: float
    model: str
    cache_read_tokens: int
    ttl: str
    compaction: bool
    pruned: str | None
    tokens: Tokens
    prompt_tokens: int
    speed: str | None
    inference_geo: str | None


def loaded_calls(thread: Thread) -> list[LoadedCall]:
    """A loaded thread's calls as `account_thread` reads them."""
    calls = []
    ttl: str | None = None
    for call in thread.calls:
        usage = call.usage
        ttl = recorded_ttl(usage, ttl)
        pruned = None if call.pruned is None else call.pruned.kind.value
        # (what LoadedCall(...) makes, without its __new__, which is Python: a call a call)
        calls.append(
            _new(LoadedCall, (call.timestamp_s, call.request_s, call.model,
                              usage.cache_read_tokens, ttl, call.compaction is not None, pruned,
                              usage.tokens, usage.prompt_tokens, usage.speed,
                              usage.inference_geo))
        )  # fmt: skip
    return calls


_new = tuple.__new__


@dataclass(frozen=True, slots=True)
class RecordedThread:
    """One thread of a recording accounted: each call's price (None: its model is not in the
    table), the breaks Claude Code's detector reports, by call, and the drops the harness
    announced to it (docs/domain.md#the-cache-break-detector). Inspect and the replay both
    take their recorded figures from `account_thread`, so they cannot differ."""

    costs: list[CallCost | None]
    breaks: dict[int, CacheBreak]
    announced: list[CacheBreak]


def account_thread(calls: Sequence[RecordedCall], prices: PriceTable) -> RecordedThread:
    """Price a recorded thread's calls and find its cache breaks."""
    micro, deletion = CompactionKind.MICROCOMPACT.value, CompactionKind.CACHE_DELETION.value
    drops = detect_breaks_columns(
        [c.request_s for c in calls],
        [c.model for c in calls],
        [c.cache_read_tokens for c in calls],
        [TTL_SECONDS[c.ttl] for c in calls],
        [c.compaction for c in calls],
        [c.pruned == micro for c in calls],
        [c.pruned == deletion for c in calls],
    )
    breaks, announced = split_drops(drops)
    costs = [prices.cost(c.model, c, c.timestamp_s) for c in calls]
    return RecordedThread(costs, {b.call_index: b for b in breaks}, announced)


@dataclass
class UsageGroup:
    """Usage summed over the calls sharing a key (a day, a model, a session...)."""

    key: str
    project: str = ""  # the session's project, for `session` groups only
    calls: int = 0
    sessions: int = 0  # how many sessions have calls in the group
    tokens: Tokens = NO_TOKENS
    cost_usd: float = 0.0  # priced calls only; see unpriced_calls
    unpriced_calls: int = 0
    _sums: ExactSums | None = field(
        default=None, init=False, repr=False, compare=False
    )  # by `merge`

    def add_call(self, usage: Usage, cost: CallCost | None) -> None:
        self.calls += 1
        self.tokens += usage.tokens
        if cost is None:
            self.unpriced_calls += 1
        else:
            self.cost_usd += cost.total_usd

    def merge(self, other: UsageGroup) -> None:
        self.calls += other.calls
        self.sessions += other.sessions
        self.tokens += other.tokens
        self._sums = self._sums or ExactSums()
        self.cost_usd = self._sums.add("cost_usd", self.cost_usd, other.cost_usd)
        self.unpriced_calls += other.unpriced_calls


@quick_init
@dataclass(frozen=True, slots=True)
class CallRecord:
    """One recorded call with its price and cache analysis."""

    session_id: str
    project: str
    thread_id: str
    thread_kind: ThreadKind
    call_index: int  # position in its thread
    call: Call
    cost: CallCost | None  # None: the model is not in the price table
    ttl: str
    gap_seconds: float | None  # since the previous call of the thread
    cache_break: CacheBreak | None

    @property
    def cache_hit_ratio(self) -> float:
        prompt = self.call.usage.prompt_tokens
        return self.call.usage.cache_read_tokens / prompt if prompt else 0.0


@dataclass(frozen=True, slots=True)
class BreakRecord:
    session_id: str
    project: str
    thread_id: str
    timestamp_s: float
    model: str
    cache_break: CacheBreak
    source: SourceRef


@dataclass(frozen=True, slots=True)
class SessionSummary:
    session_id: str
    project: str
    cwd: str | None
    start_s: float
    end_s: float
    calls: int
    threads: int
    models: tuple[str, ...]
    tokens: Tokens
    cost_usd: float  # priced calls only; see unpriced_calls
    unpriced_calls: int
    cache_breaks: int
    compactions: int
    unpriced_models: tuple[tuple[str, int], ...] = ()
    split_mismatch_calls: int = 0
    cache_edit_drops: int = 0  # read drops the recording's own cache edits explain
    cache_drops: int = 0  # every drop in reads, the breaks and those the detector was told of
    recorded_prunes: int = 0  # microcompact boundaries and cache deletions in the recording
    by_model: tuple[UsageGroup, ...] = ()  # per model, by name


@dataclass(frozen=True, slots=True)
class SessionAnalysis:
    summary: SessionSummary
    calls: list[CallRecord] = field(default_factory=list)  # (none: `keep_calls=False`)
    breaks: list[BreakRecord] = field(default_factory=list)


def analyse_session(
    session: Session, prices: PriceTable, keep_calls: bool = True
) -> SessionAnalysis:
    """Price every call of a session and find its cache breaks, thread by thread.

    With `keep_calls=False` the per-call records are not kept (the summary and the breaks
    are all `inspect --json` needs, and they are cheap to send between processes).
    """
    records: list[CallRecord] = []
    breaks: list[BreakRecord] = []
    cost = 0.0
    unpriced: Counter[str] = Counter()
    compactions = prunes = cache_edit_drops = cache_drops = 0
    split_mismatch = 0
    models: dict[str, UsageGroup] = {}
    # Each call's tokens (`LoadedCall.tokens`), in call order: all of them and by model, each
    # list summed once at the end (the same integers `UsageGroup.add_call` adds call by call).
    every: list[Tokens] = []
    by_model: dict[str, list[Tokens]] = {}
    start = end = session.threads[0].calls[0].timestamp_s
    for thread in session.threads:
        loaded = loaded_calls(thread)
        account = account_thread(loaded, prices)
        cache_drops += len(account.breaks) + len(account.announced)
        cache_edit_drops += sum(d.cause is BreakCause.CACHE_EDIT for d in account.announced)
        costs, found = account.costs, account.breaks
        for i, call in enumerate(thread.calls):
            price = costs[i]
            model = call.model
            group = models.get(model)  # (not setdefault: a group made per call)
            if group is None:
                group = models[model] = UsageGroup(model, sessions=1)
                by_model[model] = []
            tokens = loaded[i].tokens
            every.append(tokens)
            by_model[model].append(tokens)
            group.calls += 1  # UsageGroup.add_call, its tokens summed below
            timestamp = call.timestamp_s
            if timestamp < start:
                start = timestamp
            elif timestamp > end:
                end = timestamp
            if price is None:
                group.unpriced_calls += 1
                unpriced[model] += 1
            else:
                total = price.total_usd
                group.cost_usd += total
                cost += total
            if call.compaction is not None:
                compactions += 1
            if call.pruned is not None:
                prunes += 1
            if call.usage.split_mismatch:
                split_mismatch += 1
            brk = found.get(i)
            if keep_calls:
                gap = call.request_s - thread.calls[i - 1].request_s if i else None
                records.append(
                    CallRecord(
                        session.session_id,
                        session.project,
                        thread.thread_id,
                        thread.kind,
                        i,
                        call,
                        price,
                        loaded[i].ttl,
                        gap,
                        brk,
                    )
                )
            if brk is not None:
                breaks.append(
                    BreakRecord(
                        session.session_id,
                        session.project,
                        thread.thread_id,
                        call.timestamp_s,
                        call.model,
                        brk,
                        call.source,
                    )
                )
    for model, group in models.items():
        group.tokens = Tokens.total(by_model[model])
    summary = SessionSummary(
        session_id=session.session_id,
        project=session.project,
        cwd=session.cwd,
        start_s=start,
        end_s=end,
        calls=sum(len(t.calls) for t in session.threads),
        threads=len(session.threads),
        models=tuple(sorted(models)),
        tokens=Tokens.total(every),
        cost_usd=cost,
        unpriced_calls=sum(unpriced.values()),
        cache_breaks=len(breaks),
        compactions=compactions,
        unpriced_models=tuple(sorted(unpriced.items())),
        split_mismatch_calls=split_mismatch,
        cache_edit_drops=cache_edit_drops,
        cache_drops=cache_drops,
        recorded_prunes=prunes,
        by_model=tuple(models[m] for m in sorted(models)),
    )
    return SessionAnalysis(summary, records, breaks)


def _session_order(s: SessionSummary) -> tuple[float, str]:
    return (s.start_s, s.session_id)


def _call_order(r: CallRecord) -> tuple[bool, str, int]:
    """A call's place within its session: the main thread first, then by thread and call."""
    return (r.thread_id != "main", r.thread_id, r.call_index)


def _break_order(b: BreakRecord) -> tuple[float, str]:
    return (b.timestamp_s, b.thread_id)


# A session's calls summed by a time (day, week or month): per key, the sums but the cost,
# and the priced calls' costs in the session's call order, to be added in the report's order.
Periods = dict[str, tuple[UsageGroup, "array[float]"]]


class Listed:
    """Each session's records held in lists (a report without a spool)."""

    def __init__(self) -> None:
        self.sessions: list[SessionSummary] = []
        self.calls: list[CallRecord] = []
        self.breaks: list[BreakRecord] = []
        self.periods: list[Periods] = []

    def add(self, analysis: SessionAnalysis, periods: Periods | None) -> None:
        self.sessions.append(analysis.summary)
        self.calls.extend(analysis.calls)
        self.breaks.extend(analysis.breaks)
        if periods is not None:
            self.periods.append(periods)

    def finish(self) -> Ordered:
        """The lists, in the report's order."""
        order = sorted(range(len(self.sessions)), key=lambda i: _session_order(self.sessions[i]))
        sessions = [self.sessions[i] for i in order]
        periods = [self.periods[i] for i in order] if self.periods else []
        at = {(s.project, s.session_id): i for i, s in enumerate(sessions)}
        self.calls.sort(key=lambda r: (at[(r.project, r.session_id)], *_call_order(r)))
        self.breaks.sort(key=lambda b: (at[(b.project, b.session_id)], *_break_order(b)))
        return sessions, self.calls, self.breaks, periods


class SessionSpool:
    """Each session's summary, breaks and calls, put in a `Spool` as the session arrives and
    read back in the report's order (sessions by start; calls and breaks session by session,
    each session's in the order `InspectReport.finish` gives a list's).

    Keeps per session its start, id and three offsets until `finish`, then the offsets and
    how many breaks and calls each holds: about 150 bytes a session until then, 40 after,
    where the summary alone was about 2 KB.
    """

    def __init__(self, spool: Spool) -> None:
        self.spool = spool
        self._starts = array("d")
        self._ids: list[str] = []
        self._at = array("q")  # per session: its summary's, breaks' and calls' offsets
        self._counts = array("q")  # per session: its breaks, its calls
        self._periods = array("q")  # per session: its Periods' offset (a time view only)

    def add(self, analysis: SessionAnalysis, periods: Periods | None) -> None:
        summary = analysis.summary
        self._starts.append(summary.start_s)
        self._ids.append(summary.session_id)
        self._at.append(self.spool.put(summary))
        breaks, calls = analysis.breaks, analysis.calls  # an empty list is not put
        self._at.append(self.spool.put(sorted(breaks, key=_break_order)) if breaks else -1)
        self._at.append(self.spool.put(sorted(calls, key=_call_order)) if calls else -1)
        self._counts.extend((len(analysis.breaks), len(analysis.calls)))
        if periods is not None:
            self._periods.append(self.spool.put(periods))

    def finish(self) -> Ordered:
        """The sessions, calls, breaks and periods, read from the spool in order."""
        order = sorted(range(len(self._ids)), key=lambda i: (self._starts[i], self._ids[i]))
        self._starts, self._ids = array("d"), []

        def column(values: array[int], index: int, width: int) -> array[int]:
            return array("q", (values[width * i + index] for i in order))

        sessions: Spooled[SessionSummary] = Spooled(self.spool, column(self._at, 0, 3))
        breaks: Spooled[BreakRecord] = Spooled(
            self.spool, column(self._at, 1, 3), column(self._counts, 0, 2)
        )
        calls: Spooled[CallRecord] = Spooled(
            self.spool, column(self._at, 2, 3), column(self._counts, 1, 2)
        )
        periods: Spooled[Periods] = Spooled(
            self.spool, column(self._periods, 0, 1) if self._periods else array("q")
        )
        self._at, self._counts, self._periods = array("q"), array("q"), array("q")
        return sessions, calls, breaks, periods


# A report's records in its order: sessions, calls, breaks, and each session's Periods.
Ordered = tuple[
    Sequence[SessionSummary], Sequence[CallRecord], Sequence[BreakRecord], Sequence[Periods]
]


def _periods(calls: list[CallRecord], by: str, tz: tzinfo) -> Periods:
    """A session's calls summed by BY in TZ, in the session's call order."""
    periods: Periods = {}
    for r in sorted(calls, key=_call_order):
        key = period(r.call.timestamp_s, by, tz)
        if key not in periods:
            periods[key] = (UsageGroup(key, sessions=1), array("d"))
        group, costs = periods[key]
        group.calls += 1
        group.tokens += r.call.usage.tokens
        if r.cost is None:
            group.unpriced_calls += 1
        else:  # added in the report's order, by `_merged`
            costs.append(r.cost.total_usd)
    return periods


@dataclass
class InspectReport:
    """Everything `mcsim inspect` shows, as data.

    Sessions, calls and breaks are lists, or, when the report was made with a `Spool`
    (`inspect_usage(spool=...)`), sequences read back from it: each session's records go to
    disk as it arrives, so the driver holds a few offsets per session, not the records.
    """

    sessions: Sequence[SessionSummary] = field(default_factory=list)
    calls: Sequence[CallRecord] = field(default_factory=list)
    breaks: Sequence[BreakRecord] = field(default_factory=list)
    tokens: Tokens = NO_TOKENS
    cost_usd: float = 0.0
    unpriced_calls: int = 0
    unpriced_models: Counter[str] = field(default_factory=Counter)
    split_mismatch_calls: int = 0
    price_table: str = ""
    stats: LoadStats = field(default_factory=LoadStats)
    by_model: dict[str, UsageGroup] = field(default_factory=dict)
    call_count: int = 0
    break_causes: Counter[str] = field(default_factory=Counter)
    # Where each session's summary, calls and breaks go until `finish` orders them.
    records: Listed | SessionSpool = field(default_factory=Listed, repr=False, compare=False)
    # The run's totals, added exactly: sessions arrive in an order that follows file sizes.
    _sums: ExactSums = field(default_factory=ExactSums, init=False, repr=False, compare=False)
    keep_calls: bool = True  # whether `calls` keeps the calls that arrive
    # (by, tz) of a time view summed as the calls arrive, and its groups once finished.
    by_time: tuple[str, tzinfo] | None = None
    time_groups: list[UsageGroup] | None = None

    @property
    def breaks_by_cause(self) -> dict[str, int]:
        counts = self.break_causes
        return {cause.value: counts[cause.value] for cause in BreakCause if counts[cause.value]}

    def add(self, analysis: SessionAnalysis) -> None:
        periods = _periods(analysis.calls, *self.by_time) if self.by_time else None
        if not self.keep_calls and analysis.calls:
            analysis = replace(analysis, calls=[])
        self.records.add(analysis, periods)
        self.call_count += analysis.summary.calls
        self.break_causes.update(b.cache_break.cause.value for b in analysis.breaks)
        self.tokens += analysis.summary.tokens
        self.cost_usd = self._sums.add("cost_usd", self.cost_usd, analysis.summary.cost_usd)
        self.unpriced_calls += analysis.summary.unpriced_calls
        self.unpriced_models.update(dict(analysis.summary.unpriced_models))
        self.split_mismatch_calls += analysis.summary.split_mismatch_calls
        for group in analysis.summary.by_model:
            self.by_model.setdefault(group.key, UsageGroup(group.key)).merge(group)

    def finish(self) -> None:
        """Order everything by time so outputs do not depend on load order."""
        self.by_model = dict(sorted(self.by_model.items()))
        self.sessions, self.calls, self.breaks, periods = self.records.finish()
        if self.by_time is not None:
            self.time_groups = _merged(periods)


def _merged(periods: Iterable[Periods]) -> list[UsageGroup]:
    """Sessions' Periods, in the report's order, as `_by_time` sums the report's calls: the
    same costs added in the same order, so the same floats."""
    groups: dict[str, UsageGroup] = {}
    for session in periods:
        for key, (part, costs) in session.items():
            group = groups.setdefault(key, UsageGroup(key))
            group.merge(part)
            for cost in costs:
                group.cost_usd += cost
    return [groups[k] for k in sorted(groups)]


# --- analysed sessions kept between runs -------------------------------------------------------

# 1: each session's analysis, with its start, files and calls' digests and counts
ANALYSED_VERSION = 1
_ANALYSED = Kind(6, ANALYSED_VERSION)


@dataclass(frozen=True)
class KeptAnalysis:
    """One session's entry: what the pipeline needs without loading it (`SessionResult`: its start,
    files, its calls' digests and counts) and what `analyse_session` made of it."""

    start: float
    files: tuple[str, ...]
    digests: list[int]
    counts: list[int]
    analysis: SessionAnalysis


# Times are kept as the loader read them (a whole number stays one), and the gaps and break
# times made from them too.
_TIMES = {
    "KeptAnalysis.start", "SessionSummary.start_s", "SessionSummary.end_s",
    "CallRecord.gap_seconds", "BreakRecord.timestamp_s", "CacheBreak.gap_seconds",
    "Call.timestamp_s", "Call.sent_s", "Call.done_s", "Compaction.timestamp_s",
}  # fmt: skip
# By `keep_calls`: without the per-call records an entry has no tables for them (ten empty
# tables less to check per entry, which a warm `inspect --json` reads by the hundred).
_ANALYSED_CODECS = {
    True: Codec(KeptAnalysis, at_least_one={"Thread.calls"}, any_number=_TIMES),
    False: Codec(KeptAnalysis, leave={"SessionAnalysis.calls"}, any_number=_TIMES),
}
_RENAMED = ("KeptAnalysis.files", "SourceRef.file")


def analysis_key(prices: PriceTable, keep_calls: bool) -> str:
    """What a session's analysis depends on besides its calls: the price table (a --prices
    file laid over the shipped ones included), whether per-call records are kept, and
    mcsim's own code."""
    text = repr((code_hash(), prices.version, prices.as_of, prices.models, keep_calls))
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


@dataclass(frozen=True)
class AnalysisCache:
    """A pipeline memo (mcsim.ingest.pipeline.UnitMemo) of analysed sessions, in a cache
    folder, for one price table and `keep_calls` (`analysis_key`): a later `inspect` of the
    unit's files as they are neither loads nor prices them again (docs/performance.md#warm-runs).
    Only an entry made from the files as they are now is served: once a transcript changed
    the unit is loaded again anyway, and analysing it costs little next to that, so no
    session's result is taken from an earlier state (`key` is the same for all, and never
    looked up)."""

    cache_dir: Path
    setup: str
    keep_calls: bool

    @classmethod
    def of(cls, cache_dir: Path, prices: PriceTable, keep_calls: bool) -> AnalysisCache:
        return cls(cache_dir, analysis_key(prices, keep_calls), keep_calls)

    @property
    def _codec(self) -> Codec[KeptAnalysis]:
        return _ANALYSED_CODECS[self.keep_calls]

    def _entry(self, unit: LoadUnit) -> Entry:
        fmt = f"mcsim-analysed/{ANALYSED_VERSION}/{self.setup}"
        return Entry.of(self.cache_dir, unit, fmt, _ANALYSED, "analysed")

    def key(self, session: Session) -> str:
        return ""

    def kept_bytes(self, unit: LoadUnit) -> int | None:
        """The size of the unit's entry (UnitMemo.kept_bytes; disk_cache.entry_size)."""
        return entry_size(self._entry(unit).path, unit)

    def get(self, unit: LoadUnit) -> Lookup[SessionAnalysis]:
        """The unit's analysed sessions if kept for its files as they are (UnitMemo.get). A
        file that cannot be used is removed at once (this run may write none in its place:
        sessions left out by date), and noted by the pipeline once the unit is loaded."""
        entry = self._entry(unit)
        try:
            stored = entry.read(self._codec, _RENAMED)
            if stored is None:
                return Lookup(None, [], entry.stamp)
            # (array refuses what is not a 64-bit integer: digests and counts are hashes)
            done = [
                SessionResult(
                    start_s=k.start,
                    files=k.files,
                    digests=array("Q", k.digests),
                    counts=array("q", k.counts),
                    result=k.analysis,
                )
                for k in stored.records
            ]
            return Lookup(UnitResults(done, stored.skips), [], entry.stamp)
        except Damaged as why:
            unusable = [(entry.path, str(why))]
        except OverflowError:
            unusable = [(entry.path, "unexpected content")]
        with contextlib.suppress(OSError):  # (a file that stays is noted again: no more)
            remove_entry(entry.path)
        return Lookup(None, unusable, entry.stamp)

    def put(self, unit: LoadUnit, state: str, results: UnitResults[SessionAnalysis]) -> None:
        """Write the unit's entry under STATE, the stamp its files had before they were loaded
        (nothing when a file could not be read: disk_cache.Entry.write)."""
        kept = [
            KeptAnalysis(d.start_s, d.files, d.digests.tolist(), d.counts.tolist(), d.result)
            for d in results.sessions
        ]
        self._entry(unit).write(results.skips, self._codec, kept, state)


def inspect_usage(
    paths: Sequence[str],
    prices: PriceTable,
    *,
    since_s: float | None = None,
    until_s: float | None = None,
    workers: int | None = None,
    progress: ProgressFn | None = None,
    keep_calls: bool = True,
    project: str | None = None,
    engine: Engine | None = None,
    spool: Spool | None = None,
    by_time: tuple[str, tzinfo] | None = None,
    cache_dir: Path | None = None,
) -> InspectReport:
    """Load every session under PATHS and account its recorded usage.

    `keep_calls=False` leaves `report.calls` empty, which makes large runs faster when only
    sessions, breaks and totals are wanted (`group_usage` by a time needs the calls).
    `project`: an fnmatch glob on the project folder name; other projects are not read.
    `engine` runs the units (default: local processes; mcsim.ingest.engines.open_engine).
    `spool`: the sessions, calls and breaks go there as they arrive, and the report reads them
    back from it (valid while it is open), rather than holding them all (the command line's
    way: its memory then stays flat as the corpus grows).
    `by_time`: (day, week or month, a time zone) to sum the calls by as they arrive, whether
    or not they are kept: `group_usage` by it then needs no calls.
    `cache_dir`: a folder or object-store prefix where each unit's analysed sessions are
    kept, so a later run with the same price table over unchanged transcripts neither parses
    nor prices them (`AnalysisCache`), or, where those are not kept (a session left out by
    the dates), its loaded calls, so such a run skips parsing them (mcsim.ingest.calls_cache);
    None: no cache.
    """
    cap = max_cache_bytes() if cache_dir is not None else 0  # a bad value fails before work
    report = InspectReport(price_table=prices.version, keep_calls=keep_calls, by_time=by_time)
    if spool is not None:
        report.records = SessionSpool(spool)
    keep = keep_calls or by_time is not None
    analyse = partial(analyse_session, prices=prices, keep_calls=keep)
    memo = None if cache_dir is None else AnalysisCache.of(cache_dir, prices, keep)
    for analysis in map_sessions(
        paths,
        analyse,
        source=CachedCallsSource(cache_dir),  # Detail.CALLS: no conversation content
        memo=memo,
        since_s=since_s,
        until_s=until_s,
        workers=workers,
        progress=progress,
        stats=report.stats,
        engine=engine,
        project=project,
    ):
        report.add(analysis)
    report.finish()
    if cache_dir is not None:
        enforce_cap(cache_dir, cap)
    return report


# The keys `group_usage` groups by; the time ones need the report's calls.
GROUP_KEYS = ("day", "week", "month", "model", "project", "session")
TIME_KEYS = frozenset({"day", "week", "month"})


def needs_calls(by: str) -> bool:
    """Whether grouping by BY needs the per-call records (inspect_usage's keep_calls)."""
    return by in TIME_KEYS


def period(timestamp_s: float, by: str, tz: tzinfo) -> str:
    """The day (2026-01-31), week (the date of its Monday: ISO weeks) or month (2026-01) a
    call falls in, on the clock of TZ."""
    local = datetime.fromtimestamp(timestamp_s, tz).date()
    if by == "day":
        return local.isoformat()
    if by == "week":
        return (local - timedelta(days=local.weekday())).isoformat()
    if by == "month":
        return local.isoformat()[:7]
    raise ValueError(f"not a time grouping: {by}")


def group_usage(report: InspectReport, by: str, tz: tzinfo) -> list[UsageGroup]:
    """The report's usage in rows by BY (one of GROUP_KEYS): sessions in report order, times
    ascending (each call counts in its own day, so a session can span two), models and projects
    by name. Every grouping adds up to the report's totals. TZ only matters for the times."""
    if by == "session":
        return [_of_session(s, s.project) for s in report.sessions]
    if by == "model":
        return list(report.by_model.values())
    if by == "project":
        groups: dict[str, UsageGroup] = {}
        for s in report.sessions:
            groups.setdefault(s.project, UsageGroup(s.project)).merge(_of_session(s))
        return [groups[k] for k in sorted(groups)]
    if by not in TIME_KEYS:
        raise ValueError(f"cannot group by {by!r}; one of {', '.join(GROUP_KEYS)}")
    if report.time_groups is not None and report.by_time == (by, tz):
        return report.time_groups
    if report.sessions and not report.calls:
        raise ValueError("grouping by a time needs the calls: inspect_usage(keep_calls=True)")
    return _by_time(report.calls, by, tz)


def _of_session(s: SessionSummary, project: str = "") -> UsageGroup:
    return UsageGroup(s.session_id, project, s.calls, 1, s.tokens, s.cost_usd, s.unpriced_calls)


def _by_time(calls: Iterable[CallRecord], by: str, tz: tzinfo) -> list[UsageGroup]:
    """`calls` come session by session (a report's do), so a group counts a session when its
    first call in the group comes: keeping every session's name per group grew with the corpus."""
    groups: dict[str, UsageGroup] = {}
    last: dict[str, tuple[str, str]] = {}  # per group, the session of its latest call
    for r in calls:
        key = period(r.call.timestamp_s, by, tz)
        group = groups.setdefault(key, UsageGroup(key))
        group.add_call(r.call.usage, r.cost)
        if last.get(key) != (r.project, r.session_id):
            last[key] = (r.project, r.session_id)
            group.sessions += 1
    return [groups[k] for k in sorted(groups)]
