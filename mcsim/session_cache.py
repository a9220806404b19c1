"""Calibrated sessions cached on disk, so a second replay skips parsing and tokenizing.

One file per load unit, keyed by mcsim's cache format, the loader, and every file's path,
size and modification time: any change to a transcript makes a new key. Beside it, keyed by
the paths alone, the unit's token estimates by content hash: Claude Code keeps appending to
its transcripts, and a grown unit is parsed and calibrated again but only its new text is
tokenized (the slowest step). Entries hold sizes and hashes, never transcript text. The
folder is `$MCSIM_CACHE_DIR`, else `~/.cache/mcsim`; a cache that cannot be read or written is
ignored (the run recomputes), never fatal.
"""

from __future__ import annotations

import hashlib
import os
import pickle
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from mcsim.calibrate import CalSession, calibrate_session
from mcsim.loaders import Detail, LoadUnit, get_loader
from mcsim.model import SkipReport
from mcsim.pipeline import CallKey, Loaded, without_calls
from mcsim.tokens import OFFLINE_ENCODING, TokenEstimator

CACHE_FORMAT = "mcsim-calibrated/4"
TOKENS_FORMAT = f"mcsim-tokens/1/{OFFLINE_ENCODING}"


def default_cache_dir() -> Path:
    env = os.environ.get("MCSIM_CACHE_DIR")
    return Path(env) if env else Path.home() / ".cache" / "mcsim"


def unit_key(unit: LoadUnit) -> str:
    digest = hashlib.sha256(f"{CACHE_FORMAT}\0{unit.loader}".encode())
    for path in unit.files:
        try:
            st = path.stat()
            digest.update(f"\0{path.resolve()}\0{st.st_size}\0{st.st_mtime_ns}".encode())
        except OSError:
            digest.update(f"\0{path}\0missing".encode())
    return digest.hexdigest()


def paths_key(unit: LoadUnit) -> str:
    """The unit's files, whatever their content: the key of its token estimates."""
    digest = hashlib.sha256(f"{TOKENS_FORMAT}\0{unit.loader}".encode())
    for path in unit.files:
        digest.update(f"\0{path.resolve()}".encode())
    return digest.hexdigest()


# One estimator per process: token counts are shared by every unit a worker loads.
_ESTIMATOR: TokenEstimator | None = None


def _estimator() -> TokenEstimator:
    global _ESTIMATOR
    if _ESTIMATOR is None:
        _ESTIMATOR = TokenEstimator()
    return _ESTIMATOR


@dataclass(frozen=True)
class CalibratedSource:
    """A pipeline source of calibrated sessions, read from or written to the disk cache.

    `cache_dir=None` disables the cache. A unit reloaded without calls seen elsewhere (the
    rare cross-unit duplicate) is calibrated afresh and not cached.
    """

    cache_dir: Path | None

    def __call__(self, unit: LoadUnit, exclude: frozenset[CallKey]) -> Loaded[CalSession]:
        path = self.cache_dir / f"{unit_key(unit)}.pkl" if self.cache_dir else None
        files = [str(f) for f in unit.files]
        if path is not None and not exclude:
            cached = _read(path, CACHE_FORMAT, 3)
            if cached is not None:
                spelled, sessions, skips = cached
                return Loaded(sessions, _respell(skips, dict(zip(spelled, files, strict=False))))
        loaded = get_loader(unit.loader).load(unit, Detail.TEXT)
        kept, dropped = without_calls(loaded.sessions, exclude)
        estimator = _estimator()
        tokens = self.cache_dir / f"{paths_key(unit)}.tokens" if self.cache_dir else None
        if tokens is not None:
            known = _read(tokens, TOKENS_FORMAT, 1)
            estimator.learn(known[0] if known else {})
        with estimator.recording() as used:
            calibrated = [calibrate_session(s, estimator) for s in kept]
        if path is not None and not exclude:
            _write(path, (CACHE_FORMAT, files, calibrated, loaded.skips))
        if tokens is not None and used:
            _write(tokens, (TOKENS_FORMAT, used))
        return Loaded(calibrated, loaded.skips, dropped)


def _respell(skips: SkipReport, names: dict[str, str]) -> SkipReport:
    """The skipped lines named by this run's paths: the cache may have been filled through
    another spelling of the same files (relative, absolute, via a link)."""
    skips.examples = [replace(e, file=names.get(e.file, e.file)) for e in skips.examples]
    return skips


def _read(path: Path, form: str, entries: int) -> tuple[Any, ...] | None:
    """The entries of a cache file written in format `form`; None if absent or unreadable."""
    try:
        with path.open("rb") as fh:
            data = pickle.load(fh)
    except (OSError, pickle.UnpicklingError, EOFError, AttributeError, ImportError):
        return None
    if not (isinstance(data, tuple) and len(data) == entries + 1 and data[0] == form):
        return None
    return data[1:]


def _write(path: Path, payload: tuple[Any, ...]) -> None:
    """Write (format, *entries) atomically."""
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=path.parent)
        with os.fdopen(fd, "wb") as fh:
            pickle.dump(payload, fh, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(tmp, path)
    except OSError:  # a cache that cannot be written only costs speed
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)
