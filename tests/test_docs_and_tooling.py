"""Docs that cannot drift, and the lint/type gates."""

from __future__ import annotations

import re
import subprocess
import sys

from click.testing import CliRunner
from conftest import REPO

from mcsim.cli import cli


def _readme_commands() -> list[str]:
    text = (REPO / "README.md").read_text()
    return re.findall(r"```sh\n(.+?)\n```", text, re.S)


def test_ci_runs_exactly_the_readme_test_command() -> None:
    main_job, tests = _readme_commands()[:2]
    assert "mcsim inspect sample_transcripts" in main_job
    ci = (REPO / ".ci" / "run").read_text()
    assert tests in ci.splitlines()


def test_readme_main_job_works(monkeypatch: object) -> None:
    import os

    os.chdir(REPO)
    result = CliRunner().invoke(cli, ["inspect", "sample_transcripts"])
    assert result.exit_code == 0
    assert "TOTAL" in result.stdout and " 69 " in result.stdout


def test_readme_documents_every_parquet_column() -> None:
    from mcsim.output import BREAKS_SCHEMA, CALLS_SCHEMA, SESSIONS_SCHEMA

    text = re.sub(r"\s+", " ", (REPO / "README.md").read_text())
    for schema in (SESSIONS_SCHEMA, CALLS_SCHEMA, BREAKS_SCHEMA):
        for column in schema:
            assert re.search(rf"\b{column}\b", text), column


def _run(*args: str) -> None:
    proc = subprocess.run([sys.executable, "-m", *args], cwd=REPO, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_ruff_lint() -> None:
    _run("ruff", "check", ".")


def test_ruff_format() -> None:
    _run("ruff", "format", "--check", ".")


def test_mypy_strict() -> None:
    _run("mypy")
