"""PostToolUseFailure (async; Bash and edits): a test command that failed is remembered red, so
running it again with nothing changed is caught; a failed edit never counts as a patch applied
(`clavain.guards.gate.post_tool_use_failure`)."""

from __future__ import annotations


def handle(payload: dict) -> None:
    from clavain.guards.gate import post_tool_use_failure

    post_tool_use_failure(payload)
