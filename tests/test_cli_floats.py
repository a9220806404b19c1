"""Float options refuse nan and the infinities: nan passes a range test and fails every
comparison, so a gate given nan would pass whatever the result."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import REPO, SAMPLES

from mcsim.cli import cli

POLICY = ["--policy", str(REPO / "policies" / "claude-code.yaml")]
SWEEP = ["--name", "claude-code", "--grid", "ttl=5m,1h"]


@pytest.mark.parametrize(
    ("command", "option", "value", "problem"),
    [
        ("replay", "--fail-under-savings", "nan", "nan is not a finite number."),
        ("replay", "--fail-under-savings", "-inf", "-inf is not a finite number."),
        ("replay", "--fail-over-risk", "nan", "nan is not a finite number."),
        ("replay", "--fidelity-threshold", "NaN", "nan is not a finite number."),
        ("replay", "--fidelity-threshold", "1e400", "inf is not in the range 0<=x<=1."),
        # a fraction: 5 (meant as 5%) would be 500% and label no session, silently
        ("replay", "--fidelity-threshold", "5", "5.0 is not in the range 0<=x<=1."),
        ("sweep", "--fail-under-savings", "nan", "nan is not a finite number."),
        ("sweep", "--fail-over-risk", "inf", "inf is not a finite number."),
        ("sweep", "--max-risk", "nan", "nan is not a finite number."),
        ("sweep", "--max-risk", "inf", "inf is not in the range 0<=x<=100."),
    ],
)
def test_non_finite_floats_are_usage_errors(
    tmp_path: Path, command: str, option: str, value: str, problem: str
) -> None:
    out = tmp_path / "out"
    args = [command, str(SAMPLES), *POLICY, "--out", str(out), option, value]
    if command == "sweep":
        args += SWEEP
    result = CliRunner().invoke(cli, args, prog_name="mcsim")
    assert result.exit_code == 2
    assert result.stdout == ""
    assert result.stderr == (  # one line, saying where the options are explained
        f"Error: Invalid value for '{option}': {problem} See 'mcsim {command} --help'.\n"
    )
    assert not out.exists()
