"""Redaction for a shared report: a user name is hidden in a home folder's path and in a
Claude Code project folder's name (the cwd with every non-alphanumeric character as `-`)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import REPO, SAMPLES

from mcsim.cli import cli
from mcsim.outputs.redact import Redactor

PIPELINE = SAMPLES / "claude" / "projects" / "-home-dev-data-pipeline"


@pytest.mark.parametrize(
    ("path", "folder", "redacted_path", "redacted_folder"),
    [
        ("/Users/alice/dev/proj", "-Users-alice-dev-proj", "/Users/user1/dev/proj",
         "-Users-user1-dev-proj"),
        ("/home/bob/src/x", "-home-bob-src-x", "/home/user1/src/x", "-home-user1-src-x"),
        ("C:\\Users\\carol\\src", "C--Users-carol-src", "C:\\Users\\user1\\src",
         "C--Users-user1-src"),
        ("C:/Users/carol/src", "C--Users-carol-src", "C:/Users/user1/src", "C--Users-user1-src"),
        # A Windows user name may hold spaces: the whole name, up to the next separator.
        ("C:\\Users\\John Smith\\src", "C--Users-John-Smith-src", "C:\\Users\\user1\\src",
         "C--Users-user1-src"),
        ("/Users/john.doe/x", "-Users-john-doe-x", "/Users/user1/x", "-Users-user1-x"),
        # A home folder further in: WSL's view of a Windows home, a home on another disk.
        ("/mnt/c/Users/dave/proj", "-mnt-c-Users-dave-proj", "/mnt/c/Users/user1/proj",
         "-mnt-c-Users-user1-proj"),
        ("/data/home/erin/x", "-data-home-erin-x", "/data/home/user1/x", "-data-home-user1-x"),
        ("/home/fay/.config/x", "-home-fay--config-x", "/home/user1/.config/x",
         "-home-user1--config-x"),
    ],
)  # fmt: skip
def test_a_user_name_is_hidden_in_the_path_and_in_its_project_folder(
    path: str, folder: str, redacted_path: str, redacted_folder: str
) -> None:
    redactor = Redactor()
    redactor.learn({"paths": [path]})
    assert redactor(path) == redacted_path
    assert redactor(folder) == redacted_folder
    assert redactor(f"projects/{folder}/s.jsonl") == f"projects/{redacted_folder}/s.jsonl"


def test_an_unlearned_project_folder_hides_the_name_up_to_its_first_dash() -> None:
    redactor = Redactor()
    assert redactor("-mnt-c-Users-dave-proj") == "-mnt-c-Users-user1-proj"
    assert redactor("-data-home-erin-x, C--Users-carol-src") == (
        "-data-home-user2-x, C--Users-user3-src"
    )
    assert redactor("-home-dave-y") == "-home-user1-y"  # the same name, the same pseudonym
    # Neither a folder name's middle after a letter nor one with no home part.
    assert redactor("a/b-Users-oscar-x -src-app") == "a/b-Users-oscar-x -src-app"


def _project(root: Path, folder: str, n: int) -> None:
    """The sample session, as session `n` of the project `folder` (its own ids)."""
    (root / folder).mkdir(parents=True)
    for source in PIPELINE.glob("*.jsonl"):
        text = source.read_text()
        for old in ("d6159ef5", '"msg_', '"req_'):
            text = text.replace(old, f"{old}{n}")
        (root / folder / source.name).write_text(text)


@pytest.mark.slow
def test_a_redacted_report_hides_the_user_in_every_project_folder(tmp_path: Path) -> None:
    folders = ["-mnt-c-Users-dave-proj", "-data-home-erin-x", "C--Users-carol-src"]
    for n, folder in enumerate(folders):
        _project(tmp_path / "in", folder, n)
    run = tmp_path / "run"
    args = ["replay", str(tmp_path / "in"), "--policy", str(REPO / "policies" / "all.yaml")]
    result = CliRunner().invoke(cli, [*args, "--no-cache", "--out", str(run)])
    assert result.exit_code == 0, result.output

    result = CliRunner().invoke(cli, ["report", str(run), "--redact"])
    assert result.exit_code == 0, result.output
    md = (run / "report.md").read_text()
    assert "Projects: -data-home-user1-x, -mnt-c-Users-user2-proj, C--Users-user3-src." in md
    html = re.sub(r"data:image/png;base64,[A-Za-z0-9+/=]+", "", (run / "report.html").read_text())
    for page in (md, html):
        for name in ("dave", "erin", "carol"):
            assert name not in page
