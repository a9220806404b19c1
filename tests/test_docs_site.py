"""The docs site (mkdocs.yml, docs/) and the README that points into it: the site builds
with --strict, every command and option of `mcsim` is documented on its command's page, and
the README stays short with links that resolve."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import click
import pytest
from conftest import REPO, heading_ids

from mcsim.cli import cli

DOCS = REPO / "docs"


@pytest.mark.slow
def test_the_site_builds_strict_and_offline(tmp_path: Path) -> None:
    """--strict turns mkdocs' warnings into a failed build: a broken link or anchor, a nav
    entry without its page, a page left out of the nav (mkdocs.yml's validation section)."""
    site = tmp_path / "site"
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}  # mkdocs-material's notice, not a warning
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file",
         str(REPO / "mkdocs.yml"), "--site-dir", str(site)],
        cwd=tmp_path, capture_output=True, text=True, env=env,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "WARNING" not in proc.stderr, proc.stderr
    built = {p.relative_to(site) for p in site.rglob("index.html")}
    pages = {Path(p.stem) / "index.html" for p in DOCS.glob("*.md") if p.stem != "index"}
    assert built >= pages | {Path("index.html")}
    # The theme's fonts are the system's: a page loads nothing from outside the site.
    home = (site / "index.html").read_text()
    assert "fonts.googleapis.com" not in home and "fonts.gstatic.com" not in home
    assert not re.search(r"""<(?:script|link)[^>]+(?:src|href)="https?://""", home)


def _commands(group: click.Group, prefix: str) -> Iterator[tuple[str, click.Command]]:
    for name, command in sorted(group.commands.items()):
        yield f"{prefix} {name}", command
        if isinstance(command, click.Group):
            yield from _commands(command, f"{prefix} {name}")


def _options(command: click.Command) -> list[str]:
    return [o for p in command.params if isinstance(p, click.Option) for o in p.opts]


def _mentions(text: str, option: str) -> bool:
    return re.search(rf"(?<![\w-]){re.escape(option)}(?![\w-])", text) is not None


def test_every_command_and_option_is_on_its_commands_page() -> None:
    """Each top-level command has one page whose title names it (`# ... mcsim replay`), and
    that page names every option of the command and every subcommand with its options."""
    raw = {p.name: p.read_text() for p in DOCS.glob("*.md")}
    pages = {name: re.sub(r"\s+", " ", text) for name, text in raw.items()}
    titles = {name: text.split("\n", 1)[0] for name, text in raw.items()}
    readme = (REPO / "README.md").read_text()
    for name, command in _commands(cli, "mcsim"):
        top = " ".join(name.split()[:2])
        home = [
            page for page, title in titles.items() if title.startswith("# ") and f"`{top}`" in title
        ]
        assert len(home) == 1, (name, home)
        text = pages[home[0]]
        assert name in text, (name, home[0])
        assert name in readme, name  # the README's Usage names every command too
        for option in _options(command):
            assert _mentions(text, option), (name, option, home[0])
    for option in [*_options(cli), "--help", "-h"]:  # mcsim's own: --version, help
        assert _mentions(pages["index.md"], option), option


def test_readme_links_resolve() -> None:
    text = (REPO / "README.md").read_text()
    links = re.findall(r"\]\(([^)\s]+)\)", text)
    local = [link for link in links if "://" not in link]
    assert {"docs/index.md", "docs/policy-files.md", "docs/output-schema.md"} <= {
        link.split("#")[0] for link in local
    }
    for link in local:
        path, _, anchor = link.partition("#")
        assert (REPO / path).is_file(), link
        if anchor:
            assert anchor in heading_ids(REPO / path), link


def test_readme_stays_scannable() -> None:
    """The README is the overview (what mcsim is, how to run it, a tour, compact usage,
    policy files and outputs); the reference lives in docs/."""
    text = (REPO / "README.md").read_text()
    assert len(text.splitlines()) <= 200
    headings = re.findall(r"^## (.+)$", text, re.M)
    assert headings == [
        "Try it",
        "A 30-second tour",
        "Usage",
        "Policy files",
        "Output schema",
        "Documentation",
    ]
