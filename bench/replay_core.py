"""Time a first replay's calibration and simulation in one process, on sessions loaded once.

    python bench/replay_core.py load PATHS... --to FILE          # parse once, pickle the sessions
    python bench/replay_core.py time FILE [--policy FILE] [--rounds N] [--profile OUT]
    python bench/replay_core.py digest FILE [--policy FILE]

`load` reads every session under PATHS with their texts (what a replay loads) and pickles
them, with their token counts, to FILE (under /tmp: a few hundred MB for the 523 MB corpus
replica). `time` reads them back, then, N times: calibrates every session with those counts
known (the calibration besides tokenizing: hashing the texts, scaling, re-fetch keys,
classifying the reads) and replays every calibrated session under the policy file
(`replay_session`, rows kept, as `mcsim replay` does), printing the CPU seconds of each.
`digest` prints a hash of every calibrated session and of every session's replay (pickled):
two source trees that print the same hashes calibrated and replayed alike (a quick check;
bench/compare_outputs.py compares what the commands write). The mcsim imported is whichever
comes first on PYTHONPATH, so one FILE serves two source trees run alternately
(`PYTHONPATH=/tmp/base python bench/replay_core.py time FILE`), as long as both read the
same `mcsim.model` records.
"""

from __future__ import annotations

import argparse
import io
import pickle
import sys
import time
from pathlib import Path
from typing import Any

POLICY = Path(__file__).resolve().parents[1] / "policies" / "all.yaml"


def load(paths: list[str], to: Path) -> None:
    from mcsim.ingest.loaders import Detail
    from mcsim.ingest.pipeline import load_sessions
    from mcsim.replay.calibrate import calibrate_session
    from mcsim.replay.tokens import TokenEstimator

    sessions, _ = load_sessions(paths, detail=Detail.TEXT)
    estimator = TokenEstimator()
    with estimator.recording() as counts:
        for session in sessions:
            calibrate_session(session, estimator)
    with to.open("wb") as fh:
        pickle.dump((sessions, dict(counts)), fh, protocol=pickle.HIGHEST_PROTOCOL)
    print(f"{len(sessions)} sessions, {len(counts)} counts -> {to}")


def _cpu() -> float:
    return time.process_time()


def timed(file: Path, policy: Path, rounds: int, profile: str | None) -> None:
    from mcsim.accounting.prices import load_table
    from mcsim.replay.calibrate import calibrate_session
    from mcsim.replay.run import replay_session
    from mcsim.replay.scenario import load_policy_file
    from mcsim.replay.tokens import TokenEstimator
    from mcsim.tuning import tune

    tune()  # the collector's thresholds of `mcsim replay`
    with file.open("rb") as fh:
        sessions, counts = pickle.load(fh)
    scenarios = tuple(load_policy_file(policy))
    prices = load_table(None)

    def calibrate() -> list[Any]:
        estimator = TokenEstimator()
        estimator.learn(counts)
        return [calibrate_session(s, estimator) for s in sessions]

    def simulate(calibrated: list[Any]) -> None:
        for session in calibrated:
            replay_session(session, scenarios, prices, True)

    for _ in range(rounds):
        start = _cpu()
        calibrated = calibrate()
        middle = _cpu()
        simulate(calibrated)
        end = _cpu()
        print(f"calibrate {middle - start:.3f} s  simulate {end - middle:.3f} s", flush=True)
    if profile is not None:
        import cProfile

        calibrated = calibrate()
        cProfile.runctx("simulate(calibrated)", globals(), locals(), profile)


def digest(file: Path, policy: Path) -> None:
    import hashlib

    from mcsim.accounting.prices import load_table
    from mcsim.replay.calibrate import calibrate_session
    from mcsim.replay.run import replay_session
    from mcsim.replay.scenario import load_policy_file
    from mcsim.replay.tokens import TokenEstimator

    with file.open("rb") as fh:
        sessions, counts = pickle.load(fh)
    scenarios = tuple(load_policy_file(policy))
    prices = load_table(None)
    estimator = TokenEstimator()
    estimator.learn(counts)
    calibrated, replayed = hashlib.sha256(), hashlib.sha256()
    for session in sessions:
        cal = calibrate_session(session, estimator)
        calibrated.update(_pickled(cal))
        replayed.update(_pickled(replay_session(cal, scenarios, prices, True)))
    print(f"calibrated {calibrated.hexdigest()}\nreplayed {replayed.hexdigest()}")


def _pickled(value: Any) -> bytes:
    """`value` pickled without the memo, so that two equal values give the same bytes
    whether or not they share objects (an interned string, a cached tuple)."""
    out = io.BytesIO()
    pickler = pickle.Pickler(out, protocol=pickle.HIGHEST_PROTOCOL)
    pickler.fast = True  # no memo: nothing here refers to itself
    pickler.dump(value)
    return out.getvalue()


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    loading = sub.add_parser("load")
    loading.add_argument("paths", nargs="+")
    loading.add_argument("--to", type=Path, required=True)
    timing = sub.add_parser("time")
    timing.add_argument("file", type=Path)
    timing.add_argument("--policy", type=Path, default=POLICY)
    timing.add_argument("--rounds", type=int, default=1)
    timing.add_argument("--profile", help="write a cProfile of one more simulation here")
    digesting = sub.add_parser("digest")
    digesting.add_argument("file", type=Path)
    digesting.add_argument("--policy", type=Path, default=POLICY)
    args = parser.parse_args(argv)
    if args.command == "load":
        load(args.paths, args.to)
    elif args.command == "time":
        timed(args.file, args.policy, args.rounds, args.profile)
    else:
        digest(args.file, args.policy)


if __name__ == "__main__":
    main(sys.argv[1:])
