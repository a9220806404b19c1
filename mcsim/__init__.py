"""mcsim: replay recorded LLM agent transcripts under context-pruning policies.

The library does everything the CLI does:

    >>> from mcsim import inspect_usage, default_table
    >>> report = inspect_usage(["~/.claude/projects"], default_table())
    >>> report.cost_usd, report.tokens.cache_hit_ratio

    >>> from mcsim import ReplayConfig, replay_run   # what `mcsim replay` does, to a folder
    >>> run = replay_run(ReplayConfig(paths=("~/.claude/projects",), policy="claude-code"))
    >>> run.out_dir, run.report.baseline.cost_usd

The pipeline's stages are packages, each importing only those before it: `ingest` (find
and load transcripts), `accounting` (prices, recorded usage, cache breaks), `replay` (token
calibration, policies, the prompt-cache model, simulation, sweeps) and `outputs` (tables,
terminal, charts, report); `model` is the data they share, and `cli` is a thin shell.
"""

from __future__ import annotations

from typing import Any

from mcsim.accounting.prices import PriceTable, default_table, load_table
from mcsim.accounting.recorded import InspectReport, analyse_session, inspect_usage
from mcsim.errors import McsimError
from mcsim.ingest.pipeline import iter_sessions, load_sessions
from mcsim.model import Call, Item, ItemKind, Session, Thread, Usage
from mcsim.version import __version__


def __getattr__(name: str) -> Any:
    """The replay's entry points, imported on first use: `import mcsim` stays light for the
    loading workers. `run_replay` is the replay in memory (also mcsim.replay.run_replay);
    `replay_run`, `sweep_run`, `advise_run` and `inspect_run` do what the commands of their
    names do."""
    if name == "run_replay":
        from mcsim.replay.run import run_replay

        return run_replay
    if name in ("ReplayConfig", "replay_run", "SweepConfig", "sweep_run", "AdviseConfig",
                "advise_run"):  # fmt: skip
        from mcsim.outputs import runs

        return getattr(runs, name)
    if name in ("InspectConfig", "inspect_run"):
        from mcsim.outputs import inspection

        return getattr(inspection, name)
    raise AttributeError(f"module 'mcsim' has no attribute {name!r}")


__all__ = [
    "AdviseConfig",
    "Call",
    "InspectConfig",
    "InspectReport",
    "Item",
    "ItemKind",
    "McsimError",
    "PriceTable",
    "ReplayConfig",
    "Session",
    "SweepConfig",
    "Thread",
    "Usage",
    "__version__",
    "advise_run",
    "analyse_session",
    "default_table",
    "inspect_run",
    "inspect_usage",
    "iter_sessions",
    "load_sessions",
    "load_table",
    "replay_run",
    "run_replay",
    "sweep_run",
]
