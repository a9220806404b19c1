"""mcsim: replay recorded LLM agent transcripts under context-pruning policies.

The library does everything the CLI does:

    >>> from mcsim import inspect_usage, default_table
    >>> report = inspect_usage(["~/.claude/projects"], default_table())
    >>> report.cost_usd, report.tokens.cache_hit_ratio
"""

from __future__ import annotations

__version__ = "0.1.0"

from mcsim.errors import McsimError
from mcsim.model import Call, Item, ItemKind, Session, Thread, Usage
from mcsim.pipeline import iter_sessions, load_sessions
from mcsim.prices import PriceTable, default_table, load_table
from mcsim.recorded import InspectReport, analyse_session, inspect_usage

__all__ = [
    "Call",
    "InspectReport",
    "Item",
    "ItemKind",
    "McsimError",
    "PriceTable",
    "Session",
    "Thread",
    "Usage",
    "__version__",
    "analyse_session",
    "default_table",
    "inspect_usage",
    "iter_sessions",
    "load_sessions",
    "load_table",
]
