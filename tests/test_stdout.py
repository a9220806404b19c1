"""Standard output that cannot be written: a closed pipe ends the run quietly, any other
failure is one line; never a traceback, at the write or at exit."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import SAMPLES

COMMANDS = [
    ["inspect", str(SAMPLES)],
    ["inspect", str(SAMPLES), "--json"],
    ["policies"],
    ["policies", "--json"],
    # printed while the options are read, before any command runs
    ["--help"],
    ["replay", "--help"],
    ["--version"],
]


def mcsim(args: list[str], stdout: int) -> subprocess.CompletedProcess[str]:
    # Block-buffered, as a user's shell runs it: unbuffered, a failure would come at once, and
    # the failure at exit (of what is still buffered) would go untested. The environment as
    # the test has it (read when the module was imported, it lacked the test's own cache
    # folder and key: the runs wrote into the user's cache folder, and made a key file).
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    return subprocess.run(
        [sys.executable, "-m", "mcsim", *args],
        stdout=stdout,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        timeout=300,
    )


@pytest.mark.slow
@pytest.mark.parametrize("args", COMMANDS)
def test_a_closed_pipe_ends_the_run_quietly_with_exit_1(args: list[str]) -> None:
    """`mcsim ... | head` where head has gone: exit 1 and nothing on stderr (click's and
    Python's convention for EPIPE)."""
    read, write = os.pipe()
    os.close(read)
    try:
        proc = mcsim(args, write)
    finally:
        os.close(write)
    assert (proc.returncode, proc.stderr) == (1, "")


@pytest.mark.slow
@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
@pytest.mark.parametrize("args", COMMANDS)
def test_a_full_disk_on_stdout_is_one_line_and_exit_1(args: list[str]) -> None:
    fd = os.open("/dev/full", os.O_WRONLY)
    try:
        proc = mcsim(args, fd)
    finally:
        os.close(fd)
    assert (proc.returncode, proc.stderr) == (
        1,
        "Error: cannot write to standard output: No space left on device\n",
    )
