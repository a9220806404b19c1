"""Stage 4, outputs: what people read.

    run_dir.py        a run directory written safely (atomic, --force only over mcsim's own)
    tables.py         Parquet table plumbing shared by every command
    inspect_tables.py, replay_tables.py, sweep_tables.py
                      each command's tables, JSON and terminal summary
    rows_sink.py      a replay's per-call and break rows, written as the sessions arrive
    terminal.py       terminal tables and the inspect summary
    charts.py         PNG charts, drawn in a child process
    report.py         the HTML and Markdown report of a run directory

Imports every stage below; nothing imports it but the CLI.
"""
