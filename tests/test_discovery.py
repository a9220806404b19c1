"""PATHS expansion: files, folders, globs, default locations."""

from __future__ import annotations

from pathlib import Path

import pytest

from mcsim.errors import InputNotFoundError
from mcsim.ingest.discovery import default_roots, discover


def test_files_folders_and_globs(corpus: Path) -> None:
    one = corpus / "-archives-m-claude" / "f225835b-3612-4093-903f-bd4538fb7cb9.jsonl"
    assert discover([str(one)]).files == (one,)
    assert len(discover([str(corpus)]).files) == 11
    globbed = discover([str(corpus / "*" / "agent-*.jsonl")]).files
    assert [p.name for p in globbed] == ["agent-ea02459f.jsonl"]
    recursive = discover([str(corpus / "**" / "subagents")]).files
    assert len(recursive) == 2
    # The same file named twice is read once.
    assert discover([str(one), str(corpus / "-archives-m-claude")]).files.count(one) == 1


def test_unmatched_paths_are_errors(tmp_path: Path) -> None:
    with pytest.raises(InputNotFoundError, match="no such file or folder"):
        discover([str(tmp_path / "nope")])
    with pytest.raises(InputNotFoundError, match="no file matches this pattern"):
        discover([str(tmp_path / "*.jsonl")])


def test_default_roots_honour_a_config_dir_list() -> None:
    roots = default_roots({"CLAUDE_CONFIG_DIR": "/a, /b", "HOME": "/home/me"})
    assert [str(r) for r in roots] == [
        "/a/projects",
        "/b/projects",
        "/home/me/.claude/projects",
        "/home/me/.config/claude/projects",
    ]


@pytest.mark.slow
def test_a_very_deep_tree_and_one_file_under_two_spellings(tmp_path: Path) -> None:
    import os

    deep = tmp_path / "deep"
    deep.mkdir()
    fd = os.open(deep, os.O_RDONLY)
    for _ in range(1100):  # past Python 3.11's recursive os.walk; each step relative to the last
        os.mkdir("a", dir_fd=fd)
        inner = os.open("a", os.O_RDONLY, dir_fd=fd)
        os.close(fd)
        fd = inner
    os.close(os.open("x.jsonl", os.O_WRONLY | os.O_CREAT, dir_fd=fd))
    os.close(fd)
    path = deep.joinpath(*["a"] * 1100)
    try:
        assert [p.name for p in discover([str(deep)]).files] == ["x.jsonl"]
        # The same file through a link and through its own path: read once.
        (tmp_path / "link.jsonl").symlink_to(path / "x.jsonl")
        found = discover([str(deep), str(tmp_path / "link.jsonl")]).files
        assert len(found) == 1 and os.path.samefile(found[0], path / "x.jsonl")
    finally:  # pytest's own clean-up (shutil.rmtree) recurses too: remove it bottom up
        _remove_chain(path, deep)


def _remove_chain(bottom: Path, top: Path) -> None:
    import os

    fd = os.open(bottom, os.O_RDONLY)
    os.unlink("x.jsonl", dir_fd=fd)
    while True:
        parent = os.open("..", os.O_RDONLY, dir_fd=fd)
        os.close(fd)
        os.rmdir("a", dir_fd=parent)
        fd = parent
        if os.path.samestat(os.fstat(fd), os.stat(top)):
            break
    os.close(fd)
