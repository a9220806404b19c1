"""Compare what two versions of mcsim write on the same transcripts, file by file.

    python bench/compare_outputs.py BASE [--new DIR] [--inputs PATH ...] [--work DIR]

BASE and DIR (default: this checkout) are source trees holding `mcsim/` (e.g. a `git archive`
of the last release unpacked somewhere); both run with this interpreter. For each input
folder (default: the test corpus, sample_transcripts, the Codex test data, and
/work/shared/corpus when it exists), each version runs `replay --policy all`, `replay
--policy masking` and `inspect --out`, each once with an empty cache folder (cold) and once
more on the cache that run filled (warm); then every file of the run folders is compared
byte for byte, a Parquet file that differs is compared column by column, and the `--json`
outputs are compared with the run folder's path and the times of the run left out. A replay
whose outputs differ also prints each policy's savings in both versions and the largest
change in points. Prints what differs; exit status 1 if anything does.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
INPUTS = [
    REPO / "tests" / "data" / "corpus" / "claude" / "projects",
    REPO / "sample_transcripts",
    REPO / "tests" / "data" / "codex",
    REPO / "tests" / "data" / "codex-multi-call",
    Path("/work/shared/corpus/claude/projects"),
]
COMMANDS = {
    "replay-all": ["replay", "--policy", "all"],
    "replay-masking": ["replay", "--policy", "masking"],
    "inspect": ["inspect"],
}
# Fields of the --json output that say when or where a run was made, not what it found.
_VOLATILE = {"out", "out_dir", "run_dir", "created", "created_at", "started", "finished",
             "elapsed_s", "duration_s", "generated_at", "cache_dir", "mcsim_version"}  # fmt: skip


def run(tree: Path, command: list[str], inputs: Path, out: Path, cache: Path) -> Any:
    env = dict(os.environ, PYTHONPATH=str(tree), PYTHONHASHSEED="0")
    cmd = [sys.executable, "-m", "mcsim", *command, str(inputs), "--out", str(out), "--force",
           "--json", "--cache-dir", str(cache)]  # fmt: skip
    done = subprocess.run(cmd, env=env, capture_output=True, cwd=tree, check=False)
    if done.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(cmd)} (in {tree}): exit {done.returncode}\n{done.stderr!r}")
    return json.loads(done.stdout)


def scrub(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: scrub(v) for k, v in value.items() if k not in _VOLATILE}
    if isinstance(value, list):
        return [scrub(v) for v in value]
    return value


def json_diff(a: Any, b: Any, where: str = "") -> list[str]:
    if type(a) is not type(b):
        return [f"{where}: {a!r:.80} != {b!r:.80}"]
    if isinstance(a, dict):
        out = []
        for k in sorted(set(a) | set(b)):
            if k not in a or k not in b:
                out.append(f"{where}.{k}: only in {'new' if k in b else 'base'}")
            else:
                out.extend(json_diff(a[k], b[k], f"{where}.{k}"))
        return out
    if isinstance(a, list):
        if len(a) != len(b):
            return [f"{where}: {len(a)} != {len(b)} items"]
        return [d for i, (x, y) in enumerate(zip(a, b, strict=True))
                for d in json_diff(x, y, f"{where}[{i}]")]  # fmt: skip
    return [] if a == b else [f"{where}: {a!r:.80} != {b!r:.80}"]


def parquet_diff(a: Path, b: Path) -> list[str]:
    import polars as pl

    x, y = pl.read_parquet(a), pl.read_parquet(b)
    if x.columns != y.columns:
        return [f"columns {x.columns} != {y.columns}"]
    if x.height != y.height:
        return [f"{x.height} != {y.height} rows"]
    out = []
    for name in x.columns:
        p, q = x[name], y[name]
        if p.dtype != q.dtype:
            out.append(f"{name}: {p.dtype} != {q.dtype}")
            continue
        same = (p == q) | (p.is_null() & q.is_null())
        differ = same.len() - int(same.fill_null(False).sum())
        if differ:
            out.append(f"{name}: {differ} of {x.height} rows differ")
    return out or ["same values, other bytes"]


def tree_diff(a: Path, b: Path) -> list[str]:
    files_a = {p.relative_to(a) for p in a.rglob("*") if p.is_file()}
    files_b = {p.relative_to(b) for p in b.rglob("*") if p.is_file()}
    out = [f"{f}: only in base" for f in sorted(files_a - files_b)]
    out += [f"{f}: only in new" for f in sorted(files_b - files_a)]
    for f in sorted(files_a & files_b):
        if f.name == "run.json" or (a / f).read_bytes() == (b / f).read_bytes():
            continue  # run.json: compared as the --json output is
        if f.suffix == ".parquet":
            out += [f"{f}: {d}" for d in parquet_diff(a / f, b / f)]
        else:
            out.append(f"{f}: differs")
    return out


def savings(doc: dict[str, Any]) -> dict[str, float]:
    found = {}
    for p in doc.get("policies", []):
        if isinstance(p, dict) and "name" in p:
            value = p.get("savings_pct", p.get("savings_vs_baseline_pct"))
            if isinstance(value, int | float):
                found[p["name"]] = float(value)
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("base", type=Path)
    parser.add_argument("--new", type=Path, default=REPO)
    parser.add_argument("--inputs", type=Path, nargs="*", default=INPUTS)
    parser.add_argument("--work", type=Path, default=REPO / "bench" / ".work" / "compare")
    args = parser.parse_args()
    # --work is emptied first: only a folder this script made (its mark inside) or an empty
    # one, never a folder of other files (a benchmark's replicas were lost that way).
    mark = args.work / ".compare_outputs"
    if args.work.exists() and any(args.work.iterdir()) and not mark.exists():
        sys.exit(f"{args.work}: holds files this script did not write; give another --work")
    shutil.rmtree(args.work, ignore_errors=True)
    args.work.mkdir(parents=True)
    mark.touch()
    differs = False
    for inputs in (p for p in args.inputs if p.exists()):
        for label, command in COMMANDS.items():
            docs: dict[str, dict[str, Any]] = {}
            for side, tree in (("base", args.base), ("new", args.new)):
                cache = args.work / f"{side}-cache"
                shutil.rmtree(cache, ignore_errors=True)
                for temp in ("cold", "warm"):
                    out = args.work / f"{side}-{temp}"
                    docs[f"{side}-{temp}"] = run(tree, command, inputs, out, cache)
            problems = []
            for temp in ("cold", "warm"):
                base, new = args.work / f"base-{temp}", args.work / f"new-{temp}"
                found = tree_diff(base, new)
                found += json_diff(scrub(docs[f"base-{temp}"]), scrub(docs[f"new-{temp}"]))
                problems += [f"{temp}: {d}" for d in found]
            name = f"{inputs.relative_to(REPO) if inputs.is_relative_to(REPO) else inputs}"
            if not problems:
                print(f"{name} {label}: identical (cold and warm)")
                continue
            differs = True
            print(f"{name} {label}: {len(problems)} differences")
            for d in problems[:40]:
                print(f"    {d}")
            a, b = savings(docs["base-cold"]), savings(docs["new-cold"])
            if a:
                worst = max(abs(a[k] - b.get(k, float("nan"))) for k in a)
                print(f"    savings (base -> new): largest change {worst:.4f} points")
                for k in a:
                    print(f"      {k}: {a[k]:.4f} -> {b.get(k, float('nan')):.4f}")
    sys.exit(1 if differs else 0)


if __name__ == "__main__":
    main()
