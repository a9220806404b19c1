"""The parallel load: forked workers give the same results, in the same order, as one process."""

from __future__ import annotations

from pathlib import Path

import pytest

from mcsim.ingest import pipeline
from mcsim.ingest.engines import local
from mcsim.model import Session


def summary(session: Session) -> tuple[str, int, int]:
    return session.session_id, len(session.calls), sum(c.usage.output_tokens for c in session.calls)


def fail_on_big(session: Session) -> tuple[str, int, int]:
    if len(session.calls) > 30:
        raise ValueError(f"refused {session.session_id}")
    return summary(session)


@pytest.fixture
def parallel(monkeypatch: pytest.MonkeyPatch) -> None:
    """Run the worker processes even for the small corpus."""
    monkeypatch.setattr(local, "_PARALLEL_MIN_BYTES", 0)


def test_workers_give_the_serial_results_in_the_same_order(corpus: Path, parallel: None) -> None:
    serial_stats = pipeline.LoadStats()
    serial = list(pipeline.map_sessions([str(corpus)], summary, workers=1, stats=serial_stats))
    stats = pipeline.LoadStats()
    forked = list(pipeline.map_sessions([str(corpus)], summary, workers=2, stats=stats))
    assert forked == serial
    assert len(forked) == 8 and sum(n for _, n, _ in forked) == 355
    assert stats.skips.counts == serial_stats.skips.counts


def test_an_error_in_a_worker_stops_the_run_with_that_error(corpus: Path, parallel: None) -> None:
    with pytest.raises(ValueError, match="refused"):
        list(pipeline.map_sessions([str(corpus)], fail_on_big, workers=2))
