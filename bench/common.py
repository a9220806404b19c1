"""Shared by the benchmarks: a >= 500 MB replica of the corpus, ccusage, timed runs.

The replica copies a corpus (by default the repository's test corpus, tests/data/corpus; any
Claude projects folder with --corpus) with fresh ids per copy: every UUID gets a
copy-specific first group, every msg_/req_/toolu_ id a copy suffix, every project folder a
copy suffix, so no call de-duplicates across copies. Peak memory is summed over the whole
process tree (workers included), sampled every 20 ms.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
CORPUS = REPO / "tests" / "data" / "corpus" / "claude" / "projects"
CCUSAGE = ("ccusage@20.0.24", "@ccusage/ccusage-linux-x64@20.0.24")
_UUID = re.compile(rb"[0-9a-f]{8}(-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})")
_IDS = re.compile(rb"((?:msg|req|toolu)_[A-Za-z0-9]+)")


def replicate(target: Path, size_mb: int, corpus: Path = CORPUS) -> Path:
    """A Claude config folder of >= size_mb MB copied from `corpus`; reused when a replica of
    the same corpus and size already exists."""
    projects = target / "claude" / "projects"
    marker = target / f"complete-{size_mb}mb"
    source = f"from {corpus.resolve()}\n"
    if marker.exists() and marker.read_text().endswith(source):
        return target / "claude"
    shutil.rmtree(target, ignore_errors=True)
    files = sorted(corpus.rglob("*.jsonl"))
    one_copy = sum(f.stat().st_size for f in files)
    copies = -(-size_mb * 1_000_000 // one_copy)
    for k in range(copies):
        prefix = f"{k:08x}".encode()
        suffix = f"c{k}".encode()
        for f in files:
            rel = f.relative_to(corpus)
            data = _UUID.sub(prefix + rb"\1", f.read_bytes())
            data = _IDS.sub(rb"\1" + suffix, data)
            parts = list(rel.parts)
            parts[0] = f"{parts[0]}-copy{k:03d}"
            name = _UUID.sub(prefix + rb"\1", "/".join(parts).encode()).decode()
            out = projects / name
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_bytes(data)
    marker.write_text(f"{copies} copies of {one_copy} bytes\n{source}")
    return target / "claude"


def ensure_ccusage(work: Path) -> Path:
    prefix = work / "npm"
    binary = prefix / "node_modules" / ".bin" / "ccusage"
    if not binary.exists():
        subprocess.run(
            ["npm", "install", "--silent", "--no-audit", "--no-fund", "--prefix", str(prefix),
             *CCUSAGE],
            check=True,
        )  # fmt: skip
    return binary


def children(pid: int) -> list[int]:
    """The processes `pid` started (every thread's), from /proc; none once it is gone."""
    out: list[int] = []
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children") as fh:
                out.extend(int(c) for c in fh.read().split())
    except (FileNotFoundError, ProcessLookupError, ValueError):
        pass
    return out


def rss_kb(pid: int) -> int | None:
    """A process's resident memory in KB (0 for a zombie, None once it is gone)."""
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except (FileNotFoundError, ProcessLookupError):
        return None
    return 0  # a zombie has no VmRSS line


def _tree_rss_kb(pid: int) -> int:
    total = 0
    stack = [pid]
    while stack:
        p = stack.pop()
        total += rss_kb(p) or 0
        stack.extend(children(p))
    return total


def measure(cmd: list[str], env: dict[str, str]) -> tuple[float, float, bytes]:
    """(wall seconds, peak MB of the process tree, stdout)."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    peak = 0
    chunks: list[bytes] = []
    reader = threading.Thread(target=lambda: chunks.append(proc.stdout.read()))  # type: ignore[union-attr]
    reader.start()
    while proc.poll() is None:
        peak = max(peak, _tree_rss_kb(proc.pid))
        time.sleep(0.02)
    wall = time.perf_counter() - start
    reader.join()
    if proc.returncode != 0:
        raise SystemExit(f"{cmd[0]} failed with exit code {proc.returncode}")
    return wall, peak / 1024, b"".join(chunks)


def arguments(doc: str, runs: int, **extra: Any) -> argparse.Namespace:
    """The options every benchmark takes (replica size, runs, work folder), plus `extra`
    (name -> default)."""
    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    parser.add_argument("--size-mb", type=int, default=520)
    parser.add_argument("--runs", type=int, default=runs)
    parser.add_argument("--work", type=Path, default=REPO / "bench" / ".work")
    parser.add_argument("--corpus", type=Path, default=CORPUS, help="Claude projects folder")
    for name, default in extra.items():
        parser.add_argument(f"--{name}", type=type(default), default=default)
    return parser.parse_args()


def mcsim(command: str, projects: str, *options: str, cache: Path, out: Path) -> list[str]:
    """An `mcsim replay`/`sweep` command line writing to `out`, with its cache in `cache`."""
    return [sys.executable, "-m", "mcsim", command, projects, *options,
            "--cache-dir", str(cache), "--out", str(out), "--force", "--json"]  # fmt: skip
