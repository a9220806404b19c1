"""A self-contained cost review from a run directory: `report.html` and `report.md`.

Written for readers who have never heard of mcsim: what was analysed, what it really cost,
how well the prompt cache worked and why it broke, what each pruning policy would have cost
(and how much of what it cleared the agent needed again), the sweep and its recommendation,
how far the replay can be trusted, and the caveats. The HTML embeds its charts as data URIs
and references nothing outside itself, so it opens from a file with no network.

A run directory may be damaged or forged: every file is read as a regular file of bounded
size, every run.json field through an accessor that reads a field of the wrong type as absent,
and a table polars cannot read is one line naming it, never a traceback.
"""

from __future__ import annotations

import base64
import contextlib
import html
import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from mcsim.errors import McsimError, UsageError
from mcsim.ingest.loaders.jsonl import NotRegularFileError, open_regular, read_regular
from mcsim.ingest.storage import ObjectPath, filesystem, first_line
from mcsim.outputs.redact import Redactor
from mcsim.outputs.run_dir import RUN_JSON_MAX_BYTES, umask
from mcsim.text import NAME_LIMIT, TEXT_LIMIT, counted, markdown, printable, usd

# Far above any chart mcsim draws (tens of kilobytes): a bound on what is embedded.
CHART_MAX_BYTES = 64 * 1024 * 1024

CHART_CAPTIONS = {
    "cumulative_cost.png": "Cumulative cost over all calls, as recorded and under each policy "
    "(keep-warm pings included, at the call after their gap).",
    "savings.png": "Savings by policy, against no pruning and against the recorded spend.",
    "context_size.png": "Context (prompt) size sent on each main-thread call under each "
    "policy; sub-agents' calls below.",
    "break_timeline.png": "When the prompt cache broke, by policy and cause.",
    "savings_curve.png": "Savings over the swept parameter (solid: as simulated; dashed: "
    "net of re-fetches).",
    "risk_tradeoff.png": "Each variant's net savings against its re-fetch risk; the Pareto "
    "front joins the variants no other beats on both.",
    "idle_gaps.png": "Idle gaps between consecutive calls of a thread (log scale), with the "
    "TTLs and the gap up to which keep-warm pings cost less than one re-write marked.",
}
CAUSES = {
    "ttl_expired": "the cache entry expired during an idle gap longer than its TTL",
    "compaction": "the conversation was compacted (expected)",
    "model_switch": "the model changed (each model has its own cache)",
    "policy_clearing": "a pruning policy rewrote or deleted old content (expected)",
    "prefix_changed": "the start of the prompt changed while the cache was warm",
    "unknown": "nothing was read although the cache should have been warm",
}


class Fields:
    """A JSON object of run.json, read field by field with the type the report needs.

    A field of another type (a damaged or hand-edited run.json) reads as absent, and the
    report shows its neutral value instead of failing on it.
    """

    def __init__(self, value: object) -> None:
        self._doc: dict[str, Any] = value if isinstance(value, dict) else {}

    def obj(self, key: str) -> Fields:
        return Fields(self._doc.get(key))

    def has(self, key: str) -> bool:
        """Whether the field is an object (a section the run holds)."""
        return isinstance(self._doc.get(key), dict)

    def num(self, key: str, default: float = 0) -> float:
        value = self._doc.get(key)
        if isinstance(value, int | float) and not isinstance(value, bool):
            return value
        return default

    def text(self, key: str, default: str = "?") -> str:
        value = self._doc.get(key)
        return value if isinstance(value, str) else default

    def texts(self, key: str) -> list[str]:
        """The strings of a list field (anything else in it left out)."""
        value = self._doc.get(key)
        return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []

    def objs(self, key: str) -> list[Fields]:
        """The objects of a list field, each as Fields (anything else in it read as empty)."""
        value = self._doc.get(key)
        return [Fields(v) for v in value] if isinstance(value, list) else []

    def size(self, key: str) -> int:
        """How many items a list field holds."""
        value = self._doc.get(key)
        return len(value) if isinstance(value, list) else 0

    def strings(self) -> list[tuple[str, str]]:
        """The string fields, in order (anything else left out)."""
        return [(k, v) for k, v in self._doc.items() if isinstance(v, str)]

    def counts(self) -> list[tuple[str, int]]:
        """The integer fields, in order (anything else left out)."""
        return [
            (k, v) for k, v in self._doc.items() if isinstance(v, int) and not isinstance(v, bool)
        ]


@dataclass(frozen=True)
class Section:
    """One part of the report, in plain text: names are shortened when it is built, and each
    renderer escapes everything for its format, so nothing is escaped twice."""

    title: str
    paragraphs: list[str]
    table: tuple[list[str], list[list[str]]] | None = None
    charts: tuple[str, ...] = ()


def build_object_report(run: ObjectPath, redact: bool = False) -> tuple[str, str]:
    """`build_report` for a run in object storage (`replay --out s3://...`): the files a
    report reads (run.json, the summary or sweep table, the charts; never the calls table)
    are fetched into a temporary folder, the report is built there, and report.md then
    report.html are put beside the run. Returns their URLs."""
    fs = filesystem(run.scheme)
    with tempfile.TemporaryDirectory(prefix="mcsim-report-") as tmp:
        folder = Path(tmp)
        for name in ("run.json", "summary.parquet", "sweep.parquet", *CHART_CAPTIONS):
            with contextlib.suppress(FileNotFoundError):
                _fetch(fs, f"{run.key}/{name}", folder / name)
        try:
            html, md = build_report(folder, redact)
        except McsimError as exc:  # named by the run's URL, not the temporary folder
            raise type(exc)(str(exc).replace(str(folder), str(run))) from None
        urls = []
        for path in (md, html):
            try:
                fs.put_file(str(path), f"{run.key}/{path.name}")
            except Exception as exc:  # the store's own errors, in one line
                reason = first_line(exc)
                raise McsimError(f"{run}: could not write {path.name} ({reason})") from exc
            urls.append(f"{run}/{path.name}")
    return urls[1], urls[0]


def _fetch(fs: Any, key: str, path: Path) -> None:
    try:
        fs.get_file(key, str(path))
    except FileNotFoundError:
        raise
    except Exception as exc:  # a store error: what the report then misses says which file
        raise UsageError(f"{fs.unstrip_protocol(key)}: {first_line(exc)}") from exc


def build_report(run_dir: Path, redact: bool = False) -> tuple[Path, Path]:
    """Write report.html and report.md into `run_dir` (a replay or sweep run directory);
    `redact` replaces user names, home folders and working folders by pseudonyms (redact.py).

    Everything is read before anything is written; a run directory that cannot be read is
    a UsageError, a report that cannot be written an McsimError, and neither leaves a
    temporary file behind.
    """
    run_file = run_dir / "run.json"
    try:
        doc = orjson.loads(read_regular(run_file, RUN_JSON_MAX_BYTES))
    except FileNotFoundError:
        raise UsageError(f"{run_dir}: not a run directory (no run.json)") from None
    except OSError as exc:
        raise UsageError(f"{run_file}: {exc.strerror or exc}") from None
    except orjson.JSONDecodeError:
        raise UsageError(f"{run_file}: not valid JSON") from None
    if not isinstance(doc, dict):
        raise UsageError(f"{run_file}: not a run.json written by mcsim (not a JSON object)")
    redactor = Redactor() if redact else None
    if redactor is not None:
        redactor.learn(doc)
        doc = redactor.doc(doc)
    run = Fields(doc)
    kind = "sweep" if os.path.lexists(run_dir / "sweep.parquet") else "replay"
    if kind == "replay" and not os.path.lexists(run_dir / "summary.parquet"):
        raise UsageError(
            f"{run_dir}: neither summary.parquet nor sweep.parquet is there; mcsim report reads "
            "the run directory of a replay or a sweep"
        )
    sections = _sections(run, run_dir, kind, redactor)
    title = f"Prompt-cache and pruning cost review ({kind})"
    html_path, md_path = run_dir / "report.html", run_dir / "report.md"
    pages = {
        html_path: _html(title, run, sections, _charts(run_dir, sections)),
        md_path: _markdown(title, sections),
    }
    for path in pages:
        if os.path.isdir(path) and not os.path.islink(path):
            raise UsageError(f"{path}: a directory; not replaced by the report")
    for path, text in pages.items():
        _atomic_write(path, text)
    return html_path, md_path


def _atomic_write(path: Path, text: str) -> None:
    """Replace `path` with `text` at once, with the permissions of any new file (0666 less
    the umask; mkstemp's are 0600), and no temporary file left whatever happens."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            os.fchmod(fh.fileno(), 0o666 & ~umask())
            fh.write(text)
        os.replace(tmp, path)
    except OSError as exc:
        raise McsimError(f"{path}: could not write the report ({exc.strerror or exc})") from exc
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)  # gone already once it replaced `path`


def _charts(run_dir: Path, sections: list[Section]) -> dict[str, bytes]:
    """The PNG of every chart the sections show that the run has (a missing one is left out;
    one that is not a regular file of sensible size makes the run directory a bad one)."""
    charts = {}
    for chart in (c for section in sections for c in section.charts):
        try:
            charts[chart] = read_regular(run_dir / chart, CHART_MAX_BYTES)
        except FileNotFoundError:
            continue
        except OSError as exc:
            raise UsageError(f"{run_dir / chart}: {exc.strerror or exc}") from None
    return charts


# A null re-fetch risk: no cleared result could be assessed (mcsim.replay.refetch).
UNKNOWN_RISK = -1.0


def _risk(value: float) -> str:
    return "unknown" if value < 0 else f"{100 * value:.0f}%"


# The columns the report shows, with the value a null reads as (its type is the column's).
_POLICY_COLUMNS: dict[str, object] = {
    "policy": "", "cost_usd": 0.0, "refetch_cost_usd": 0.0, "savings_vs_baseline_pct": 0.0,
    "net_savings_vs_baseline_pct": 0.0, "cleared_tokens": 0, "cleared_results": 0,
    "refetch_risk": UNKNOWN_RISK, "cache_hit_ratio": 0.0, "cache_breaks": 0,
}  # fmt: skip
_SWEEP_COLUMNS: dict[str, object] = {
    "level": "", "variant": "", "recommended": False, "cost_usd": 0.0,
    "savings_vs_baseline_pct": 0.0, "net_savings_vs_baseline_pct": 0.0, "cleared_tokens": 0,
    "refetch_risk": UNKNOWN_RISK, "cache_breaks": 0,
}  # fmt: skip


def _table(path: Path, columns: dict[str, object]) -> Any:
    """`columns` of the Parquet file `path`, each of its type with nulls read as its neutral
    value; a file that is not a regular one, or not a table of the run, is one line."""
    import polars as pl

    dtypes = {str: pl.String, bool: pl.Boolean, int: pl.Int64, float: pl.Float64}
    try:
        with open_regular(path):  # before polars opens it: a FIFO would block it
            pass
        # glob=False: a run directory named with `[` or `*` is a path, not a pattern.
        table = pl.read_parquet(path, columns=list(columns), glob=False)
        return table.select(
            pl.col(name).cast(dtypes[type(neutral)]).fill_null(neutral)
            for name, neutral in columns.items()
        )
    except NotRegularFileError as exc:
        raise UsageError(f"{path}: {exc.what}, not a regular file") from None
    except OSError as exc:
        raise UsageError(f"{path}: {exc.strerror or exc}") from None
    except pl.exceptions.PolarsError as exc:
        raise UsageError(f"{path}: not a table of this run ({first_line(exc)})") from None


def _name(value: object, limit: int = NAME_LIMIT) -> str:
    """A name from the run (project, model, policy), shortened for the reader."""
    return printable(value, limit=limit)


def _redacted(table: Any, redactor: Redactor | None) -> Any:
    """The table with every text cell redacted (policy and variant names may hold paths)."""
    import polars as pl

    if redactor is None:
        return table
    return table.with_columns(
        pl.Series(name, list(map(redactor, table[name].to_list())), dtype=pl.String)
        for name, dtype in table.schema.items()
        if dtype == pl.String
    )


def _sections(run: Fields, run_dir: Path, kind: str, redactor: Redactor | None) -> list[Section]:
    a = run.obj("analysed")
    rec = run.obj("recorded")
    fid = run.obj("fidelity")
    unpriced = rec.num("unpriced_calls")
    out = [
        *([_verdict_section(run)] if kind == "replay" and not run.has("cache_advice") else []),
        *([_advice_section(run)] if run.has("cache_advice") else []),
        Section(
            "What was analysed",
            [
                f"{counted(a.num('sessions'), 'session', 'sessions')} of a coding agent "
                f"(Claude Code transcripts), {a.num('calls'):,} model "
                f"{'call' if a.num('calls') == 1 else 'calls'}, from {a.text('start')[:10]} "
                f"to {a.text('end')[:10]}, in "
                f"{counted(a.size('projects'), 'project', 'projects')}.",
                "Models: " + (", ".join(map(_name, a.texts("models"))) or "none") + ".",
                "Projects: " + (", ".join(map(_name, a.texts("projects"))) or "none") + ".",
            ],
        ),
        Section(
            "What it really cost",
            [
                f"Recorded spend at list prices: {usd(rec.num('cost_usd'))}"
                + (f" ({unpriced} calls of unknown models not priced)" if unpriced else "")
                + ".",
                "An agent re-sends the whole conversation on every call; a prompt cache makes "
                "re-sent tokens cheap (a cache read costs a tenth of normal input). "
                f"{100 * rec.num('cache_hit_ratio'):.1f}% of all prompt tokens were "
                "read from the cache.",
            ],
            (
                ["tokens", "count"],
                [
                    ["uncached input", f"{rec.num('input_tokens'):,}"],
                    ["written to cache (5-minute)", f"{rec.num('cache_write_5m_tokens'):,}"],
                    ["written to cache (1-hour)", f"{rec.num('cache_write_1h_tokens'):,}"],
                    ["read from cache", f"{rec.num('cache_read_tokens'):,}"],
                    ["output", f"{rec.num('output_tokens'):,}"],
                ],
            ),
        ),
    ]
    causes = rec.obj("breaks_by_cause").counts()
    out.append(
        Section(
            "When the cache broke, and why",
            [
                f"A cache break is a call that read much less from the cache than the call "
                f"before it (more than 5% and 2,000 tokens less), so it paid to write the "
                f"conversation again, counted as Claude Code's detector counts it: a drop the "
                f"agent announced (a compaction, its own pruning, a cache edit) is not a "
                f"break. The recording has {rec.num('cache_breaks')}"
                + (
                    f" ({drops} drops in all)."
                    if (drops := rec.num("cache_drops", -1)) >= 0
                    else "."
                ),
            ],
            (
                ["cause", "breaks", "meaning"],
                [[_name(c), str(n), CAUSES.get(c, "")] for c, n in causes],
            )
            if causes
            else None,
            ("break_timeline.png",) if kind == "replay" else (),
        )
    )
    if kind == "replay":
        summary = _redacted(_table(run_dir / "summary.parquet", _POLICY_COLUMNS), redactor)
        out.append(_policy_section(summary, run))
    else:
        sweep = _redacted(_table(run_dir / "sweep.parquet", _SWEEP_COLUMNS), redactor)
        out.append(_sweep_section(run, sweep))
    over = fid.size("sessions_over_threshold")
    out.append(
        Section(
            "How far to trust the numbers",
            [
                "Every policy is replayed by the same simulation. Replayed without pruning "
                "and with the recorded cache lifetime, it should reproduce what was really "
                f"read from and written to the cache: its error is "
                f"{100 * fid.num('overall_error'):.3f}% overall and "
                f"{100 * fid.num('worst_session_error'):.3f}% in the worst session"
                + (
                    f"; {counted(over, 'session exceeds', 'sessions exceed')} the "
                    f"{100 * fid.num('threshold', 0.05):g}%"  # 0.005: 0.5%, not 0%
                    " threshold and their results are less certain."
                    if over
                    else "."
                ),
            ],
        )
    )
    out.append(
        Section(
            "Caveats",
            [
                *[n[0].upper() + n[1:] + "." for n in run.texts("notes") if n],
                f"Prices: table {_name(run.text('price_table'))} (Anthropic list prices); "
                "negotiated prices differ.",
                "Compactions are kept where they were recorded; each policy reports whether "
                "the prompt would still have grown large enough to trigger them.",
                "A re-fetch hazard is a cleared result whose file or command the agent used "
                "again later; content referred to without a repeated tool call is not counted.",
                f"Made by mcsim {run.text('mcsim_version')} on {run.text('created')[:10]}.",
            ],
        )
    )
    return out


def _policy_section(summary: Any, run: Fields) -> Section:
    """The policies' table, what its baseline is, and why each policy that cleared nothing
    did not (run.json's `cleared_nothing`)."""
    recorded = run.obj("recorded").num("cost_usd")
    rows = []
    for r in summary.iter_rows(named=True):
        is_recorded = r["policy"] == "recorded"
        net_saved = recorded - r["cost_usd"] - r["refetch_cost_usd"]
        rows.append(
            [
                _name(r["policy"]),
                usd(r["cost_usd"]),
                "" if is_recorded else usd(recorded - r["cost_usd"]),
                "" if is_recorded else usd(net_saved),
                "" if is_recorded else f"{r['savings_vs_baseline_pct']:+.1f}%",
                "" if is_recorded else f"{r['net_savings_vs_baseline_pct']:+.1f}%",
                f"{r['cleared_tokens']:,}",
                _risk(r["refetch_risk"]) if r["cleared_results"] else "",
                f"{100 * r['cache_hit_ratio']:.1f}%",
                str(r["cache_breaks"]),
            ]
        )
    return Section(
        "What each pruning policy would have cost",
        [
            "Each policy clears old tool results (file reads, command output) from the "
            "conversation to make prompts smaller. Smaller prompts cost less, but rewriting "
            "old content breaks the prompt cache, which can cost more than it saves. "
            "'Saved' is the recorded spend less the policy's cost ('net saved' also pays for "
            "results the agent needed again: re-fetch risk is the share of cleared results it "
            "used again). 'Savings' compares with the same sessions replayed without pruning, "
            f"the baseline: {_baseline_text(run)}; 'net' with the re-fetches paid.",
            *_other_baselines(run),
            *[_name(line, 4 * TEXT_LIMIT) + "." for line in run.texts("pings")],
            *[
                f"{_name(name)} cleared nothing: {_name(why, 4 * TEXT_LIMIT)}."
                for name, why in run.obj("cleared_nothing").strings()
            ],
        ],
        (
            [
                "policy",
                "cost",
                "saved",
                "net saved",
                "savings",
                "net",
                "cleared tokens",
                "re-fetch risk",
                "cache hit",
                "breaks",
            ],
            rows,
        ),
        ("cumulative_cost.png", "savings.png", "context_size.png"),
    )


def _baseline_text(run: Fields) -> str:
    """What "vs baseline" is against, as run.json says (a run of an older mcsim: its words)."""
    return _name(run.obj("baseline").text("description", "no pruning"), 4 * TEXT_LIMIT)


def _other_baselines(run: Fields) -> list[str]:
    """A sentence for each baseline the policy file's own cache settings added."""
    others = run.obj("baseline").objs("others")
    return [
        f"{_name(b.text('name'))} is no pruning under {_name(b.text('cache'))}, as the policy "
        "file's defaults set it: the difference from the baseline is what that cache alone "
        "changes."
        for b in others
    ]


def _advice_section(run: Fields) -> Section:
    """`mcsim advise cache`'s advice: per group of threads, the cheapest way of running the
    cache, what it saves against what was recorded and why; the variants over all threads;
    the idle gaps with the break-even points."""
    advice = run.obj("cache_advice")
    paragraphs = [
        "Each variant replays the same sessions with no pruning, only the prompt cache run "
        "otherwise: no change, the 5-minute TTL, the 1-hour TTL (writes at 2x input instead "
        "of 1.25x), or keep-warm pings (a tiny request that reads the cached prompt at a "
        "tenth of the input price before the TTL runs out). Pings are priced apart and "
        "included in each cost. Savings are against what was recorded."
    ]
    table = None
    for group in advice.objs("overall"):
        paragraphs.append(
            f"{_name(group.text('group'))}: {_name(group.text('pick'), TEXT_LIMIT)} saves "
            f"{usd(group.num('saved_usd'))} ({group.num('saved_pct'):+.1f}%; "
            f"{_name(group.text('interval'), TEXT_LIMIT)}). "
            f"{_name(group.text('reason'), 4 * TEXT_LIMIT)}."
        )
        if group.has("if_longer_gaps_paid"):
            paid = group.obj("if_longer_gaps_paid")
            paragraphs[-1] += (
                f" If its pings also went out, and were paid, in gaps of max_idle_minutes or "
                f"more (a scheduler that cannot see the user's return: {paid.num('pings'):,.0f} "
                f"pings), it saves {usd(paid.num('saved_usd'))} "
                f"({paid.num('saved_pct'):+.1f}%)."
            )
        if group.text("group") == "all threads":
            table = (
                ["variant", "cost", "saved", "pings", "ping cost"],
                [
                    [_name(o.text("name"), TEXT_LIMIT)
                     + (" (pick)" if o.text("name") == group.text("pick") else ""),
                     usd(o.num("cost_usd")), f"{o.num('saved_pct'):+.1f}%",
                     f"{o.num('pings'):,.0f}", usd(o.num("ping_cost_usd"))]
                    for o in group.objs("options")
                ],
            )  # fmt: skip
    return Section("Cache advice: TTL and keep-warm pings", paragraphs, table, ("idle_gaps.png",))


def _verdict_section(run: Fields) -> Section:
    """The replay's verdict, first: the policy to ship, in dollars, its risk and interval."""
    found = run.obj("verdict").text("text", "").removeprefix("verdict: ")
    if found.startswith("no "):  # ("no policy saves"; a policy's name keeps its case)
        found = "N" + found[1:]
    text = found or "This run was made by an mcsim that did not state a verdict"
    return Section("Verdict", [_name(text, 8 * TEXT_LIMIT) + "."])


def _sweep_section(run: Fields, sweep: Any) -> Section:
    import polars as pl

    variants = sweep.filter(pl.col("level") == "variant")
    rows = [
        [
            _name(r["variant"], TEXT_LIMIT) + (" (recommended)" if r["recommended"] else ""),
            usd(r["cost_usd"]),
            f"{r['savings_vs_baseline_pct']:+.1f}%",
            f"{r['net_savings_vs_baseline_pct']:+.1f}%",
            f"{r['cleared_tokens']:,}",
            _risk(r["refetch_risk"]),
            str(r["cache_breaks"]),
        ]
        for r in variants.iter_rows(named=True)
    ]
    rec = run.obj("recommendation")
    text = (
        f"Recommendation: {_name(rec.text('name'), TEXT_LIMIT)}: {rec.text('reason', '')}."
        + "".join(f" Caution: {c}." for c in rec.texts("cautions"))
        if rec.text("name", "")
        else f"No recommendation: {rec.text('reason', 'no variant qualified')}."
    )
    options = run.obj("options")
    return Section(
        "Tuning: every variant of the policy",
        [
            f"Variants of policy '{_name(options.text('policy'))}' over "
            + ", ".join(_name(g, TEXT_LIMIT) for g in options.texts("grid"))
            + f"; the baseline ({_baseline_text(run)}) costs "
            f"{usd(run.num('baseline_cost_usd'))}: 'savings' and 'net' are against it.",
            text,
        ],
        (["variant", "cost", "savings", "net", "cleared tokens", "re-fetch risk", "breaks"], rows),
        ("savings_curve.png", "risk_tradeoff.png"),
    )


_NUMERIC = re.compile(r"^[+\-$]?[\d,.$]+%?$")
_CSS = """
body{font-family:system-ui,-apple-system,'Segoe UI',sans-serif;max-width:980px;margin:2em auto;
padding:0 1em;color:#1d1d1f;line-height:1.5}
h1{font-size:1.6em;border-bottom:2px solid #ddd;padding-bottom:.3em}
h2{font-size:1.25em;margin-top:1.8em}
table{border-collapse:collapse;margin:1em 0;font-size:.92em}
th,td{border:1px solid #ccc;padding:.35em .7em;text-align:left}
th{background:#f3f3f3}
td.n{text-align:right}
figure{margin:1.2em 0}
figure img{max-width:100%;border:1px solid #eee}
figcaption{font-size:.88em;color:#555}
.meta{color:#666;font-size:.9em}
"""


_BRACKETS = str.maketrans({"[": "&#91;", "]": "&#93;"})


def _policy_source(run: Any) -> str:
    """Where a run's policies came from: a built-in preset by its name (not the path it has in
    the installed package), or the user's policy file."""
    preset = run.text("policy_preset", "")
    return f"preset {preset}" if preset else f"policy file {run.text('policy_file', '')}"


def _html_text(value: object) -> str:
    """Any text as HTML that shows it: no tag, no attribute break, no control character, and
    brackets as references too, so the file holds no Markdown link or image for a tool that
    scans or converts it (the page looks the same)."""
    return html.escape(printable(value)).translate(_BRACKETS)


def _html(title: str, run: Fields, sections: list[Section], charts: dict[str, bytes]) -> str:
    e = _html_text
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{e(title)}</title><style>{_CSS}</style></head><body>",
        f"<h1>{e(title)}</h1>",
        f'<p class="meta">Run of {e(run.text("created", ""))} over '
        f"{e(', '.join(run.texts('paths')) or 'the default transcript folders')}; "
        f"{e(_policy_source(run))}.</p>",
    ]
    for section in sections:
        parts.append(f"<h2>{e(section.title)}</h2>")
        parts.extend(f"<p>{e(p)}</p>" for p in section.paragraphs)
        if section.table:
            head, rows = section.table
            parts.append("<table><thead><tr>")
            parts.extend(f"<th>{e(h)}</th>" for h in head)
            parts.append("</tr></thead><tbody>")
            for row in rows:
                cells = "".join(
                    f'<td class="n">{e(c)}</td>' if _NUMERIC.match(c) else f"<td>{e(c)}</td>"
                    for c in row
                )
                parts.append(f"<tr>{cells}</tr>")
            parts.append("</tbody></table>")
        for chart in section.charts:
            if chart not in charts:
                continue
            data = base64.b64encode(charts[chart]).decode()
            caption = CHART_CAPTIONS.get(chart, chart)
            parts.append(
                f'<figure><img alt="{e(caption)}" src="data:image/png;base64,{data}">'
                f"<figcaption>{e(caption)}</figcaption></figure>"
            )
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


def _markdown(title: str, sections: list[Section]) -> str:
    """The report as Markdown; every paragraph, cell and caption goes through markdown(), so
    what the run holds renders as the text it is (titles are mcsim's own)."""
    lines = [f"# {title}", ""]
    for section in sections:
        lines += [f"## {section.title}", ""]
        for p in section.paragraphs:
            lines += [markdown(p), ""]
        if section.table:
            head, rows = section.table
            lines.append("| " + " | ".join(map(markdown, head)) + " |")
            lines.append("|" + "---|" * len(head))
            lines += ["| " + " | ".join(map(markdown, row)) + " |" for row in rows]
            lines.append("")
        for chart in section.charts:
            lines += [f"![{markdown(CHART_CAPTIONS.get(chart, chart))}]({chart})", ""]
    return "\n".join(lines)
