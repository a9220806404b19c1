"""Shared fixtures: the real corpus, the bundled samples, a CLI runner; a tokenizing guard."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import markdown
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
REPORTS = REPO / "reports"  # the default --out's parent, run from the repository


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


# The key the tests' cache entries are signed with (mcsim.ingest.cache_key): set for the whole
# session, so that no test makes or reads a key file in the user's config folder (and a test's
# `monkeypatch.undo()`, which undoes its function-scoped fixtures' changes too, keeps it).
CACHE_KEY = "mcsim-tests-cache-key-0123456789abcdef0123456789abcdef"


@pytest.fixture(autouse=True, scope="session")
def _own_cache_key() -> Iterator[None]:
    with pytest.MonkeyPatch.context() as env:
        env.setenv("MCSIM_CACHE_KEY", CACHE_KEY)
        yield


@pytest.fixture(autouse=True)
def _nothing_written_into_the_clone() -> Iterator[None]:
    """Fail a test that leaves a new entry in the clone's reports/ folder (a command run with
    the default --out from the repository): tests write under tmp_path, never into the
    repository."""
    before = _entries(REPORTS)
    yield
    new = sorted(p.name for p in _entries(REPORTS) - before)
    assert not new, f"the test wrote into {REPORTS}: {', '.join(new)}"


def _entries(folder: Path) -> set[Path]:
    return set(folder.iterdir()) if folder.is_dir() else set()


def forbid_tokenizing(monkeypatch: pytest.MonkeyPatch, why: str) -> None:
    """Fail the test if anything is tokenized from now on (a fresh estimator, no counter)."""

    def refuse(self: object, text: object) -> int:
        raise AssertionError(why)

    monkeypatch.setattr(TiktokenCounter, "count", refuse)
    monkeypatch.setattr(TiktokenCounter, "count_many", refuse)
    monkeypatch.setattr(mcsim.replay.session_cache, "_ESTIMATOR", None)


def signed_copy(source: Path, target: Path) -> None:
    """Copy the cache entry SOURCE to TARGET signed for its new name (with the tests' key),
    as mcsim would have written that content there: what a copy alone is not (its signature
    binds the file's name), to reach the checks behind the signature."""
    from mcsim.ingest.disk_cache import signature

    data = source.read_bytes()
    start = 8 + 32  # the magic, then the signature (disk_cache.py)
    target.write_bytes(data[:8] + signature(target.name, data[start:]) + data[start:])


def keep_loaded_calls(cache: Path, *paths: Path) -> list[Path]:
    """Write the loaded calls of each unit under PATHS to CACHE (`.calls` entries), as a run
    that keeps no analysed sessions of a unit does (its --since or --until left a session
    out): a first `inspect` keeps only the analysed sessions. The entries, sorted."""
    from mcsim.ingest.calls_cache import CachedCallsSource
    from mcsim.ingest.discovery import discover
    from mcsim.ingest.loaders import plan_units

    source = CachedCallsSource(cache)
    for unit in plan_units(discover([str(p) for p in paths], None).files):
        loaded = source(unit, frozenset())
        assert loaded.keep is not None
        loaded.keep()
    return sorted(cache.glob("*.calls"))


def heading_ids(page: Path) -> set[str]:
    """The ids mkdocs gives a docs page's headings (the toc extension, as mkdocs.yml sets it):
    what may follow `#` in a link to the page."""
    md = markdown.Markdown(extensions=["toc", "tables"])
    md.convert(page.read_text())

    def walk(tokens: list[dict[str, Any]]) -> Iterator[str]:
        for token in tokens:
            yield str(token["id"])
            yield from walk(token["children"])

    return set(walk(md.toc_tokens))


def row_columns(n: int, **given: Any) -> Any:
    """`n` calls' `rows.RowColumns`: those `given`, the rest zero (false; model "m", TTL "5m")."""
    from mcsim.replay.rows import BOOL_COLUMNS, FLOAT_COLUMNS, INT_COLUMNS, RowColumns

    zeros: dict[str, Any] = {name: [0] * n for name in INT_COLUMNS}
    zeros |= {name: [0.0] * n for name in FLOAT_COLUMNS}
    zeros |= {name: [False] * n for name in BOOL_COLUMNS}
    zeros |= {"call_index": range(n), "model": ["m"] * n, "ttl": ["5m"] * n}
    return RowColumns(**(zeros | given))


def replay_report(paths: list[str], policy: str) -> Any:
    """The `ReplayReport` of `mcsim replay PATHS --policy POLICY --no-cache`, replayed by the
    library without the run folder: a test that checks only the figures saves the command's
    chart process (about two seconds: docs/development.md#running-the-tests)."""
    from mcsim.accounting.prices import default_table
    from mcsim.replay.presets import resolve_policy
    from mcsim.replay.run import run_replay
    from mcsim.replay.scenario import load_policy_file

    scenarios = load_policy_file(resolve_policy(policy).path)
    return run_replay(paths, scenarios, default_table(), cache_dir=None)


def replay_doc(paths: list[str], policy: str, report: Any = None) -> dict[str, Any]:
    """What `mcsim replay PATHS --policy POLICY --json --no-cache` prints (`report`: the run's
    `replay_report`, when the test has it already), encoded as the command encodes it."""
    from mcsim.outputs.replay_tables import replay_json
    from mcsim.outputs.run_dir import json_stream

    report = report if report is not None else replay_report(paths, policy)
    doc: dict[str, Any] = json.loads(b"".join(json_stream(replay_json(report, None))))
    return doc
