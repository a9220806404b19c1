"""Typed errors raised by the library.

The CLI turns these into one-line messages and exit codes; the library never prints or exits.
"""

from __future__ import annotations

from typing import Any

from mcsim.text import counted


class McsimError(Exception):
    """Base class for every error mcsim raises on purpose."""

    exit_code = 1


class UsageError(McsimError):
    """The caller asked for something that cannot be done (bad path, bad option value)."""

    exit_code = 2


class InputNotFoundError(UsageError):
    """A PATHS argument matched nothing readable."""


class PriceTableError(UsageError):
    """A price file could not be read or has the wrong shape."""


class TokenizerUnavailableError(McsimError):
    """The offline tokenizer encoding is not installed."""


class OutputExistsError(UsageError):
    """The output directory already holds a run and --force was not given."""


class OutputRefusedError(UsageError):
    """The output directory may not be used: a folder mcsim did not write, one holding inputs,
    a home or current directory, a file, or a place where nothing can be created."""


class NoCallsError(McsimError):
    """An input in which not a single API call could be read (every command's error for it);
    `stats` (mcsim.ingest.pipeline.LoadStats) says what was read and skipped."""

    def __init__(self, stats: Any, what: str) -> None:
        why = ""
        if stats.files_skipped_by_project:
            why = (
                f"; --project matched no project (the "
                f"{counted(stats.files_skipped_by_project, 'file', 'files')} found belong to "
                "others)"
            )
        elif not stats.files:
            why = "; no transcript file (*.jsonl) was found there"
        super().__init__(
            f"no API calls could be read from the input ({counted(stats.files, 'file', 'files')}, "
            f"{counted(stats.skips.lines_read, 'line', 'lines')} read, {stats.skips.total} "
            f"skipped); nothing to "
            f"{what}{why}"
        )
        self.stats = stats
