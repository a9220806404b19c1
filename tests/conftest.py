"""Shared fixtures: the real corpus, the bundled samples, and a CLI runner."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

REPO = Path(__file__).resolve().parents[1]
CORPUS = REPO.parent / "shared" / "corpus" / "claude" / "projects"
SAMPLES = REPO / "sample_transcripts"
GOLDEN = Path(__file__).resolve().parent / "golden"


@pytest.fixture(scope="session")
def corpus() -> Path:
    assert CORPUS.is_dir(), f"the shared corpus is missing at {CORPUS}"
    return CORPUS


@pytest.fixture(scope="session")
def corpus_reference() -> dict[str, dict[str, float]]:
    return json.loads((GOLDEN / "corpus_sessions.json").read_text())


@pytest.fixture()
def runner() -> CliRunner:
    return CliRunner()
