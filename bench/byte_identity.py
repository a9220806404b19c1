"""Run mcsim's commands over the bundled inputs into a folder, or compare two such folders.

    python bench/byte_identity.py run OUT_DIR      # replay cold and warm, inspect, sweep
    python bench/byte_identity.py compare REF NEW  # every file byte for byte

Used to show that a change to the inside leaves every output as it was: Parquet tables,
charts and JSON are compared byte for byte; `run.json` and the printed JSON with the fields
that name a time, a folder or a duration masked. Each input's cache is its own folder, so
the warm replay reads what the cold one wrote.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MCSIM = str(Path(sys.executable).parent / "mcsim")
INPUTS = {
    "corpus": "tests/data/corpus/claude/projects",
    "samples": "sample_transcripts",
    "codex": "tests/data/codex",
}
# Fields whose value is a time, a path under the output folder or a measured duration.
VOLATILE = {
    "created",
    "started",
    "finished",
    "out",
    "run_dir",
    "cache_dir",
    "elapsed",
    "elapsed_s",
    "duration_s",
    "timestamp",
    "generated",
    "path",
    "paths",
    "argv",
    "cpu_s",
    "wall_s",
    "command",
}


def _run(args: list[str], stdout: Path) -> None:
    done = subprocess.run([MCSIM, *args], cwd=ROOT, capture_output=True, text=True)
    stdout.write_text(f"exit {done.returncode}\n{done.stdout}")


def run(out: Path) -> None:
    for name, src in INPUTS.items():
        base = out / name
        base.mkdir(parents=True, exist_ok=True)
        cache = str(base / "cache")
        for leg in ("cold", "warm"):
            _run(
                [
                    "replay",
                    src,
                    "--policy",
                    "all",
                    "--json",
                    "--workers",
                    "2",
                    "--out",
                    str(base / f"replay-{leg}"),
                    "--cache-dir",
                    cache,
                ],
                base / f"replay-{leg}.stdout",
            )
        _run(
            ["inspect", src, "--json", "--out", str(base / "inspect"), "--cache-dir", cache],
            base / "inspect.stdout",
        )
    base = out / "sweep"
    base.mkdir(parents=True, exist_ok=True)
    _run(
        [
            "sweep",
            "sample_transcripts",
            "--policy",
            "claude-code",
            "--json",
            "--name",
            "claude-code",
            "--grid",
            "cached_microcompact.keep_recent=1..8",
            "--out",
            str(base / "sweep"),
            "--cache-dir",
            str(base / "cache"),
        ],
        base / "sweep.stdout",
    )


def _masked(value: object) -> object:
    if isinstance(value, dict):
        return {k: ("<masked>" if k in VOLATILE else _masked(v)) for k, v in value.items()}
    if isinstance(value, list):
        return [_masked(v) for v in value]
    return value


def _json_equal(a: str, b: str, root_a: str, root_b: str) -> bool:
    try:
        ja, jb = json.loads(a.replace(root_a, "<root>")), json.loads(b.replace(root_b, "<root>"))
    except ValueError:
        return a.replace(root_a, "<root>") == b.replace(root_b, "<root>")
    return _masked(ja) == _masked(jb)


def compare(ref: Path, new: Path) -> int:
    differ = 0
    files = sorted(
        p.relative_to(ref)
        for p in ref.rglob("*")
        if p.is_file() and "cache" not in p.relative_to(ref).parts
    )
    theirs = sorted(
        p.relative_to(new)
        for p in new.rglob("*")
        if p.is_file() and "cache" not in p.relative_to(new).parts
    )
    if files != theirs:
        print("file lists differ:", sorted(set(files) ^ set(theirs)))
        differ += 1
    for rel in files:
        a, b = ref / rel, new / rel
        if not b.exists():
            continue
        if rel.suffix in (".json", ".stdout"):
            ta, tb = a.read_text(), b.read_text()
            if rel.suffix == ".stdout":
                head_a, _, ta = ta.partition("\n")
                head_b, _, tb = tb.partition("\n")
                if head_a != head_b:
                    print("exit status differs:", rel, head_a, head_b)
                    differ += 1
            same = _json_equal(ta, tb, str(ref), str(new))
        else:
            same = a.read_bytes() == b.read_bytes()
        if not same:
            print("differs:", rel)
            differ += 1
    print(f"{len(files)} files compared, {differ} differ")
    return 1 if differ else 0


if __name__ == "__main__":
    if sys.argv[1] == "run":
        run(Path(sys.argv[2]).resolve())
    else:
        sys.exit(compare(Path(sys.argv[2]).resolve(), Path(sys.argv[3]).resolve()))
