"""Names that attack the terminal or the report, fed through inspect, replay, sweep and report.

A transcript carries terminal escapes (clear screen, window title, OSC 52 clipboard write),
a bidi override, HTML, Markdown images and `javascript:` links and a table break in its
model name, project folder, session id, cwd and unknown line types; the policy file names
its policy the same way. What a person reads must hold none of it raw, and still show it.
"""

from __future__ import annotations

import json
import re
import unicodedata
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from lines import assistant, usage, user, write

from mcsim.cli import cli
from mcsim.text import width

R = "\ufffd"
CLEAR = "\x1b[2J"
TITLE = "\x1b]0;owned\x07"
CLIPBOARD = "\x1b]52;c;b3duZWQ=\x07"
RTL = "\u202e"
MODEL = f"claude-<script>alert(1)</script>{CLIPBOARD}{RTL}"
PROJECT = f"proj{CLEAR}{TITLE}<img src=x onerror=alert(1)>\n| a | b |{RTL}"
SESSION = f"sess{CLEAR}[x](javascript:alert(1)){RTL}"
TYPES = [f"![](https://evil.example/p.png){TITLE}", f"{CLIPBOARD}[x](javascript:alert(1))\b\r"]
POLICY = f"p![](https://evil.example/p.png){CLEAR}{RTL}|x"
MATH_POLICY = "m$\\frac$"  # mathtext in a chart label, math on GitHub
CJK_PROJECT = "日本語のプロジェクト" * 2  # the widest in its column

# What each payload looks like once made printable: the reader can still see it.
MODEL_SHOWN = f"claude-<script>alert(1)</script>{R}]52;c;b3duZWQ={R}{R}"
PROJECT_SHOWN = f"proj{R}[2J{R}]0;owned{R}<img src=x onerror=alert(1)> | a | b |{R}"
SESSION_SHOWN = f"sess{R}[2J[x](javascript:alert(1)){R}"
POLICY_SHOWN = f"p![](https://evil.example/p.png){R}[2J{R}|x"


def _session(session: str, model: str, cwd: str, tag: str) -> list[object]:
    """Four calls, each reading what the previous one wrote; ids start with `tag`."""
    lines: list[object] = [user(f"{tag}u0", None, 0, session=session, cwd=cwd)]
    for i in range(4):
        u = usage(write=200 if i == 0 else 50, read=0 if i == 0 else 150 + 50 * i)
        lines.append(assistant(f"{tag}a{i}", f"{tag}u{i}", 10 + 60 * i, f"{tag}m{i}",
                               f"{tag}r{i}", u=u, model=model, session=session))  # fmt: skip
        lines.append(user(f"{tag}u{i + 1}", f"{tag}a{i}", 20 + 60 * i, session=session))
    return lines


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("hostile")
    unknown = [{"type": t, "sessionId": SESSION} for t in TYPES]
    write(root / "projects" / PROJECT / "s.jsonl", [*_session(SESSION, MODEL, f"/w/{CLEAR}", "h"),
                                                    *unknown])  # fmt: skip
    sonnet = "claude-sonnet-4-5-20250929"
    write(root / "projects" / CJK_PROJECT / "c.jsonl", _session("cjk-session", sonnet, "/w", "c"))
    policy_dir = root / f"policies{TITLE}"
    policy_dir.mkdir()
    (policy_dir / "p.yaml").write_text(
        "policies:\n"
        + "".join(
            f"  - name: {json.dumps(name)}\n    kind: cached_microcompact\n"
            "    trigger_threshold: 1\n    keep_recent: 1\n"
            for name in (POLICY, MATH_POLICY)
        )
    )
    return root


def invoke(args: list[str]) -> Result:
    # color=True: click would strip ANSI sequences from a captured stream by itself; the
    # test is that mcsim never writes them.
    return CliRunner().invoke(cli, args, color=True)


def assert_terminal_safe(result: Result) -> None:
    for stream in (result.stdout, result.stderr):
        bad = {ch for ch in stream if ch != "\n" and unicodedata.category(ch) in ("Cc", "Cf")}
        assert not bad, sorted(map(hex, map(ord, bad)))


def assert_report_safe(page: str) -> None:
    for raw in ("<script", "<img src=x", "](javascript:", "![](http", "\x1b", "\x07", "\b", RTL):
        assert raw not in page, raw


def assert_tables_whole(md: str) -> None:
    """Every row of every Markdown table has as many cells as its header."""
    cells = re.compile(r"(?<!\\)\|")
    for block in md.split("\n\n"):
        if block.startswith("|"):
            head, *rows = block.splitlines()
            assert all(len(cells.findall(r)) == len(cells.findall(head)) for r in rows), block


def test_inspect_shows_every_name_printable_and_aligned(hostile: Path) -> None:
    result = invoke(["inspect", str(hostile / "projects")])
    assert result.exit_code == 0, result.output
    assert_terminal_safe(result)
    out = result.stdout
    # The project column keeps both ends of a long name (32 characters).
    assert f"{PROJECT_SHOWN[:16]}…{PROJECT_SHOWN[-15:]}" in out
    assert SESSION_SHOWN[:8] in out
    assert f"{MODEL_SHOWN} (4)" in out  # the unpriced-model warning
    for shown in (f"![](https://evil.example/p.png){R}]0;owned{R}",
                  f"{R}]52;c;b3duZWQ={R}[x](javascript:alert(1)){R} "):  # fmt: skip
        assert f": unknown_type: {shown}" in out
    # Every column starts at the same terminal column on every row, CJK and payload alike.
    lines = out.splitlines()
    header = lines[0]
    for row in [line for line in lines if "2026-01-01 00:00" in line]:
        assert width(row[: row.index("2026-01-01 00:00")]) == header.index("start (UTC)")
    assert any(row.startswith(CJK_PROJECT) for row in lines)


@pytest.mark.slow
def test_replay_and_its_report_show_names_as_text(hostile: Path, tmp_path: Path) -> None:
    out = tmp_path / f"run{CLEAR}{TITLE}"  # printed in the "wrote" lines; `[` is no glob
    policy = hostile / f"policies{TITLE}" / "p.yaml"
    result = invoke(["replay", str(hostile / "projects"), "--policy", str(policy),
                     "--out", str(out), "--no-cache"])  # fmt: skip
    assert result.exit_code == 0, result.output
    assert_terminal_safe(result)
    assert POLICY_SHOWN in result.stdout
    assert f"  {PROJECT_SHOWN} {SESSION_SHOWN}: 100.00%" in result.stdout  # fidelity line
    # The data keep every character.
    doc = json.loads((out / "run.json").read_text())
    assert doc["analysed"]["projects"] == sorted([PROJECT, CJK_PROJECT])

    report = invoke(["report", str(out)])
    assert report.exit_code == 0, report.output
    assert_terminal_safe(report)
    md = (out / "report.md").read_text()
    assert_report_safe(md)
    assert "Models: claude-&lt;script&gt;alert(1)&lt;/script&gt;" in md
    assert f"{R}&#91;2J{R}&#93;0;owned{R}&lt;img src=x onerror=alert(1)&gt; \\| a \\| b \\|" in md
    assert f"| p!&#91;&#93;(https&#91;:&#93;//evil.example/p.png){R}&#91;2J{R}\\|x |" in md
    assert "| m\\$\\\\frac\\$ |" in md
    assert_tables_whole(md)

    page = (out / "report.html").read_text()
    assert_report_safe(page)
    assert "Models: claude-&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "&lt;img src=x onerror=alert(1)&gt; | a | b |" in page
    shown = POLICY_SHOWN.replace("[", "&#91;").replace("]", "&#93;")
    assert f"<td>{shown}</td>" in page


def test_sweep_and_its_report_show_names_as_text(hostile: Path, tmp_path: Path) -> None:
    out = tmp_path / f"sweep{CLEAR}"
    policy = hostile / f"policies{TITLE}" / "p.yaml"
    result = invoke(["sweep", str(hostile / "projects"), "--policy", str(policy),
                     "--name", POLICY, "--grid", "cached_microcompact.keep_recent=1,2",
                     "--out", str(out), "--no-cache"])  # fmt: skip
    assert result.exit_code == 0, result.output
    assert_terminal_safe(result)
    assert ": unknown_type: ![](https://evil.example/p.png)" in result.stdout
    assert invoke(["report", str(out)]).exit_code == 0
    md = (out / "report.md").read_text()
    assert_report_safe(md)
    assert_tables_whole(md)
    assert "Variants of policy 'p!&#91;&#93;(https&#91;:&#93;//evil.example" in md
    assert_report_safe((out / "report.html").read_text())


def test_an_error_naming_a_hostile_path_is_one_printable_line(tmp_path: Path) -> None:
    missing = tmp_path / f"missing{TITLE}\n.yaml"
    result = invoke(["replay", str(tmp_path), "--policy", str(missing)])
    assert result.exit_code == 2
    assert_terminal_safe(result)
    assert result.stderr == (
        f"Error: {tmp_path}/missing{R}]0;owned{R} .yaml: cannot read policy file "
        "(No such file or directory)\n"
    )


def test_json_output_escapes_what_a_terminal_would_obey(tmp_path: Path) -> None:
    # orjson writes C1 controls and bidi characters raw; --json writes them as \u escapes,
    # so the data is exact and the terminal is safe.
    model = "claude-\u009b2J\u202eevil\u200b\u2028"
    write(tmp_path / "p" / "s.jsonl", _session("s1", model, "/w", "j"))
    result = CliRunner().invoke(cli, ["inspect", str(tmp_path), "--json"])
    assert result.exit_code == 0, result.output
    raw = result.stdout_bytes
    for ch in "\u009b\u202e\u200b\u2028":
        assert ch.encode() not in raw
    assert json.loads(raw)["sessions"][0]["models"] == [model]
