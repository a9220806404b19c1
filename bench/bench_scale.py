"""Scale: wall time, throughput and peak memory per process of mcsim at several corpus sizes,
on the local engine and on a local Ray.

    python bench/bench_scale.py [--sizes 500,1000,2000] [--engines local,ray] [--workers 2]
                                [--policy policies/claude-code.yaml] [--work bench/.work]
                                [--runs 1] [--delete-replicas]

For each size (MB) a replica of the corpus is built under WORK/scale-SIZE (reused when it
exists, see common.py). For each engine (`local`: forked workers; `ray`: a local Ray with
--workers CPUs started by mcsim for the run, `--engine ray`), four commands run as
subprocesses, one after the other:

* inspect: `mcsim inspect --json --no-cache` (every run parses, as a first run does)
* cold:    `mcsim replay --policy POLICY --no-cache` (parse, tokenize, calibrate, replay)
* fill:    the same with an empty --cache-dir (a cold run that also writes the cache)
* warm:    the same again, served by the cache `fill` wrote (replay only)

Every process of the tree (the driver, forked workers, Ray's gcs_server, raylet, workers and
helpers) is sampled every --interval seconds from /proc; each process's peak RSS is kept. The
table gives wall time, throughput (replica MB / wall s), the driver's peak, the largest peak of
any other process, the sum of every process's peak (an upper bound of the tree's peak: peaks
are not simultaneous, and pages shared after fork count in each process) and the number of
processes seen. Then, per engine and mode, how each process role's peak grows per GB.
Prints figures; asserts nothing. The replicas are deleted at the end only with
--delete-replicas, and only those this run built.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from common import CORPUS, REPO, children, replicate, rss_kb

MODES = ("inspect", "cold", "fill", "warm")


@dataclass
class Proc:
    role: str
    name: str
    peak_kb: int = 0


@dataclass
class Result:
    size_mb: float
    engine: str
    mode: str
    wall: float
    procs: dict[int, Proc] = field(default_factory=dict)

    def peak_mb(self, role: str) -> float:
        return max((p.peak_kb for p in self.procs.values() if p.role == role), default=0) / 1024

    def largest(self, exclude: str = "") -> Proc | None:
        rest = [p for p in self.procs.values() if p.role != exclude]
        return max(rest, key=lambda p: p.peak_kb) if rest else None


def _describe(pid: int, root: int) -> tuple[str, str]:
    """(role, short name) of a process: driver; mcsim-child (the local engine's forked
    workers, or a helper the driver forks); ray-worker (a Ray worker process, which runs the
    units); ray-actor (a shard of the calls seen, engines/ray.py); gcs_server; raylet;
    ray-other (dashboard, agents, log monitor, autoscaler)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            argv = [a.decode(errors="replace") for a in fh.read().split(b"\0") if a]
    except (FileNotFoundError, ProcessLookupError):
        return "gone", "?"
    if not argv:  # a zombie
        return "gone", "?"
    cmd = " ".join(argv)
    exe = os.path.basename(argv[0])
    if pid == root:
        return "driver", "mcsim"
    if exe in ("gcs_server", "raylet"):
        return exe, exe
    if cmd.startswith("ray::_Shard"):  # an actor of the Ray engine's seen-calls shards
        return "ray-actor", "seen-calls shard"
    if cmd.startswith("ray::") or "default_worker.py" in cmd:
        return "ray-worker", "ray worker"
    if "-m mcsim" in cmd:
        return "mcsim-child", "mcsim (forked)"
    script = next((os.path.basename(a) for a in argv[1:] if a.endswith(".py")), exe)
    return "ray-other", script[:30]


def run(cmd: list[str], interval: float) -> tuple[float, dict[int, Proc], bytes]:
    """(wall seconds, every process of the tree with its peak RSS, stdout)."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    chunks: list[bytes] = []
    errs: list[bytes] = []
    readers = [
        threading.Thread(target=lambda: chunks.append(proc.stdout.read())),  # type: ignore[union-attr]
        threading.Thread(target=lambda: errs.append(proc.stderr.read())),  # type: ignore[union-attr]
    ]
    for r in readers:
        r.start()
    seen: dict[int, Proc] = {}
    while proc.poll() is None:
        stack = [proc.pid]
        while stack:
            pid = stack.pop()
            rss = rss_kb(pid)
            if rss is None:
                continue
            # Described at every sample: a child is forked (with its parent's command line)
            # before it execs gcs_server, raylet or a Ray worker.
            role, name = _describe(pid, proc.pid)
            if pid not in seen or role != "gone":
                seen[pid] = Proc(role, name, seen[pid].peak_kb if pid in seen else 0)
            seen[pid].peak_kb = max(seen[pid].peak_kb, rss)
            stack.extend(children(pid))
        time.sleep(interval)
    wall = time.perf_counter() - start
    for r in readers:
        r.join()
    if proc.returncode != 0:
        sys.stderr.write(b"".join(errs).decode(errors="replace")[-3000:])
        raise SystemExit(f"{' '.join(cmd)} failed with exit code {proc.returncode}")
    return wall, {k: v for k, v in seen.items() if v.role != "gone"}, b"".join(chunks)


def commands(
    mode: str, projects: Path, engine: str, workers: int, policy: Path, work: Path
) -> list[str]:
    base = [sys.executable, "-m", "mcsim"]
    eng = ["--engine", engine, "--workers", str(workers)]
    if mode == "inspect":
        return [*base, "inspect", str(projects), "--json", "--no-cache", *eng]
    out = work / "scale-out"
    replay = [*base, "replay", str(projects), "--policy", str(policy), *eng,
              "--out", str(out), "--force", "--json"]  # fmt: skip
    if mode == "cold":
        return [*replay, "--no-cache"]
    return [*replay, "--cache-dir", str(work / f"scale-cache-{engine}")]


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="500,1000,2000", help="replica sizes in MB")
    parser.add_argument("--engines", default="local,ray")
    parser.add_argument("--modes", default=",".join(MODES))
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--runs", type=int, default=1, help="runs of each command (best wall)")
    parser.add_argument("--interval", type=float, default=0.05, help="sampling period, s")
    parser.add_argument("--policy", type=Path, default=REPO / "policies" / "claude-code.yaml")
    parser.add_argument("--work", type=Path, default=REPO / "bench" / ".work")
    parser.add_argument("--corpus", type=Path, default=CORPUS, help="Claude projects folder")
    parser.add_argument("--json-out", type=Path, help="also write every result here")
    parser.add_argument(
        "--delete-replicas",
        action="store_true",
        help="delete the replicas this run built (not those it reused)",
    )
    return parser.parse_args()


def _dump(results: list[Result], path: Path) -> None:
    doc = [
        {"size_mb": r.size_mb, "engine": r.engine, "mode": r.mode, "wall_s": r.wall,
         "processes": [{"pid": pid, "role": p.role, "name": p.name,
                        "peak_mb": p.peak_kb / 1024} for pid, p in r.procs.items()]}
        for r in results
    ]  # fmt: skip
    path.write_text(json.dumps(doc, indent=1))


def main() -> None:
    args = arguments()
    sizes = [int(s) for s in args.sizes.split(",")]
    engines = args.engines.split(",")
    modes = args.modes.split(",")
    results: list[Result] = []
    built: list[Path] = []
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} cores; policy {args.policy.name}")
    hdr = (f"{'size':>6} {'engine':6} {'mode':7} {'wall s':>7} {'MB/s':>6} {'driver':>7} "
           f"{'largest other':>22} {'sum':>7} {'procs':>5}")  # fmt: skip
    for size_mb in sizes:
        target = args.work / f"scale-{size_mb}"
        fresh = not any(target.glob(f"complete-{size_mb}mb"))
        t0 = time.perf_counter()
        config = replicate(target, size_mb, args.corpus)
        if fresh:
            built.append(target)
        projects = config / "projects"
        size = sum(f.stat().st_size for f in projects.rglob("*.jsonl")) / 1e6
        units = sum(1 for _ in projects.iterdir())
        how = "built" if fresh else "reused"
        print(f"\nreplica {size:.0f} MB, {units} project folders ({how} in "
              f"{time.perf_counter() - t0:.0f} s)")  # fmt: skip
        print(hdr)
        for engine in engines:
            shutil.rmtree(args.work / f"scale-cache-{engine}", ignore_errors=True)
            for mode in modes:
                best: Result | None = None
                for _ in range(args.runs if mode != "fill" else 1):
                    cmd = commands(mode, projects, engine, args.workers, args.policy, args.work)
                    wall, procs, _ = run(cmd, args.interval)
                    r = Result(size, engine, mode, wall, procs)
                    if best is None or r.wall < best.wall:
                        best = r
                assert best is not None
                results.append(best)
                if args.json_out:
                    _dump(results, args.json_out)
                other = best.largest(exclude="driver")
                other_s = f"{other.peak_kb / 1024:6.0f} {other.name[:15]}" if other else "-"
                total = sum(p.peak_kb for p in best.procs.values()) / 1024
                print(f"{size:6.0f} {engine:6} {mode:7} {best.wall:7.2f} {size / best.wall:6.0f} "
                      f"{best.peak_mb('driver'):7.0f} {other_s:>22} {total:7.0f} "
                      f"{len(best.procs):5d}", flush=True)  # fmt: skip
            shutil.rmtree(args.work / f"scale-cache-{engine}", ignore_errors=True)
    shutil.rmtree(args.work / "scale-out", ignore_errors=True)

    roles = (
        "driver",
        "mcsim-child",
        "ray-worker",
        "ray-actor",
        "raylet",
        "gcs_server",
        "ray-other",
    )
    print("\npeak RSS (MB) of the largest process of each role, and its growth per GB of corpus")
    print(f"{'engine':6} {'mode':7} {'role':11} " + " ".join(f"{s:>7}" for s in sorted(sizes))
          + "   MB per GB")  # fmt: skip
    for engine in engines:
        for mode in modes:
            rows = sorted((r for r in results if r.engine == engine and r.mode == mode),
                          key=lambda r: r.size_mb)  # fmt: skip
            for role in roles:
                peaks = [r.peak_mb(role) for r in rows]
                if not any(peaks):
                    continue
                slope = ""
                if len(rows) > 1:
                    slope = f"{(peaks[-1] - peaks[0]) / ((rows[-1].size_mb - rows[0].size_mb) / 1e3):+8.0f}"  # noqa: E501
                cells = " ".join(f"{p:7.0f}" for p in peaks)
                print(f"{engine:6} {mode:7} {role:11} {cells}   {slope}")
    if args.delete_replicas:
        for target in built:
            shutil.rmtree(target, ignore_errors=True)
            print(f"deleted {target}")


if __name__ == "__main__":
    main()
