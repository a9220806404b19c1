"""mcsim.text: what a person is shown of a string read from disk."""

from __future__ import annotations

import unicodedata

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mcsim.text import counted, markdown, printable, width

R = "\ufffd"


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        ("claude-opus-4-6", "claude-opus-4-6"),
        ("a\x1b[2Jb", f"a{R}[2Jb"),  # clear screen: ESC replaced, the rest is inert text
        ("\x1b]0;owned\x07x", f"{R}]0;owned{R}x"),  # window title: ESC and BEL
        ("\x1b]52;c;aGk=\x07", f"{R}]52;c;aGk={R}"),  # OSC 52 clipboard write
        ("good\rEVIL", "good EVIL"),  # CR cannot go back over the line
        ("ab\x08\x08xy\x7f", f"ab{R}{R}xy{R}"),  # backspace and DEL
        ("a\x85b\x9bc", "a b" + R + "c"),  # C1: NEL is a line break, CSI a control
        ("txt.\u202eexe", f"txt.{R}exe"),  # bidi override
        ("\u2066x\u2069", f"{R}x{R}"),  # bidi isolate
        ("ad\u200bmin", f"ad{R}min"),  # zero-width space
        ("\n| a | b |", " | a | b |"),
        ("a\tb\r\nc\u2028d", "a b  c d"),
        ("café naïve 日本語 🚀", "café naïve 日本語 🚀"),
        ("e\u0301", "e\u0301"),  # a combining accent stays
        ("👨\u200d👩\u200d👧", "👨\u200d👩\u200d👧"),  # ZWJ inside an emoji sequence
        ("🏳\ufe0f\u200d🌈", "🏳\ufe0f\u200d🌈"),
        ("a\u200db", f"a{R}b"),  # ZWJ between letters
        ("\u200d🚀", f"{R}🚀"),
        ("bad\udcffname", f"bad{R}name"),  # undecodable byte in a file name (surrogateescape)
        (12.5, "12.5"),
    ],
)
def test_printable_rule(raw: object, shown: str) -> None:
    assert printable(raw) == shown


@pytest.mark.parametrize(
    ("raw", "limit", "shown"),
    [
        ("abcdefghij", 10, "abcdefghij"),
        ("abcdefghij", 9, "abcd…ghij"),
        ("abcdefghij", 4, "ab…j"),
        ("abcdefghij", 3, "a…j"),
        ("abcdefghij", 2, "a…"),
        ("abcdefghij", 1, "…"),
        # Two project folders that share their beginning stay apart.
        ("-Users-alice-src-github-com-acme-shop-api", 20, "-Users-ali…-shop-api"),
        ("-Users-alice-src-github-com-acme-shop-web", 20, "-Users-ali…-shop-web"),
        # The limit counts what is shown, after the controls are replaced.
        ("\x1b" * 30, 5, R * 2 + "…" + R * 2),
    ],
)
def test_printable_shortens_in_the_middle(raw: str, limit: int, shown: str) -> None:
    assert printable(raw, limit=limit) == shown
    assert len(shown) == min(len(raw), limit)


@given(st.text())
def test_printable_leaves_nothing_that_changes_the_display(raw: str) -> None:
    shown = printable(raw, limit=40)
    assert len(shown) <= 40
    assert printable(shown) == shown  # applying it twice changes nothing
    for i, ch in enumerate(shown):
        category = unicodedata.category(ch)
        assert category not in ("Cc", "Cs", "Zl", "Zp"), repr(shown)
        if category == "Cf":  # only a ZWJ between two symbols
            assert ch == "\u200d" and 0 < i < len(shown) - 1, repr(shown)


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        ("claude-opus-4-6", "claude-opus-4-6"),
        ("-home-dev-shop-api", "-home-dev-shop-api"),
        ("cost (expected)!", "cost (expected)!"),
        ("<script>alert(1)</script>", "&lt;script&gt;alert(1)&lt;/script&gt;"),
        ("<img src=x onerror=alert(1)>", "&lt;img src=x onerror=alert(1)&gt;"),
        ("![](https://evil.example/p.png)", "!&#91;&#93;(https&#91;:&#93;//evil.example/p.png)"),
        ("[x](javascript:alert(1))", "&#91;x&#93;(javascript:alert(1))"),
        ("\n| a | b |", " \\| a \\| b \\|"),
        ("see www.evil.example", "see www&#91;.&#93;evil.example"),
        ("me@evil.example", "me&#91;@&#93;evil.example"),
        ("`code` *em* _em_ ~~s~~", "\\`code\\` \\*em\\* \\_em\\_ \\~\\~s\\~\\~"),
        ("a\\b", "a\\\\b"),
        ("&lt;", "&amp;lt;"),
        ("$30.51", "$30.51"),  # one dollar opens no math
        ("$x$ and $y", "\\$x\\$ and \\$y"),
        ("# title", "\\# title"),
        ("#hashtag", "#hashtag"),
        ("- item", "\\- item"),
        ("---", "\\---"),
        ("+ item", "\\+ item"),
        ("+5.0%", "+5.0%"),
        ("12. item", "12\\. item"),
        ("3) item", "3\\) item"),
        ("12.5%", "12.5%"),
        ("> quote", "&gt; quote"),
        ("a\x1b[2Jb", f"a{R}&#91;2Jb"),
    ],
)
def test_markdown_rule(raw: str, shown: str) -> None:
    assert markdown(raw) == shown


def test_markdown_shortens_before_escaping() -> None:
    # The limit is on the text shown, so an escape is never cut in half.
    assert markdown("<<<<<<<<<<", limit=5) == "&lt;&lt;…&lt;&lt;"


@pytest.mark.parametrize(
    ("text", "columns"),
    [("abc", 3), ("日本", 4), ("🚀x", 3), ("e\u0301", 1), ("café", 4), ("👨\u200d👩", 4)],
)
def test_width_counts_terminal_columns(text: str, columns: int) -> None:
    assert width(text) == columns


def test_counted_agrees_with_one_and_many() -> None:
    assert counted(1, "session", "sessions") == "1 session"
    assert [counted(n, "call is", "calls are") for n in (0, 2)] == ["0 calls are", "2 calls are"]
