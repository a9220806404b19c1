"""A replay, a sweep or a cache advice from its typed configuration to its written outputs:
what `mcsim replay`, `mcsim sweep` and `mcsim advise cache` do, for any Python caller
(`mcsim inspect`'s is mcsim.outputs.inspection, which imports nothing of the replay).

    from mcsim.outputs.runs import ReplayConfig, replay_run
    run = replay_run(ReplayConfig(paths=("~/.claude/projects",), policy="claude-code"))
    run.report.baseline...; run.out_dir  # reports/<UTC time>-claude-code/

Everything a configuration can get wrong (a policy file, a price file, the cache folder, an
output folder that may not be written) is refused before any transcript is read; a run that
reads no API call raises mcsim.errors.NoCallsError, which carries what was skipped. The
command line only parses options into a configuration, calls one of these, and renders.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mcsim.accounting.prices import PriceTable
from mcsim.errors import NoCallsError
from mcsim.ingest.pipeline import ProgressFn, day_range
from mcsim.outputs.inspection import ReadInputs, date_options
from mcsim.outputs.run_dir import cache_folder, checked_out_dir
from mcsim.replay import run as replay_core  # run_replay read at call time (tests stand in for it)
from mcsim.replay.presets import PolicySource, resolve_policy
from mcsim.replay.refetch import DEFAULT_MAX_RISK
from mcsim.replay.run import DEFAULT_FIDELITY_THRESHOLD, RECORDED, ReplayReport
from mcsim.replay.scenario import Scenario, baseline, load_policy_file
from mcsim.tuning import importing_tables

if TYPE_CHECKING:  # (the sweep needs numpy: imported by `sweep_run`, after the workers fork)
    from mcsim.replay.advise import CacheAdvice
    from mcsim.replay.sweep import Outcome, Recommendation


@dataclass(frozen=True, kw_only=True)  # by name: a dozen options of like types
class RunInputs:
    """What a replay or a sweep reads, and how: the options both commands share."""

    paths: tuple[str, ...] = ()  # files, folders, globs, s3:// gs:// URLs; () = the defaults
    policy: str = "claude-code"  # a policy file, or a built-in preset's name
    out_dir: Path | None = None  # None: reports/<UTC time>-<policy file or preset name>/
    force: bool = False  # replace an existing run folder mcsim wrote
    since: datetime | None = None  # sessions starting on or after this day (UTC)
    until: datetime | None = None  # ... on or before this day
    prices_path: Path | None = None  # a price file laid over the built-in tables
    cache_dir: Path | None = None  # None: $MCSIM_CACHE_DIR or the platform's cache folder
    use_cache: bool = True  # False: neither read nor write the cache (--no-cache)
    workers: int | None = None  # processes (default: all cores)
    engine: str = "local"  # or "ray"
    ray_address: str | None = None  # with engine "ray": a cluster to join


@dataclass(frozen=True, kw_only=True)
class ReplayConfig(RunInputs):
    """`mcsim replay`: every policy of the file beside the recording and the baselines."""

    fidelity_threshold: float = DEFAULT_FIDELITY_THRESHOLD  # a fraction (0.05 = 5%)


@dataclass(frozen=True, kw_only=True)
class SweepConfig(RunInputs):
    """`mcsim sweep`: variants of one policy over a grid, and a recommendation."""

    grids: tuple[str, ...] = ()  # KEY=VALUES, as --grid takes them
    name: str | None = None  # the policy to sweep (needed when the file holds several)
    max_risk: float = DEFAULT_MAX_RISK  # a fraction of cleared results


@dataclass(frozen=True, kw_only=True)
class AdviseConfig(ReadInputs):
    """`mcsim advise cache`: the cheapest of no change, 5m, 1h and keep-warm pings; `out_dir`
    None writes reports/<UTC time>-advise-cache/."""


@dataclass(frozen=True)
class ReplayRun:
    report: ReplayReport
    out_dir: Path


@dataclass(frozen=True)
class SweepRun:
    report: ReplayReport
    results: list[Outcome]
    recommendation: Recommendation
    out_dir: Path
    run: dict[str, Any]  # what run.json holds


def replay_run(config: ReplayConfig, progress: ProgressFn | None = None) -> ReplayRun:
    """Replay every session under PATHS under each policy of the file, and write the run
    folder: tables, run.json and charts (see docs/replay.md)."""
    from mcsim.outputs.charts import ChartProcess
    from mcsim.outputs.replay_tables import run_record, write_replay_outputs
    from mcsim.outputs.rows_sink import RowsSink

    prepared = _prepare(config)
    scenarios = prepared.scenarios
    out_dir = prepared.out_dir
    # The per-call rows go to disk as the sessions arrive (the driver's memory stays flat).
    with RowsSink([RECORDED, *(s.name for s in scenarios)], out_dir) as sink:
        # Imports matplotlib while the replay runs, once a unit is replayed (a run served by
        # the result cache may find its charts kept too: mcsim.outputs.chart_cache).
        charts = ChartProcess()
        try:
            report = _replayed(
                config, prepared, scenarios, "replay", progress, sink=importing_tables(sink),
                in_worker=sink.packer(local=config.engine == "local"),
                fidelity_threshold=config.fidelity_threshold, on_first_load=charts.warm,
            )  # fmt: skip
            options = {
                **date_options(config),
                "fidelity_threshold": config.fidelity_threshold,
            }
            run = run_record(report, list(config.paths), prepared.source.path, options,
                             prepared.source.preset)  # fmt: skip
            write_replay_outputs(report, out_dir, config.force, run, charts, sink,
                                 prepared.cache)  # fmt: skip
        finally:
            charts.close()
    return ReplayRun(report, out_dir)


@dataclass(frozen=True)
class AdviseRun:
    report: ReplayReport
    advice: CacheAdvice
    out_dir: Path


def advise_run(config: AdviseConfig, progress: ProgressFn | None = None) -> AdviseRun:
    """Replay every session under the cache variants the advisor weighs (no pruning), advise,
    and write the run folder: the replay's tables and charts, advice.json, idle_gaps.png and
    run.json with the advice (so `mcsim report` shows it). See docs/advise.md."""
    from mcsim.accounting.prices import load_table
    from mcsim.outputs.advise_tables import advice_json, idle_gaps_chart
    from mcsim.outputs.replay_tables import run_summary, write_replay_outputs
    from mcsim.outputs.run_dir import run_header, write_json
    from mcsim.replay.advise import advise, cache_variants, variant_scenarios

    dates = day_range(config.since, config.until)
    prices = load_table(config.prices_path)
    cache = cache_folder(config.use_cache, config.cache_dir)
    out_dir = config.out_dir
    if out_dir is None:
        out_dir = Path("reports") / f"{datetime.now(UTC).strftime('%Y%m%d-%H%M%S')}-advise-cache"
    out_dir = checked_out_dir(out_dir, config.force, config.paths, cache)

    def replayed(openai_only: bool) -> tuple[ReplayReport, list[Any]]:
        from mcsim.ingest.engines import open_engine

        variants = cache_variants(openai_only)
        runs = variant_scenarios(variants, openai_only)
        with open_engine(config.engine, address=config.ray_address,
                         workers=config.workers) as runner:  # fmt: skip
            report = replay_core.run_replay(list(config.paths), runs, prices, cache_dir=cache,
                                since_s=dates[0], until_s=dates[1], workers=config.workers,
                                progress=progress, engine=runner)  # fmt: skip
        if not report.sessions:
            raise NoCallsError(report.stats, "advise on")
        return report, variants

    report, variants = replayed(False)
    # On OpenAI's cache the choice is in-memory or 24h retention: weighed on an input of
    # OpenAI recordings only (a mixed input keeps Anthropic's choices; the notes say so).
    openai_only = set(report.providers) == {"openai"}
    if openai_only:
        report, variants = replayed(True)
    advice = advise(report, variants, prices, openai_only)
    doc = advice_json(advice)
    run = {
        **run_header(list(config.paths), report.stats),
        "command": "advise cache",
        "scenarios": [{"name": s.name, "description": s.describe()} for s in report.scenarios],
        "price_table": report.price_table,
        "options": date_options(config),
        "notes": ["output tokens are taken as recorded (a lower bound)",
                  *report.provider_notes()],
        **run_summary(report),
        "cache_advice": doc,
    }  # fmt: skip
    extra = {
        "advice.json": lambda p: write_json(p, doc),
        "idle_gaps.png": lambda p: idle_gaps_chart(advice, p),
    }
    write_replay_outputs(report, out_dir, config.force, run, None, None, cache, extra)
    return AdviseRun(report, advice, out_dir)


def sweep_run(config: SweepConfig, progress: ProgressFn | None = None) -> SweepRun:
    """Replay variants of one policy over the grid, recommend one, and write the run folder:
    sweep.parquet, the two charts and run.json (see docs/sweep.md)."""
    from mcsim.outputs.replay_tables import run_record
    from mcsim.outputs.sweep_tables import sweep_json, write_sweep_outputs
    from mcsim.replay.sweep import build_variants, outcomes, parse_axis, pick_policy, recommend

    day_range(config.since, config.until)  # refused first, as the command line does
    source = resolve_policy(config.policy)
    scenarios = load_policy_file(source.path)
    label = f"preset {source.preset}" if source.preset else str(source.path)
    base = pick_policy(scenarios, config.name, label)
    variants = build_variants(base, [parse_axis(g) for g in config.grids])
    prepared = _prepare(config, source, scenarios)
    runs = [baseline(), *(v.scenario for v in variants)]
    report = _replayed(config, prepared, runs, "sweep", progress, keep_rows=False)
    results = outcomes(report, variants)
    rec = recommend(results, config.max_risk)
    # (rounded: 33.3% given as 0.333 is 33.300000000000004% again)
    options = {"policy": base.name, "grid": list(config.grids),
               "max_risk_pct": round(100 * config.max_risk, 9)}  # fmt: skip
    run = run_record(report, list(config.paths), source.path, options, source.preset,
                     with_verdict=False)  # fmt: skip
    out_dir = prepared.out_dir
    run["recommendation"] = sweep_json(report, results, rec, str(out_dir))["recommendation"]
    write_sweep_outputs(report, results, rec, out_dir, config.force, run)
    return SweepRun(report, results, rec, out_dir, run)


@dataclass(frozen=True)
class _Prepared:
    """A configuration checked before any transcript is read."""

    source: PolicySource
    scenarios: list[Scenario]  # the policy file's
    prices: PriceTable
    cache: Path | None
    out_dir: Path
    dates: tuple[float | None, float | None]


def _prepare(
    config: RunInputs,
    source: PolicySource | None = None,
    scenarios: list[Scenario] | None = None,
) -> _Prepared:
    """`config` checked; `source` and `scenarios`: the policy file and its policies where the
    caller has them already."""
    from mcsim.accounting.prices import load_table

    dates = day_range(config.since, config.until)
    source = source or resolve_policy(config.policy)
    if scenarios is None:  # a bad file is refused before the rest is checked
        scenarios = load_policy_file(source.path)
    prices = load_table(config.prices_path)
    cache = cache_folder(config.use_cache, config.cache_dir)
    out_dir = config.out_dir
    if out_dir is None:
        stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
        out_dir = Path("reports") / f"{stamp}-{source.path.stem}"
    out_dir = checked_out_dir(out_dir, config.force, config.paths, cache)
    return _Prepared(source, scenarios, prices, cache, out_dir, dates)


def _replayed(
    config: RunInputs,
    prepared: _Prepared,
    scenarios: list[Scenario],
    what: str,
    progress: ProgressFn | None,
    **options: Any,
) -> ReplayReport:
    """The replay behind both: an input without a single API call is `NoCallsError` (`what`
    names the command's job)."""
    from mcsim.ingest.engines import open_engine

    with open_engine(config.engine, address=config.ray_address, workers=config.workers) as runner:
        report = replay_core.run_replay(
            list(config.paths),
            scenarios,
            prepared.prices,
            cache_dir=prepared.cache,
            since_s=prepared.dates[0],
            until_s=prepared.dates[1],
            workers=config.workers,
            progress=progress,
            engine=runner,
            **options,
        )
    if not report.sessions:
        raise NoCallsError(report.stats, what)
    return report
