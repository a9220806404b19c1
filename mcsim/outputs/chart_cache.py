"""Replay charts kept in the cache folder, by what they draw.

A chart is a function of its data (`ChartData`), of the code that draws it (mcsim's files and
Python) and of matplotlib, Pillow and matplotlib's settings (a `matplotlibrc`). A replay of
unchanged transcripts under the same policies gathers the same data, and drawing its four
charts again was the largest part of such a run, matplotlib's import included
(docs/performance.md#measured-reasons). So each drawn chart's
PNG is kept under a hash of all of that, and a run whose chart hashes the same copies the PNG
instead of drawing it; when every chart is kept, matplotlib is never imported.

Entries are files of the cache folder (mcsim.ingest.disk_cache: header, checksum, atomic
write, the cap), named by the hash, suffix `.chart`; inside, the hash again, then the PNG. An
entry that cannot be used is removed and its chart drawn again: a chart is never taken from
an entry made for other data. A PNG is bytes only (matplotlib writes no date into it), so a
kept chart is byte for byte the chart drawing it again gives. Not in the hash: the fonts
installed (matplotlib reads them into its own font cache once; a name in a script no bundled
font has is drawn with what that cache lists). `mcsim cache clear` removes the entries.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import os
import pickle
import sys
from dataclasses import dataclass
from pathlib import Path

from mcsim.ingest.disk_cache import (
    Damaged,
    Kind,
    code_hash,
    enforce_cap,
    max_cache_bytes,
    read_payload,
    remove_file,
    write_entry,
)
from mcsim.ingest.loaders.jsonl import read_regular
from mcsim.outputs.charts import ChartData, ChartProcess

CHART_VERSION = 1
_CHART = Kind(5, CHART_VERSION)
_PNG = b"\x89PNG\r\n\x1a\n"
_KEY_BYTES = 64  # the hash, as hex digits, at the start of the payload
_RC_MAX_BYTES = 1 << 20  # a matplotlibrc larger than this is not read (the chart is drawn)


def _drawing_setup() -> bytes | None:
    """What a chart's pixels depend on besides its data: mcsim's code, Python's version (its
    Unicode table decides which characters of a label are printable), the versions of
    matplotlib and of Pillow (which writes matplotlib's PNGs: another one may compress the
    same pixels into other bytes), read from their `_version.py` without importing them (the
    import is what a kept chart spares), and every matplotlibrc matplotlib may read
    (`$MATPLOTLIBRC`, the working folder's, the user's). None if one is there that cannot be
    read whole (too large, a FIFO, a device): matplotlib would read it (or wait on it), and
    what it sets is unknown. Read for each chart, not once per process: a library caller's
    next run may be in another folder, with other settings (about 0.4 ms)."""
    digest = hashlib.sha256(code_hash().encode() + b"\0" + sys.version.encode())
    candidates = []
    for package in ("matplotlib", "PIL"):
        spec = importlib.util.find_spec(package)
        if spec is not None and spec.origin:
            candidates.append((package, Path(spec.origin).parent / "_version.py"))
    rc = os.environ.get("MATPLOTLIBRC")
    if rc:
        candidates += [("env", Path(rc)), ("env folder", Path(rc) / "matplotlibrc")]
    config = os.environ.get("MPLCONFIGDIR") or os.path.join(
        os.environ.get("XDG_CONFIG_HOME") or os.path.expanduser("~/.config"), "matplotlib"
    )
    candidates += [("here", Path("matplotlibrc")), ("user", Path(config) / "matplotlibrc")]
    for role, path in candidates:  # by role, not path: the same settings elsewhere draw alike
        try:
            text = None if path.is_dir() else read_regular(path, _RC_MAX_BYTES)
        except (FileNotFoundError, NotADirectoryError):  # none there: nothing it can change
            text = None
        except OSError:
            return None
        digest.update(f"\0{role}\0".encode() + (b"\0" if text is None else b"\1" + text))
    return digest.digest()


def chart_key(name: str, data: ChartData) -> str | None:
    """The hash a chart is kept under: its file name, its data (pickled: equal data pickles
    the same, and other data never does) and `_drawing_setup`; None if that cannot be known
    (the chart is drawn, and not kept)."""
    return chart_keys([name], data)[name]


def chart_keys(names: list[str], data: ChartData) -> dict[str, str | None]:
    """`chart_key` of each of NAMES, drawn from the same data: the data pickled and the
    setup read once for all of them."""
    setup = _drawing_setup()
    if setup is None:
        return dict.fromkeys(names)
    pickled = pickle.dumps(data, protocol=5)
    keys: dict[str, str | None] = {}
    for name in names:
        digest = hashlib.sha256(setup)
        digest.update(name.encode("utf-8", "surrogatepass") + b"\0")
        digest.update(pickled)
        keys[name] = digest.hexdigest()
    return keys


@dataclass(frozen=True)
class ChartCache:
    """The charts kept in a cache folder (or prefix in object storage)."""

    folder: Path

    def _path(self, key: str) -> Path:
        return self.folder / f"{key}.chart"

    def get(self, key: str) -> bytes | None:
        """The PNG kept under `key`, or None (an entry that cannot be used is removed)."""
        path = self._path(key)
        try:
            payload = read_payload(path, _CHART)
            if payload is None:
                return None
            if payload[:_KEY_BYTES] != key.encode() or not payload[_KEY_BYTES:].startswith(_PNG):
                raise Damaged("unexpected content")
        except Damaged:
            with contextlib.suppress(OSError):
                remove_file(path)
            return None
        return payload[_KEY_BYTES:]

    def put(self, key: str, png: bytes) -> None:
        """Keep a drawn chart (never fatal: a chart not kept is drawn again next time)."""
        if png.startswith(_PNG):
            write_entry(self._path(key), _CHART, key.encode() + png)

    def keep(self, drawn: list[tuple[str, bytes]]) -> None:
        """`put` each (key, PNG), then hold the folder to its cap (the replay held it before
        the charts were drawn)."""
        for key, png in drawn:
            self.put(key, png)
        if drawn:
            enforce_cap(self.folder, max_cache_bytes())


class KeptCharts:
    """Charts asked of a `ChartProcess` for a run's folder: each one kept in `cache` is copied
    from there, the others are drawn, and kept once drawn. What `write_run_dir` waits for."""

    def __init__(self, process: ChartProcess, folder: Path, cache: ChartCache | None) -> None:
        self.process = process
        self.folder = folder
        self.cache = cache
        self._drawing: list[tuple[str, str]] = []  # (chart, key) of those the process draws
        self._asked = False

    def ask(self, data: ChartData, names: list[str]) -> None:
        """The charts NAMES of `data`."""
        missing = []
        keys = chart_keys(names, data) if self.cache is not None else dict.fromkeys(names)
        for name in names:
            key = keys[name]
            if self.cache is not None and key is not None:
                png = self.cache.get(key)
                if png is not None:
                    (self.folder / name).write_bytes(png)
                    continue
                self._drawing.append((name, key))
            missing.append(name)
        if missing:
            self.process.start(data, self.folder, missing)
            self._asked = True

    def wait(self) -> None:
        if self._asked:  # else it has nothing to draw (it may have ended: no matter, `close`)
            self.process.wait()
        if self.cache is not None:
            drawn = [(key, (self.folder / name).read_bytes()) for name, key in self._drawing]
            self.cache.keep(drawn)

    def close(self) -> None:
        self.process.close()
