"""Stage 2, accounting: what the recording cost and where its cache broke.

    prices/        the dated price table shipped with mcsim, override files, LiteLLM import
    breaks.py      Claude Code's cache-break rule, with a cause for every break
    recorded.py    recorded usage per session and in total (`mcsim inspect`)

Imports ingest and below, never replay or outputs.
"""
