"""Each stage of a first run's CPU against its floor, in one process (the stage table of
docs/performance.md#targets).

    python bench/stages.py PATHS... [--policy FILE] [--rounds N] [--skip-commands]

For the Claude Code transcripts under PATHS, prints the CPU seconds of:

- **parse**: loading every session as a replay does (`Detail.TEXT`) and as `inspect` does
  (`Detail.CALLS`); *floor*: the same files read into lines, each decoded by the loader's
  msgspec decoder and checked by simdjson (`fields.read_typed`, doing nothing with the
  result): the compiled parts alone.
- **tokenize**: the token counts a first replay's calibration asks for (every distinct text
  once, by the counter a replay uses), the tokenizer's load included (the first round's);
  *floor*: gigatoken counting all of those texts in a process of its own, its load left out.
- **calibrate** besides tokenizing, and **simulate** (`replay_session` under every policy of
  the file, rows kept, as `mcsim replay` does): no compiled part does either; no floor.
- **analyse** (`inspect`'s pricing and break detection, `analyse_session`).
- **the whole command**, `mcsim replay` and `mcsim inspect --json`, run as a child process
  with `--workers 1` (everything in one process, as the stages above), once with a new cache
  folder and once with `--no-cache`: the first less the second is writing the cache entries,
  and the second less the stages is the rest (start, imports, discovery, the run folder's
  tables and charts, the report).

The stages are measured in this process, one after the other, with `mcsim.tuning.tune()` as
the commands set it, each N times (3 by default), keeping the least: the figures move with
the machine's load (by half a second on a whole command), so compare a table's rows, not two
tables made at different times.
"""

from __future__ import annotations

import argparse
import pickle
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")

POLICY = Path(__file__).resolve().parents[1] / "policies" / "all.yaml"


def _cpu() -> float:
    return time.process_time()


class _TimedCounter:
    """The replay's counter, timing each call and keeping the texts it was given."""

    def __init__(self) -> None:
        from mcsim.replay.tokens import TiktokenCounter

        self._inner = TiktokenCounter()
        self.seconds = 0.0
        self.texts: list[str] = []

    def count(self, text: str) -> int:
        start = _cpu()
        n = self._inner.count(text)
        self.seconds += _cpu() - start
        self.texts.append(text)
        return n

    def count_many(self, texts: list[str]) -> list[int]:
        start = _cpu()
        counts = self._inner.count_many(texts)
        self.seconds += _cpu() - start
        self.texts.extend(texts)
        return counts


def _parse_floor(paths: list[str], with_text: bool) -> tuple[float, int, int]:
    """CPU seconds to read, decode and check every line of the files, with lines and bytes."""
    from mcsim.ingest.discovery import discover
    from mcsim.ingest.loaders.claude_code import _DECODERS
    from mcsim.ingest.loaders.fields import read_typed
    from mcsim.model import SkipReport

    files = discover(paths).files
    decode = _DECODERS[with_text]
    lines = 0
    start = _cpu()
    for path in files:
        skips = SkipReport()
        for _ in read_typed(path, path.name, skips, decode):
            lines += 1
    seconds = _cpu() - start
    size = sum(p.stat().st_size for p in files)
    return seconds, lines, size


def _token_floor(texts: list[str]) -> float:
    from mcsim.replay.tokens import FastCounter

    counter = FastCounter.load()  # (loaded and warmed up: its load is left out)
    if not counter.usable:
        return float("nan")
    encode = counter._tokenizer.encode
    start = _cpu()
    for text in texts:
        encode(text)
    return _cpu() - start


def _fresh_token_floor(texts: list[str]) -> float:
    """`_token_floor` in a new process: gigatoken keeps the pieces it has encoded for the
    process, across tokenizers (the calibration above used it), and counts texts it has seen
    three times faster than a first run does."""
    with tempfile.TemporaryDirectory(prefix="mcsim-stages-") as tmp:
        path = Path(tmp) / "texts.pickle"
        with path.open("wb") as fh:
            pickle.dump(texts, fh, protocol=pickle.HIGHEST_PROTOCOL)
        out = subprocess.run([sys.executable, __file__, "--token-floor", str(path)],
                             check=True, capture_output=True, text=True).stdout  # fmt: skip
    return float(out)


def _command(args: list[str]) -> float:
    """CPU seconds (user + system) of `python -m mcsim ARGS` and every process it waited for."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([sys.executable, "-m", "mcsim", *args], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def _commands(paths: list[str], policy: Path, rounds: int) -> dict[str, tuple[float, float]]:
    """Each command's least CPU over ROUNDS with a new cache folder, and with none."""
    out: dict[str, tuple[float, float]] = {}
    jobs = {
        "replay": ["replay", *paths, "--policy", str(policy), "--workers", "1"],
        "inspect": ["inspect", *paths, "--json", "--workers", "1"],
    }
    for name, args in jobs.items():
        cached, bare = [], []
        for _ in range(rounds):
            with tempfile.TemporaryDirectory(prefix="mcsim-stages-") as tmp:
                out_a = ["--out", f"{tmp}/a"] if name == "replay" else []
                out_b = ["--out", f"{tmp}/b"] if name == "replay" else []
                cached.append(_command([*args, *out_a, "--cache-dir", f"{tmp}/cache"]))
                bare.append(_command([*args, *out_b, "--no-cache"]))
        out[name] = (min(cached), min(bare))
    return out


def _least(rounds: int, stage: Callable[[], T]) -> tuple[float, T]:
    """The least CPU seconds of ROUNDS runs of `stage`, with the last run's result."""
    best = float("inf")
    for _ in range(rounds):
        start = _cpu()
        result = stage()
        best = min(best, _cpu() - start)
    return best, result


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("paths", nargs="*")
    parser.add_argument("--policy", type=Path, default=POLICY)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--skip-commands", action="store_true",
                        help="leave out the whole commands (the stages only)")  # fmt: skip
    parser.add_argument("--token-floor", type=Path, help=argparse.SUPPRESS)  # (a pickle)
    args = parser.parse_args(argv)
    rounds = args.rounds
    if args.token_floor is not None:
        with args.token_floor.open("rb") as fh:
            print(_token_floor(pickle.load(fh)))
        return
    if not args.paths:
        parser.error("give the transcripts' PATHS")

    from mcsim.accounting.prices import load_table
    from mcsim.accounting.recorded import analyse_session
    from mcsim.ingest.loaders import Detail
    from mcsim.ingest.pipeline import load_sessions
    from mcsim.replay.calibrate import calibrate_session
    from mcsim.replay.run import replay_session
    from mcsim.replay.scenario import load_policy_file
    from mcsim.replay.tokens import TokenEstimator
    from mcsim.tuning import tune

    tune()
    prices = load_table(None)
    scenarios = tuple(load_policy_file(args.policy))
    rows: list[tuple[str, float, str]] = []

    read: dict[bool, tuple[int, int]] = {}  # lines and bytes, as the floor read them

    def floor(with_text: bool) -> str:
        runs = [_parse_floor(args.paths, with_text) for _ in range(rounds)]
        read[with_text] = runs[0][1:]
        return f"{min(seconds for seconds, _, _ in runs):.2f} s"

    def loaded(detail: Detail) -> list[Any]:
        return load_sessions(args.paths, detail=detail, workers=1)[0]

    seconds, calls = _least(rounds, lambda: loaded(Detail.CALLS))
    rows.append(("inspect: parse", seconds, floor(False)))
    seconds, _ = _least(rounds, lambda: [analyse_session(s, prices, False) for s in calls])
    rows.append(("inspect: analyse", seconds, ""))
    seconds, sessions = _least(rounds, lambda: loaded(Detail.TEXT))
    rows.append(("replay: parse", seconds, floor(True)))

    # Each round counts afresh (a new estimator). The tokenizing is the first round's, which
    # loads the tokenizers as a first run does; later rounds find them loaded.
    tokenize, calibrate = -1.0, float("inf")
    for _ in range(rounds):
        counter = _TimedCounter()
        estimator = TokenEstimator(counter)
        start = _cpu()
        calibrated = [calibrate_session(s, estimator) for s in sessions]
        calibrate = min(calibrate, _cpu() - start - counter.seconds)
        tokenize = counter.seconds if tokenize < 0 else tokenize
    chars = sum(map(len, counter.texts))
    token_floor = _fresh_token_floor(counter.texts)
    rows.append((f"replay: tokenize ({chars / 1e6:.1f} M characters)", tokenize,
                 f"{token_floor:.2f} s"))  # fmt: skip
    rows.append(("replay: calibrate besides tokenizing", calibrate, ""))
    seconds, _ = _least(rounds, lambda: [replay_session(s, scenarios, prices, True)
                                         for s in calibrated])  # fmt: skip
    rows.append(("replay: simulate", seconds, ""))

    lines, size = read[True]
    print(f"{' '.join(args.paths)}: {size / 1e6:.0f} MB, {lines:,} lines; "
          f"CPU seconds, least of {rounds}")  # fmt: skip
    for name, seconds, floor_text in rows:
        print(f"  {name:<45} {seconds:6.2f} s   floor {floor_text or '-'}")
    if args.skip_commands:
        return
    stages = {
        "replay": sum(s for n, s, _ in rows if n.startswith("replay")),
        "inspect": sum(s for n, s, _ in rows if n.startswith("inspect")),
    }
    for name, (cached, bare) in _commands(args.paths, args.policy, rounds).items():
        print(f"  {name}, whole command --workers 1: {cached:.2f} s with a new cache folder, "
              f"{bare:.2f} s with --no-cache")  # fmt: skip
        print(f"    writing cache entries {cached - bare:.2f} s; "
              f"the rest (start, tables, charts, report) {bare - stages[name]:.2f} s")  # fmt: skip


if __name__ == "__main__":
    main(sys.argv[1:])
