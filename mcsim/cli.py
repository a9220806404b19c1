"""The `mcsim` command line: parse options, call one library function, render the result.

Library errors (McsimError) become one-line messages with their exit code here and only here.
"""

from __future__ import annotations

import contextlib
import errno
import math
import os
import re
import signal
import sys
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, NoReturn, TypeVar

import click

from mcsim import __version__
from mcsim.errors import McsimError, NoCallsError
from mcsim.ingest.storage import ObjectPath, is_url
from mcsim.processes import STOP, Stopped
from mcsim.text import MESSAGE_LIMIT, counted, fit_lines, printable, terminal_width
from mcsim.tuning import tune

# mcsim.replay.sweep.DEFAULT_MAX_RISK in percent; not imported here: `inspect` starts light.
MAX_RISK_DEFAULT_PCT = 50.0

_DATE_FORMATS = ["%Y-%m-%d", "%Y%m%d"]


class _Parsed(click.Command):
    """A command whose option and argument errors are told on one line (`_UsageLine`)."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        try:
            with _stdout():  # --help and --version print here, before any command runs
                return super().parse_args(ctx, args)
        except McsimError as exc:  # raised before `_Group.invoke`, which tells the others
            _tell(ctx, exc)
        except click.exceptions.NoArgsIsHelpError:
            raise  # a group called alone: its help, whole, as click shows it
        except click.UsageError as exc:
            raise _UsageLine(exc, ctx) from None


class _Command(_Parsed):
    """A command that Ctrl-C stops like SIGINT, even when polars raises KeyboardInterrupt for
    it (polars catches Ctrl-C too) before the handler in `main` runs."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt as exc:
            if not STOP.installed():
                raise
            raise STOP.stopped(signal.SIGINT) from exc


class _UsageLine(click.UsageError):
    """A usage error (an unknown or missing option, a bad value) told on one line, with where
    to read the options, instead of click's four (usage, hint, blank line, error).

    `ctx`: the command being parsed, for errors click's parser raises without one (an option
    missing its value), which would lack the pointer to --help."""

    def __init__(self, error: click.UsageError, ctx: click.Context | None = None) -> None:
        super().__init__(error.format_message(), error.ctx or ctx)

    def show(self, file: Any = None) -> None:
        where = f" See '{self.ctx.command_path} --help'." if self.ctx is not None else ""
        # click puts some parts on a line of their own, indented ("Choose from:\n\tinterchange")
        message = re.sub(r"\s*\n\s*", " ", self.format_message().strip())
        message = printable(message, limit=MESSAGE_LIMIT)
        if where and not message.endswith((".", "?", "!")):  # "extra argument (x)": one stop
            message += "."
        click.echo(f"Error: {message}{where}", file=file, err=file is None)


def _tell(ctx: click.Context, exc: McsimError) -> NoReturn:
    """A library error as its one line, and its exit code."""
    # Messages quote paths and values read from files: shown on one line, harmless.
    click.echo(f"Error: {printable(exc, limit=MESSAGE_LIMIT)}", err=True)
    ctx.exit(exc.exit_code)


class _Group(_Parsed, click.Group):
    command_class = _Command
    group_class = type  # `cache`, a group of this class too

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except click.UsageError as exc:  # no such command, or an error a command raised
            if isinstance(exc, _UsageLine | click.exceptions.NoArgsIsHelpError):
                raise  # told on one line already, or a group's help
            raise _UsageLine(exc, ctx) from None
        except McsimError as exc:
            if STOP.signum is not None:  # an error the stop caused (a write cut short)
                raise STOP.stopped(STOP.signum) from exc
            _tell(ctx, exc)


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="mcsim")
def cli() -> None:
    """Replay recorded agent transcripts under context-pruning policies.

    Start with `mcsim inspect` to see what your sessions really cost.
    """


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


F = TypeVar("F", bound=Callable[..., Any])


def _input_options(fn: F) -> F:
    """PATHS and the options every reading command shares."""
    options = [
        click.argument("paths", nargs=-1),
        click.option(
            "--since",
            type=click.DateTime(_DATE_FORMATS),
            help="Only sessions starting on or after this day (UTC).",
        ),
        click.option(
            "--until",
            type=click.DateTime(_DATE_FORMATS),
            help="Only sessions starting on or before this day (UTC).",
        ),
        click.option(
            "--prices",
            "prices_path",
            type=click.Path(dir_okay=False, path_type=Path),
            help="Price file laid over the built-in table (mcsim format or LiteLLM's JSON).",
        ),
        click.option("--force", is_flag=True, help="Replace an existing --out directory."),
        click.option(
            "--json", "as_json", is_flag=True, help="Print one JSON object instead of the table."
        ),
        click.option(
            "--workers",
            type=click.IntRange(min=1),
            help="Processes to load with (default: all cores).",
        ),
    ]
    for option in reversed(options):
        fn = option(fn)
    return fn


def _engine_options(fn: F) -> F:
    """--engine and --ray-address, for the commands that load transcripts."""
    fn = click.option(
        "--ray-address",
        metavar="ADDRESS",
        help="With --engine ray: a running Ray cluster to join (`auto` finds one); "
        "default: a local Ray started for the run.",
    )(fn)
    return click.option(
        "--engine",
        type=click.Choice(["local", "ray"]),
        default="local",
        show_default=True,
        help="Where units are loaded and replayed: local processes, or Ray tasks "
        "(pip install 'mcsim[ray]').",
    )(fn)


def _dates(since: datetime | None, until: datetime | None) -> tuple[float | None, float | None]:
    """--since and --until as seconds (mcsim.ingest.pipeline.day_range), refused as the
    option they are when they cross."""
    from mcsim.ingest.pipeline import day_range

    if since and until and since > until:
        raise click.BadParameter("--since is after --until", param_hint="--since")
    return day_range(since, until)


# orjson escapes C0 controls but writes C1 controls (U+0080-U+009F, which some terminals obey
# as 8-bit escape sequences) and bidi/zero-width format characters as they are. Written as
# \u escapes instead, the JSON means the same and is harmless on a terminal.
_JSON_UNSAFE = re.compile(  # their UTF-8 forms: C1, soft hyphen, bidi marks and embeddings,
    # zero-width and invisible characters, line/paragraph separators, byte-order mark
    rb"\xc2[\x80-\x9f\xad]|\xd8\x9c|\xe1\xa0\x8e|\xe2\x80[\x8b-\x8f\xa8-\xae]"
    rb"|\xe2\x81[\xa0-\xaf]|\xef\xbb\xbf"
)


class _PathOrUrl(click.Path):
    """click.Path that keeps an s3:// or gs:// URL whole (a Path would merge its slashes)."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, str) and is_url(value):
            return ObjectPath.from_url(value)
        return super().convert(value, param, ctx)


@contextmanager
def _stdout() -> Iterator[None]:
    """Write to stdout: a closed pipe (`mcsim ... | head`) is left to click, which ends the run
    quietly with exit 1; any other failure (a full disk) is one line and exit 1."""
    try:
        yield
    except OSError as exc:
        if exc.errno == errno.EPIPE:
            raise
        _discard_stdout()
        raise McsimError(f"cannot write to standard output: {exc.strerror or exc}") from exc


def _discard_stdout() -> None:
    """Point stdout at the null device, as Python's documentation advises for a closed pipe:
    what is still buffered is then dropped at exit instead of failing again there (the
    interpreter would print that failure and exit 120)."""
    with contextlib.suppress(OSError, ValueError):  # no descriptor (a test runner's stdout)
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)


def _echo(text: str) -> None:
    with _stdout():
        # On a terminal, long lines wrap at its width (tables fit it already); piped, as is.
        click.echo(fit_lines(text, terminal_width()))  # flushes: a failure is met here


def _echo_lines(lines: Iterable[str]) -> None:
    """`_echo` of the lines, one at a time."""
    columns = terminal_width()
    with _stdout():
        for line in lines:
            click.echo(fit_lines(line, columns))


def _as_yaml(value: Any) -> Any:
    """A parameter's default as a policy file spells it (false, not Python's False)."""
    if value is None:
        return "none"
    return str(value).lower() if isinstance(value, bool) else value


def _print_json(doc: dict[str, Any]) -> None:
    from mcsim.outputs.run_dir import json_stream

    with _stdout():
        for piece in json_stream(doc):  # the longest lists are never held as text whole
            if not piece.isascii():  # every sequence it escapes is multi-byte
                piece = _JSON_UNSAFE.sub(lambda m: b"\\u%04x" % ord(m.group(0).decode()), piece)
            sys.stdout.buffer.write(piece)
        sys.stdout.buffer.write(b"\n")
        # Now, not at exit: the interpreter would report a failure there as a traceback.
        sys.stdout.buffer.flush()


def _finite(ctx: click.Context, param: click.Parameter, value: float | None) -> float | None:
    """Refuse nan and the infinities in a float option: nan passes click's range test and
    fails every comparison, so a gate given nan would pass whatever the result."""
    if value is not None and not math.isfinite(value):
        raise click.BadParameter(f"{value} is not a finite number.", ctx, param)
    return value


def _timezone(ctx: click.Context, param: click.Parameter, value: str) -> tuple[str, Any]:
    """An IANA zone name, with its tzinfo."""
    from zoneinfo import ZoneInfo

    try:
        return value, ZoneInfo(value)
    except (ValueError, OSError, KeyError):  # ZoneInfoNotFoundError is a KeyError
        raise click.BadParameter(f"unknown time zone {value!r}", ctx, param) from None


# --cache-dir and --no-cache: where loaded (inspect) and calibrated (replay, sweep) sessions
# are kept between runs.
_CACHE_OPTIONS = [
    click.option(
        "--cache-dir",
        type=_PathOrUrl(file_okay=False, path_type=Path),
        help="Where loaded sessions are cached, a folder or an s3:// gs:// prefix "
        "(default: $MCSIM_CACHE_DIR or the platform's user cache folder, ~/.cache/mcsim "
        "on Linux).",
    ),
    click.option("--no-cache", is_flag=True, help="Neither read nor write the session cache."),
]


def _cache_options(fn: F) -> F:
    for option in reversed(_CACHE_OPTIONS):
        fn = option(fn)
    return fn


def _out_option(help: str, required: bool = False) -> Callable[[F], F]:
    """--out DIR: a folder, or an s3:// gs:// prefix (checked by check_out_dir, in one line)."""
    return click.option(
        "--out", "out_dir", required=required, type=_PathOrUrl(path_type=Path), help=help
    )


def _replay_options(fn: F) -> F:
    """Options shared by the commands that replay: policy file, cache, run directory, gates."""
    options = [
        click.option(
            "--policy",
            "policy_file",
            required=True,
            # A directory is refused by load_policy_file, in one line like every bad file.
            # Kept as typed (not a Path): `./claude-code` is a path, `claude-code` a preset.
            help="YAML policy file, or a built-in preset's name (see `mcsim policies`).",
        ),
        _out_option(
            "Run directory to write (default: reports/<UTC time>-<policy or preset name>)."
        ),
        *_CACHE_OPTIONS,
        click.option(
            "--fail-under-savings",
            type=float,
            callback=_finite,
            metavar="PCT",
            help="Exit 1 if savings vs no pruning, net of re-fetches, fall below PCT percent.",
        ),
        click.option(
            "--fail-over-risk",
            type=click.FloatRange(min=0),
            callback=_finite,
            metavar="PCT",
            help="Exit 1 if the re-fetch risk exceeds PCT percent of cleared results.",
        ),
    ]
    for option in reversed(options):
        fn = option(fn)
    return fn


@contextmanager
def _no_calls_told(as_json: bool) -> Iterator[None]:
    """An input without a single API call: what was skipped goes to stderr (the terminal
    summary's notes), then the error."""
    try:
        yield
    except NoCallsError as exc:
        if not as_json:
            from mcsim.outputs.terminal import load_notes

            for line in load_notes(exc.stats):
                click.echo(line, err=True)
        raise


def _gate(
    checks: list[tuple[str, float, float]],
    fail_under_savings: float | None,
    fail_over_risk: float | None,
) -> None:
    """(what, net savings %, risk share) per checked result; exit 1 on the first failure."""
    for what, savings, risk in checks:
        if fail_under_savings is not None and savings < fail_under_savings:
            raise McsimError(
                f"{what} saves {savings:+.2f}% net of re-fetches, under --fail-under-savings "
                f"{fail_under_savings:g}%"
            )
        if fail_over_risk is not None and 100 * risk > fail_over_risk:
            raise McsimError(
                f"{what} has a re-fetch risk of {100 * risk:.1f}%, over --fail-over-risk "
                f"{fail_over_risk:g}%"
            )


@cli.command()
@_input_options
@_engine_options
@_out_option("Write sessions.parquet, calls.parquet, breaks.parquet and run.json here.")
@_cache_options
@click.option(
    "--by",
    type=click.Choice(["day", "week", "month", "model", "project", "session"]),
    default="session",
    show_default=True,
    help="Rows by this key, with a TOTAL row. day/week/month follow each call's own time "
    "(a session over midnight splits) in --timezone; weeks start on Monday (ISO weeks).",
)
@click.option(
    "--timezone",
    "tz_name",
    default="UTC",
    show_default=True,
    callback=_timezone,
    help="IANA time zone (e.g. Europe/Paris) for --by day/week/month.",
)
@click.option(
    "--project",
    help="Only project folders whose name matches this glob (fnmatch: * ? [..]; "
    "case-sensitive); others are not read.",
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
    engine: str,
    ray_address: str | None,
    by: str,
    tz_name: tuple[str, Any],
    project: str | None,
    cache_dir: Path | None,
    no_cache: bool,
) -> None:
    """Account recorded usage: calls, tokens by kind, cost, cache hit ratio, cache breaks.

    PATHS are transcript files, folders (searched recursively), globs or s3:// gs:// URLs;
    with none, Claude Code's default locations ($CLAUDE_CONFIG_DIR, ~/.claude/projects,
    ~/.config/claude/projects) and Codex's ($CODEX_HOME/sessions, ~/.codex/sessions) are read.

    \b
    Example:
      mcsim inspect ~/.claude/projects --since 2026-11-01 --out reports/november
    """
    from mcsim.accounting.recorded import group_usage
    from mcsim.outputs.inspection import InspectConfig, inspect_run
    from mcsim.outputs.json_documents import inspect_json
    from mcsim.outputs.terminal import grouped_text, inspect_lines, load_notes

    _dates(since, until)
    config = InspectConfig(
        paths=paths, out_dir=out_dir, force=force, since=since, until=until,
        prices_path=prices_path, cache_dir=cache_dir, use_cache=not no_cache, workers=workers,
        engine=engine, ray_address=ray_address, by=by, timezone=tz_name[1], project=project,
    )  # fmt: skip
    with contextlib.ExitStack() as bar, inspect_run(config, bar.enter_context(
        _progress(not as_json)
    )) as report:  # fmt: skip
        bar.close()  # the progress bar ends before anything is printed
        wrote = out_dir is not None and bool(report.sessions)
        rows = group_usage(report, by, tz_name[1])
        if as_json:
            where = str(out_dir.expanduser()) if wrote and out_dir is not None else None
            _print_json(inspect_json(report, where, (by, tz_name[0], rows), lazy=True))
        elif not report.sessions:  # no table of zeros: what was skipped, then the error
            for line in load_notes(report.stats):
                click.echo(line, err=True)
        else:
            if by == "session":
                _echo_lines(inspect_lines(report))  # a line per session: never held whole
            else:
                _echo(grouped_text(report, by, tz_name[0], rows))
            if wrote and out_dir is not None:
                _echo(
                    f"wrote {printable(out_dir.expanduser())}/sessions.parquet, calls.parquet, "
                    "breaks.parquet, run.json"
                )


@cli.command()
@_input_options
@_engine_options
@_replay_options
@click.option(
    "--fidelity-threshold",
    # A fraction, where the gates take percent: so over 1 (100%) is refused, not taken to
    # mean a threshold nothing reaches (5 would be 500% and label no session, silently).
    type=click.FloatRange(min=0, max=1),
    callback=_finite,
    default=0.05,
    show_default=True,
    metavar="FRACTION",
    help="Per-session replay error above which results are labelled, as a fraction (0.05 = 5%).",
)
def replay(
    paths: tuple[str, ...],
    since: datetime | None,
    until: datetime | None,
    prices_path: Path | None,
    force: bool,
    as_json: bool,
    workers: int | None,
    engine: str,
    ray_address: str | None,
    policy_file: str,
    out_dir: Path | None,
    cache_dir: Path | None,
    no_cache: bool,
    fail_under_savings: float | None,
    fail_over_risk: float | None,
    fidelity_threshold: float,
) -> None:
    """Replay sessions under each policy of a policy file, beside the recording and a
    no-pruning baseline: cost, savings, cleared tokens, cache breaks, fidelity.

    Writes summary/sessions/calls/breaks Parquet tables, run.json and PNG charts to the run
    directory, and prints a summary table.

    \b
    Example:
      mcsim replay ~/.claude/projects --policy claude-code
    """
    from mcsim.accounting.recorded import savings_pct
    from mcsim.outputs.replay_tables import replay_json, replay_text
    from mcsim.outputs.runs import ReplayConfig, replay_run
    from mcsim.replay.scenario import is_baseline

    _dates(since, until)
    config = ReplayConfig(
        paths=paths, policy=policy_file, out_dir=out_dir, force=force, since=since,
        until=until, prices_path=prices_path, cache_dir=cache_dir, use_cache=not no_cache,
        workers=workers, engine=engine, ray_address=ray_address,
        fidelity_threshold=fidelity_threshold,
    )  # fmt: skip
    with _progress(not as_json) as progress, _no_calls_told(as_json):
        run = replay_run(config, progress)
    report = run.report
    if as_json:
        _print_json(replay_json(report, str(run.out_dir)))
    else:
        _echo(replay_text(report))
        _echo(
            f"wrote {printable(run.out_dir)}/ (summary, sessions, calls, breaks .parquet; "
            "run.json; charts)"
        )
    base = report.baseline.cost_usd
    checks = [
        (
            f"policy {s.name}",
            savings_pct(s.totals.net_cost_usd, base),
            s.totals.refetch_risk,
        )
        for s in report.summaries()
        if not is_baseline(s.name)
    ]
    _gate(checks, fail_under_savings, fail_over_risk)


@cli.command()
@_input_options
@_engine_options
@_replay_options
@click.option(
    "--name", "policy_name", help="The policy to sweep (needed when the file holds several)."
)
@click.option(
    "--grid",
    "grids",
    multiple=True,
    required=True,
    metavar="KEY=VALUES",
    help="A parameter and its values: lists (5m,1h), ranges (1..20) or stepped ranges "
    "(0..120:15); `kind.param` picks a layer of a stack; `ttl` is the cache TTL. Repeatable.",
)
@click.option(
    "--max-risk",
    type=click.FloatRange(min=0, max=100),
    callback=_finite,
    default=MAX_RISK_DEFAULT_PCT,
    show_default=True,
    metavar="PCT",
    help="Highest re-fetch risk (percent of cleared results) a recommendation may have.",
)
def sweep(
    paths: tuple[str, ...],
    since: datetime | None,
    until: datetime | None,
    prices_path: Path | None,
    force: bool,
    as_json: bool,
    workers: int | None,
    engine: str,
    ray_address: str | None,
    policy_file: str,
    out_dir: Path | None,
    cache_dir: Path | None,
    no_cache: bool,
    fail_under_savings: float | None,
    fail_over_risk: float | None,
    policy_name: str | None,
    grids: tuple[str, ...],
    max_risk: float,
) -> None:
    """Replay many variants of one policy over a parameter grid and recommend one.

    Writes sweep.parquet (per variant, and per variant x session), savings_curve.png,
    risk_tradeoff.png and run.json, and prints every variant with a 95% interval (bootstrap
    over sessions, seed 0) and the recommendation: the highest savings net of re-fetches
    whose re-fetch risk stays under --max-risk, or a more conservative variant within noise.

    \b
    Example:
      mcsim sweep ~/.claude/projects --policy claude-code --name claude-code \\
        --grid cached_microcompact.keep_recent=1..10 --grid ttl=5m,1h
    """
    from mcsim.outputs.runs import SweepConfig, sweep_run
    from mcsim.outputs.sweep_tables import sweep_json, sweep_text

    _dates(since, until)
    config = SweepConfig(
        paths=paths, policy=policy_file, out_dir=out_dir, force=force, since=since,
        until=until, prices_path=prices_path, cache_dir=cache_dir, use_cache=not no_cache,
        workers=workers, engine=engine, ray_address=ray_address, grids=grids,
        name=policy_name, max_risk=max_risk / 100,
    )  # fmt: skip
    with _progress(not as_json) as progress, _no_calls_told(as_json):
        run = sweep_run(config, progress)
    report, results, rec = run.report, run.results, run.recommendation
    if as_json:
        _print_json(sweep_json(report, results, rec, str(run.out_dir)))
    else:
        _echo(sweep_text(report, results, rec))
        _echo(
            f"wrote {printable(run.out_dir)}/ (sweep.parquet, savings_curve.png, risk_tradeoff.png)"
        )
    if fail_under_savings is not None or fail_over_risk is not None:
        if rec.best is None:
            raise McsimError(f"no recommendation to gate on: {rec.reason}")
        best = rec.best
        checks = [
            (
                f"recommended variant {best.variant.name}",
                best.net_savings_pct,
                best.totals.refetch_risk,
            )
        ]
        _gate(checks, fail_under_savings, fail_over_risk)


@cli.group()
def advise() -> None:
    """Advice from replaying your own sessions under alternatives (see `advise cache`)."""


@advise.command("cache")
@_input_options
@_engine_options
@_out_option("Run directory to write (default: reports/<UTC time>-advise-cache).")
@_cache_options
def advise_cache(
    paths: tuple[str, ...],
    since: datetime | None,
    until: datetime | None,
    prices_path: Path | None,
    force: bool,
    as_json: bool,
    workers: int | None,
    engine: str,
    ray_address: str | None,
    out_dir: Path | None,
    cache_dir: Path | None,
    no_cache: bool,
) -> None:
    """Which prompt-cache setting would have cost least on these sessions: no change, the
    5-minute TTL, the 1-hour TTL, or keep-warm pings (5m with a ping every 4.5 minutes for up
    to 15, 30 or 60 minutes; 1h with one every 55 minutes for up to 3 hours), for main
    threads and sub-agents apart, over the whole input and per project.

    Prints each variant's cost and savings against what was recorded, the pick with its 95%
    interval over sessions and the reason, and the pick as a policy file. Writes the replay's
    tables and charts, advice.json and idle_gaps.png (the gaps, break-even points marked)
    to the run directory; `mcsim report` on it shows the advice.

    \b
    Example:
      mcsim advise cache ~/.claude/projects
    """
    from mcsim.outputs.advise_tables import advice_json, advice_text
    from mcsim.outputs.runs import AdviseConfig, advise_run

    _dates(since, until)
    config = AdviseConfig(
        paths=paths, out_dir=out_dir, force=force, since=since, until=until,
        prices_path=prices_path, cache_dir=cache_dir, use_cache=not no_cache, workers=workers,
        engine=engine, ray_address=ray_address,
    )  # fmt: skip
    with _progress(not as_json) as progress, _no_calls_told(as_json):
        run = advise_run(config, progress)
    if as_json:
        _print_json({**advice_json(run.advice), "out": str(run.out_dir)})
    else:
        _echo(advice_text(run.advice, str(run.out_dir)))


@cli.command()
@click.argument("run_dir", type=_PathOrUrl(file_okay=False, path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print the written paths as JSON.")
@click.option(
    "--redact",
    is_flag=True,
    help="Replace user names, home folders and working folders by pseudonyms (user1, cwd1).",
)
def report(run_dir: Path, as_json: bool, redact: bool) -> None:
    """Write report.html and report.md into a replay or sweep run directory (a folder, or an
    s3:// gs:// prefix): a cost review for readers who will not run mcsim (charts embedded;
    opens with no network).

    \b
    Example:
      mcsim report reports/20261129-101500-claude-code
    """
    from mcsim.outputs.report import build_object_report, build_report

    html_path, md_path = (
        build_object_report(run_dir, redact)
        if isinstance(run_dir, ObjectPath)
        else tuple(map(str, build_report(run_dir, redact)))
    )
    if as_json:
        _print_json({"html": str(html_path), "markdown": str(md_path)})
    else:
        _echo(f"wrote {printable(html_path)} and {printable(md_path)}")


@cli.command()
@click.argument("paths", nargs=-1)
@click.option(
    "--to",
    type=click.Choice(["interchange"]),
    required=True,
    help="The format to write: mcsim's interchange format (docs/interchange.md).",
)
@_out_option("Write DIR/<project>/<session_id>.jsonl here, and run.json.", required=True)
@click.option("--since", type=click.DateTime(_DATE_FORMATS), help="Only sessions from this day.")
@click.option("--until", type=click.DateTime(_DATE_FORMATS), help="Only sessions to this day.")
@click.option("--force", is_flag=True, help="Replace a folder mcsim convert wrote.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead.")
@click.option("--workers", type=click.IntRange(min=1), help="Processes to load with.")
def convert(
    paths: tuple[str, ...],
    to: str,
    out_dir: Path,
    since: datetime | None,
    until: datetime | None,
    force: bool,
    as_json: bool,
    workers: int | None,
) -> None:
    """Convert transcripts of any supported format (Claude Code, Codex, interchange) into
    one interchange file per session, which loads back into the same sessions.

    \b
    Example:
      mcsim convert ~/.claude/projects --to interchange --out converted
    """
    from mcsim.outputs.convert import convert as convert_sessions
    from mcsim.outputs.json_documents import skipped_json
    from mcsim.outputs.terminal import load_notes

    since_s, until_s = _dates(since, until)
    out_dir = out_dir.expanduser()
    report = convert_sessions(
        list(paths), out_dir, to=to, force=force, since_s=since_s, until_s=until_s, workers=workers
    )
    stats = report.stats
    if as_json:
        _print_json(
            {
                "out": str(out_dir) if report.sessions else None,
                "to": to,
                "sessions": report.sessions,
                "calls": report.calls,
                "files_written": len(report.files),
                "input_files": stats.files,
                "skipped": skipped_json(stats),
            }
        )
    else:
        for line in load_notes(stats):
            click.echo(line, err=True)
        if report.sessions:
            _echo(
                f"converted {counted(report.sessions, 'session', 'sessions')} "
                f"({counted(report.calls, 'call', 'calls')}) into "
                f"{counted(len(report.files), 'file', 'files')} under {printable(out_dir)}; "
                f"{stats.skips.total} input {'line' if stats.skips.total == 1 else 'lines'} "
                "skipped"
            )
    if not report.sessions:
        raise NoCallsError(stats, "convert")


@cli.group()
def cache() -> None:
    """The session cache folder: what it holds, and emptying it. It keeps itself under
    $MCSIM_CACHE_MAX_SIZE (default 2GB), removing the least recently used entries first."""


_CACHE_DIR = click.option(
    "--cache-dir",
    type=_PathOrUrl(file_okay=False, path_type=Path),
    help="The cache folder (default: $MCSIM_CACHE_DIR or the platform's user cache folder).",
)


# What each kind of cache file holds (mcsim.ingest.disk_cache), by its suffix
_CACHE_KINDS = {
    ".sessions": "calibrated sessions",
    ".tokens": "token estimates",
    ".calls": "loaded calls (inspect)",
    ".analysed": "analysed sessions (inspect)",
    ".results": "replayed results",
    ".chart": "charts",
}


def _size(n: int) -> str:
    return f"{n / 1e6:,.1f} MB" if n >= 100_000 else f"{n:,} bytes"


@cache.command("info")
@_CACHE_DIR
def cache_info(cache_dir: Path | None) -> None:
    """Where the cache is, how many entries it holds, their size, oldest and newest use."""
    from mcsim.ingest.cache_packs import TMP_PREFIX
    from mcsim.ingest.disk_cache import (
        cache_entries,
        cache_files,
        default_cache_dir,
        max_cache_bytes,
    )

    folder = cache_dir or default_cache_dir()
    files, cap = cache_files(folder), max_cache_bytes()
    entries = cache_entries(files)
    # A file being written, or left by a stopped run (swept later), is no entry yet.
    unfinished = [f.size for f in files if f.path.name.startswith(TMP_PREFIX)]
    packs = sum(f.path.suffix == ".pack" for f in files)
    # An entry written again (a later run, a concurrent one) may have older copies in packs
    # until the cap evicts them: counted once, their bytes counted in full.
    names = {name for name, _ in entries}
    copies = len(entries) - len(names)
    notes = [f"{packs} pack file{'s hold' if packs > 1 else ' holds'} some"] if packs else []
    notes += [f"and {copies} older copies"] if copies else []
    _echo(f"location: {printable(folder)}")
    _echo(f"entries: {len(names)}" + (f" ({', '.join(notes)})" if notes else ""))
    kinds: dict[str, tuple[set[str], list[int]]] = {}
    for name, size in entries:
        named, sizes = kinds.setdefault(_CACHE_KINDS.get(Path(name).suffix, "other"), (set(), []))
        named.add(name)
        sizes.append(size)
    for kind, (named, sizes) in sorted(kinds.items()):
        _echo(f"  {kind}: {len(named)}, {_size(sum(sizes))}")
    if unfinished:
        _echo(f"  unfinished writes: {len(unfinished)}, {_size(sum(unfinished))}")
    _echo(f"size: {_size(sum(f.size for f in files))} (cap {_size(cap)})")
    for label, f in (("oldest", files[:1]), ("newest", files[-1:])):
        when = datetime.fromtimestamp(f[0].mtime, UTC).strftime("%Y-%m-%d %H:%M UTC") if f else "-"
        _echo(f"{label}: {when}")


@cache.command("clear")
@_CACHE_DIR
def cache_clear(cache_dir: Path | None) -> None:
    """Remove mcsim's entries from the cache folder (nothing else in it is touched)."""
    from mcsim.ingest.disk_cache import cache_entries, cache_files, clear_cache, default_cache_dir

    folder = cache_dir or default_cache_dir()
    entries = len({name for name, _ in cache_entries(cache_files(folder))})  # (a pack holds many)
    removed = clear_cache(folder)
    freed = _size(sum(f.size for f in removed))
    _echo(f"removed {entries} entries from {printable(folder)}, freed {freed}")


# The keys every policy takes beside its kind or stack (mcsim.replay.scenario), as
# `policies --json` lists them.
SCENARIO_KEYS = {
    "ttl": "5m | 1h | 24h (with provider: openai) | recorded, or by thread kind: "
    "{main: 1h, subagent: 5m, compact: 5m} (kinds not named keep the defaults')",
    "provider": "recorded | anthropic | openai: whose prompt cache",
    "compactable_tools": "tool names or classes (class:<class>) whose results may be cleared",
    "exclude_tools": "tool names or classes never cleared",
    "main_thread_only": "true: sub-agents are never pruned",
    "keep_warm": "{interval_minutes, max_idle_minutes, input_tokens: 10, output_tokens: 1, "
    "threads: [main, subagent]}: in an idle gap, a ping every interval (below the TTL) up to "
    "max_idle_minutes, each reading the cached prompt at the cache-read price",
}


@cli.command()
@click.option("--json", "as_json", is_flag=True, help="Print the kinds and presets as JSON.")
@click.option("--show", metavar="NAME", help="Print a preset's YAML, to start your own from.")
def policies(as_json: bool, show: str | None) -> None:
    """List the built-in policy kinds with their parameters, defaults and meanings, and the
    presets that `--policy NAME` accepts.

    \b
    Example:
      mcsim policies
      mcsim policies --show claude-code > my-policy.yaml
    """
    from mcsim.replay.policies import REGISTRY
    from mcsim.replay.presets import preset_names, preset_policies, preset_text

    if show is not None:
        text = preset_text(show)
        with _stdout():
            click.echo(text, nl=False)  # the file's exact text
        return
    presets = [{"name": n, "policies": preset_policies(n)} for n in preset_names()]

    kinds: list[dict[str, Any]] = [
        {
            "kind": cls.kind,
            "summary": cls.summary,
            "params": [{"name": p.name, "default": p.default, "help": p.help} for p in cls.params],
        }
        for cls in REGISTRY.values()
    ]
    if as_json:
        _print_json({"kinds": kinds, "presets": presets, "scenario_keys": SCENARIO_KEYS})
        return
    for kind in kinds:
        _echo(f"{kind['kind']}: {kind['summary']}")
        for p in kind["params"]:
            _echo(f"    {p['name']} (default {_as_yaml(p['default'])}): {p['help']}")
    _echo(
        "Every policy also takes the scenario keys: ttl (5m|1h|24h|recorded; 24h with "
        "provider: openai; or by thread kind, {main: 1h, subagent: 5m}), provider "
        "(recorded|anthropic|openai), compactable_tools, exclude_tools, main_thread_only, "
        "keep_warm ({interval_minutes, max_idle_minutes, input_tokens: 10, output_tokens: 1, "
        "threads: [main, subagent]}: a ping reading the cached prompt every interval of an "
        "idle gap, below the TTL, up to max_idle_minutes)."
    )
    _echo("Presets (--policy NAME; see one with --show NAME):")
    for preset in presets:
        _echo(f"    {preset['name']}: {', '.join(preset['policies'])}")


def main() -> None:
    tune()  # before any command imports polars
    STOP.install()
    try:
        cli(prog_name="mcsim")  # exits by itself, unless stopped
    except Stopped as stopped:
        signum = stopped.signum
    except BaseException as exc:  # pyo3's panics are BaseExceptions, not Exceptions
        if STOP.signum is None or isinstance(exc, SystemExit):
            raise
        signum = STOP.signum  # an error the signal caused in native code: the stop is the news
    else:
        return
    # Outside the except block: the traceback, and with it every suspended generator (the
    # workers' one), is released, so their clean-up has run before the exit.
    click.echo("Aborted.", err=True)
    sys.exit(128 + signum)
