"""Shared fixtures: the real corpus, the bundled samples, a CLI runner; a tokenizing guard."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import mcsim.replay.session_cache
from mcsim.replay.tokens import TiktokenCounter

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


@pytest.fixture(autouse=True)
def _own_cache_folder(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each test's runs cache in a folder of their own, never in the user's cache folder
    (`inspect` and `replay` cache by default): a test sees only the entries it made."""
    monkeypatch.setenv("MCSIM_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))


def forbid_tokenizing(monkeypatch: pytest.MonkeyPatch, why: str) -> None:
    """Fail the test if anything is tokenized from now on (a fresh estimator, no counter)."""

    def refuse(self: object, text: str) -> int:
        raise AssertionError(why)

    monkeypatch.setattr(TiktokenCounter, "count", refuse)
    monkeypatch.setattr(mcsim.replay.session_cache, "_ESTIMATOR", None)
