"""Speed and memory of `mcsim inspect --json` next to ccusage on a >= 500 MB corpus replica.

    python bench/bench_inspect.py [--size-mb 520] [--runs 3] [--work bench/.work]

Builds the replica once (see common.py), installs ccusage from npm once, then runs the two
tools alternately and prints wall time and peak memory for each run, their medians and the
ratio. Prints figures; asserts nothing.
"""

from __future__ import annotations

import json
import os
import statistics
import sys

from common import arguments, ensure_ccusage, measure, replicate


def main() -> None:
    args = arguments(__doc__, runs=3)

    config = replicate(args.work / "replica", args.size_mb, args.corpus)
    size = sum(f.stat().st_size for f in (config / "projects").rglob("*.jsonl"))
    ccusage = ensure_ccusage(args.work)
    env = dict(os.environ, CLAUDE_CONFIG_DIR=str(config))
    mcsim = [sys.executable, "-m", "mcsim", "inspect", str(config / "projects"), "--json"]
    tools = {"ccusage": [str(ccusage), "session", "--offline", "--json"], "mcsim": mcsim}
    print(f"corpus replica: {size / 1e6:.0f} MB in {config}")
    results: dict[str, list[tuple[float, float]]] = {name: [] for name in tools}
    for run in range(args.runs):
        for name, cmd in tools.items():
            wall, peak, out = measure(cmd, env)
            results[name].append((wall, peak))
            print(f"run {run + 1} {name:8s} {wall:6.2f} s  peak {peak:7.0f} MB")
            if name == "mcsim" and run == 0:
                totals = json.loads(out)["totals"]
                print(f"         mcsim totals: {totals['calls']} calls, ${totals['cost_usd']:.2f}")
    med = {n: statistics.median(w for w, _ in r) for n, r in results.items()}
    peak = {n: max(p for _, p in r) for n, r in results.items()}
    for name in tools:
        print(f"median {name:8s} {med[name]:6.2f} s  max peak {peak[name]:7.0f} MB")
    print(f"mcsim / ccusage wall time: {med['mcsim'] / med['ccusage']:.2f}x (target <= 2x)")


if __name__ == "__main__":
    main()
