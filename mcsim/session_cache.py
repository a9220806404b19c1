"""Calibrated sessions cached on disk, so a second replay skips parsing and tokenizing.

One file per load unit, keyed by mcsim's cache format, the loader, and every file's path,
size and modification time: any change to a transcript makes a new key. Entries hold sizes
and hashes, never transcript text. The folder is `$MCSIM_CACHE_DIR`, else `~/.cache/mcsim`;
a cache that cannot be read or written is ignored (the run recomputes), never fatal.
"""

from __future__ import annotations

import hashlib
import os
import pickle
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path

from mcsim.calibrate import CalSession, calibrate_session
from mcsim.loaders import Detail, LoadUnit, get_loader
from mcsim.model import SkipReport
from mcsim.pipeline import CallKey, Loaded, without_calls
from mcsim.tokens import TokenEstimator

CACHE_FORMAT = "mcsim-calibrated/4"


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
            cached = _read(path)
            if cached is not None:
                spelled, sessions, skips = cached
                return Loaded(sessions, _respell(skips, dict(zip(spelled, files, strict=False))))
        loaded = get_loader(unit.loader).load(unit, Detail.TEXT)
        kept, dropped = without_calls(loaded.sessions, exclude)
        estimator = _estimator()
        calibrated = [calibrate_session(s, estimator) for s in kept]
        if path is not None and not exclude:
            _write(path, (files, calibrated, loaded.skips))
        return Loaded(calibrated, loaded.skips, dropped)


def _respell(skips: SkipReport, names: dict[str, str]) -> SkipReport:
    """The skipped lines named by this run's paths: the cache may have been filled through
    another spelling of the same files (relative, absolute, via a link)."""
    skips.examples = [replace(e, file=names.get(e.file, e.file)) for e in skips.examples]
    return skips


Payload = tuple[list[str], list[CalSession], SkipReport]  # file names as given, sessions, skips


def _read(path: Path) -> Payload | None:
    try:
        with path.open("rb") as fh:
            data = pickle.load(fh)
    except (OSError, pickle.UnpicklingError, EOFError, AttributeError, ImportError):
        return None
    if not (isinstance(data, tuple) and len(data) == 4 and data[0] == CACHE_FORMAT):
        return None
    return data[1], data[2], data[3]


def _write(path: Path, payload: Payload) -> None:
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=path.parent)
        with os.fdopen(fd, "wb") as fh:
            pickle.dump((CACHE_FORMAT, *payload), fh, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(tmp, path)
    except OSError:  # a cache that cannot be written only costs speed
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)
