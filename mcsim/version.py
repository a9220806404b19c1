"""mcsim's version, in a module of the shared bottom that imports nothing: the cache folder's
keys (`mcsim/ingest/disk_cache.py`) and run.json (`mcsim/outputs/run_dir.py`) carry it
without importing the package's API, which loads every stage. `mcsim.__version__` is the same
value, for users; it matches `version` in pyproject.toml."""

__version__ = "0.1.0"
