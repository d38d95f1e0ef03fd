"""What a sprint reads about the verdicts: the LATEST verdict of each agent, one short line each,
detail paths only where attention is needed, never the agents' raw answers.

An agent dispatched several times shows its latest verdict and says so; any earlier non-clean
verdict of it stays visible as a count on that line (`(3 dispatches; 1 earlier
NEEDS_ATTENTION)`), so a later CLEAN never silently hides a finding. Stdlib only, like
`files` (the summary must work before the plugin venv exists). Functions take the records
`files.parse_all(folder)` returns.
"""

from __future__ import annotations

from clavain.verdicts.files import (
    ALL_STATUSES,
    ATTENTION_STATUSES,
    DISPATCH,
    display_name,
    order_key,
)

TYPE_CHECKING = False
if TYPE_CHECKING:  # `typing` imports `re`: PreCompact and SessionStart read verdicts
    from typing import Any

COMPACT_SUMMARY_CHARS = 60
COMPACT_AGENT_CHARS = 32


def latest_per_agent(verdicts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per agent (ordered by agent): its latest verdict plus `dispatches` (how many it has) and
    `earlier_attention` ({status: count} of its earlier verdicts that needed attention)."""
    by_agent: dict[str, list[dict[str, Any]]] = {}
    for verdict in verdicts:
        by_agent.setdefault(verdict["agent"], []).append(verdict)
    entries = []
    for agent in sorted(by_agent):
        *earlier, latest = sorted(by_agent[agent], key=order_key)
        entries.append({**latest, "dispatches": len(earlier) + 1,
                        "earlier_attention": _count(v for v in earlier
                                                    if v["status"] in ATTENTION_STATUSES)})
    return entries


def _count(verdicts: Any) -> dict[str, int]:
    counts = {status: 0 for status in ALL_STATUSES}
    for verdict in verdicts:
        counts[verdict["status"]] += 1
    return {status: n for status, n in counts.items() if n}


def count_by_status(verdicts: list[dict[str, Any]]) -> dict[str, int]:
    """{status: number} of the latest verdict per agent, statuses in their canonical order."""
    return _count(latest_per_agent(verdicts))


def get_attention(verdicts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The latest verdicts that need a look (one per agent), with their detail paths. An
    earlier attention verdict of an agent whose latest is clean is counted by
    `older_attention`, and shows on that agent's summary line."""
    return [{"agent": v["agent"], DISPATCH: v[DISPATCH], "status": v["status"],
             "summary": v["summary"], "detail_path": v["detail_path"],
             "findings_count": v["findings_count"], "dispatches": v["dispatches"],
             "earlier_attention": v["earlier_attention"]}
            for v in latest_per_agent(verdicts) if v["status"] in ATTENTION_STATUSES]


def older_attention(verdicts: list[dict[str, Any]]) -> int:
    """How many attention verdicts are not the latest of their agent (not in `get_attention`)."""
    return sum(sum(entry["earlier_attention"].values()) for entry in latest_per_agent(verdicts))


def total_tokens(verdicts: list[dict[str, Any]]) -> int:
    """Tokens of every dispatch (what was spent, not only the latest runs)."""
    return sum(v["tokens_spent"] or 0 for v in verdicts)


def ls_rows(verdicts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows for the people's table of every dispatch: STATUS, AGENT, DISPATCH, TOKENS,
    SUMMARY."""
    return [{"status": v["status"], "agent": v["agent"], DISPATCH: v[DISPATCH],
             "tokens": v["tokens_spent"], "summary": v["summary"]} for v in verdicts]


def summary_json(verdicts: list[dict[str, Any]]) -> dict[str, Any]:
    """`clavain verdicts summary --json`: numbers as numbers."""
    latest = latest_per_agent(verdicts)
    return {"counts": _count(latest), "agents": len(latest), "dispatches": len(verdicts),
            "total_tokens": total_tokens(verdicts), "attention": get_attention(verdicts),
            "older_attention": older_attention(verdicts),
            "verdicts": [{"status": v["status"], "agent": v["agent"], DISPATCH: v[DISPATCH],
                          "tokens": v["tokens_spent"], "summary": v["summary"],
                          "dispatches": v["dispatches"],
                          "earlier_attention": v["earlier_attention"]} for v in latest]}


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _dispatch_note(entry: dict[str, Any]) -> str:
    """` (3 dispatches; 1 earlier NEEDS_ATTENTION)`; nothing for a single dispatch."""
    if entry["dispatches"] == 1:
        return ""
    note = f"{entry['dispatches']} dispatches"
    earlier = ", ".join(f"{n} earlier {status}" for status, n in entry["earlier_attention"].items())
    return f" ({note}; {earlier})" if earlier else f" ({note})"


def render_summary(verdicts: list[dict[str, Any]]) -> str:
    """The sprint-facing summary: a count line (latest verdict per agent), then one short line
    per agent; only those needing attention carry their detail path."""
    if not verdicts:
        return "Verdicts: none yet."
    latest = latest_per_agent(verdicts)
    counts = ", ".join(f"{n} {status}" for status, n in _count(latest).items())
    header = f"Verdicts: {counts}"
    if len(verdicts) > len(latest):
        header += f"; {len(verdicts)} dispatches of {len(latest)} agents"
    tokens = total_tokens(verdicts)
    lines = [header + (f"; {tokens:,} tokens" if tokens else "")]
    # What needs a look comes first, so a reader can stop at the first CLEAN line.
    for entry in sorted(latest, key=lambda v: v["status"] not in ATTENTION_STATUSES):
        line = (f"{entry['status']} {_clip(display_name(entry['agent']), COMPACT_AGENT_CHARS)}: "
                f"{_clip(entry['summary'], COMPACT_SUMMARY_CHARS)}{_dispatch_note(entry)}")
        if entry["status"] in ATTENTION_STATUSES and entry["detail_path"]:
            line += f" → {entry['detail_path']}"
        lines.append(line)
    return "\n".join(lines)
