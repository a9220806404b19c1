"""The class of each tool a harness names (ToolClass): what the tool does, so one policy
prunes every harness alike.

One table per harness, each used by its loader; the interchange loader falls back on both for
a tool written without a class. A tool that no table names is `other`, and so is every MCP
tool (`mcp__server__tool`, or a Codex tool in an `mcp__` namespace): what an MCP tool does is
the server's business. docs/policy-files.md shows these tables.

Commands a shell tool runs are not classed by what they run (`cat` is still shell): a class
belongs to the tool, and re-fetch analysis looks into the commands (mcsim.replay.refetch).
"""

from __future__ import annotations

from collections.abc import Mapping

from mcsim.model import ToolClass

READ, SEARCH, SHELL, WEB = ToolClass.READ, ToolClass.SEARCH, ToolClass.SHELL, ToolClass.WEB
EDIT, PLAN, ASK, OTHER = ToolClass.EDIT, ToolClass.PLAN, ToolClass.INTERACTION, ToolClass.OTHER

# Claude Code's tools, 1.0.x to 2.1.x. Retired ones (LS, MultiEdit, NotebookRead) keep their
# class: old transcripts still hold them. BashOutput, KillShell (KillBash before it),
# TaskOutput and TaskStop read or stop a background command: shell, though Claude Code's
# compactable list leaves them out (the claude-code preset excludes them by name).
CLAUDE_CODE: Mapping[str, ToolClass] = {
    "Read": READ, "NotebookRead": READ,
    "Grep": SEARCH, "Glob": SEARCH, "LS": SEARCH,
    "Bash": SHELL, "PowerShell": SHELL, "BashOutput": SHELL, "KillShell": SHELL,
    "KillBash": SHELL, "TaskOutput": SHELL, "TaskStop": SHELL,
    "WebFetch": WEB, "WebSearch": WEB,
    "Edit": EDIT, "Write": EDIT, "MultiEdit": EDIT, "NotebookEdit": EDIT,
    "TodoWrite": PLAN, "TodoRead": PLAN, "ExitPlanMode": PLAN, "EnterPlanMode": PLAN,
    "TaskCreate": PLAN, "TaskUpdate": PLAN, "TaskList": PLAN, "TaskGet": PLAN,
    "AskUserQuestion": ASK,
    "Task": OTHER, "Agent": OTHER, "SendMessage": OTHER, "Skill": OTHER,
    "SlashCommand": OTHER, "ToolSearch": OTHER,
}  # fmt: skip

# Codex CLI's tools (codex-rs/core/src/tools/spec.rs, 0.5x to 0.14x) and response item types
# that are tool calls of their own (local_shell_call, web_search_call). exec_command returns
# after about a second with a session id when the command is still running, and write_stdin
# polls the rest of its output: both are shell. wait, spawn_agent and the like drive
# sub-agents: other.
CODEX: Mapping[str, ToolClass] = {
    "read_file": READ, "view_image": READ,
    "grep_files": SEARCH, "list_dir": SEARCH,
    "shell": SHELL, "shell_command": SHELL, "exec_command": SHELL, "write_stdin": SHELL,
    "local_shell": SHELL, "local_shell_call": SHELL, "container.exec": SHELL, "exec": SHELL,
    "web_search": WEB, "web_search_call": WEB,
    "apply_patch": EDIT,
    "update_plan": PLAN,
    "request_user_input": ASK,
    "spawn_agent": OTHER, "send_input": OTHER, "resume_agent": OTHER, "wait": OTHER,
    "close_agent": OTHER, "get_memory": OTHER, "list_mcp_resources": OTHER,
    "list_mcp_resource_templates": OTHER, "read_mcp_resource": OTHER,
}  # fmt: skip

EVERY_HARNESS: Mapping[str, ToolClass] = {**CODEX, **CLAUDE_CODE}  # no name is in both


def tool_class(name: str | None, table: Mapping[str, ToolClass]) -> ToolClass:
    """The class of a tool a harness names: MCP tools and names the table lacks are other."""
    if name is None or name.startswith("mcp__"):
        return OTHER
    return table.get(name, OTHER)
