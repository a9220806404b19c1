"""Docs that cannot drift, and the lint/type gates."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import REPO

from mcsim.cli import cli


def _readme_commands() -> list[str]:
    text = (REPO / "README.md").read_text()
    return re.findall(r"```sh\n(.+?)\n```", text, re.S)


def test_ci_runs_exactly_the_readme_test_command() -> None:
    main_job, tests = _readme_commands()[:2]
    assert "mcsim replay sample_transcripts --policy policies/all.yaml" in main_job
    ci = (REPO / ".ci" / "run").read_text()
    assert tests in ci.splitlines()


def _readme_tour() -> tuple[str, list[str]]:
    """The README's tour: the command it runs and the lines it shows as printed."""
    text = (REPO / "README.md").read_text()
    match = re.search(r"```console\n\$ \.venv/bin/(mcsim [^\n]+)\n(.*?)```", text, re.S)
    assert match is not None
    return match.group(1), match.group(2).splitlines()


@pytest.mark.slow
def test_readme_main_job_works(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)
    monkeypatch.setenv("MCSIM_CACHE_DIR", str(tmp_path / "cache"))
    args = ["replay", "sample_transcripts", "--policy", "policies/all.yaml"]
    result = CliRunner().invoke(cli, [*args, "--out", str(tmp_path / "run")])
    assert result.exit_code == 0, result.output
    assert "claude-code" in result.stdout and "fidelity" in result.stdout
    # The tour shows what this command prints, line for line: a line cut at " …" starts the
    # printed one, and the run directory's name (a UTC time) is the only other difference.
    command, shown = _readme_tour()
    assert command == "mcsim " + " ".join(args)
    assert command in _readme_commands()[0]
    printed = result.stdout.splitlines()
    assert len(shown) == len(printed), result.stdout
    for line, real in zip(shown, printed, strict=True):
        if line.endswith(" …"):
            assert real.startswith(line.removesuffix(" …")) and len(real) > len(line), real
        elif line.startswith("wrote reports/"):
            assert re.fullmatch(r"wrote reports/\d{8}-\d{6}-all/ \(.+\)", line), line
            assert real == f"wrote {tmp_path / 'run'}/ " + line.split(" ", 2)[2]
        else:
            assert real == line


def test_readme_reading_gives_the_tours_figures() -> None:
    """'How to read it' quotes the tour's net figure for claude-code as the verdict gives it
    (four decimals under a dollar): "$0.00 dearer" read as no difference at all."""
    _, shown = _readme_tour()
    verdict = next(line for line in shown if line.startswith("verdict:"))
    more = re.search(r"claude-code, costs (\$[\d.]+) more", verdict)
    assert more is not None and more.group(1) == "$0.0023"
    prose = " ".join((REPO / "README.md").read_text().split("How to read it:")[1].split())
    assert f"leaves it {more.group(1)} (0.10%) dearer" in prose


def test_readme_and_the_schema_page_give_the_schema_version_written() -> None:
    from mcsim.outputs.tables import SCHEMA_VERSION

    readme = " ".join((REPO / "README.md").read_text().split())
    assert f"a `schema_version` column (now {SCHEMA_VERSION})" in readme
    schema = (REPO / "docs" / "output-schema.md").read_text().splitlines()[0]
    assert schema == f"# Output schema (schema_version {SCHEMA_VERSION})"


def test_readme_and_docs_policy_examples_load(tmp_path: Path) -> None:
    from mcsim.replay.scenario import load_policy_file

    expected = {  # per file, each yaml block's policies (baseline: always run)
        "README.md": [["baseline", "warm-5m", "claude-code", "api-defaults"]],
        "docs/policy-files.md": [
            ["baseline", "claude-code", "api-defaults", "naive-keep-6"],
            ["baseline", "warm-5m"],
        ],
        "docs/advise.md": [["baseline", "main 1h+warm55/180; sub no change"]],
    }
    for name, per_block in expected.items():
        blocks = re.findall(r"```yaml\n(.+?)```", (REPO / name).read_text(), re.S)
        assert len(blocks) == len(per_block), name
        for i, (block, policies) in enumerate(zip(blocks, per_block, strict=True)):
            path = tmp_path / f"{Path(name).stem}-{i}.yaml"
            path.write_text(block)
            assert [s.name for s in load_policy_file(path)] == policies, name


def test_every_example_policy_file_loads() -> None:
    from mcsim.replay.scenario import load_policy_file

    files = sorted((REPO / "policies").glob("*.yaml"))
    assert len(files) >= 5
    names = {s.name for f in files for s in load_policy_file(f)}
    assert {
        "claude-code",
        "api-defaults",
        "claude-code-api",
        "swe-agent-n5-polling",
        "masking-study-n10",
        "naive-keep-6",
        "claude-code-1h",
    } <= names


def test_docs_document_every_parquet_column() -> None:
    from mcsim.outputs.inspect_tables import BREAKS_SCHEMA, CALLS_SCHEMA, SESSIONS_SCHEMA
    from mcsim.outputs.replay_tables import (
        REPLAY_BREAKS_SCHEMA,
        REPLAY_CALLS_SCHEMA,
        REPLAY_SESSIONS_SCHEMA,
        SUMMARY_SCHEMA,
    )
    from mcsim.outputs.sweep_tables import SWEEP_SCHEMA

    text = re.sub(r"\s+", " ", (REPO / "docs" / "output-schema.md").read_text())
    schemas = (
        SESSIONS_SCHEMA,
        CALLS_SCHEMA,
        BREAKS_SCHEMA,
        SUMMARY_SCHEMA,
        REPLAY_SESSIONS_SCHEMA,
        REPLAY_CALLS_SCHEMA,
        REPLAY_BREAKS_SCHEMA,
        SWEEP_SCHEMA,
    )
    for schema in schemas:
        for column in schema:
            assert re.search(rf"\b{column}\b", text), column


def test_every_command_has_help_with_an_example() -> None:
    for command in ("inspect", "replay", "sweep", "report", "policies", "convert"):
        result = CliRunner().invoke(cli, [command, "--help"])
        assert result.exit_code == 0
        assert "Example:" in result.stdout, command
        example = result.stdout.split("Example:\n", 1)[1].split("\n\n", 1)[0].splitlines()
        # Each line as typed: a command, or the continuation of one ending in a backslash
        # (a backslash-newline in a docstring used to join them with a run of spaces).
        for before, line in zip(["mcsim", *example], example, strict=False):
            assert line.strip().startswith("mcsim") or before.endswith("\\"), (command, line)
            assert "   " not in line.strip(), (command, line)


def _run(*args: str) -> None:
    proc = subprocess.run([sys.executable, "-m", *args], cwd=REPO, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_ruff_lint() -> None:
    _run("ruff", "check", ".")


def test_ruff_format() -> None:
    _run("ruff", "format", "--check", ".")


@pytest.mark.slow
def test_mypy_strict() -> None:
    _run("mypy")
