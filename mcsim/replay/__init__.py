"""Stage 3, replay: what the recording would have cost under other pruning policies.

    tokens.py        token estimates (offline tiktoken encoding)
    calibrate.py     item sizes scaled to the recorded prompt growth; reads classified
    session_cache.py calibrated sessions cached on disk, so a second run skips stages 1-3a
    scenario.py      policy files: YAML in, validated scenarios out
    policies/        one module per policy kind, behind a registry
    presets/         the built-in policy files (`--policy claude-code`), package data
    context.py       the replayed context: clearings applied, the recording's own pruning
    cache.py         the prompt-cache model (TTL clock, prefix and head fall-back, edits)
    pricing.py       replayed calls billed against the price table
    simulate.py      one thread's replay: the policies decide call by call, the cache
                     serves, the calls are priced, the detector names every break
    refetch.py       what a cleared result would have cost to fetch again
    rows.py          per-call rows, packed as columns in the workers
    run.py           a whole run: every session under every scenario (`run_replay`)
    sweep.py         many variants of one policy (`mcsim sweep`)

Imports accounting and below, never outputs.
"""

from __future__ import annotations

from typing import Any


def __getattr__(name: str) -> Any:
    """`mcsim.replay.run_replay`, the entry point, imported on first use (the package is
    imported by every module below it, which must not load the whole replay)."""
    if name == "run_replay":
        from mcsim.replay.run import run_replay

        return run_replay
    raise AttributeError(f"module 'mcsim.replay' has no attribute {name!r}")
