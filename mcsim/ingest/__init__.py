"""Stage 1, ingest: find transcripts, load them with the loader of their format, and stream
normalised sessions (mcsim.model) out of a pool of worker processes.

    discovery.py   where transcripts are (Claude Code's folders, globs, files)
    loaders/       one module per transcript format, a registry that sniffs them, and
                   jsonl.py: reading JSON-lines files safely, for every loader
    storage.py     object URLs (s3://, gs://) as paths, read through fsspec
    pipeline.py    files planned into units, loaded in parallel, calls de-duplicated

Imports only mcsim.model and the shared helpers (errors, text, processes).
"""
