"""Speed and memory of `mcsim replay` (all example policies), cold and warm, next to ccusage.

    python bench/bench_replay.py [--size-mb 520] [--runs 3] [--policy policies/all.yaml]

Cold: an empty session cache (parse, tokenize, calibrate, replay). Warm: the cache the cold
run wrote (replay only). ccusage (`session --offline --json`) runs alternately on the same
replica as the reference. Prints wall time and peak memory per run, medians and ratios;
asserts nothing.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics

from common import REPO, arguments, ensure_ccusage, mcsim, measure, replicate


def main() -> None:
    args = arguments(__doc__, runs=3, policy=REPO / "policies" / "all.yaml")

    config = replicate(args.work / "replica", args.size_mb, args.corpus)
    size = sum(f.stat().st_size for f in (config / "projects").rglob("*.jsonl"))
    ccusage = ensure_ccusage(args.work)
    cache = args.work / "replay-cache"
    out = args.work / "replay-out"
    env = dict(os.environ, CLAUDE_CONFIG_DIR=str(config))
    replay = mcsim("replay", str(config / "projects"), "--policy", str(args.policy),
                   cache=cache, out=out)  # fmt: skip
    print(f"corpus replica: {size / 1e6:.0f} MB; policies: {args.policy}")
    results: dict[str, list[tuple[float, float]]] = {"ccusage": [], "cold": [], "warm": []}
    for run in range(args.runs):
        wall, peak, _ = measure([str(ccusage), "session", "--offline", "--json"], env)
        results["ccusage"].append((wall, peak))
        print(f"run {run + 1} ccusage       {wall:6.2f} s  peak {peak:7.0f} MB")
        shutil.rmtree(cache, ignore_errors=True)
        for label in ("cold", "warm"):
            wall, peak, stdout = measure(replay, env)
            results[label].append((wall, peak))
            print(f"run {run + 1} mcsim {label:7s} {wall:6.2f} s  peak {peak:7.0f} MB")
            if run == 0 and label == "warm":
                doc = json.loads(stdout)
                fid = doc["fidelity"]
                print(
                    f"         {doc['sessions']} sessions, {len(doc['policies'])} policies, "
                    f"fidelity overall {fid['overall_error']:.4%}, "
                    f"worst {fid['worst_session_error']:.4%}"
                )
    med = {k: statistics.median(w for w, _ in v) for k, v in results.items()}
    peak = {k: max(p for _, p in v) for k, v in results.items()}
    for k in results:
        print(f"median {k:8s} {med[k]:6.2f} s  max peak {peak[k]:7.0f} MB")
    print(
        f"warm replay / ccusage: {med['warm'] / med['ccusage']:.2f}x (target <= 1.5x); "
        f"cold / ccusage: {med['cold'] / med['ccusage']:.2f}x (target <= 3x)"
    )


if __name__ == "__main__":
    main()
