"""Built-in policy presets: the example policy files, shipped inside the package.

`--policy claude-code` names the preset `claude-code.yaml` here, read through importlib.resources
so it works from an installed package with no repository around. The YAML files in this folder
are the single source; the repository's top-level `policies/` holds identical copies as the
user-facing examples (tests/test_presets.py checks they match byte for byte).

A `--policy` value that is an existing file is that file; otherwise a bare name (no folder, no
.yaml/.yml suffix) must be a preset, and any other name is refused with the preset names. A
path-like value that does not exist is left to the policy-file reader, whose message names it.
"""

from __future__ import annotations

import atexit
import os
from contextlib import ExitStack
from dataclasses import dataclass
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path

import yaml

from mcsim.errors import UsageError

SUFFIX = ".yaml"

# Files extracted from a zipped install live until exit (a plain install needs no copy).
_extracted = ExitStack()
atexit.register(_extracted.close)


class UnknownPresetError(UsageError):
    """A `--policy` value that is neither a file nor a preset name."""


@dataclass(frozen=True)
class PolicySource:
    """Where a run's policies come from: a file, and the preset's name when it is one."""

    path: Path
    preset: str | None = None


def preset_names() -> list[str]:
    """The presets, sorted: the names of this folder's YAML files without the suffix."""
    return sorted(
        entry.name.removesuffix(SUFFIX)
        for entry in resources.files(__name__).iterdir()
        if entry.name.endswith(SUFFIX) and entry.is_file()
    )


def preset_text(name: str) -> str:
    """A preset's file text, exactly as shipped."""
    return _resource(name).read_text(encoding="utf-8")


def preset_policies(name: str) -> list[str]:
    """The names of the policies a preset declares, in file order."""
    data = yaml.safe_load(preset_text(name))
    return [str(policy["name"]) for policy in data["policies"]]


def resolve_policy(value: str | os.PathLike[str]) -> PolicySource:
    """A `--policy` value: an existing file, else a preset name, else a one-line error."""
    path = Path(value)
    text = str(value)
    if not text:  # an unset shell variable: Path("") is the current folder
        raise UnknownPresetError(
            "--policy is empty: a policy file or a preset's name "
            f"(presets: {', '.join(preset_names())})"
        )
    if not path.exists() and not _bare(text) and path.stem in preset_names():
        # The README's policies/all.yaml, run outside the repository: the preset is here.
        raise UnknownPresetError(
            f"--policy {text}: no such file; the preset {path.stem} ships with mcsim: "
            f"--policy {path.stem}"
        )
    if path.exists() or not _bare(text):
        return PolicySource(path)
    names = preset_names()
    if text not in names:
        raise UnknownPresetError(
            f"--policy {text}: no such file and no preset of that name "
            f"(presets: {', '.join(names)})"
        )
    resource = _resource(text)
    preset_path = resource if isinstance(resource, Path) else None
    if preset_path is None:
        preset_path = _extracted.enter_context(resources.as_file(resource))
    return PolicySource(preset_path, text)


def _bare(text: str) -> bool:
    """A name, not a path: no folder separator and no YAML suffix."""
    separators = {os.sep, "/"} | ({os.altsep} if os.altsep else set())
    return (
        text != ""
        and not any(sep in text for sep in separators)
        and not text.lower().endswith((".yaml", ".yml"))
    )


def _resource(name: str) -> Traversable:
    if name not in preset_names():
        raise UnknownPresetError(f"no preset named {name} (presets: {', '.join(preset_names())})")
    return resources.files(__name__).joinpath(f"{name}{SUFFIX}")
