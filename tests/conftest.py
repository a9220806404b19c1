"""Shared fixtures: the real corpus, the bundled samples, a CLI runner; a tokenizing guard."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

import mcsim.session_cache
from mcsim.tokens import TiktokenCounter

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


def forbid_tokenizing(monkeypatch: pytest.MonkeyPatch, why: str) -> None:
    """Fail the test if anything is tokenized from now on (a fresh estimator, no counter)."""

    def refuse(self: object, text: str) -> int:
        raise AssertionError(why)

    monkeypatch.setattr(TiktokenCounter, "count", refuse)
    monkeypatch.setattr(mcsim.session_cache, "_ESTIMATOR", None)
