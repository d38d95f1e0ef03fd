"""PreToolUse: count the call against the run's budgets and loop guards; deny it when a budget
is spent or the agent is going in circles (`clavain.guards`). Any failure lets the tool run."""

from __future__ import annotations


def handle(payload: dict) -> dict | None:
    from clavain.guards.gate import pre_tool_use

    return pre_tool_use(payload)
