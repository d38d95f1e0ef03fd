"""PostToolUseFailure (async; Bash, edits, Agent/Task/Workflow): a test command that failed is
remembered red, so running it again with nothing changed is caught; a failed edit never counts
as a patch applied; a failed subagent launch gives back its reservation
(`clavain.guards.failures`)."""

from __future__ import annotations


def handle(payload: dict) -> None:
    from clavain.guards.failures import post_tool_use_failure

    post_tool_use_failure(payload)
