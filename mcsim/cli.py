"""The `mcsim` command line: parse options, call one library function, render the result.

Library errors (McsimError) become one-line messages with their exit code here and only here.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import click
import orjson

from mcsim import __version__
from mcsim.errors import McsimError

_DATE_FORMATS = ["%Y-%m-%d", "%Y%m%d"]


class _Group(click.Group):
    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except McsimError as exc:
            click.echo(f"Error: {exc}", err=True)
            ctx.exit(exc.exit_code)


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="mcsim")
def cli() -> None:
    """Replay recorded agent transcripts under context-pruning policies.

    Start with `mcsim inspect` to see what your sessions really cost.
    """


def _day_start(value: datetime | None) -> float | None:
    return None if value is None else value.replace(tzinfo=UTC).timestamp()


def _day_end(value: datetime | None) -> float | None:
    if value is None:
        return None
    return (value.replace(tzinfo=UTC) + timedelta(days=1)).timestamp() - 1e-6


@contextmanager
def _progress(enabled: bool) -> Iterator[Callable[[int, int], None] | None]:
    """A progress bar on stderr, only when stderr is a terminal."""
    if not (enabled and sys.stderr.isatty()):
        yield None
        return
    bar: Any = None

    def update(done: int, total: int) -> None:
        nonlocal bar
        if bar is None:
            bar = click.progressbar(length=total, label="reading", file=sys.stderr)
            bar.__enter__()
        bar.update(done - bar.pos)

    try:
        yield update
    finally:
        if bar is not None:
            bar.__exit__(None, None, None)


@cli.command()
@click.argument("paths", nargs=-1)
@click.option(
    "--since",
    type=click.DateTime(_DATE_FORMATS),
    help="Only sessions starting on or after this day (UTC).",
)
@click.option(
    "--until",
    type=click.DateTime(_DATE_FORMATS),
    help="Only sessions starting on or before this day (UTC).",
)
@click.option(
    "--prices",
    "prices_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Price file laid over the built-in table (mcsim format or LiteLLM's JSON).",
)
@click.option(
    "--out",
    "out_dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="Write sessions.parquet, calls.parquet and breaks.parquet here.",
)
@click.option("--force", is_flag=True, help="Replace an existing --out directory.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead of the table.")
@click.option(
    "--workers", type=click.IntRange(min=1), help="Processes to load with (default: all cores)."
)
def inspect(
    paths: tuple[str, ...],
    since: datetime | None,
    until: datetime | None,
    prices_path: Path | None,
    out_dir: Path | None,
    force: bool,
    as_json: bool,
    workers: int | None,
) -> None:
    """Account recorded usage: calls, tokens by kind, cost, cache hit ratio, cache breaks.

    PATHS are transcript files, folders (searched recursively) or globs; with none, Claude
    Code's default locations are read ($CLAUDE_CONFIG_DIR, ~/.claude/projects,
    ~/.config/claude/projects).

    \b
    Example:
      mcsim inspect ~/.claude/projects --since 2026-11-01 --out reports/november
    """
    from mcsim.output import check_out_dir, write_inspect_tables
    from mcsim.prices import load_table
    from mcsim.recorded import inspect_usage
    from mcsim.render import inspect_json, inspect_text

    if since and until and since > until:
        raise click.BadParameter("--since is after --until", param_hint="--since")
    prices = load_table(prices_path)
    if out_dir is not None:
        check_out_dir(out_dir, force)
    with _progress(not as_json) as progress:
        report = inspect_usage(
            list(paths),
            prices,
            since_s=_day_start(since),
            until_s=_day_end(until),
            workers=workers,
            progress=progress,
            keep_calls=out_dir is not None,  # only calls.parquet needs every call
        )
    if out_dir is not None:
        write_inspect_tables(report, out_dir, force)
    if as_json:
        doc = inspect_json(report, str(out_dir) if out_dir else None)
        sys.stdout.buffer.write(orjson.dumps(doc, option=orjson.OPT_INDENT_2) + b"\n")
    else:
        click.echo(inspect_text(report))
        if out_dir is not None:
            click.echo(f"wrote {out_dir}/sessions.parquet, calls.parquet, breaks.parquet")
    if not report.sessions and report.stats.skips.total:
        raise McsimError("no API calls could be read from the input (see skipped lines above)")


def main() -> None:
    cli(prog_name="mcsim")
