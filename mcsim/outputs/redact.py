"""Pseudonyms for a report that will be shared: user names and working folders replaced.

A home folder (`/home/NAME`, `/Users/NAME`, `C:\\Users\\NAME`, also further in a path), the user
name inside a Claude Code project folder name (`-Users-alice-src-app`, `C--Users-alice-src`,
`-mnt-c-Users-alice-src`) and every `cwd` value are replaced by stable pseudonyms: the same
name always becomes the same `userN` (numbered by first appearance) within one report, and the
same folder the same `cwdN`.
"""

from __future__ import annotations

import re
from typing import Any

# A home folder anywhere in a path (WSL sees C:\Users\NAME as /mnt/c/Users/NAME). A Windows
# user name may hold spaces ("John Smith"): taken whole when a separator follows it.
_HOME = re.compile(
    r"(/home/|/Users/|[A-Za-z]:[\\/]Users[\\/])"
    r"((?<=:.Users.)[^\s/\\:*?\"'<>|]+(?: [^\s/\\:*?\"'<>|]+)+(?=[\\/])|[^/\\\s'\"]+)"
)
# A project folder is its path with every character but letters and digits as `-`: the home
# part may follow other parts of the path (-mnt-c-Users-NAME-src, -data-home-NAME-x).
_PROJECT = re.compile(
    r"(?<![\w-])((?:[A-Za-z]-)?-(?:[A-Za-z0-9]*-)*?(?:home|Users)-)([A-Za-z0-9][^\s/\\'\"]*)"
)
_PSEUDONYM = re.compile(r"user\d+")


class Redactor:
    def __init__(self) -> None:
        self.users: dict[str, str] = {}  # a user name (and its project-folder spelling) -> userN
        self.cwds: dict[str, str] = {}

    def _user(self, name: str) -> str:
        if _PSEUDONYM.fullmatch(name):
            return name
        if name not in self.users:
            pseudonym = f"user{len(set(self.users.values())) + 1}"
            self.users[name] = pseudonym
            self.users.setdefault(re.sub(r"[^A-Za-z0-9]", "-", name), pseudonym)
        return self.users[name]

    def learn(self, doc: Any) -> None:
        """Number the home folders' user names in the order they first appear in `doc`."""
        for text in _strings(doc):
            for match in _HOME.finditer(text):
                self._user(match[2])

    def __call__(self, text: str) -> str:
        text = _HOME.sub(lambda m: m[1] + self._user(m[2]), text)
        return _PROJECT.sub(lambda m: m[1] + self._project_rest(m[2]), text)

    def _project_rest(self, rest: str) -> str:
        """`alice-src-app` with its user name replaced (a known name first, longest first;
        else up to the first `-`)."""
        for name in sorted(self.users, key=len, reverse=True):
            if rest == name or rest.startswith(name + "-"):
                return self.users[name] + rest[len(name) :]
        name, sep, tail = rest.partition("-")
        return self._user(name) + sep + tail

    def doc(self, value: Any, key: str = "") -> Any:
        """A JSON document with every string (and key) redacted, each `cwd` a pseudonym."""
        if isinstance(value, dict):
            return {self(k) if isinstance(k, str) else k: self.doc(v, k) for k, v in value.items()}
        if isinstance(value, list):
            return [self.doc(v, key) for v in value]
        if isinstance(value, str):
            if key == "cwd":
                return self.cwds.setdefault(value, f"cwd{len(self.cwds) + 1}")
            return self(value)
        return value


def _strings(value: Any) -> list[str]:
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in (*_strings(k), *_strings(v))]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return [value] if isinstance(value, str) else []
