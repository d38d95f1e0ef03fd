"""The nodes a person must look at, before any picture: every failed, waiting (needs_human) and
retried node with its attempts, crashes, the first line of its last error (or the question it
asks), what it cost and the command that unblocks it — the command `clavain status` gives
(`status.next_steps`), else the one that resets a failed node."""

from __future__ import annotations

from collections import defaultdict
from html import escape
from typing import Any

from clavain.textio import clip
from clavain.workgraph.statuses import NodeStatus

ORDER = {"failed": 0, "needs_human": 1}


def node_dollars(page: dict[str, Any]) -> dict[str, float]:
    """Dollars each node's runner calls cost, over every run on the page."""
    spent: dict[str, float] = defaultdict(float)
    for run in page["runs"]:
        for entry in run["timeline"]:
            spent[str(entry["node"])] += float(entry["cost_usd"])
    return dict(spent)


def retried(page: dict[str, Any]) -> dict[str, int]:
    """Node → runner calls that did not end done (each a retry or the failure)."""
    count: dict[str, int] = defaultdict(int)
    for run in page["runs"]:
        for entry in run["timeline"]:
            if entry["outcome"] != "done":
                count[str(entry["node"])] += 1
    return dict(count)


def first_line(text: Any) -> str:
    return clip(str(text or "").strip().splitlines()[0], 200) if str(text or "").strip() else ""


def rows(page: dict[str, Any]) -> list[dict[str, Any]]:
    nodes = (page["graph"] or {}).get("nodes") or []
    errors = page.get("errors") or {}
    commands = {step["node"]: step["command"]
                for step in (page.get("status") or {}).get("next_steps") or []
                if step["node"] and step["command"]}
    spent, again = node_dollars(page), retried(page)
    found = []
    for node in nodes:
        node_id, status = str(node.get("id")), str(node.get("status"))
        if status not in ORDER and not again.get(node_id) and not node.get("crashes"):
            continue
        if node.get("superseded_by"):
            status = f"replaced by {node['superseded_by']}"
        question = (node.get("human_question") or {}).get("question") if isinstance(
            node.get("human_question"), dict) else None
        command = commands.get(node_id) or (
            f"clavain graph answer {node_id} --answer TEXT" if node.get("status") ==
            NodeStatus.NEEDS_HUMAN else f"clavain graph reset {node_id}"
            if node.get("status") == NodeStatus.FAILED and not node.get("superseded_by") else "")
        found.append({"node": node_id, "status": status,
                      "attempts": int(node.get("attempts") or 0),
                      "crashes": int(node.get("crashes") or 0),
                      "problem": (f"asks: {question}" if question else
                                  first_line(errors.get(node_id))),
                      "spent": spent.get(node_id, 0.0), "command": command})
    return sorted(found, key=lambda r: (ORDER.get(r["status"], 2), -r["spent"], r["node"]))


def section(page: dict[str, Any]) -> str:
    """The table, or nothing when no node failed, waits or was retried."""
    found = rows(page)
    if not found:
        return ""
    body = "".join(
        f'<tr data-node="{escape(r["node"])}" data-status="{escape(r["status"])}">'
        f'<td><code>{escape(r["node"])}</code></td>'
        f'<td class="status-{escape(r["status"].split()[0])}">{_mark(r["status"])}'
        f'{escape(r["status"].replace("_", " "))}</td>'
        f'<td class=num>{r["attempts"]}</td><td class=num>{r["crashes"]}</td>'
        f'<td class="problem">{escape(r["problem"])}</td>'
        f'<td class=num>${r["spent"]:.2f}</td>'
        f'<td>{_command(r["command"])}</td></tr>' for r in found)
    head = ("<tr><th>node</th><th>status</th><th class=num>attempts</th>"
            "<th class=num>crashes</th><th>last error or question</th><th class=num>spent</th>"
            "<th>to unblock</th></tr>")
    return ('<section id="attention"><h2>Failed, waiting and retried nodes '
            f'({len(found)})</h2><table class="attention"><thead>{head}</thead>'
            f"<tbody>{body}</tbody></table></section>")


def _command(command: str) -> str:
    return f'<code class="command">{escape(command)}</code>' if command else ""


def _mark(status: str) -> str:
    """A shape beside the word, so the table does not lean on colour."""
    return {"failed": "✖ ", "needs_human": "? "}.get(status, "↻ ")
