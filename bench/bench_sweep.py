"""What one more sweep variant costs, next to a cold single-policy replay.

    python bench/bench_sweep.py [--size-mb 520] [--runs 2]

On the >= 500 MB replica (common.py): a cold `mcsim replay` of one policy (empty session
cache), then warm sweeps of 5 and 20 keep_recent variants of Claude Code's stack. The cost
of an extra variant is the difference between the two sweeps divided by 15; the target is
under 5% of the cold single-policy run. Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
from pathlib import Path

from common import REPO, measure, replicate

POLICY = REPO / "policies" / "claude-code.yaml"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size-mb", type=int, default=520)
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--work", type=Path, default=REPO / "bench" / ".work")
    args = parser.parse_args()

    config = replicate(args.work / "replica", args.size_mb)
    projects = str(config / "projects")
    cache = args.work / "sweep-cache"
    out = args.work / "sweep-out"
    env = dict(os.environ)
    mcsim = [sys.executable, "-m", "mcsim"]
    single = [
        *mcsim,
        "replay",
        projects,
        "--policy",
        str(POLICY),
        "--cache-dir",
        str(cache),
        "--out",
        str(out),
        "--force",
        "--json",
    ]

    def sweep(n: int) -> list[str]:
        return [
            *mcsim,
            "sweep",
            projects,
            "--policy",
            str(POLICY),
            "--name",
            "claude-code",
            "--grid",
            f"cached_microcompact.keep_recent=1..{n}",
            "--cache-dir",
            str(cache),
            "--out",
            str(out),
            "--force",
            "--json",
        ]

    cold, small, large = [], [], []
    for run in range(args.runs):
        shutil.rmtree(cache, ignore_errors=True)
        wall, peak, _ = measure(single, env)
        cold.append(wall)
        print(f"run {run + 1} cold single-policy replay {wall:6.2f} s  peak {peak:5.0f} MB")
        for n, bucket in ((5, small), (20, large)):
            wall, peak, _ = measure(sweep(n), env)
            bucket.append(wall)
            print(f"run {run + 1} warm sweep, {n:2d} variants  {wall:6.2f} s  peak {peak:5.0f} MB")
    c, s5, s20 = (statistics.median(x) for x in (cold, small, large))
    extra = (s20 - s5) / 15
    print(
        f"median cold single-policy replay {c:.2f} s; sweeps: 5 variants {s5:.2f} s, "
        f"20 variants {s20:.2f} s"
    )
    print(f"one more variant: {extra:.3f} s = {100 * extra / c:.1f}% of the cold run (target < 5%)")


if __name__ == "__main__":
    main()
