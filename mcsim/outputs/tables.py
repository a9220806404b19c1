"""Parquet table plumbing shared by every command's tables.

Every table has a `schema_version` column; the schemas are documented in docs/output-schema.md
and checked by tests, so downstream notebooks can rely on them. Polars is imported here only,
so commands that write no tables never pay for it.
"""

from __future__ import annotations

import io
import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

# 2 (2026-12-01): inspect's sessions.parquet `models` is a list column, no longer a
# comma-separated string; replay's tables gained cache_edit_drops (summary) and inspect's
# sessions cache_edit_drops and recorded_prunes.
# 3 (2026-12-01): sweep.parquet gained net_savings_low_pct / net_savings_high_pct (the 95%
# bootstrap interval) and one typed `param_<key>` column per swept key.
# 4 (2026-12-01): replay's calls, sessions and breaks tables are Parquet datasets partitioned
# by policy (`calls.parquet/policy_index=0/part-0.parquet`), each policy's rows in the order
# the single file had them.
# 5 (2026-12-03): the baseline is always no pruning under the cache as recorded (a file whose
# defaults set another TTL adds `baseline:ttl=1h`); summary.parquet gained cache, baseline,
# saved_usd, net_saved_usd, the net savings interval, net_savings_if_edits_reread_pct and
# verdict; sweep.parquet net_saved_usd and baseline.
# 6 (2026-12-03): summary.parquet and sweep.parquet gained refetch_unassessed (cleared results
# whose re-use cannot be told); refetch_risk is hazards over the assessed ones, null when none.
# 7 (2026-12-03): cache breaks are counted as Claude Code's detector reports them: a drop the
# harness announced (a compaction, its own rewrite, a cache edit) is not a break; replay's
# summary.parquet and inspect's sessions.parquet gained cache_drops (every drop), calls.parquet
# break_cause names the cause of any drop (is_break: reported), breaks.parquet `expected`
# means explained (all but prefix_changed and unknown) and unexpected_breaks counts the rest;
# summary.parquet also gained net_savings_if_other_cleared_set_pct (a policy with API context
# editing under the other reading of its undocumented cleared-set rule).
# 8 (2026-12-03): keep-warm pings (a scenario's `keep_warm`): calls.parquet gained pings (sent
# in the idle gap before the call) and ping_cost_usd (their cost; cost_usd stays the call's
# own), summary.parquet pings and ping_cost_usd (part of its cost_usd).
# 9 (2026-12-03): each keep-warm ping is also a row of its own in calls.parquet (`ping` true,
# before the call after its gap, with its time, tokens and cost); the agent's calls have
# `ping` false.
SCHEMA_VERSION = 9
TS = "datetime"
# The partition key of a replay's datasets: the policy's place in the run (0 the recording,
# then the baseline and the policy file's order), not its name. A name may hold characters a
# file system does not keep apart (case on macOS and Windows, `/`, `=`), and a number zero-
# padded to one width makes every reader list the partitions in the run's order.
PARTITION_KEY = "policy_index"
PART_FILE = "part-0.parquet"


def frame(rows: list[dict[str, Any]], schema: dict[str, str]) -> Any:
    """A DataFrame with the documented dtypes, even when there are no rows."""
    import polars as pl

    dtypes: dict[str, Any] = {
        "str": pl.String,
        "int": pl.Int64,
        "float": pl.Float64,
        "bool": pl.Boolean,
        "list[str]": pl.List(pl.String),
        TS: pl.Datetime("ms", "UTC"),
    }
    full: dict[str, Any] = {"schema_version": pl.Int32, **{k: dtypes[v] for k, v in schema.items()}}
    for row in rows:
        row["schema_version"] = SCHEMA_VERSION
    return pl.DataFrame(rows, schema=full, orient="row" if not rows else None)


def partition(table: Path, index: int, count: int) -> Path:
    """The file holding policy number INDEX's rows (of COUNT) in the dataset TABLE, its
    folder made: `calls.parquet/policy_index=03/part-0.parquet`. The key is in the folder
    name only, never in the file (Spark refuses a column that is both)."""
    width = len(str(max(count - 1, 0)))
    path = table / f"{PARTITION_KEY}={index:0{width}d}" / PART_FILE
    path.parent.mkdir(parents=True)
    return path


def by_policy(frame: Any, policies: Sequence[str]) -> Iterator[tuple[int, Any]]:
    """Each of POLICIES' rows of a table with a `policy` column: (its index, its rows)."""
    import polars as pl

    for index, name in enumerate(policies):
        yield index, frame.filter(pl.col("policy") == name)


def write_dataset(frame: Any, table: Path, policies: Sequence[str]) -> None:
    """A table with a `policy` column as a dataset partitioned by policy: one file for each
    of POLICIES (the run's, in order), empty for a policy without rows, so every reader finds
    the schema and every policy."""
    for index, rows in by_policy(frame, policies):
        write_parquet(rows, partition(table, index, len(policies)))


def write_parquet(frame: Any, path: Path) -> None:
    """A table to a file. Polars encodes it in memory and the file is written here, so a full
    disk fails as an OSError with the system's reason (writing a small table itself, polars
    reports the failed write of its footer as "Invalid thrift: transport error"). The encoded
    table is compressed: far smaller than the frame already in memory."""
    buffer = io.BytesIO()
    frame.write_parquet(buffer)
    with open(path, "wb") as fh:
        fh.write(buffer.getbuffer())


def write_part(frame: Any, path: Path) -> None:
    """A part of a table that `concat_parts` joins later: Arrow IPC, uncompressed, cheaper to
    write and to read back than Parquet (the replay's part files cost 0.18 s less CPU on the
    523 MB replica); the table written from it is the same."""
    frame.write_ipc(path, compression="uncompressed")


def concat_parts(
    parts: Sequence[Path | Any], path: Path, schema: dict[str, str], group_rows: int | None = None
) -> None:
    """The parts, in order, streamed into one table: part files (Parquet, or Arrow IPC from
    `write_part`: `.arrow`; removed, one Parquet part renamed), or frames still in memory
    (an Arrow part not written: `.arrow` parts may be either, the frames first); an empty
    table when there are none. `group_rows`: rows per row group (None: polars' default, which
    buffered all 145,000 rows of inspect's calls table on 2 GB of transcripts, 37 MB, before
    writing). The same bytes whichever way each part was kept (tested)."""
    import polars as pl

    if not parts:
        write_parquet(frame([], schema), path)
        return
    files = [p for p in parts if isinstance(p, Path)]
    ipc = not files or files[0].suffix == ".arrow"
    if len(parts) == 1 and not ipc:
        files[0].rename(path)
        return
    if len(parts) == 1:  # as the frame itself would have been (read whole: not mapped)
        part = parts[0]
        write_parquet(pl.read_ipc(io.BytesIO(part.read_bytes())) if files else part, path)
    elif not ipc:
        pl.scan_parquet(files, glob=False).sink_parquet(path, row_group_size=group_rows)
    else:
        held = [p.lazy() for p in parts if not isinstance(p, Path)]
        scans = [pl.scan_ipc(files, glob=False)] if files else []
        pl.concat([*held, *scans], rechunk=False).sink_parquet(path, row_group_size=group_rows)
    for part in files:
        os.remove(part)
