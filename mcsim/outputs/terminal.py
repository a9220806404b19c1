"""Turn reports into what a person reads in a terminal: tables, lines and notes (what a program
reads, the JSON documents, is mcsim/outputs/json_documents.py)."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Iterator, Sequence

from mcsim.accounting.recorded import InspectReport, UsageGroup
from mcsim.ingest.pipeline import LoadStats
from mcsim.model import Tokens
from mcsim.outputs.json_documents import iso_time
from mcsim.text import NAME_LIMIT, TEXT_LIMIT, counted, printable, terminal_width, width

# How many skipped-line examples the terminal summary shows; --json lists them all.
TERMINAL_EXAMPLES = 5


def _k(n: int) -> str:
    """Compact token counts: 1234 -> 1.2k, 23794961 -> 23.8M."""
    if n >= 1_000_000:
        return f"{n / 1e6:.1f}M"
    if n >= 1_000:
        return f"{n / 1e3:.1f}k"
    return str(n)


def table(headers: list[str], rows: list[list[str]], right: set[int], key: int = 1) -> list[str]:
    """Aligned columns; every cell goes through printable(), so no caller can forget a value
    read from disk, and widths are the terminal columns of what is shown. Callers shorten.

    Piped, the whole table in plain columns, whatever its width: a stable format for scripts.
    On a terminal, rich draws it; when the terminal is too narrow for the whole table, the
    columns come in blocks that fit, one under the other, each led by the `key` first columns
    (the row's names, shortened in the middle with an ellipsis to at most half the width, so
    the distinct end of a project folder's name stays). Nothing else is cut: a number is never
    shortened. The blocks are chosen here because rich's Table alone, tried first, fits 80
    columns by cutting numbers to "12.2…" and dropping the name column."""
    shown = [[printable(c) for c in r] for r in [headers, *rows]]
    columns = terminal_width()
    widths = [max(width(r[i]) for r in shown) for i in range(len(headers))]
    if columns is None:
        return _block(shown, widths, right, list(range(len(headers))))
    blocks: list[list[int]] = [list(range(len(headers)))]
    if _span(widths) > columns:
        # Half the width for the name columns, taken from the longest first (a session id of
        # 8 keeps its 8; a project name gets the rest).
        rooms = widths[:key]
        while sum(rooms) + 2 * (key - 1) > columns // 2 and max(rooms) > 8:
            rooms[rooms.index(max(rooms))] -= 1
        for r in shown[1:]:
            r[:key] = [printable(c, limit=n) for c, n in zip(r[:key], rooms, strict=True)]
        widths = [max(width(r[i]) for r in shown) for i in range(len(headers))]
        blocks = _blocks(widths, key, columns)
    lines: list[str] = []
    for block in blocks:
        lines += [*([""] if lines else []), *_rich_block(shown, right, block, columns)]
    return lines


def _blocks(widths: list[int], key: int, columns: int) -> list[list[int]]:
    """The columns after the `key` first ones cut into as few blocks as fit `columns` (each
    led by the key columns), the cuts placed so the widest block is as narrow as can be: two
    blocks of five columns rather than nine and one."""
    names, rest = list(range(key)), list(range(key, len(widths)))

    def span(part: Sequence[int]) -> int:
        return _span([widths[i] for i in [*names, *part]])

    greedy: list[list[int]] = [[]]  # as many columns per block as fit: the fewest blocks
    for i in rest:
        if greedy[-1] and span([*greedy[-1], i]) > columns:
            greedy.append([])
        greedy[-1].append(i)
    best = greedy  # also what stays when one column alone is wider than the terminal
    for cuts in itertools.combinations(range(1, len(rest)), len(greedy) - 1):
        parts = [rest[a:b] for a, b in itertools.pairwise((0, *cuts, len(rest)))]
        if max(map(span, parts)) < max(map(span, best)):
            best = parts  # narrower (so fits, if the fewest blocks can)
    return [[*names, *part] for part in best]


def _span(widths: list[int]) -> int:
    return sum(widths) + 2 * (len(widths) - 1)


def _block(
    shown: list[list[str]], widths: list[int], right: set[int], which: list[int]
) -> list[str]:
    rule = ["-" * w for w in widths]
    return [_line(r, widths, right, which) for r in [shown[0], rule, *shown[1:]]]


def _line(cells: list[str], widths: list[int], right: set[int], which: list[int]) -> str:
    """The cells `which` of a row, in plain columns of `widths`, two apart."""
    return "  ".join(
        " " * (widths[i] - width(cells[i])) + cells[i]
        if i in right
        else cells[i] + " " * (widths[i] - width(cells[i]))
        for i in which
    ).rstrip()


def table_lines(
    headers: list[str], rows: Callable[[], Iterable[list[str]]], right: set[int], key: int = 1
) -> Iterator[str]:
    """`table` of the rows `rows()` gives, a line at a time. Piped, the rows are made twice
    (once for the widths, once for the lines) and never held: a table of every session of
    a large corpus grew the driver with it, and memory must not grow with the corpus
    (docs/design.md#performance). On a terminal, rich draws it whole."""
    if terminal_width() is not None:
        yield from table(headers, list(rows()), right, key)
        return
    widths = [width(printable(h)) for h in headers]
    for r in rows():
        widths = [max(w, width(printable(c))) for w, c in zip(widths, r, strict=True)]
    which = list(range(len(headers)))
    yield _line([printable(h) for h in headers], widths, right, which)
    yield _line(["-" * w for w in widths], widths, right, which)
    for r in rows():
        yield _line([printable(c) for c in r], widths, right, which)


def _rich_block(
    shown: list[list[str]], right: set[int], which: list[int], columns: int
) -> list[str]:
    """The columns `which` of a table drawn by rich: a header, a rule, the rows; columns two
    apart as in `_block`. Cells are Text, so a name holding "[bold]" is shown, not obeyed."""
    import io

    from rich import box
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    grid = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, padding=(0, 1, 0, 0))
    for i in which:
        grid.add_column(Text(shown[0][i]), justify="right" if i in right else "left", no_wrap=True)
    for r in shown[1:]:
        grid.add_row(*(Text(r[i]) for i in which))
    drawn = io.StringIO()
    Console(file=drawn, width=columns, color_system=None, legacy_windows=False).print(grid)
    return [line.rstrip() for line in drawn.getvalue().splitlines()]


def _short_model(model: str) -> str:
    return model.removeprefix("claude-")


def inspect_lines(report: InspectReport) -> Iterator[str]:
    """The usage table by session, with the report's totals, causes, warnings and notes, a
    line at a time (`table_lines`)."""
    headers = ["project", "session", "start (UTC)", "calls", "models", "input", "write 5m",
               "write 1h", "read", "output", "cost $", "hit %", "breaks"]  # fmt: skip

    def rows() -> Iterator[list[str]]:
        for s in report.sessions:
            t = s.tokens
            cost = f"{s.cost_usd:.4f}" + ("*" if s.unpriced_calls else "")
            yield [
                printable(s.project, limit=32),
                s.session_id[:8],
                iso_time(s.start_s)[:16].replace("T", " "),
                str(s.calls),
                ",".join(printable(_short_model(m), limit=NAME_LIMIT) for m in s.models),
                _k(t.input_tokens),
                _k(t.cache_write_5m_tokens),
                _k(t.cache_write_1h_tokens),
                _k(t.cache_read_tokens),
                _k(t.output_tokens),
                cost,
                f"{100 * t.cache_hit_ratio:.1f}",
                str(s.cache_breaks),
            ]
        t = report.tokens
        yield ["" for _ in headers]
        yield [
            "TOTAL",
            f"{len(report.sessions)} sess",
            "",
            str(report.call_count),
            "",
            _k(t.input_tokens),
            _k(t.cache_write_5m_tokens),
            _k(t.cache_write_1h_tokens),
            _k(t.cache_read_tokens),
            _k(t.output_tokens),
            f"{report.cost_usd:.4f}",
            f"{100 * t.cache_hit_ratio:.1f}",
            str(len(report.breaks)),
        ]

    yield from table_lines(headers, rows, right=set(range(3, 13)) - {4}, key=2)
    if report.breaks:
        causes = ", ".join(f"{k} {v}" for k, v in report.breaks_by_cause.items())
        yield f"cache breaks by cause: {causes}"
    yield from warnings_text(report)


_GROUP_TITLES = {"day": "day", "week": "week (Mon)", "month": "month", "model": "model",
                 "project": "project"}  # fmt: skip


def grouped_text(report: InspectReport, by: str, tz: str, rows: list[UsageGroup]) -> str:
    """The usage table by day, week, month, model or project (`inspect_text` is by session),
    with the report's totals, warnings and notes."""
    title = _GROUP_TITLES[by] + (f" ({tz})" if by in ("day", "week", "month") else "")
    headers = [title, "sessions", "calls", "input", "write 5m", "write 1h", "read", "output",
               "cost $", "hit %"]  # fmt: skip

    def cells(key: str, sessions: int, calls: int, t: Tokens, cost: str) -> list[str]:
        return [key, str(sessions), str(calls), _k(t.input_tokens), _k(t.cache_write_5m_tokens),
                _k(t.cache_write_1h_tokens), _k(t.cache_read_tokens), _k(t.output_tokens), cost,
                f"{100 * t.cache_hit_ratio:.1f}"]  # fmt: skip

    body = [
        cells(
            printable(_short_model(g.key) if by == "model" else g.key, limit=NAME_LIMIT),
            g.sessions,
            g.calls,
            g.tokens,
            f"{g.cost_usd:.4f}" + ("*" if g.unpriced_calls else ""),
        )
        for g in rows
    ]
    body.append(["" for _ in headers])
    body.append(cells("TOTAL", len(report.sessions), report.call_count, report.tokens,
                      f"{report.cost_usd:.4f}"))  # fmt: skip
    lines = table(headers, body, right=set(range(1, len(headers))))
    lines.extend(warnings_text(report))
    return "\n".join(lines)


def _were(n: int) -> str:
    """The verb that agrees with `n`, for the notes that say what was left out."""
    return "was" if n == 1 else "were"


def warnings_text(report: InspectReport) -> list[str]:
    """Lines about anything that was not counted or priced, for stderr or the summary."""
    out = []
    if report.unpriced_calls:
        models = ", ".join(
            f"{printable(m, limit=NAME_LIMIT)} ({n})"
            for m, n in sorted(report.unpriced_models.items())
        )
        out.append(
            f"warning: {counted(report.unpriced_calls, 'call is', 'calls are')} unpriced (model "
            "not in price table "
            f"{printable(report.price_table, limit=NAME_LIMIT)}): {models}; costs marked * "
            "exclude them"
        )
    if report.split_mismatch_calls:
        out.append(
            f"note: {counted(report.split_mismatch_calls, 'call', 'calls')} had a cache_creation "
            "split that did not add up; the billed total was used and the rest priced as "
            "5-minute writes"
        )
    return out + load_notes(report.stats)


def load_notes(stats: LoadStats) -> list[str]:
    """Lines about input that was skipped, repaired or counted once, with the first examples."""
    out = []
    skips = stats.skips
    if skips.total or skips.repaired or skips.notes:
        reasons = ", ".join(f"{k} {v}" for k, v in sorted(skips.counts.items()))
        repaired = ", ".join(f"{k} {v}" for k, v in sorted(skips.repaired.items()))
        noted = ", ".join(f"{k} {v}" for k, v in sorted(skips.notes.items()))
        text = f"skipped {counted(skips.total, 'line', 'lines')}"
        text += f" ({reasons})" if reasons else ""
        if repaired:
            text += f"; repaired {sum(skips.repaired.values())} ({repaired})"
        if noted:
            text += f"; noted {sum(skips.notes.values())} ({noted})"
        # The colon announces examples: none follow when every one was in a session outside
        # --since/--until (the note on those sessions says how many were left out).
        out.append(text + (":" if skips.examples else ""))
        for e in skips.examples[:TERMINAL_EXAMPLES]:
            detail = f": {printable(e.detail, limit=TEXT_LIMIT)}" if e.detail else ""
            out.append(f"  {printable(e.file, limit=TEXT_LIMIT)}:{e.line}: {e.reason}{detail}")
        if len(skips.examples) > TERMINAL_EXAMPLES:
            out.append(f"  … {len(skips.examples) - TERMINAL_EXAMPLES} more (all in --json)")
    if stats.files_skipped_by_date:
        out.append(
            f"note: {counted(stats.files_skipped_by_date, 'file', 'files')} last modified before "
            f"--since {_were(stats.files_skipped_by_date)} not read (a file cannot hold a session "
            "starting after it)"
        )
    if stats.sessions_outside_dates:
        out.append(
            f"note: {counted(stats.sessions_outside_dates, 'session', 'sessions')} starting "
            f"outside --since/--until {_were(stats.sessions_outside_dates)} left out"
            + (
                f" (and {counted(stats.examples_outside_dates, 'example', 'examples')} of "
                "skipped lines in their files)"
                if stats.examples_outside_dates
                else ""
            )
        )
    if stats.files_skipped_by_project:
        out.append(
            f"note: {counted(stats.files_skipped_by_project, 'file', 'files')} of projects not "
            f"matching --project {_were(stats.files_skipped_by_project)} not read"
        )
    if stats.duplicate_calls:
        out.append(
            f"note: {counted(stats.duplicate_calls, 'call', 'calls')} appeared in more than one "
            f"project folder and {_were(stats.duplicate_calls)} counted once"
        )
    return out
