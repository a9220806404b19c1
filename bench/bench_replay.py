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
import subprocess
import sys
from pathlib import Path
from typing import Any

from common import REPO, alternate, arguments, ensure_ccusage, mcsim, mixed_source, replicate


def fidelity(doc: dict[str, Any]) -> str:
    fid = doc["fidelity"]
    return (
        f"{doc['sessions']} sessions, {len(doc['policies'])} policies, fidelity overall "
        f"{fid['overall_error']:.4%}, worst {fid['worst_session_error']:.4%}"
    )


def bench(label: str, config: Path, ccusage: Path, args: argparse.Namespace, cache: Path) -> None:
    print(f"policies: {args.policy}")
    replay = mcsim("replay", str(config / "projects"), "--policy", str(args.policy),
                   cache=cache, out=args.work / "replay-out")  # fmt: skip
    # docs/design.md#performance; where no text repeats (distinct), tokenizing them all: 4x
    targets = {"cold": 4.0 if label == "distinct" else 3.0, "warm": 1.0}
    alternate(label, config, ccusage, replay, cache, args.runs, targets, ("warm", fidelity))


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
