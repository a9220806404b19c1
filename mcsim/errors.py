"""Typed errors raised by the library.

The CLI turns these into one-line messages and exit codes; the library never prints or exits.
"""

from __future__ import annotations


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
