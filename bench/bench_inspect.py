"""Speed and memory of `mcsim inspect --json` next to ccusage on two >= 500 MB replicas.

    python bench/bench_inspect.py [--size-mb 520] [--mixed-mb 540] [--runs 3] [--work bench/.work]
                                  [--only corpus|mixed]

Two replicas are built once each (see common.py) and reused:

* corpus: copies of the bundled test corpus (tests/data/corpus, or --corpus);
* mixed: copies of real transcripts (/work/shared/corpus/claude/projects when it exists, see
  common.mixed_source) plus generated projects with many sub-agents, call-heavy sessions,
  file-history-snapshot, progress and hook lines, compact boundaries and broken lines.

ccusage is installed from npm once. mcsim's bytecode is compiled first, as pip does on install
(with PYTHONDONTWRITEBYTECODE set, as on the reference machine, every run would compile
mcsim's modules again: about 50 ms a run). On each replica the tools run alternately: ccusage,
mcsim cold (an empty cache folder: the first run over these transcripts, which parses them and
fills the cache), mcsim warm (the cache that run filled: every later run over unchanged
transcripts), ccusage, ...; each run prints wall time, CPU time (user + sys of the whole tree)
and peak memory of the whole process tree; then the medians and the ratios. Prints figures;
asserts nothing.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

from common import REPO, arguments, ensure_ccusage, measure, mixed_source, replicate


def cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def bench(label: str, config: Path, ccusage: Path, runs: int, cache: Path) -> None:
    size = sum(f.stat().st_size for f in (config / "projects").rglob("*.jsonl"))
    env = dict(os.environ, CLAUDE_CONFIG_DIR=str(config))
    mcsim = [sys.executable, "-m", "mcsim", "inspect", str(config / "projects"), "--json",
             "--cache-dir", str(cache)]  # fmt: skip
    tools = {
        "ccusage": [str(ccusage), "session", "--offline", "--json"],
        "cold": mcsim,
        "warm": mcsim,
    }
    print(f"{label} replica: {size / 1e6:.0f} MB in {config}")
    results: dict[str, list[tuple[float, float, float]]] = {name: [] for name in tools}
    for run in range(runs):
        for name, cmd in tools.items():
            if name == "cold":
                shutil.rmtree(cache, ignore_errors=True)
            cpu = cpu_s()
            wall, peak, out = measure(cmd, env)
            cpu = cpu_s() - cpu
            results[name].append((wall, cpu, peak))
            print(f"run {run + 1} {name:8s} {wall:6.2f} s  cpu {cpu:6.2f} s  peak {peak:5.0f} MB")
            if name == "cold" and run == 0:
                totals = json.loads(out)["totals"]
                print(f"         mcsim totals: {totals['calls']} calls, ${totals['cost_usd']:.2f}")
    med = {n: statistics.median(w for w, _, _ in r) for n, r in results.items()}
    cpu = {n: statistics.median(c for _, c, _ in r) for n, r in results.items()}
    peak = {n: max(p for _, _, p in r) for n, r in results.items()}
    for name in tools:
        print(
            f"median {name:8s} {med[name]:6.2f} s  cpu {cpu[name]:6.2f} s"
            f"  max peak {peak[name]:5.0f} MB"
        )
    for name in ("cold", "warm"):
        print(
            f"{label}: mcsim {name} / ccusage wall time {med[name] / med['ccusage']:.2f}x"
            f" (target <= 1x), cpu time {cpu[name] / cpu['ccusage']:.2f}x"
        )
    print()


def main() -> None:
    args = arguments(__doc__, runs=3, **{"mixed-mb": 540, "only": ""})
    ccusage = ensure_ccusage(args.work)
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(REPO / "mcsim")], check=True)
    if args.only in ("", "corpus"):
        corpus = replicate(args.work / "replica", args.size_mb, args.corpus)
        bench("corpus", corpus, ccusage, args.runs, args.work / "inspect-cache")
    if args.only in ("", "mixed"):
        mixed = replicate(args.work / "mixed", args.mixed_mb, mixed_source(args.work))
        bench("mixed", mixed, ccusage, args.runs, args.work / "inspect-cache")


if __name__ == "__main__":
    main()
