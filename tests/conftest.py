"""Shared fixtures: the real corpus, the bundled samples, and a CLI runner."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

REPO = Path(__file__).resolve().parents[1]
# Real transcripts whose licences allow it, plus one generated legacy session
# (tests/data/corpus/README.md says what each covers and where it comes from).
CORPUS = REPO / "tests" / "data" / "corpus" / "claude" / "projects"
SAMPLES = REPO / "sample_transcripts"
GOLDEN = Path(__file__).resolve().parent / "golden"


@pytest.fixture(scope="session")
def corpus() -> Path:
    assert CORPUS.is_dir(), f"the test corpus is missing at {CORPUS}"
    return CORPUS


@pytest.fixture(scope="session")
def corpus_reference() -> dict[str, Any]:
    """The independent computation's figures (tests/golden/corpus_reference.py): `totals`,
    `breaks_by_cause` and per-session `sessions`."""
    return json.loads((GOLDEN / "corpus_sessions.json").read_text())


@pytest.fixture()
def runner() -> CliRunner:
    return CliRunner()
