"""Strings read from disk, made safe to show a person: on a terminal or in Markdown.

Model names, project folder names (any byte but / and NUL), session ids, paths and skip
details come from files anyone could have written. Raw, they could clear the screen, set the
window title or write the clipboard (ANSI and OSC escape sequences), hide or reverse text
(carriage return, backspace, bidi overrides) or, in report.md, become tags, tracking-pixel
images, `javascript:` links and broken tables. Values keep their exact text in JSON and
Parquet; only what a person reads goes through here.
"""

from __future__ import annotations

import re
import shutil
import sys
import textwrap
import unicodedata
from typing import Any

REPLACEMENT = "\ufffd"
ELLIPSIS = "…"

# How much of a value a person is shown; the middle of a longer one is elided (JSON and
# Parquet keep all of it). A name: project, session id, model, policy, price table.
NAME_LIMIT = 60
# A file path or a skip detail, where both ends matter: the folder and the file name.
TEXT_LIMIT = 160
# An error message: whole paths and values, but not a megabyte of YAML on one line.
MESSAGE_LIMIT = 1000
SHOWN_CHARS = 40  # of a value from a file or the command line, in an error message

# Line breaks and tabs (str.splitlines' set, minus the file/group/record separators, which
# are plain controls) become one space each, so the text stays on one line of a table.
_BREAKS = frozenset("\t\n\v\f\r\x85\u2028\u2029")
_ZWJ = "\u200d"
_EMOJI_VARIATION = "\ufe0f"

# GFM links bare URLs and e-mail addresses after escapes are resolved (cmark-gfm joins the
# text nodes first), so no escape can stop it: the `:` of `scheme://`, the `.` of `www.` and
# every `@` are bracketed instead, as security reports defang addresses.
_MD_BARE_LINK = re.compile(r"(?i):(?=//)|(?<=www)\.|@")
# Code spans, emphasis, strikethrough, table cell separators.
_MD_INLINE = re.compile(r"[\\`*_~|]")
# Entities cannot open a tag or close a link text (CommonMark: references never count as
# structure), and unlike a backslash they leave no `](` in the file for a filter to miss.
_MD_ENTITIES = {"&": "&amp;", "<": "&lt;", ">": "&gt;", "[": "&#91;", "]": "&#93;"}
# What opens a heading, a list or a rule, at the start of a line only.
_MD_LINE_START = re.compile(r"^(?:#{1,6}(?= |$)|[+-](?= |$)|-(?=-)|\d{1,9}(?=[.)]( |$)))")


def usd(x: float) -> str:
    """Dollars as a reader compares them: cents from $1 up, four decimals below (a saving of
    $0.0023 would read as "$0.00")."""
    return f"${x:,.2f}" if abs(x) >= 1 else f"${x:,.4f}"


def counted(n: float, one: str, many: str) -> str:
    """`n` and the words that agree with it: one session must not read "1 sessions"."""
    return f"{n} {one if n == 1 else many}"


def from_fs(name: str) -> str:
    """A file or folder name as valid Unicode text, for data (JSON, Parquet, run.json).

    A name is any bytes but `/` and NUL; Python holds the bytes that are not UTF-8 as lone
    surrogates, which no encoder accepts (orjson and polars refuse them). Those bytes are
    spelled `\\xNN` instead: the name stays readable and tells the bytes apart.
    """
    if name.isascii():
        return name
    return name.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def printable(value: object, limit: int | None = None) -> str:
    """`str(value)` with every character that changes how text is shown made visible, and at
    most `limit` (at least 1) characters long; all of it when `limit` is None.

    The rule, one character at a time:
    * tabs and line breaks (LF, CR, VT, FF, NEL, U+2028, U+2029) become one space, so a value
      stays on its line and cannot overwrite it;
    * other control characters (C0 with ESC, BEL and backspace, DEL, C1 0x80-0x9f), format
      characters (Unicode category Cf: bidi embeddings, overrides and isolates U+202A-U+202E
      and U+2066-U+2069, zero-width spaces and joiners, the soft hyphen, tag characters) and
      lone surrogates (undecodable file names) become U+FFFD, so an escape sequence cannot run
      and a reader still sees that something was there; a zero-width joiner between two
      symbols is kept, as it glues emoji sequences;
    * everything else is kept: accents, CJK, emoji, private-use characters.

    A longer result is shortened to `limit` characters with one `…` in the MIDDLE, not at the
    end: names share their beginnings (project folders are paths spelled with dashes, like
    `-home-dev-shop-api` and `-home-dev-shop-web`; file paths end in the file name), so the
    end tells them apart, and the beginning says where they come from.
    """
    text = value if isinstance(value, str) else str(value)
    if not text.isprintable():
        text = "".join(_visible(text, i) for i in range(len(text)))
    if limit is not None and len(text) > limit:
        head = limit // 2
        tail = limit - 1 - head
        text = text[:head] + ELLIPSIS + (text[-tail:] if tail else "")
    return text


def _visible(text: str, i: int) -> str:
    """The character at `text[i]` as `printable` shows it."""
    ch = text[i]
    if ch in _BREAKS:
        return " "
    category = unicodedata.category(ch)
    if category not in ("Cc", "Cf", "Cs"):
        return ch
    if ch == _ZWJ and 0 < i < len(text) - 1 and _symbol(text[i - 1]) and _symbol(text[i + 1]):
        return ch
    return REPLACEMENT


def _symbol(ch: str) -> bool:
    """An emoji or a symbol; an emoji sequence may show the emoji form (U+FE0F) before a ZWJ."""
    return ch == _EMOJI_VARIATION or unicodedata.category(ch) in ("So", "Sk")


def markdown(value: object, limit: int | None = None) -> str:
    """`printable(value, limit)` escaped so that Markdown (CommonMark, GitHub's GFM) shows it
    literally: never a link, image, autolink, HTML tag, heading, list or table break.

    The rule, in this order:
    * bare links are defanged, as security reports do: `https://` shows as `https[:]//`,
      `www.` as `www[.]`, `@` as `[@]` (GFM links them even when escaped);
    * backslash, backtick, `*`, `_`, `~` and `|` get a backslash (code spans, emphasis,
      strikethrough, table cells), and `$` too when the text holds two (GitHub's math);
    * `&`, `<`, `>`, `[` and `]` become character references: no tag, entity or `<url>` can
      open, no link or image text can close, so `(`, `)` and `!` can stay as they are;
    * at the start, `#` or `+`, `-` or digits with `.` or `)` that would open a heading, a
      list or a rule get a backslash.
    printable() has already made line breaks spaces, so the text stays on one line and a
    table row cannot be split. Everything else means nothing inside a line and stays
    readable in the raw file.
    """
    text = _MD_BARE_LINK.sub(lambda m: f"[{m.group(0)}]", printable(value, limit))
    text = _MD_INLINE.sub(r"\\\g<0>", text)
    if text.count("$") > 1:
        text = text.replace("$", "\\$")
    text = "".join(_MD_ENTITIES.get(ch, ch) for ch in text)
    return _MD_LINE_START.sub(_line_start, text, count=1)


def _line_start(match: re.Match[str]) -> str:
    opener = match.group(0)
    return opener + "\\" if opener[0].isdigit() else "\\" + opener


def width(text: str) -> int:
    """Terminal columns `text` takes (printable text): wide East Asian characters and most
    emoji take two, combining marks none, so tables stay aligned whatever the names."""
    if text.isascii():
        return len(text)
    return sum(_columns(ch) for ch in text)


def _columns(ch: str) -> int:
    if unicodedata.category(ch) in ("Mn", "Me", "Cf"):  # combining marks, a kept ZWJ
        return 0
    return 2 if unicodedata.east_asian_width(ch) in "WF" else 1


def escaped(text: str, limit: int = SHOWN_CHARS) -> str:
    """`text` cut to `limit` characters with control characters escaped, for a one-line
    message: a value from a file or the command line may be huge or hold terminal escapes."""
    cut = "".join(c if c.isprintable() else repr(c)[1:-1] for c in text[:limit])
    return cut + ("..." if len(text) > limit else "")


def shown(value: Any) -> str:
    """A value as an error message shows it: short and printable, strings quoted, and never
    the whole of a nested or huge value (Python refuses to print ints of 4,300 digits)."""
    if isinstance(value, str):
        return f"'{escaped(value)}'"
    if isinstance(value, bool) or value is None:
        return {True: "true", False: "false", None: "null"}[value]
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list | tuple | set):
        return "a list"
    if isinstance(value, int) and abs(value) >= 10**SHOWN_CHARS:
        return f"a number of more than {SHOWN_CHARS} digits"
    return escaped(repr(value))


def terminal_width() -> int | None:
    """The columns of the terminal standard output is, or None when it is not one: piped
    output stays plain and stable, whatever the width."""
    try:
        if not sys.stdout.isatty():
            return None
    except (AttributeError, ValueError, OSError):  # no stdout, or a closed one
        return None
    return shutil.get_terminal_size().columns


def fit_lines(text: str, columns: int | None) -> str:
    """`text` with each line longer than `columns` wrapped at spaces, continuation lines
    indented (None: as it is). A word longer than a line (a file path) is kept whole on a
    line of its own, so it can be copied: the terminal folds it, mcsim does not cut it."""
    if columns is None:
        return text
    out = []
    for line in text.split("\n"):
        if width(line) <= columns:
            out.append(line)
            continue
        lead = line[: len(line) - len(line.lstrip(" "))]
        out.extend(
            textwrap.wrap(line.lstrip(" "), columns, initial_indent=lead,
                          subsequent_indent=lead + "  ", break_on_hyphens=False,
                          break_long_words=False) or [line]
        )  # fmt: skip
    return "\n".join(out)
