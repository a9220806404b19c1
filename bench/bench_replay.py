"""Speed and memory of `mcsim replay` (all example policies), cold and warm, next to ccusage,
on three >= 500 MB replicas.

    python bench/bench_replay.py [--size-mb 520] [--mixed-mb 540] [--runs 3]
                                 [--policy policies/all.yaml] [--only corpus|mixed|distinct]

The replicas are those of bench_inspect.py (see common.py): copies of the bundled test corpus,
and a mixed one of real transcripts plus generated sub-agents, call-heavy sessions and broken
lines; and a third, `distinct`: copies of the corpus whose texts differ from copy to copy.
In the first two every text repeats once per copy, and a replay tokenizes each distinct text
once, so their cold replay leaves out most of the tokenizing that real transcripts (where
texts rarely repeat) cost. mcsim's bytecode is compiled first, as pip does on install.

On each replica the tools run alternately: ccusage (`session --offline --json`, the
reference), mcsim cold (an empty cache folder: parse, tokenize, calibrate, replay, draw),
mcsim warm (the cache the cold run filled: unchanged transcripts under the same policies),
ccusage, ...; each run prints wall time, CPU time (user + sys of the whole tree) and peak
memory of the whole process tree; then the medians and the ratios. Prints figures; asserts
nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

from common import REPO, arguments, ensure_ccusage, mcsim, measure, mixed_source, replicate


def cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def bench(label: str, config: Path, ccusage: Path, args: argparse.Namespace, cache: Path) -> None:
    size = sum(f.stat().st_size for f in (config / "projects").rglob("*.jsonl"))
    env = dict(os.environ, CLAUDE_CONFIG_DIR=str(config))
    out = args.work / "replay-out"
    replay = mcsim("replay", str(config / "projects"), "--policy", str(args.policy),
                   cache=cache, out=out)  # fmt: skip
    tools = {"ccusage": [str(ccusage), "session", "--offline", "--json"], "cold": replay,
             "warm": replay}  # fmt: skip
    print(f"{label} replica: {size / 1e6:.0f} MB in {config}; policies: {args.policy}")
    results: dict[str, list[tuple[float, float, float]]] = {name: [] for name in tools}
    for run in range(args.runs):
        for name, cmd in tools.items():
            if name == "cold":
                shutil.rmtree(cache, ignore_errors=True)
            cpu = cpu_s()
            wall, top, stdout = measure(cmd, env)
            cpu = cpu_s() - cpu
            results[name].append((wall, cpu, top))
            print(f"run {run + 1} {name:8s} {wall:6.2f} s  cpu {cpu:6.2f} s  peak {top:5.0f} MB")
            if run == 0 and name == "warm":
                doc = json.loads(stdout)
                fid = doc["fidelity"]
                print(
                    f"         {doc['sessions']} sessions, {len(doc['policies'])} policies, "
                    f"fidelity overall {fid['overall_error']:.4%}, "
                    f"worst {fid['worst_session_error']:.4%}"
                )
    med = {n: statistics.median(w for w, _, _ in r) for n, r in results.items()}
    cpus = {n: statistics.median(c for _, c, _ in r) for n, r in results.items()}
    peak = {n: max(p for _, _, p in r) for n, r in results.items()}
    for name in tools:
        print(
            f"median {name:8s} {med[name]:6.2f} s  cpu {cpus[name]:6.2f} s"
            f"  max peak {peak[name]:5.0f} MB"
        )
    for name, target in (("cold", 3), ("warm", 1.5)):
        print(
            f"{label}: replay {name} / ccusage wall time {med[name] / med['ccusage']:.2f}x"
            f" (target <= {target}x), cpu time {cpus[name] / cpus['ccusage']:.2f}x"
        )
    print()


def main() -> None:
    args = arguments(__doc__, runs=3, policy=REPO / "policies" / "all.yaml",
                     **{"mixed-mb": 540, "only": ""})  # fmt: skip
    ccusage = ensure_ccusage(args.work)
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(REPO / "mcsim")], check=True)
    if args.only in ("", "corpus"):
        corpus = replicate(args.work / "replica", args.size_mb, args.corpus)
        bench("corpus", corpus, ccusage, args, args.work / "replay-cache")
    if args.only in ("", "mixed"):
        mixed = replicate(args.work / "mixed", args.mixed_mb, mixed_source(args.work))
        bench("mixed", mixed, ccusage, args, args.work / "replay-cache-mixed")
    if args.only in ("", "distinct"):
        distinct = replicate(args.work / "distinct", args.size_mb, args.corpus, distinct=True)
        bench("distinct", distinct, ccusage, args, args.work / "replay-cache-distinct")


if __name__ == "__main__":
    main()
