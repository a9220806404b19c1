"""`mcsim inspect --by/--timezone/--project`: grouped usage, with numbers worked by hand."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from lines import assistant, usage, user, write

from mcsim.cli import cli

SONNET = "claude-sonnet-4-5-20250929"  # $/M: input 3, 5m write 3.75, 1h write 6, read 0.3, out 15
HAIKU = "claude-haiku-4-5-20251001"  # $/M: input 1, 5m write 1.25, 1h write 2, read 0.1, out 5
DAY = 86_400
KINDS = [
    "input_tokens",
    "cache_write_5m_tokens",
    "cache_write_1h_tokens",
    "cache_read_tokens",
    "output_tokens",
]


def _session(folder: Path) -> None:
    """Three calls of one session over midnight UTC (2026-01-01 23:59 to 2026-01-02 00:02).

    a1 sonnet: 1000 in, 1500 5m + 500 1h write, 100 out
       = 0.003 + 0.005625 + 0.003 + 0.0015 = 0.013125
    a2 haiku: 10 in, 4000 read, 200 out = 0.00001 + 0.0004 + 0.001 = 0.00141
    a3 sonnet: 20 in, 100 5m write, 3000 read, 50 out
       = 0.00006 + 0.000375 + 0.0009 + 0.00075 = 0.002085
    """
    write(
        folder / "proj" / "s1.jsonl",
        [
            user("u1", None, DAY - 61, session="s1"),
            assistant(
                "a1", "u1", DAY - 60, "m1", "r1", session="s1", u=usage(1000, 2000, 0, 100, w1h=500)
            ),
            assistant(
                "a2",
                "a1",
                DAY + 60,
                "m2",
                "r2",
                session="s1",
                model=HAIKU,
                u=usage(10, 0, 4000, 200),
            ),
            assistant("a3", "a2", DAY + 120, "m3", "r3", session="s1", u=usage(20, 100, 3000, 50)),
        ],
    )


def _doc(runner: CliRunner, *args: str) -> dict[str, Any]:
    result = runner.invoke(cli, ["inspect", *args, "--json"])
    assert result.exit_code == 0, result.output
    doc: dict[str, Any] = json.loads(result.stdout)
    return doc


def _rows(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {r["key"]: r for r in doc["groups"]["rows"]}


def test_by_day_splits_a_session_at_midnight(runner: CliRunner, tmp_path: Path) -> None:
    _session(tmp_path)
    doc = _doc(runner, str(tmp_path), "--by", "day")
    assert doc["groups"]["by"] == "day"
    assert doc["groups"]["timezone"] == "UTC"
    rows = _rows(doc)
    assert list(rows) == ["2026-01-01", "2026-01-02"]
    first, second = rows["2026-01-01"], rows["2026-01-02"]
    assert (first["calls"], second["calls"]) == (1, 2)
    assert (first["sessions"], second["sessions"]) == (1, 1)
    assert [first[k] for k in KINDS] == [1000, 1500, 500, 0, 100]
    assert [second[k] for k in KINDS] == [30, 100, 0, 7000, 250]
    assert first["cost_usd"] == pytest.approx(0.013125)
    assert second["cost_usd"] == pytest.approx(0.00141 + 0.002085)
    assert second["cache_hit_ratio"] == pytest.approx(7000 / 7130, abs=1e-6)
    assert doc["totals"]["cost_usd"] == pytest.approx(0.01662)


def test_day_and_model_rows_add_up_to_the_session_rows(runner: CliRunner, tmp_path: Path) -> None:
    _session(tmp_path)
    sessions = _doc(runner, str(tmp_path))["groups"]["rows"]
    assert len(sessions) == 1
    assert sessions[0]["key"] == "s1"
    assert sessions[0]["project"] == "proj"
    assert [sessions[0][k] for k in KINDS] == [1030, 1600, 500, 7000, 350]
    assert sessions[0]["cost_usd"] == pytest.approx(0.01662)
    for by in ("day", "model", "week", "month", "project"):
        rows = _doc(runner, str(tmp_path), "--by", by)["groups"]["rows"]
        for k in [*KINDS, "calls"]:
            assert sum(r[k] for r in rows) == sessions[0][k], (by, k)
        assert sum(r["cost_usd"] for r in rows) == pytest.approx(0.01662, abs=1e-9)
    models = _rows(_doc(runner, str(tmp_path), "--by", "model"))
    assert list(models) == [HAIKU, SONNET]
    assert models[HAIKU]["calls"] == 1
    assert models[HAIKU]["cost_usd"] == pytest.approx(0.00141)
    assert models[SONNET]["calls"] == 2
    assert models[SONNET]["cost_usd"] == pytest.approx(0.013125 + 0.002085)
    assert [models[SONNET][k] for k in KINDS] == [1020, 1600, 500, 3000, 150]
    # 2026-01-01 is a Thursday: its ISO week starts on Monday 2025-12-29, and holds Friday too.
    assert list(_rows(_doc(runner, str(tmp_path), "--by", "week"))) == ["2025-12-29"]
    assert list(_rows(_doc(runner, str(tmp_path), "--by", "month"))) == ["2026-01"]


def test_totals_by_model_in_json(runner: CliRunner, tmp_path: Path) -> None:
    _session(tmp_path)
    by_model = _doc(runner, str(tmp_path))["totals"]["by_model"]
    assert list(by_model) == [HAIKU, SONNET]
    assert by_model[HAIKU]["cost_usd"] == pytest.approx(0.00141)
    assert [by_model[HAIKU][k] for k in KINDS] == [10, 0, 0, 4000, 200]
    assert by_model[SONNET]["cost_usd"] == pytest.approx(0.01521)


def test_timezone_moves_a_call_to_the_other_day(runner: CliRunner, tmp_path: Path) -> None:
    _session(tmp_path)
    # New York is UTC-5 in January: 18:59, 19:01 and 19:02 on 2026-01-01.
    rows = _rows(_doc(runner, str(tmp_path), "--by", "day", "--timezone", "America/New_York"))
    assert list(rows) == ["2026-01-01"]
    assert rows["2026-01-01"]["calls"] == 3
    # Tokyo is UTC+9: 08:59, 09:01 and 09:02 on 2026-01-02.
    rows = _rows(_doc(runner, str(tmp_path), "--by", "day", "--timezone", "Asia/Tokyo"))
    assert list(rows) == ["2026-01-02"]
    text = runner.invoke(cli, ["inspect", str(tmp_path), "--by", "day"]).stdout
    lines = text.splitlines()
    assert lines[0].split()[:3] == ["day", "(UTC)", "sessions"]
    assert lines[2].split()[:3] == ["2026-01-01", "1", "1"]
    assert lines[3].split()[:3] == ["2026-01-02", "1", "2"]
    assert lines[5].split()[:3] == ["TOTAL", "1", "3"]
    # hit %: 7000 reads over 1030 + 1600 + 500 + 7000 = 10130 prompt tokens
    assert lines[5].split()[-2:] == ["0.0166", "69.1"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--by", "hour"], "Invalid value for '--by'"),
        (["--timezone", "Mars/Olympus"], "unknown time zone 'Mars/Olympus'"),
        (["--timezone", "../etc"], "unknown time zone"),
    ],
)
def test_bad_by_or_timezone_exit_2(
    runner: CliRunner, tmp_path: Path, args: list[str], message: str
) -> None:
    _session(tmp_path)
    result = runner.invoke(cli, ["inspect", str(tmp_path), *args])
    assert result.exit_code == 2
    assert message in result.stderr
    assert [line for line in result.stderr.splitlines() if line.startswith("Error")] == [
        next(line for line in result.stderr.splitlines() if message in line)
    ]


def test_project_glob_is_case_sensitive_and_skips_reading(
    runner: CliRunner, tmp_path: Path
) -> None:
    for name, session in (("alpha", "sa"), ("Beta", "sb")):
        write(
            tmp_path / name / f"{session}.jsonl",
            [user("u", None, 0, session=session), assistant("a", "u", 1, session, session=session)],
        )
    doc = _doc(runner, str(tmp_path), "--project", "a*")
    assert [s["project"] for s in doc["sessions"]] == ["alpha"]
    assert doc["input"]["files"] == 1
    assert doc["input"]["files_skipped_by_project"] == 1
    doc = _doc(runner, str(tmp_path), "--project", "B?ta")
    assert [s["project"] for s in doc["sessions"]] == ["Beta"]
    result = runner.invoke(cli, ["inspect", str(tmp_path), "--project", "b*"])
    assert result.exit_code == 1  # nothing matches: no calls
    assert "no API calls" in result.stderr


def test_dates_filter_skipped_line_examples(runner: CliRunner, tmp_path: Path) -> None:
    early = write(
        tmp_path / "p" / "early.jsonl",
        [
            user("u1", None, 0, session="early"),
            "{not json",
            assistant("a1", "u1", 1, "m1", session="early"),
        ],
    )
    late = 59 * DAY
    write(
        tmp_path / "p" / "late.jsonl",
        [
            user("u2", None, late, session="late"),
            "[1]",
            assistant("a2", "u2", late + 1, "m2", session="late"),
        ],
    )
    write(tmp_path / "p" / "broken.jsonl", ["{nope"])  # no session: cannot be dated
    os.utime(early, None)  # written recently, so --since reads it

    def examples(*args: str) -> list[tuple[str, int]]:
        skipped = _doc(runner, str(tmp_path), *args)["skipped"]
        return sorted((Path(e["file"]).name, e["line"]) for e in skipped["examples"])

    assert examples() == [("broken.jsonl", 1), ("early.jsonl", 2), ("late.jsonl", 2)]
    assert examples("--since", "2026-02-01") == [("broken.jsonl", 1), ("late.jsonl", 2)]
    assert examples("--until", "2026-01-01") == [("broken.jsonl", 1), ("early.jsonl", 2)]
    doc = _doc(runner, str(tmp_path), "--since", "2026-02-01")
    assert doc["skipped"]["examples_outside_dates"] == 1
    assert doc["skipped"]["total"] == 3  # the counts still cover every line read


def test_no_colon_when_every_skipped_example_is_outside_the_dates(
    runner: CliRunner, tmp_path: Path
) -> None:
    early = write(
        tmp_path / "p" / "early.jsonl",
        [
            user("u1", None, 0, session="early"),
            assistant("a1", "u1", 1, "m1", session="early"),
            assistant("a2", "a1", 2, "m2", session="early", model="<synthetic>"),
        ],
    )
    late = 59 * DAY
    write(
        tmp_path / "p" / "late.jsonl",
        [
            user("u2", None, late, session="late"),
            assistant("a3", "u2", late + 1, "m3", session="late"),
        ],
    )
    os.utime(early, None)  # written recently, so --since reads it
    result = runner.invoke(cli, ["inspect", str(tmp_path), "--since", "2026-02-01"])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert "skipped 1 line (synthetic 1)" in lines
    assert (
        "note: 1 session starting outside --since/--until was left out (and 1 example of "
        "skipped lines in their files)"
    ) in lines
    assert not any(line.endswith(":") for line in lines)
    result = runner.invoke(cli, ["inspect", str(tmp_path)])  # the example shown, after a colon
    lines = result.output.splitlines()
    i = lines.index("skipped 1 line (synthetic 1):")
    assert lines[i + 1] == (
        f"  {tmp_path / 'p' / 'early.jsonl'}:3: synthetic: not an API call (error or interrupt)"
    )


def test_corpus_days_add_up_to_sessions_and_reference(
    runner: CliRunner, corpus: Path, corpus_reference: dict[str, Any]
) -> None:
    ref = corpus_reference["totals"]  # cost rounded to the tenth of a cent
    costs = []
    for by in ("session", "day", "model", "month"):
        rows = _doc(runner, str(corpus), "--by", by)["groups"]["rows"]
        for k in [*KINDS, "calls"]:
            assert sum(r[k] for r in rows) == ref[k], (by, k)
        costs.append(sum(r["cost_usd"] for r in rows))
        assert costs[-1] == pytest.approx(ref["cost_usd"], abs=5e-4)
    assert costs[1:] == pytest.approx([costs[0]] * 3, abs=1e-5)  # rows are rounded to 1e-6
    by_model = _doc(runner, str(corpus))["totals"]["by_model"]
    assert sum(m["calls"] for m in by_model.values()) == ref["calls"]


def test_a_project_pattern_that_matches_nothing_says_so(tmp_path: Path) -> None:
    write(tmp_path / "-src-app" / "s.jsonl", [user("u1", None, 0), assistant("a1", "u1", 1, "m1")])
    write(tmp_path / "-src-lib" / "s.jsonl", [user("u1", None, 0), assistant("a1", "u1", 1, "m2")])
    result = CliRunner().invoke(cli, ["inspect", str(tmp_path), "--project", "*nomatch*"])
    assert result.exit_code == 1
    assert (
        result.stderr.strip()
        .splitlines()[-1]
        .endswith(
            "nothing to account; --project matched no project (the 2 files found belong to others)"
        )
    )
