"""What a sprint's step must show before `clavain sprint done STEP` records it. The CLI checks
these, not the model's reading of a skill; a person may pass a gate on purpose (`--waive
REASON`, recorded in the checkpoint, the summary and the report).

| step | the gate |
| plan | a plan recorded in the sprint's graph (`--plan PATH`, or the one recorded before) |
| plan-review | a `plan` lens verdict filed since the step began, not ERROR |
| execute, test | every task of the sprint's graph done, and its verify node passed |
| quality-gates | a verdict from every lens the route asked for, filed since the step began, none
  ERROR; reviewer dispatches still running are waited for (bounded) |
| resolve | every NEEDS_ATTENTION / BLOCKED verdict of the sprint answered by a later CLEAN verdict
  of the same lens or by `clavain verdicts resolve ID --note TEXT` |
| ship | the whole graph done (integrate and final-verify too), the final gate run on the tree as
  it is now, and nothing left unresolved |
"""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Callable
from typing import Any

from clavain.paths import StatePaths
from clavain.store import queries
from clavain.workgraph.graphs import Graph
from clavain.workgraph.statuses import NodeStatus

REVIEW_WAIT_SECONDS = 90.0  # under the Bash tool's 2-minute default
POLL_SECONDS = 1.0
REVIEWER = "clavain:reviewer"
RERUN = "`clavain graph reset {0} && clavain verify {0}`"
RERUN_FINAL = "clavain graph reset final-verify && clavain verify final-verify"


def sprint_graph(conn: sqlite3.Connection, state: StatePaths, active: dict[str, Any]) -> Graph:
    from clavain.sprint.checkpoint import graph_of

    return Graph(conn, graph_of(active), state)


def lenses_for(active: dict[str, Any], step: str) -> list[str]:
    """The reviewer lenses a step's gate wants a verdict from."""
    if step == "plan-review":
        from clavain.sprint.route import PLAN_REVIEW

        return [PLAN_REVIEW]
    if step == "quality-gates":
        return [*active["reviewers"], active["goal_check"]]
    return []


def problems(g: Graph, active: dict[str, Any], step: str) -> list[str]:
    """What keeps `step` from being recorded now (empty: the gate is open). Reads only."""
    check = _CHECKS.get(step)
    return check(g, active, step) if check else []


# ---------------------------------------------------------------- verdicts

def _filed_under(state: StatePaths, active: dict[str, Any]) -> list[dict[str, Any]]:
    """The verdicts SubagentStop filed under this sprint: a verdict filed under no sprint does
    not pass its gates."""
    from clavain.sprint.summary import sprint_verdicts

    return [v for v in sprint_verdicts(state, active) if v.get("sprint_id") ==
            active["sprint_id"]]


def _after(verdict: dict[str, Any], since: str | None) -> bool:
    from clavain.verdicts.files import order_key

    # Same millisecond counts: both stamps come from one clock at millisecond precision.
    return since is None or order_key(verdict)[:2] >= order_key({"timestamp": since})[:2]


def lens_verdicts(state: StatePaths, active: dict[str, Any],
                  step: str) -> dict[str, dict[str, Any] | None]:
    """Each lens the step wants → its latest verdict filed since the step began, or None."""
    from clavain.verdicts.files import order_key

    since = active.get("step_started_at")
    found: dict[str, dict[str, Any] | None] = {lens: None for lens in lenses_for(active, step)}
    for verdict in sorted(_filed_under(state, active), key=order_key):
        lens = verdict["agent"].removeprefix(f"{REVIEWER}/")
        if lens in found and verdict["agent"] == f"{REVIEWER}/{lens}" and _after(verdict, since):
            found[lens] = verdict
    return found


def _review_problems(g: Graph, active: dict[str, Any], step: str) -> list[str]:
    found = lens_verdicts(g.state, active, step)
    missing = [lens for lens, verdict in found.items() if verdict is None]
    out = []
    if missing:
        running = _running_lenses(g.state, active, missing)
        still = (f" ({len(running)} reviewer dispatch(es) still running: run this again when "
                 "they report)" if running else "")
        out.append(f"no verdict yet from lens {', '.join(missing)} since step {step} began"
                   f"{still}; dispatch clavain:reviewer once per lens, the prompt's first line "
                   "`Lens: NAME`")
    for lens, verdict in found.items():
        if verdict is not None and verdict["status"] == "ERROR":
            out.append(f"lens {lens}'s verdict is ERROR ({verdict['summary'][:120]}); "
                       "dispatch that lens again")
    return out


def _running_lenses(state: StatePaths, active: dict[str, Any],
                    lenses: list[str]) -> list[dict[str, Any]]:
    """Reviewer dispatches of this sprint still running that may bring one of `lenses`."""
    from clavain.verdicts import dispatches

    try:
        running = dispatches.running(state, sprint_id=active["sprint_id"])
    except (OSError, sqlite3.Error):
        return []
    return [d for d in running
            if d.get("agent") == REVIEWER and d.get("lens") in (None, *lenses)]


def wait_for_reviews(g: Graph, active: dict[str, Any], step: str, *,
                     seconds: float | None = None,
                     progress: Callable[[str], None] | None = None) -> None:
    """While a lens the step wants has no verdict and a reviewer dispatch that may bring it is
    still running, wait (at most `seconds`): the host runs Agent calls in the background, so
    the model often records the step before its reviewers report."""
    lenses = lenses_for(active, step)
    if not lenses:
        return
    limit = review_wait_seconds(g.state) if seconds is None else seconds
    deadline = time.monotonic() + limit
    told = None
    while True:
        found = lens_verdicts(g.state, active, step)
        missing = [lens for lens, verdict in found.items() if verdict is None]
        running = _running_lenses(g.state, active, missing) if missing else []
        left = deadline - time.monotonic()
        if not running or left <= 0:
            return
        lens_names = sorted({d.get("lens") or "not named yet" for d in running})
        line = (f"waiting for {len(running)} reviewer dispatch(es) still running "
                f"(lens {', '.join(lens_names)}); up to {left:.0f} s more")
        if progress and line.split(";")[0] != told:
            progress(line)
            told = line.split(";")[0]
        time.sleep(min(POLL_SECONDS, max(0.05, left)))


def review_wait_seconds(state: StatePaths) -> float:
    """How long a review gate waits for running reviewers: CLAVAIN_REVIEW_WAIT_SECONDS, else
    config `sprint.reviewWaitSeconds`, else 90."""
    from clavain import config as config_mod

    raw = os.environ.get("CLAVAIN_REVIEW_WAIT_SECONDS")
    if raw is None:
        raw = config_mod.get(config_mod.load(state.config), "sprint.reviewWaitSeconds",
                             REVIEW_WAIT_SECONDS)
    try:
        value = float(raw)
    except (TypeError, ValueError):
        return REVIEW_WAIT_SECONDS
    return value if 0 <= value <= 3600 else REVIEW_WAIT_SECONDS


def _resolve_problems(g: Graph, active: dict[str, Any], step: str) -> list[str]:
    from clavain.verdicts.resolutions import resolved, unanswered

    left = unanswered(_filed_under(g.state, active), resolved(g.state.verdicts))
    if not left:
        return []
    first = left[0]
    more = f" and {len(left) - 1} more" if len(left) > 1 else ""
    return [f"{len(left)} verdict(s) need an answer: {first['status']} {first['agent']} "
            f"({first['summary'][:100]}){more}; fix it and dispatch that lens again (a later "
            f"CLEAN answers it), or `clavain verdicts resolve {first['dispatch']} --note TEXT`"]


# ---------------------------------------------------------------- the graph

def _task_problems(g: Graph, active: dict[str, Any], step: str) -> list[str]:
    tasks = queries.run(g.conn, "sprint_gates.live_tasks", (g.id,)).fetchall()
    if not tasks:
        return ["the sprint's graph has no tasks yet; record the plan "
                "(`clavain sprint done plan --plan PATH`)"]
    live = [t for t in tasks if not t["superseded_by"]]
    unfinished = [f"{t['id']} ({t['status']})" for t in live if t["status"] != NodeStatus.DONE]
    unverified = []
    for task in live:
        if task["status"] != NodeStatus.DONE:
            continue
        checks = queries.run(g.conn, "sprint_gates.checks_of_task",
                             (g.id, task["id"], task["id"])).fetchall()
        if not checks:
            unverified.append(f"{task['id']} (no verify node: `clavain graph scaffold`)")
        unverified += [f"{c['id']} ({c['status']})" for c in checks
                       if c["status"] != NodeStatus.DONE]
        unverified += [f"{c['id']} (done, but not by the shell verifier: {RERUN.format(c['id'])})"
                       for c in checks
                       if c["status"] == NodeStatus.DONE and not by_verifier(g, c["id"])]
    out = []
    if unfinished:
        out.append(f"{len(unfinished)} task(s) not done: {_list(unfinished)}; "
                   "`clavain graph next --claim` runs the next")
    if unverified:
        out.append(f"{len(unverified)} verify node(s) not passed: {_list(unverified)}; "
                   "`clavain verify ID` runs one")
    return out


def _ship_problems(g: Graph, active: dict[str, Any], step: str) -> list[str]:
    from clavain.tree import fingerprint
    from clavain.workgraph import kv
    from clavain.workgraph.scaffold import singleton

    open_nodes = queries.run(g.conn, "sprint_gates.open_nodes", (g.id,)).fetchall()
    out = []
    if open_nodes:
        out.append(f"{len(open_nodes)} node(s) of the sprint's graph not done: "
                   f"{_list([f'{r[0]} ({r[1]})' for r in open_nodes])}; "
                   "`clavain graph next --claim` runs the next")
    final = singleton(g, "final_verify")
    if final is None and not open_nodes and not queries.run(
            g.conn, "sprint_gates.has_task", (g.id,)).fetchone():
        out.append("the sprint's graph has no tasks, so nothing was built or checked: record "
                   "a plan (`clavain sprint resume --from-step plan`, then `clavain sprint done "
                   "plan --plan PATH`) or add the work (`clavain graph import FILE`, then "
                   "`clavain graph scaffold`)")
    elif final is None:
        out.append("the sprint's graph has no final-verify node; `clavain graph scaffold` "
                   "adds it")
    elif final["status"] == NodeStatus.DONE and not by_verifier(g, final["id"]):
        out.append(f"{final['id']} is done, but not by the shell verifier: "
                   f"{RERUN.format(final['id'])}")
    elif final["status"] == NodeStatus.DONE:
        ran_on = kv.get(g, final["id"], "out.tree")
        now = fingerprint(g.state.project, state_root=g.state.root)
        if now is None:
            out.append("the project's files cannot be fingerprinted now (git failed, or too "
                       "many files outside git), so nothing shows final-verify ran on them")
        elif ran_on is None:
            out.append(f"{final['id']} recorded no tree it ran on; run it again: {RERUN_FINAL}")
        elif ran_on["value"] != now:
            out.append(f"{final['id']} ran on tree {_short(ran_on['value'])}, the files are "
                       f"now {_short(now)} (changed since): run it again: {RERUN_FINAL}")
    out += _resolve_problems(g, active, step)
    return out


def by_verifier(g: Graph, node_id: str) -> bool:
    """Whether the node's last move to done was the shell verifier's run (which records
    `out.verified_run` with the result): nothing else makes a check pass."""
    from clavain.workgraph import kv

    done = queries.run(g.conn, "sprint_gates.last_done_run", (g.id, node_id)).fetchone()
    marker = kv.get(g, node_id, "out.verified_run")
    return bool(done and marker and done[0] and marker["value"] == done[0])


def _short(tree: str) -> str:
    kind, _, digest = tree.partition(":")
    return f"{kind}:{digest[:12]}"


def _list(items: list[str], shown: int = 4) -> str:
    more = f" and {len(items) - shown} more" if len(items) > shown else ""
    return ", ".join(items[:shown]) + more


_CHECKS: dict[str, Callable[[Graph, dict[str, Any], str], list[str]]] = {
    "plan-review": _review_problems,
    "execute": _task_problems,
    "test": _task_problems,
    "quality-gates": _review_problems,
    "resolve": _resolve_problems,
    "ship": _ship_problems,
}
