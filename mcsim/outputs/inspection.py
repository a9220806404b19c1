"""An inspection from its typed configuration to its written outputs: what `mcsim inspect`
does, for any Python caller. Apart from mcsim.outputs.runs (the replay's commands) so that
an inspection imports nothing of the replay, which a warm `inspect` would spend a tenth of
its time on (docs/performance.md#warm-runs).

    with inspect_run(InspectConfig(paths=(...,), out_dir=Path("november"))) as report:
        ...  # its sessions are read back from disk as they are iterated, until the block ends

Everything a configuration can get wrong (a price file, the cache folder, an output folder
that may not be written) is refused before any transcript is read; a run that reads no API
call raises mcsim.errors.NoCallsError, which carries what was skipped.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, tzinfo
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from mcsim.errors import NoCallsError
from mcsim.ingest.pipeline import ProgressFn, day_range
from mcsim.outputs.run_dir import cache_folder, checked_out_dir

if TYPE_CHECKING:
    from mcsim.accounting.recorded import InspectReport


@dataclass(frozen=True, kw_only=True)
class ReadInputs:
    """What a command that reads transcripts without a policy file takes (inspect, advise)."""

    paths: tuple[str, ...] = ()  # files, folders, globs, s3:// gs:// URLs; () = the defaults
    out_dir: Path | None = None  # inspect: None writes nothing; advise: its default folder
    force: bool = False
    since: datetime | None = None
    until: datetime | None = None
    prices_path: Path | None = None
    cache_dir: Path | None = None
    use_cache: bool = True
    workers: int | None = None
    engine: str = "local"
    ray_address: str | None = None


@dataclass(frozen=True, kw_only=True)
class InspectConfig(ReadInputs):
    """`mcsim inspect`: the recorded usage, exactly; tables written when `out_dir` is given."""

    by: str = "session"  # day, week, month, model, project or session
    timezone: tzinfo = field(default=UTC)  # the days, weeks and months are this zone's
    project: str | None = None  # only projects whose folder name matches this glob


class DatedInputs(Protocol):
    """What `date_options` reads of a command's configuration."""

    @property
    def since(self) -> datetime | None: ...
    @property
    def until(self) -> datetime | None: ...
    @property
    def prices_path(self) -> Path | None: ...


def date_options(config: DatedInputs) -> dict[str, str | None]:
    """The dates and price file a run was given, as run.json's `options` records them."""
    return {
        "since": str(config.since) if config.since else None,
        "until": str(config.until) if config.until else None,
        "prices": str(config.prices_path) if config.prices_path else None,
    }


@contextmanager
def inspect_run(
    config: InspectConfig, progress: ProgressFn | None = None
) -> Iterator[InspectReport]:
    """Account the recorded usage under PATHS, write the tables when asked, and hand the
    report over while its sessions, breaks and calls can still be read back from disk (they
    go to a spool as they arrive, so memory stays flat: the report is only valid inside the
    block). An input without a single API call is NoCallsError, after the block ran (the
    caller may show what was skipped first)."""
    from mcsim.accounting.prices import load_table
    from mcsim.accounting.recorded import inspect_usage, needs_calls
    from mcsim.ingest.engines import open_engine
    from mcsim.ingest.spool import Spool
    from mcsim.outputs.inspect_tables import inspect_run_record, write_inspect_tables

    since_s, until_s = day_range(config.since, config.until)
    prices = load_table(config.prices_path)
    cache = cache_folder(config.use_cache, config.cache_dir)
    out_dir = config.out_dir
    if out_dir is not None:
        out_dir = checked_out_dir(out_dir, config.force, config.paths, cache)
    with Spool("inspect", out_dir) as spool:
        engine = open_engine(config.engine, address=config.ray_address, workers=config.workers)
        with engine as runner:
            report = inspect_usage(
                list(config.paths), prices, since_s=since_s, until_s=until_s,
                workers=config.workers, progress=progress, engine=runner,
                keep_calls=out_dir is not None,  # calls.parquet
                project=config.project, spool=spool,
                by_time=(config.by, config.timezone) if needs_calls(config.by) else None,
                cache_dir=cache,
            )  # fmt: skip
        if out_dir is not None and report.sessions:  # an input with no call writes nothing
            options = {
                **date_options(config),
                **({"project": config.project} if config.project is not None else {}),
            }
            run = inspect_run_record(report, list(config.paths), options)
            write_inspect_tables(report, out_dir, config.force, run)
        yield report
    if not report.sessions:
        raise NoCallsError(report.stats, "account")
