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

import subprocess
import sys
from pathlib import Path
from typing import Any

from common import REPO, alternate, arguments, ensure_ccusage, mixed_source, replicate


def totals(doc: dict[str, Any]) -> str:
    return f"mcsim totals: {doc['totals']['calls']} calls, ${doc['totals']['cost_usd']:.2f}"


def bench(label: str, config: Path, ccusage: Path, runs: int, cache: Path) -> None:
    mcsim = [sys.executable, "-m", "mcsim", "inspect", str(config / "projects"), "--json",
             "--cache-dir", str(cache)]  # fmt: skip
    targets = {"cold": 1.0, "warm": 0.5}  # docs/design.md#performance
    alternate(label, config, ccusage, mcsim, cache, runs, targets, ("cold", totals))


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
