"""Transcript loaders behind a registry keyed by format.

A loader turns files of one format into normalised Sessions. It declares how its files group
into independent units (a unit can be loaded in another process with no knowledge of the
others), and sniffs whether a file is its format. Adding a format is one new module that
calls `register` at import time, plus one import line below.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import IntEnum
from pathlib import Path
from typing import Protocol

from mcsim.ingest.loaders.jsonl import read_head
from mcsim.model import Session, SkipReport


class Detail(IntEnum):
    """How much of each conversation a load keeps: no more than the command needs."""

    CALLS = 0  # calls and usage only (inspect)
    SIZES = 1  # plus the items added before each call, with their sizes
    TEXT = 2  # plus the items' text (token estimates, re-fetch analysis)


@dataclass(frozen=True, slots=True)
class LoadUnit:
    """Files that must be read together (a session and its sub-agents, a project folder)."""

    loader: str
    key: str
    files: tuple[Path, ...]
    size_bytes: int


@dataclass
class LoadResult:
    sessions: list[Session] = field(default_factory=list)
    skips: SkipReport = field(default_factory=SkipReport)


class Loader(Protocol):
    """The interface every transcript format implements."""

    name: str

    def sniff(self, path: Path, head: bytes) -> int:
        """How sure this loader is that `path` is its format: 0 = not mine, higher = surer."""
        ...

    def units(self, files: Sequence[Path]) -> list[LoadUnit]:
        """Group this format's files into independently loadable units."""
        ...

    def load(self, unit: LoadUnit, detail: Detail) -> LoadResult:
        """Read one unit. Never raises on bad content: bad lines go to the skip report."""
        ...


_REGISTRY: dict[str, Loader] = {}


def register(loader: Loader) -> None:
    _REGISTRY[loader.name] = loader


def get_loader(name: str) -> Loader:
    return _REGISTRY[name]


def sniff(path: Path) -> Loader | None:
    """The registered loader that claims `path` most strongly, or None."""
    head = read_head(path, 4096)
    best: tuple[int, Loader] | None = None
    for loader in _REGISTRY.values():
        score = loader.sniff(path, head)
        if score > 0 and (best is None or score > best[0]):
            best = (score, loader)
    return best[1] if best else None


def plan_units(files: Sequence[Path]) -> list[LoadUnit]:
    """Assign every file to its loader and group them into units, largest first."""
    by_loader: dict[str, list[Path]] = {}
    for path in files:
        loader = sniff(path)
        if loader is not None:
            by_loader.setdefault(loader.name, []).append(path)
    units = [u for name, paths in by_loader.items() for u in _REGISTRY[name].units(paths)]
    return units


from mcsim.ingest.loaders import claude_code as _claude_code  # noqa: E402,F401  (registers itself)
from mcsim.ingest.loaders import codex as _codex  # noqa: E402,F401  (registers itself)
from mcsim.ingest.loaders import interchange as _interchange  # noqa: E402,F401  (registers itself)
