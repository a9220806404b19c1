"""Re-fetch risk: did the recorded agent later need what a policy cleared?

Clearing a tool result is only free if the agent never needed it again. The recording says
what the agent did next: if, after a result was cleared, it read, edited or wrote the same
file again, or repeated the same command, search, glob or fetch, the cleared content was
probably needed; with the result cleared, the agent would have had to fetch it again. Each
such cleared result is a *hazard*. (Whether the agent would really have re-fetched is not
knowable from the recording; a hazard is the observable proxy. Content referred to later
without a repeated tool call is not detected.)

What a tool call touched is a set of *keys*, by the tool's class (mcsim.model.ToolClass):
`file:<path>` for reads and edits (a Read and a later Edit of one file share it), the pattern
and path of a search, the URL or query of a web tool, and for a shell command what the command
reads: the files of `cat`, `sed`, `head`, `tail`, `nl`, `less`, `more`, `bat`, the patterns
and paths of `rg`, `grep`, `find`, `ls`, the files an `apply_patch` names, and for any other
command the command itself. So `cat README.md` cleared and `nl -ba README.md` later is a
hazard, whatever the harness. A Codex `write_stdin` polls the output of a command that
`exec_command` started ("Process running with session ID N"): its result has that command's
keys, and the poll itself is not a new use. A tool whose calls cannot be keyed (plans,
questions, sub-agents, MCP tools, a background command's output) has no keys: its cleared
results are *not assessed*, counted apart, never as safe.

Paths are compared relative to the command's working directory when they lie in it, so a
`sed -n 1,80p src/a.ts` run in /repo and a patch of `src/a.ts` meet.

A hazard's estimated cost is one extra call: the result's tokens written to the cache again
plus the prompt at that point read from the cache, at the model's list prices.
"""

from __future__ import annotations

import functools
import posixpath
import re
import shlex
from collections.abc import Iterator, Sequence
from itertools import pairwise
from typing import Any

import orjson

from mcsim.model import Item, ItemKind, ToolClass

# The highest re-fetch risk a recommendation (sweep.recommend) or the replay's verdict may
# have: at most half of what a policy clears may be needed again. Re-fetches are priced into
# the net savings already, so the limit guards what they do not price (latency, lost context).
DEFAULT_MAX_RISK = 0.50

# Programs that print files (the non-option arguments), and the options among theirs that
# take a value as the next word (so the value is not read as a file).
_READERS: dict[str, frozenset[str]] = {
    "cat": frozenset(),
    "nl": frozenset({"-b", "-d", "-f", "-h", "-i", "-l", "-n", "-s", "-v", "-w"}),
    "head": frozenset({"-n", "-c"}),
    "tail": frozenset({"-n", "-c", "-s", "--pid"}),
    "less": frozenset({"-b", "-h", "-j", "-k", "-o", "-p", "-t", "-x", "-y", "-z"}),
    "more": frozenset({"-n", "-p"}),
    "bat": frozenset({"-l", "--language", "-r", "--line-range", "-H", "--highlight-line"}),
    "sed": frozenset({"-e", "--expression", "-f", "--file", "-l", "--line-length"}),
}
# Searches: options that take the next word as their value.
_GREP_VALUES = frozenset(
    {"-e", "--regexp", "-f", "--file", "-m", "--max-count", "-A", "--after-context", "-B",
     "--before-context", "-C", "--context", "-g", "--glob", "--iglob", "-t", "--type", "-T",
     "--type-not", "-M", "--max-columns", "-j", "--threads", "-d", "--max-depth",
     "--type-add", "--sort", "--sortr", "-E", "--encoding", "--color", "--colors",
     "--include", "--exclude", "--exclude-dir", "-r", "--replace", "--max-filesize",
     "--pre", "--pre-glob", "--engine", "--path-separator", "-D", "--devices"}
)  # fmt: skip
_GLOB_OPTIONS = frozenset({"-g", "--glob", "--iglob", "--include"})
_GREPS = frozenset({"rg", "grep", "egrep", "fgrep"})
_OPERATOR_CHARS = frozenset("&|;()")  # words made of these separate simple commands
_REDIRECTS = frozenset({">", ">>", "<", "<<", "<<<", ">&", "<&", "&>", "&>>", ">|"})
_FD_NUMBERS = frozenset("0123456789")
_PATCH_PATH = re.compile(r"^\*\*\* (?:Update File|Add File|Delete File|Move to): (.+?)\s*$", re.M)
_SESSION_ID = re.compile(r"[Ss]ession ID:? (\d+)")
_SHELL_WRAPPERS = frozenset({"bash", "sh", "zsh", "/bin/bash", "/bin/sh", "/bin/zsh"})


class ResourceKeys:
    """The keys of every tool use and result of one thread, fed its items in order.

    `of` gives an item's keys: for a tool use, what the call touched (a later use of any of
    them after a result was cleared makes that result a hazard); for a tool result, what its
    content is (the keys a later use must touch). An empty tuple: not keyed (not assessed).
    """

    def __init__(self) -> None:
        self._results: dict[str, tuple[str, ...]] = {}  # tool_use_id -> its result's keys
        self._running: dict[str, tuple[str, ...]] = {}  # a running command's session id -> keys

    def of(self, item: Item) -> tuple[str, ...]:
        if item.kind is ItemKind.TOOL_USE:
            use, result = self._use(item)
            if item.tool_use_id:
                self._results[item.tool_use_id] = result
            return use
        if item.kind is ItemKind.TOOL_RESULT and item.tool_use_id:
            keys = self._results.get(item.tool_use_id, ())
            if keys and item.text and item.tool_class is ToolClass.SHELL:
                head = item.text[:2000]
                # (its words looked for first: few results hold them, and a plain search for
                # a string is much cheaper than the pattern's)
                found = _SESSION_ID.search(head) if "ession ID" in head else None
                if found:  # a command still running: later polls show its output
                    self._running[found.group(1)] = keys
            return keys
        return ()

    def _use(self, item: Item) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """(the keys the call touched, the keys of its result)."""
        if item.tool_name == "write_stdin":
            args = _arguments(item.text)
            if isinstance(args, dict):
                session = args.get("session_id")
                running = self._running
                keys = running.get(str(session), ()) if isinstance(session, int | str) else ()
                return (), keys
        text = item.text
        if text is not None and len(text) <= _MEMO_CHARS:
            keys = _memo_keys(item.tool_name, item.tool_class, text)
        else:
            keys = keys_of(item.tool_name, item.tool_class, text)
        return keys, keys


# Tool inputs up to this size have their keys kept (most are commands, searches and paths, and
# the same ones come back: splitting a shell command is the costly part); longer ones (a file
# written whole) would hold memory for little.
_MEMO_CHARS = 4_000


@functools.lru_cache(maxsize=16_384)
def _memo_keys(tool_name: str | None, tool_class: ToolClass | None, text: str) -> tuple[str, ...]:
    return keys_of(tool_name, tool_class, text)


def _arguments(text: str | None) -> Any:
    if not text:
        return None
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return text  # a freeform tool's input (Codex's apply_patch): the text itself


def keys_of(
    tool_name: str | None, tool_class: ToolClass | None, text: str | None, args: Any = None
) -> tuple[str, ...]:
    """What one tool call touched, from its input (`text`, a JSON object for most tools)."""
    if not tool_name or not text:
        return ()
    if args is None:
        args = _arguments(text)
    if tool_class is ToolClass.EDIT and tool_name == "apply_patch":
        body = args.get("input") if isinstance(args, dict) else args
        return _patch_keys(body) if isinstance(body, str) else ()
    if not isinstance(args, dict):
        return ()
    if tool_class in (ToolClass.READ, ToolClass.EDIT):
        for name in ("file_path", "notebook_path", "path"):
            path = args.get(name)
            if isinstance(path, str):
                return (f"file:{_path(path, '')}",) if path else ()
        return ()
    if tool_class is ToolClass.SEARCH:
        return _search_keys(tool_name, args)
    if tool_class is ToolClass.WEB:
        action = _action(args)
        url = _key("url", action.get("url"))
        return (url,) if url else _one(_key("search", action.get("query")))
    if tool_class is ToolClass.SHELL:
        return _shell_keys(args)
    return ()


def _action(args: dict[str, Any]) -> dict[str, Any]:
    """The arguments, or the `action` object they wrap (Codex's local_shell_call and
    web_search_call items)."""
    action = args.get("action")
    return action if isinstance(action, dict) else args


def _one(key: str | None) -> tuple[str, ...]:
    return (key,) if key else ()


def _key(prefix: str, value: Any) -> str | None:
    return f"{prefix}:{value.strip()}" if isinstance(value, str) and value.strip() else None


def _search_keys(tool_name: str, args: dict[str, Any]) -> tuple[str, ...]:
    """Claude Code's Grep and Glob as before (`grep:<pattern>|<path>`), its LS and Codex's
    grep_files and list_dir alike."""
    where = args.get("path") or args.get("dir_path") or ""
    pattern = args.get("pattern")
    if tool_name in ("LS", "list_dir"):
        return _one(_key("ls", where if isinstance(where, str) else None))
    name = "glob" if tool_name == "Glob" else "grep"
    if not isinstance(pattern, str):
        return ()
    include = args.get("include")  # grep_files's file filter
    extra = f"|{include}" if isinstance(include, str) and include else ""
    return _one(_key(name, f"{pattern}|{where}{extra}"))


def _patch_keys(patch: str) -> tuple[str, ...]:
    return tuple(dict.fromkeys(f"file:{_path(p, '')}" for p in _PATCH_PATH.findall(patch)))


def _path(path: str, cwd: str) -> str:
    """A path as keys compare it: normalised, relative to `cwd` when it lies inside it."""
    if cwd and not posixpath.isabs(path):
        path = posixpath.join(cwd, path)
    path = posixpath.normpath(path)
    if cwd and posixpath.isabs(cwd):
        root = posixpath.normpath(cwd)
        if path == root:
            return "."
        if path.startswith(root.rstrip("/") + "/"):
            return path[len(root.rstrip("/")) + 1 :]
    return path


def _shell_keys(args: dict[str, Any]) -> tuple[str, ...]:
    """The keys of a shell tool's command: Claude Code's Bash (`command`, a string), Codex's
    shell (`command`, a list), shell_command and exec_command (`command`, `cmd`) and
    local_shell_call (`action.command`), with their working directory when given."""
    action = _action(args)
    command = action.get("cmd", action.get("command"))
    workdir = action.get("workdir", action.get("working_directory"))
    workdir = workdir if isinstance(workdir, str) else ""
    if isinstance(command, list) and all(isinstance(w, str) for w in command):
        if len(command) >= 3 and command[0] in _SHELL_WRAPPERS and command[1] in ("-c", "-lc"):
            command = command[2]
        else:
            command = shlex.join(command)
    if not isinstance(command, str) or not command.strip():
        return ()
    return command_keys(command, workdir)


def command_keys(command: str, workdir: str = "") -> tuple[str, ...]:
    """What a shell command reads: files and searches where it is one of the known readers,
    else the command itself (`cmd:<command>`, as repeating it is fetching its output again)."""
    if "*** Begin Patch" in command:
        return _patch_keys(command)
    try:
        words = _words(command)
    except ValueError:  # unbalanced quotes: not parsed, the command stands for itself
        return (f"cmd:{command.strip()}",)
    keys: list[str] = []
    unknown = False
    cwd = workdir
    for simple, piped in _simple_commands(words):
        program = posixpath.basename(simple[0])
        if program == "cd":
            cwd = _path(simple[1], cwd) if len(simple) > 1 else cwd
            if cwd == ".":
                cwd = workdir
            continue
        found = _program_keys(program, simple[1:], cwd or workdir, piped)
        if found is None:
            unknown = True
        else:
            keys.extend(found)
    if unknown or not keys:
        keys.append(f"cmd:{command.strip()}")
    return tuple(dict.fromkeys(keys))


def _words(command: str) -> list[str]:
    """The words of `command` as `shlex.shlex(command with each newline as " ; ", posix=True,
    punctuation_chars=True)` with `whitespace_split` gives them (ValueError on an unclosed
    quote or a trailing backslash), split by one regular expression instead of shlex's
    character-at-a-time reader: the same words (tests/test_refetch.py compares the two on
    20,000 random commands over every character either treats specially), 10x faster on the
    quoted and piped commands that are half of real transcripts' (docs/performance.md)."""
    plain = command.strip(" \t\r")
    if _PLAIN.fullmatch(plain):  # nothing shlex reads specially: its words are these
        return _BLANKS.split(plain)
    words: list[str] = []
    word: list[str] = []
    quoted = False  # the word holds a quoted part, so it is a word even when empty
    for match in _PIECES.finditer(command.replace("\n", " ; ")):
        kind = match.lastgroup
        text = match.group()
        if kind == "chars":
            word.append(text)
        elif kind == "single":
            word.append(text[1:-1])
            quoted = True
        elif kind == "double":
            # Within double quotes a backslash escapes only a double quote or a backslash.
            word.append(_DOUBLE_ESCAPE.sub(r"\1", text[1:-1]))
            quoted = True
        elif kind == "escape":
            word.append(text[1:])
        elif kind == "unclosed":
            raise ValueError("No closing quotation" if text != "\\" else "No escaped character")
        else:  # blanks, operators or a comment end the word
            if word or quoted:
                words.append("".join(word))
                word, quoted = [], False
            if kind == "operators":
                words.append(text)
            elif kind == "comment":  # to the end of the line: no newline is left
                return words
    if word or quoted:
        words.append("".join(word))
    return words


# A command of words with no quote, escape, operator, comment or newline, between blanks
# shlex splits on: half the corpus's commands, split 100x faster than shlex does (106 us).
_PLAIN = re.compile(r"[^'\"\\();<>|&#\s]+(?:[ \t\r]+[^'\"\\();<>|&#\s]+)*")
_BLANKS = re.compile(r"[ \t\r]+")
# shlex's pieces of a word, in its terms: word characters (anything but its whitespace
# " \t\r\n", quotes, escape, comment and punctuation), a single-quoted part (no escapes), a
# double-quoted part (backslash escapes), a backslash and the character it escapes; and what
# ends a word: blanks, a run of punctuation (one operator word: "&&", ">&", "|"), "#"
# (the rest is a comment). A quote or backslash no other piece takes is left unclosed. (A
# double-quoted part is written as runs between escapes, "[^"\\]*(?:\\.[^"\\]*)*": the same
# parts as "(?:[^"\\]|\\.)*" without an alternation per character, which long quoted scripts
# made slow: docs/performance.md#measured-reasons.)
_PIECES = re.compile(
    r"""(?P<chars>[^ \t\r\n'"\\#();<>|&]+)"""
    r"""|(?P<single>'[^']*')"""
    r"""|(?P<double>"[^"\\]*(?:\\[\s\S][^"\\]*)*")"""
    r"""|(?P<escape>\\[\s\S])"""
    r"""|(?P<operators>[();<>|&]+)"""
    r"""|(?P<blanks>[ \t\r\n]+)"""
    r"""|(?P<comment>\#)"""
    r"""|(?P<unclosed>['"\\])"""
)
_DOUBLE_ESCAPE = re.compile(r'\\([\\"])')


def _simple_commands(words: Sequence[str]) -> Iterator[tuple[list[str], bool]]:
    """The words of each simple command between operators, redirections taken out (an input
    redirection's file kept as an argument: `sed -n 1p < f` reads f), and whether a pipe
    feeds it (then a search without paths reads the pipe, not the directory)."""
    current: list[str] = []
    piped = after_pipe = False
    redirect: str | None = None
    for word in words:
        if redirect is not None:
            if redirect == "<":
                current.append(word)
            redirect = None
        elif word in _REDIRECTS:
            if word != "<" and current and current[-1] in _FD_NUMBERS:
                current.pop()  # `2>/dev/null` is read as 2, >, /dev/null: 2 is no argument
            redirect = word
        elif not word or (word[0] in _OPERATOR_CHARS and set(word) <= _OPERATOR_CHARS):
            if current:
                yield current, piped
            current = []
            after_pipe = word in ("|", "|&")
        elif "=" in word and not current and word.split("=", 1)[0].isidentifier():
            continue  # VAR=value before a command
        else:
            if not current:
                piped, after_pipe = after_pipe, False
            current.append(word)
    if current:
        yield current, piped


def _program_keys(program: str, args: list[str], where: str, piped: bool) -> list[str] | None:
    """The keys of one simple command run in `where`, or None when it is not one mcsim knows
    (a reader or search that reads a pipe has none)."""
    if program in _READERS:
        files = _operands(args, _READERS[program], script=program == "sed")
        return [f"file:{_path(f, where)}" for f in files if f != "-"]
    if program == "ls":
        paths = [a for a in args if not a.startswith("-")] or ["."]
        return [f"ls:{','.join(_path(p, where) for p in paths)}"]
    if program == "find":
        paths = []
        for word in args:
            if word.startswith(("-", "(", "!")):
                break
            paths.append(word)
        rest = " ".join(args[len(paths) :])
        return [f"find:{','.join(_path(p, where) for p in paths or ['.'])}|{rest}"]
    if program in _GREPS:
        return _grep_keys(program, args, where, piped)
    return None


def _grep_keys(program: str, args: list[str], where: str, piped: bool) -> list[str]:
    """rg and grep: the patterns, the paths searched and the globs (`rg --files`: a listing).
    With no path, rg searches the directory and grep (unless recursive) its input; either
    reads a pipe that feeds it."""
    globs = [v for o, v in pairwise(args) if o in _GLOB_OPTIONS]
    globs += [a.split("=", 1)[1] for a in args if a.split("=", 1)[0] in _GLOB_OPTIONS and "=" in a]
    patterns = [v for o, v in pairwise(args) if o in ("-e", "--regexp")]
    operands = _operands(args, _GREP_VALUES, script=False)
    kind = "glob" if "--files" in args else "grep"
    if kind == "grep" and not patterns and operands:
        patterns, operands = operands[:1], operands[1:]
    recursive = program == "rg" or any(
        a == "--recursive" or (a[:1] == "-" and a[1:2] != "-" and bool({"r", "R"} & set(a)))
        for a in args
    )
    if not operands and (piped or not recursive):
        return []
    paths = ",".join(_path(p, where) for p in operands or ["."])
    return [f"{kind}:{'|'.join(patterns)}|{paths}|{','.join(globs)}"]


def _operands(args: list[str], with_value: frozenset[str], script: bool) -> list[str]:
    """The non-option words of a command (its files), options' values left out; for sed, the
    first is its script unless `-e` or `-f` gave one."""
    operands: list[str] = []
    given_script = False
    skip = False
    for i, word in enumerate(args):
        if skip:
            skip = False
            continue
        if word == "--":
            operands.extend(args[i + 1 :])
            break
        if word.startswith("-") and len(word) > 1:
            if word in with_value:
                skip = True
                given_script = given_script or word in ("-e", "--expression", "-f", "--file")
            continue
        operands.append(word)
    if script and not given_script and operands:
        operands = operands[1:]
    return operands
