"""The sections of the HTML page, each drawn from the data `collect.gather` read: the overview,
the sprint's route and its gates, the workgraph, the timeline, the budgets, the verdicts and the
loop runs. Every text is escaped here; the pictures escape their own."""

from __future__ import annotations

from collections import defaultdict
from html import escape
from pathlib import Path
from typing import Any

from clavain.textio import clip
from clavain.workgraph.statuses import NodeStatus

FOLD_ABOVE = 300  # nodes drawn one by one; beyond, the picture folds (page.graph_svg)


def title(page: dict[str, Any]) -> str:
    kind, subject = page["subject"]["kind"], page["subject"]["id"]
    if kind == "sprint":
        return f"Sprint {subject}: {clip(page['sprint']['description'], 90)}"
    if kind == "run":
        return f"Run {subject} on graph {page['runs'][0]['graph_id']}"
    if kind == "loop":
        return f"Loop run {subject}"
    return f"Workgraph {subject}"


def _section(anchor: str, heading: str, *body: str) -> str:
    return (f'<section id="{anchor}"><h2>{escape(heading)}</h2>' + "".join(body)
            + "</section>")


def _table(rows: list[dict[str, Any]], columns: list[str], *, numeric: tuple[str, ...] = (),
           css: str = "", raw: tuple[str, ...] = ()) -> str:
    """`raw` columns hold HTML this module built; every other cell is escaped."""
    if not rows:
        return '<p class="empty">None.</p>'
    head = "".join(f'<th class="num">{escape(c)}</th>' if c in numeric else
                   f"<th>{escape(c)}</th>" for c in columns)
    body = "".join(
        "<tr>" + "".join(
            f'<td{" class=num" if c in numeric else ""}>'
            f'{row.get(c, "") if c in raw else escape(_text(row.get(c)))}</td>'
            for c in columns) + "</tr>"
        for row in rows)
    return f'<table class="{css}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:,.4f}".rstrip("0").rstrip(".") if value else "0"
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    if isinstance(value, (list, tuple)):
        return ", ".join(_text(item) for item in value)
    return str(value)


def _items(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [] if value is None else [value]


def _cards(items: list[tuple[str, Any]]) -> str:
    return '<div class="cards">' + "".join(
        f'<div class="card"><b>{escape(_text(value))}</b><span>{escape(label)}</span></div>'
        for label, value in items) + "</div>"


# ---------------------------------------------------------------- overview

def overview(page: dict[str, Any]) -> str:
    from clavain.page.outcome import word

    nodes = (page["graph"] or {}).get("nodes") or []
    done = sum(1 for node in nodes if node.get("status") == NodeStatus.DONE)
    cards: list[tuple[str, Any]] = []
    if page["sprint"] is not None:
        sprint = page["sprint"]
        finished = sum(1 for step in sprint["route"] if step["state"] in ("done", "waived"))
        cards += [("sprint", sprint["outcome"]),
                  ("steps", f"{finished}/{len(sprint['route'])}"),
                  ("complexity", sprint["complexity"])]
    if nodes:
        cards.append(("nodes done", f"{done}/{len(nodes)}"))
    for run in page["runs"]:
        cards.append((f"run {run['run_id']}", word(run["status"])))
        if run["live"]:  # its metrics hold the runner calls that ended, not the ones at work
            cards += [("runners at work", len(run["running"])),
                      ("running for", f"{_since(run['started_at'], page['generated_at'])} s")]
        else:
            cards += [("peak concurrency", run["peak_concurrency"]),
                      ("wall", f"{run['wall_seconds']:.1f} s")]
    for loop in page["loops"]:
        cards += [(f"loop {loop['run_id']}", word(loop["status"])),
                  ("iterations", len(loop["iterations"]))]
    budget = page["budget"]
    if budget is not None:
        cards += [(_against("tokens", budget, "Tokens"), budget.get("tokens", 0)),
                  (_against("cost", budget, "Dollars"),
                   f"${float(budget.get('cost_usd') or 0):.2f}")]
    return _section("overview", "Overview", _cards(cards)) if cards else ""


def _against(label: str, budget: dict[str, Any], name: str) -> str:
    """`cost of $60.00 cap (58%)`: the figure's label names the cap it counts against."""
    row = next((b for b in budget.get("budgets") or [] if b.get("budget") == name), None)
    if row is None or not row.get("limit"):
        return label
    limit = (f"${float(row['limit']):.2f}" if name == "Dollars"
             else f"{int(row['limit']):,}")
    return f"{label} of {limit} cap ({float(row['used']) / float(row['limit']):.0%})"


def _since(start: str, now: str) -> str:
    from clavain.clock import parse_iso

    try:
        return f"{max(parse_iso(now).timestamp() - parse_iso(start).timestamp(), 0):.0f}"
    except ValueError:
        return "?"


def problems(found: list[str]) -> str:
    items = "".join(f"<li>{escape(problem)}</li>" for problem in found)
    return (f'<section id="problems" class="problems"><h2>What could not be read</h2>'
            f"<ul>{items}</ul></section>")


# ---------------------------------------------------------------- the sprint

def sprint_route(sprint: dict[str, Any]) -> str:
    from clavain.authority import describe

    steps = []
    for step in sprint["route"]:
        notes = []
        if step["gate"]:
            notes.append("gate" + (f": {', '.join(step['lenses'])}" if step["lenses"] else ""))
        steps.append(f'<li class="{step["state"]}" data-step="{escape(step["step"])}" '
                     f'data-state="{step["state"]}">{escape(step["step"])}'
                     f'<small>{escape(step["state"])}{" · " if notes else ""}'
                     f'{escape(" · ".join(notes))}</small></li>')
    waivers = [{"step": step["step"], "reason": step["waiver"].get("reason"),
                "the gate said": "; ".join(step["waiver"].get("problems") or []),
                "decided by": describe(step["waiver"].get("decided_by")),
                "at": step["waiver"].get("at")}
               for step in sprint["route"] if step["waiver"]]
    decisions = [{"decision": d.get("what"), "decided by": describe(d.get("decided_by"))}
                 for d in sprint["person_decisions"] if isinstance(d, dict)]
    skipped = [{"step": step, "why": why} for step, why in sprint["skipped"].items()]
    return _section(
        "route", "Route and gates",
        f"<p>{escape(sprint['description'])}</p>",
        f'<ol class="route">{"".join(steps)}</ol>',
        "<h3>Gates a person waived</h3>",
        _table(waivers, ["step", "reason", "the gate said", "decided by", "at"],
               css="waivers"),
        "<h3>Decisions only a person may make</h3>",
        _table(decisions, ["decision", "decided by"], css="decisions"),
        *(["<h3>Steps not run</h3>", _table(skipped, ["step", "why"])] if skipped else []),
        '<p class="empty">A gate passed without a waiver was open when its step was recorded '
        "done: what it checks held then.</p>")


# ---------------------------------------------------------------- the workgraph

def _node_seconds(page: dict[str, Any]) -> dict[str, float]:
    seconds: dict[str, float] = defaultdict(float)
    for run in page["runs"]:
        for entry in run["timeline"]:
            seconds[str(entry.get("node"))] += float(entry["end_epoch"]) - float(
                entry["start_epoch"])
    return dict(seconds)


def workgraph(page: dict[str, Any]) -> str:
    from clavain.page import graph_svg

    graph = page["graph"]
    if graph is None or not graph["nodes"]:
        return ""  # only what has content is drawn
    nodes = graph["nodes"]
    weights = _node_seconds(page)
    picture = graph_svg.draw(nodes, weights=weights or None, fold_above=FOLD_ABOVE)
    counts: dict[str, int] = defaultdict(int)
    for node in nodes:
        counts[str(node.get("status"))] += 1
    legend = ", ".join(f"{n} {status}" for status, n in sorted(counts.items()))
    measure = "measured runner seconds" if weights else "number of nodes"
    fold = (f" Folded: {picture.shown_nodes} nodes drawn one by one, the rest in "
            f"{picture.groups} groups by layers and status." if picture.folded else "")
    from clavain.page.attention import first_line

    errors = page.get("errors") or {}
    # The nodes not done first: what a person looks for is at the top of the table.
    rows = [{"id": node.get("id"), "title": node.get("title"), "type": node.get("type"),
             "status": node.get("status"), "attempts": node.get("attempts"),
             "last error": first_line(errors.get(str(node.get("id")))),
             "depends on": node.get("depends_on") or []}
            for node in sorted(nodes, key=lambda n: n.get("status") == NodeStatus.DONE)]
    return _section(
        "graph", f"Workgraph {graph['id']}",
        f"<p>{len(nodes)} nodes: {escape(legend)}.{escape(fold)}</p>",
        f'<div class="scroll">{picture.svg}</div>',
        f'<p>Critical path (by {measure}): <span id="critical-path">'
        f'{escape(" → ".join(picture.critical_path)) or "none"}</span></p>',
        f"<details><summary>Every node ({len(nodes)})</summary>",
        _table(rows, ["id", "title", "type", "status", "attempts", "last error", "depends on"],
               numeric=("attempts",), css="nodes"),
        "</details>")


# ---------------------------------------------------------------- verdicts

def verdicts(found: list[dict[str, Any]]) -> str:
    rows = []
    for verdict in found:
        detail = verdict.get("detail_file")
        link = (f'<a href="{escape(Path(detail).as_uri())}">details</a>' if detail else "")
        status = str(verdict.get("status"))
        rows.append({"lens": escape(str(verdict.get("agent"))),
                     "status": f'<span class="status-{escape(status)}">{escape(status)}</span>',
                     "tokens": escape(_text(verdict.get("tokens_spent"))),
                     "summary": escape(clip(verdict.get("summary") or "", 300)),
                     "filed": escape(str(verdict.get("timestamp") or "")), "detail": link})
    columns = ["lens", "status", "tokens", "summary", "filed", "detail"]
    if not rows:
        return ""
    return _section("verdicts", "Verdicts", _table(rows, columns, numeric=("tokens",),
                                                   raw=tuple(columns), css="verdicts"))


# ---------------------------------------------------------------- loop runs

def _block_value(value: Any) -> str:
    """As the status block says it: `true`, not Python's `True`."""
    return ("true" if value else "false") if isinstance(value, bool) else str(value)


def loops(found: list[dict[str, Any]]) -> str:
    body = []
    for loop in found:
        summary = loop["summary"]
        body += [f'<h3 data-loop="{escape(loop["run_id"])}">Loop {escape(loop["run_id"])}: '
                 f'{escape(str(loop["status"]))}</h3>',
                 f"<p>{escape(str(summary.get('message') or ''))}"
                 f"{' — ' if loop.get('task_label') else ''}"
                 f"{escape(str(loop.get('task_label') or ''))}</p>",
                 _cards([("iterations", len(loop["iterations"])),
                         ("confirmed done", len(summary.get("confirmed_done") or [])),
                         ("claimed, not confirmed",
                          len(summary.get("claimed_not_confirmed") or [])),
                         ("breaker", summary.get("breaker_state", "?")),
                         ("tokens", summary.get("tokens", 0))])]
        rows = []
        for record in loop["iterations"]:
            status = record.get("status") if isinstance(record.get("status"), dict) else {}
            progress = record.get("progress") if isinstance(record.get("progress"),
                                                            dict) else {}
            rows.append({"#": record.get("iteration"),
                         "offered": record.get("items") or "nothing actionable",
                         "status block": " ".join(f"{k}={_block_value(v)}"
                                                  for k, v in status.items()
                                                  if k in ("status", "task_completed",
                                                           "exit_signal", "tests_status")
                                                  and v not in (None, "")),
                         "problem": record.get("status_error") or record.get("runner_error"),
                         "progress": "yes" if progress.get("progress") else "none measured",
                         "why": [*_items(progress.get("why")),
                                 *_items(progress.get("unconfirmed"))],
                         "breaker": record.get("breaker"), "tokens": record.get("tokens")})
        body += [_table(rows, ["#", "offered", "status block", "problem", "progress", "why",
                               "breaker", "tokens"], numeric=("#", "tokens"),
                        css="iterations"),
                 "<h3>Breaker transitions</h3>",
                 _table(loop["breaker_transitions"], ["iteration", "from", "to"],
                        css="breaker"),
                 "<h3>Waits for the rate limit</h3>",
                 _table(loop["waits"], ["at", "why", "seconds"], numeric=("seconds",),
                        css="waits")]
    return _section("loops", "Loop runs", *body)
