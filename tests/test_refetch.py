"""Re-fetch risk: a cleared result whose file or command the agent used again is a hazard;
one whose tool cannot be keyed is not assessed (never counted as safe)."""

from __future__ import annotations

import json

import pytest
from simthreads import result, text, thread, use

from mcsim.accounting.prices import default_table
from mcsim.ingest.loaders.tool_classes import EVERY_HARNESS, tool_class
from mcsim.model import Item, ItemKind
from mcsim.replay.refetch import ResourceKeys, command_keys, keys_of
from mcsim.replay.scenario import Layer, Scenario
from mcsim.replay.simulate import simulate_thread

KEEP_1 = Scenario(
    "k",
    (Layer("keep_last_n", (("n", 1), ("min_messages", 0), ("polling", 1), ("keep_first", False))),),
)


def steps(edit_again: bool) -> list:
    s = [
        (0.0, [text(1_000)]),
        (10.0, [use("file:a"), result(5_000, "Read", resource="file:a")]),
        (10.0, [use("file:b"), result(5_000, "Read", resource="file:b")]),
        (10.0, [use("file:c"), result(5_000, "Read", resource="file:c")]),
    ]
    if edit_again:
        s.append((10.0, [use("file:a", "Edit"), result(100, "Edit", resource="file:a")]))
    return s


def test_a_file_read_cleared_then_edited_is_one_hazard() -> None:
    sim = simulate_thread(thread(steps(edit_again=True)), KEEP_1, default_table())
    # keep_last_n n=1 clears a (before call 2), b (call 3), c (call 4); a is edited at call 4.
    assert sim.cleared_results == 3
    (hazard,) = sim.hazards
    assert (hazard.resource, hazard.cleared_before_call, hazard.reused_at_call) == ("file:a", 2, 4)
    assert hazard.tokens == 5_000
    # Re-writing the 5,000 tokens at $3.75/M plus reading the 11,324-token prompt at $0.30/M
    # (26,300 recorded - 3 x 4,992 cleared).
    assert sim.prompt_tokens[4] == 11_324
    assert hazard.refetch_cost_usd == pytest.approx((5_000 * 3.75 + 11_324 * 0.30) / 1e6)


def test_never_touched_again_is_no_hazard() -> None:
    sim = simulate_thread(thread(steps(edit_again=False)), KEEP_1, default_table())
    assert sim.cleared_results == 2
    assert sim.hazards == ()


@pytest.mark.parametrize(
    ("tool", "args", "keys"),
    [
        ("Read", '{"file_path": "/src/a.py", "limit": 40}', ("file:/src/a.py",)),
        ("Edit", '{"file_path": "/src/a.py", "old_string": "x"}', ("file:/src/a.py",)),
        ("Bash", '{"command": " pytest -q "}', ("cmd:pytest -q",)),
        ("Grep", '{"pattern": "cache", "path": "src"}', ("grep:cache|src",)),
        ("WebFetch", '{"url": "https://x.org"}', ("url:https://x.org",)),
        ("mcp__gh__issue", '{"n": 1}', ()),
        ("Read", "not json", ()),
        ("TodoWrite", '{"todos": []}', ()),  # a plan: nothing to fetch again
        ("BashOutput", '{"bash_id": "b1"}', ()),  # a background command's output so far
        # Codex: the same file read with sed in the session's cwd and patched, relative
        (
            "shell",
            '{"command": ["bash", "-lc", "sed -n \'1,160p\' README.md"], "workdir": "/r"}',
            ("file:README.md",),
        ),
        ("exec_command", '{"cmd": "cat /r/src/a.ts", "workdir": "/r"}', ("file:src/a.ts",)),
        ("shell_command", '{"command": "rg -n todo src", "workdir": "/r"}', ("grep:todo|src|",)),
        ("apply_patch", "*** Begin Patch\n*** Update File: src/a.ts\n@@\n-a\n+b\n*** End Patch",
         ("file:src/a.ts",)),
        ("apply_patch", '{"input": "*** Begin Patch\\n*** Add File: b.py\\n+x\\n"}',
         ("file:b.py",)),
        ("local_shell_call",
         '{"type": "exec", "command": ["ls", "-la", "docs"], "working_directory": "/r"}',
         ("ls:docs",)),
        ("web_search_call", '{"type": "search", "query": "polars"}', ("search:polars",)),
        ("update_plan", '{"plan": []}', ()),
        ("request_user_input", '{"questions": []}', ()),
    ],
)  # fmt: skip
def test_resource_keys(tool: str, args: str, keys: tuple[str, ...]) -> None:
    assert keys_of(tool, tool_class(tool, EVERY_HARNESS), args) == keys


@pytest.mark.parametrize(
    ("command", "keys"),
    [
        ("ls", ("ls:.",)),
        ("rg --files -g 'AGENTS.md'", ("glob:|.|AGENTS.md",)),
        ("nl -ba README.md", ("file:README.md",)),
        ("head -n 40 a.py && tail -20 b.py", ("file:a.py", "file:b.py")),
        ("cd src && cat x.ts", ("file:src/x.ts",)),
        # the sed after the pipe reads the pipe; 2>/dev/null is no file
        ("nl -ba src/a.ts | sed -n '90,108p' 2>/dev/null", ("file:src/a.ts",)),
        ("sed -n 1p < f.txt", ("file:f.txt",)),
        ("grep -n 'def x' a.py", ("grep:def x|a.py|",)),
        ("git diff | grep -n x", ("cmd:git diff | grep -n x",)),  # grep reads the pipe
        ("find src -name '*.py'", ("find:src|-name *.py",)),
        ("npm test", ("cmd:npm test",)),
        ("git status && cat a", ("file:a", "cmd:git status && cat a")),
        ('echo "unbalanced', ('cmd:echo "unbalanced',)),
    ],
)
def test_shell_command_keys(command: str, keys: tuple[str, ...]) -> None:
    assert command_keys(command, "/repo") == keys


def _item(kind: ItemKind, tool: str, call_id: str, text: str) -> Item:
    return Item(kind, len(text), text, tool, call_id, tool_class=tool_class(tool, EVERY_HARNESS))


def test_write_stdin_results_carry_their_commands_keys() -> None:
    """Codex's exec_command returns after a second with a session id; write_stdin polls the
    rest of the output: its result is that command's output, and the poll is no new use."""
    keys = ResourceKeys()
    cmd = json.dumps({"cmd": "sed -n '1,220p' src/a.ts", "workdir": "/r"})
    running = "Chunk ID: a1\nWall time: 1.0 seconds\nProcess running with session ID 48230\n"
    poll = json.dumps({"session_id": 48230, "chars": "", "yield_time_ms": 1000})
    other = json.dumps({"session_id": 7, "chars": ""})
    assert keys.of(_item(ItemKind.TOOL_USE, "exec_command", "c1", cmd)) == ("file:src/a.ts",)
    assert keys.of(_item(ItemKind.TOOL_RESULT, "exec_command", "c1", running)) == ("file:src/a.ts",)
    assert keys.of(_item(ItemKind.TOOL_USE, "write_stdin", "c2", poll)) == ()
    assert keys.of(_item(ItemKind.TOOL_RESULT, "write_stdin", "c2", "1: x")) == ("file:src/a.ts",)
    # a poll of a session mcsim never saw start: not assessed
    assert keys.of(_item(ItemKind.TOOL_USE, "write_stdin", "c3", other)) == ()
    assert keys.of(_item(ItemKind.TOOL_RESULT, "write_stdin", "c3", "y")) == ()


def test_results_that_cannot_be_keyed_are_not_assessed() -> None:
    """keep_last_n n=1 clears a Read of a (edited later: a hazard), a TodoWrite (no keys: not
    assessed) and Reads of c and d (never used again): 1 hazard of 3 assessed, 1 not
    assessed."""
    s = [
        (0.0, [text(1_000)]),
        (10.0, [use("file:a"), result(5_000, "Read", resource="file:a")]),
        (10.0, [result(3_000, "TodoWrite")]),
        (10.0, [use("file:c"), result(5_000, "Read", resource="file:c")]),
        (10.0, [use("file:d"), result(5_000, "Read", resource="file:d")]),
        (10.0, [use("file:a", "Edit"), result(100, "Edit", resource="file:a")]),
    ]
    sim = simulate_thread(thread(s), KEEP_1, default_table())
    assert sim.cleared_results == 4  # a, the plan, c, d (each cleared once its successor came)
    assert sim.unassessed_results == 1
    assert [h.resource for h in sim.hazards] == ["file:a"]


@pytest.mark.slow  # 25,000 commands through shlex: 3 to 5 s
def test_commands_split_as_shlex_splits() -> None:
    """_words splits commands itself (plain ones by blanks, the rest by one regular
    expression): the words, and the refusals, must be shlex's for any command (random ones
    from every character either treats specially, short and long, and the real ones)."""
    import random
    import shlex

    from mcsim.replay import refetch

    def by_shlex(command: str) -> list[str] | str:
        lexer = shlex.shlex(command.replace("\n", " ; "), posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        try:
            return list(lexer)
        except ValueError:
            return "unbalanced"

    def ours(command: str) -> list[str] | str:
        try:
            return refetch._words(command)
        except ValueError:
            return "unbalanced"

    rng = random.Random(7)
    alphabet = [*"ab./-_~*?=$`{}!@%^+:,0 \t\r\n'\"\\();<>|&#\x0b\x0c\xa0é→", "ls", "cat", "  "]
    commands = ["".join(rng.choices(alphabet, k=rng.randint(0, 25))) for _ in range(20_000)]
    commands += ["".join(rng.choices(alphabet, k=rng.randint(26, 120))) for _ in range(1_500)]
    commands += [
        'grep -rn "a \\"b\\" \\$x \\\\" src | head -5 # note',
        "sed -n '1,20p' f.py && cat a\\ b.txt 2>&1 >out;ls",
        'echo ""; echo \'\'; printf "%s\\n" x\ny',
        "cd 'dir with space' && rg -n foo#bar",
        'echo "unclosed',
        "echo trailing \\",
    ]
    plain = [c for c in commands if refetch._PLAIN.fullmatch(c.strip(" \t\r"))]
    assert len(plain) > 1_000
    refused = [c for c in commands if by_shlex(c) == "unbalanced"]
    assert len(refused) > 1_000 and len(commands) - len(plain) - len(refused) > 3_000
    assert [ours(c) for c in commands] == [by_shlex(c) for c in commands]
