"""What one more sweep variant costs, next to a cold single-policy replay.

    python bench/bench_sweep.py [--size-mb 520] [--runs 2]

On the >= 500 MB replica (common.py): a cold `mcsim replay` of one policy (empty session
cache), then warm sweeps of 5 and 20 keep_recent variants of Claude Code's stack. The cost
of an extra variant is the difference between the two sweeps divided by 15; the target is
under 5% of the cold single-policy run. Prints figures; asserts nothing.
"""

from __future__ import annotations

import os
import shutil
import statistics

from common import REPO, arguments, mcsim, measure, replicate

POLICY = REPO / "policies" / "claude-code.yaml"


def main() -> None:
    args = arguments(__doc__, runs=2)

    config = replicate(args.work / "replica", args.size_mb, args.corpus)
    projects = str(config / "projects")
    cache = args.work / "sweep-cache"
    out = args.work / "sweep-out"
    env = dict(os.environ)
    policy = ("--policy", str(POLICY))
    single = mcsim("replay", projects, *policy, cache=cache, out=out)

    def sweep(n: int) -> list[str]:
        grid = f"cached_microcompact.keep_recent=1..{n}"
        return mcsim("sweep", projects, *policy, "--name", "claude-code", "--grid", grid,
                     cache=cache, out=out)  # fmt: skip

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
