"""PostToolUse (async): a test command that passed is no longer red; the run's tokens and cost
are measured from the transcripts (`clavain.guards.gate.post_tool_use`)."""

from __future__ import annotations


def handle(payload: dict) -> None:
    from clavain.guards.gate import post_tool_use

    post_tool_use(payload, failed=False)
