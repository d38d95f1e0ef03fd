"""Fan-out: a call that starts subagents (Agent/Task, Workflow) is projected before it runs, and
reserved against its session's budget — or denied when it would not fit.

What a call starts (`shape`, read before the budget's transaction: it may read a file): an
Agent/Task call starts one subagent, of the model its input names (`model`), else of the model
its agent definition names (`subagent_type` read from the plugin's, the project's or the user's
`agents/` folder), else "inherit" — a history bucket of its own. A Workflow call starts as many
as its script has `agent(` calls (the inline script, its `scriptPath`, or the named
`.claude/workflows/<name>.js`), each counted once per item of the `args` list the script maps
over, when it maps over one; a `model:` option names an agent's model, the others inherit.
That is an estimate: an `agent(` outside the loop is counted with the loop (it errs high, as
a reservation should), a script that cannot be read counts as one agent. Never fewer than one.

What one subagent is projected to cost (`projection`): the median of this project's finished
subagents of that model (`budget_agents` rows with `ended_at`, the most recent HISTORY_ROWS,
once there are MIN_HISTORY), else `agentTokens` / `agentCostUsd`.

The reservation (`reserve`) runs inside `budget.check`'s BEGIN IMMEDIATE transaction, so six
Agent calls of one turn (six PreToolUse hooks at once) are cut to exactly what fits. It ends
at SubagentStop (`release_one`, one agent's share, after the session's spend was measured) or
when the call failed (`release_failed`). One never released only ever over-counts; `clavain
budget reset` clears it. Stdlib only.
"""

from __future__ import annotations

import os

FANOUT_TOOLS = ("Agent", "Task", "Workflow")
MODELS = ("sonnet", "opus", "haiku", "fable")
INHERIT = "inherit"
# What the host names an Agent call's subagent when `subagent_type` is left out, and every agent
# of a Workflow run (both seen on 2.1.330).
DEFAULT_AGENT_TYPE = "general-purpose"
WORKFLOW_AGENT_TYPE = "workflow-subagent"
MIN_HISTORY = 3
HISTORY_ROWS = 50
SCRIPT_MAX_BYTES = 256 * 1024
DEFINITION_MAX_BYTES = 8 * 1024


def model_family(name: object) -> str:
    """sonnet | opus | haiku | fable for a model alias or id, else "inherit"."""
    if not isinstance(name, str):
        return INHERIT
    lowered = name.lower()
    return next((family for family in MODELS if family in lowered), INHERIT)


def shape(tool: str, tool_input: object, project: str) -> dict:
    """{"tool", "subagent_type", "agents": [[model, count], ...], "count", "note"}: what the
    call would start."""
    data = tool_input if isinstance(tool_input, dict) else {}
    if tool != "Workflow":
        kind = data.get("subagent_type")
        kind = kind if isinstance(kind, str) and kind else DEFAULT_AGENT_TYPE
        model = data.get("model")
        model = model if model in MODELS else definition_model(kind, project)
        return {"tool": tool, "subagent_type": kind[:200], "agents": [[model, 1]], "count": 1,
                "note": ""}
    script, where = _workflow_script(data, project)
    agents, note = workflow_agents(script, data.get("args"))
    return {"tool": tool, "subagent_type": "workflow", "agents": agents,
            "count": sum(count for _, count in agents), "note": note or where}


def workflow_agents(script: str | None, args: object) -> tuple[list[list], str]:
    """([[model, count], ...], how they were counted) for a workflow script."""
    import re

    if not script:
        return [[INHERIT, 1]], "its script could not be read: counted as one agent"
    calls = len(re.findall(r"(?<![\w.$])agent\s*\(", script))
    if not calls:
        return [[INHERIT, 1]], "no agent( call found: counted as one agent"
    named = [model for model in re.findall(r"\bmodel\s*:\s*['\"`]([\w.-]+)['\"`]", script)
             if model_family(model) != INHERIT][:calls]
    times = _mapped_items(script, args)
    counts: dict[str, int] = {}
    for model in named:
        family = model_family(model)
        counts[family] = counts.get(family, 0) + times
    if calls > len(named):
        counts[INHERIT] = counts.get(INHERIT, 0) + (calls - len(named)) * times
    note = f"{calls} agent( call(s)" + (f" × {times} items of args" if times > 1 else "")
    return [[model, count] for model, count in sorted(counts.items())], note


def _mapped_items(script: str, args: object) -> int:
    """How many items the script's loop over `args` (or one of its lists) runs: the longest
    list it maps over, else 1."""
    import re

    most = 1
    for key in re.findall(r"\bargs((?:\.\w+)?)\s*\.\s*(?:map|forEach|flatMap|filter)\s*\(",
                          script) + re.findall(r"\bof\s+args((?:\.\w+)?)\b", script):
        items = args if not key else args.get(key[1:]) if isinstance(args, dict) else None
        if isinstance(items, list):
            most = max(most, len(items))
    return most


def _workflow_script(data: dict, project: str) -> tuple[str | None, str]:
    """(the script's text, where it came from): scriptPath first, then the inline script,
    then the named workflow of the project, then the user's (`.claude/workflows/<name>.js`)."""
    path = data.get("scriptPath")
    if isinstance(path, str) and path:
        full = path if os.path.isabs(path) else os.path.join(project, path)
        return _read_text(full, SCRIPT_MAX_BYTES), f"script {path}"
    script = data.get("script")
    if isinstance(script, str) and script:
        return script[:SCRIPT_MAX_BYTES], "inline script"
    name = data.get("name")
    if isinstance(name, str) and _plain_name(name):
        for folder in (project, os.environ.get("HOME", "")):
            found = folder and _read_text(os.path.join(folder, ".claude", "workflows",
                                                       f"{name}.js"), SCRIPT_MAX_BYTES)
            if found:
                return found, f"workflow {name}"
    return None, "no script"


def definition_model(subagent_type: str, project: str) -> str:
    """The model an agent definition names (its frontmatter `model:`), "inherit" when it names
    none, says inherit, or cannot be read cheaply: this plugin's `clavain:<name>` (or
    `clavain:<folder>:<name>`), the project's or the user's `.claude/agents/<name>.md`."""
    parts = subagent_type.split(":")
    if not all(_plain_name(part) for part in parts) or len(parts) > 3:
        return INHERIT
    if len(parts) == 1:
        candidates = [os.path.join(folder, ".claude", "agents", f"{parts[0]}.md")
                      for folder in (project, os.environ.get("HOME", "")) if folder]
    elif parts[0] == "clavain":
        agents = os.path.join(_plugin_root(), "agents")
        candidates = [os.path.join(agents, *parts[1:-1], f"{parts[-1]}.md")]
        if len(parts) == 2:  # the host names `agents/<folder>/<name>.md` so too
            candidates += [os.path.join(agents, sub, f"{parts[1]}.md")
                           for sub in _folders(agents)]
    else:
        return INHERIT  # another plugin's agent: its folder is not ours to look for
    for path in candidates:
        text = _read_text(path, DEFINITION_MAX_BYTES)
        if text is not None:
            return _frontmatter_model(text)
    return INHERIT


def _folders(path: str) -> list[str]:
    try:
        return sorted(os.listdir(path))
    except OSError:
        return []


def _frontmatter_model(text: str) -> str:
    lines = text.splitlines()
    if not lines or lines[0].strip() != "---":
        return INHERIT
    for line in lines[1:]:
        if line.strip() == "---":
            break
        key, _, value = line.partition(":")
        if key.strip() == "model":
            return model_family(value.strip().strip("'\""))
    return INHERIT


def _plugin_root() -> str:
    root = os.environ.get("CLAUDE_PLUGIN_ROOT") or os.environ.get("CLAVAIN_ROOT")
    if root:
        return root
    here = os.path.dirname(os.path.abspath(__file__))  # lib/clavain/guards
    bundled = os.path.join(os.path.dirname(here), "_plugin")  # a wheel's copy
    return bundled if os.path.isdir(bundled) else os.path.dirname(os.path.dirname(
        os.path.dirname(here)))


def _plain_name(name: str) -> bool:
    return 0 < len(name) <= 64 and name[0].isalnum() and \
        all(c.isalnum() or c in "-_." for c in name) and ".." not in name


def _read_text(path: str, limit: int) -> str | None:
    """A regular file's first `limit` bytes as text, or None (never blocks on a FIFO)."""
    import stat

    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except (OSError, ValueError):
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        return os.read(fd, limit).decode("utf-8", errors="replace")
    except OSError:
        return None
    finally:
        os.close(fd)


def projection(conn, model: str, limits: dict) -> dict:
    """{"tokens", "cost_usd", "source"}: what one subagent of `model` is projected to cost."""
    rows = conn.execute(
        # Only agents whose transcript was measured: one never written (or not in time)
        # measured nothing, and zeros would project the next fan-out as free.
        "SELECT tokens, cost_usd FROM budget_agents WHERE model = ? AND ended_at IS NOT NULL "
        "AND tokens > 0 ORDER BY ended_at DESC LIMIT ?", (model, HISTORY_ROWS)).fetchall()
    if len(rows) < MIN_HISTORY:
        return {"tokens": int(limits["agentTokens"]), "cost_usd": float(limits["agentCostUsd"]),
                "source": "the defaults agentTokens / agentCostUsd"}
    return {"tokens": int(_median([row[0] for row in rows])),
            "cost_usd": float(_median([row[1] for row in rows])),
            "source": f"the median of this project's last {len(rows)} {model} subagents"}


def _median(values: list) -> float:
    ordered = sorted(values)
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2


def reserve(conn, run_key: str, holder: str, planned: dict, limits: dict, at: str) -> str | None:
    """Reserve what `planned` (a `shape`) is projected to cost, or the denial when it would not
    fit: None when reserved. Inside the caller's write transaction."""
    from clavain.guards import reservations

    per_model = [(model, count, projection(conn, model, limits))
                 for model, count in planned["agents"]]
    tokens = sum(count * each["tokens"] for _, count, each in per_model)
    cost = sum(count * each["cost_usd"] for _, count, each in per_model)
    first = per_model[0][0] if len(per_model) == 1 else "mixed"
    detail = {"tool": planned["tool"], "subagent_type": planned["subagent_type"],
              "model": first, "count": planned["count"], "left": planned["count"],
              "agents": [[model, count, each["tokens"], each["cost_usd"]]
                         for model, count, each in per_model]}
    why = reservations.reserve_if_fits(conn, run_key, holder, limits, kind=reservations.SUBAGENT,
                                       tokens=tokens, cost_usd=cost, at=at, detail=detail)
    if why is None:
        return None
    return _denial(conn, run_key, planned, per_model, tokens, cost, why, limits)


def _denial(conn, run_key: str, planned: dict, per_model: list, tokens: int, cost: float,
            why: str, limits: dict) -> str:
    from clavain.guards import reservations
    from clavain.guards.budget import raise_hint

    count = planned["count"]
    each = "; ".join(f"{n} {model} at {p['tokens']:,} tokens / ${p['cost_usd']:.2f} each "
                     f"(from {p['source']})" for model, n, p in per_model)
    left = reservations.headroom(conn, run_key, limits)
    held = reservations.reserved(conn, run_key)
    per_agent = {"tokens": tokens / count, "cost_usd": cost / count}
    fit = min(int(left[column] // per_agent[column]) if per_agent[column] > 0 else count
              for column in ("tokens", "cost_usd"))
    what = "subagent" if count == 1 else f"{count} subagents"
    counted = f" ({planned['note']})" if planned["note"] else ""
    now = (f"{fit} such subagent{'s' if fit != 1 else ''} would fit now" if fit
           else "none would fit now")
    return (f"Clavain budget: this {planned['tool']} call would start {what}{counted}: {each}; "
            f"{tokens:,} tokens / ${cost:.2f} in all. The session has {left['tokens']:,.0f} "
            f"tokens / ${left['cost_usd']:.2f} left ({held['count']} reservation(s) of running "
            f"subagents hold {held['tokens']:,} tokens / ${held['cost_usd']:.2f}; run "
            f"{run_key}): {why}. {now}. Do not retry it as it is: start at most what fits, "
            "wait for running subagents to finish (what they do not use comes back), do the "
            "work in this conversation, or stop and return partial success (what is done, what "
            f"is left and why) or escalate to a person. "
            f"{raise_hint('maxTokens' if why.startswith('tokens') else 'maxCostUsd')}")


def decide(conn, run_key: str, call: dict, limits: dict, tool_use_id: str | None,
           at: str) -> str | None:
    """`budget.check`'s fan-out step, in its transaction: a subagent's own cap
    (`guards.agents`), then a new subagent's reservation. The denial, or None (counted,
    reserved)."""
    from clavain.guards import agents
    from clavain.guards.counting import SUPERVISED_PREFIX

    denial = agents.count_call(conn, run_key, call, limits, at) if call.get("agent_id") else None
    # A runner of `clavain run` holds its share already and the host caps it there
    # (`--max-budget-usd` counts its subagents): reserving again would only deny them.
    supervised = run_key.startswith(SUPERVISED_PREFIX)
    if denial is None and call.get("fanout") and not supervised:
        denial = reserve(conn, run_key, tool_use_id or f"call:{at}", call["fanout"], limits, at)
    return denial


def release_failed(conn, run_key: str, tool_use_id: str) -> dict | None:
    """The call that reserved failed: its whole reservation ends (what it held, or None)."""
    from clavain.guards import reservations
    from clavain.store.db import transaction

    with transaction(conn):
        return reservations.release(conn, run_key, tool_use_id)


def release_one(conn, run_key: str, agent_type: object) -> dict | None:
    """One subagent of the run stopped: end the oldest held reservation an Agent call made for
    its type, or, for a Workflow run's agent, one agent's share of the oldest Workflow
    reservation. Its detail, or None when none matched (nothing is released: it only
    over-counts). Inside the caller's transaction, after the session's spend was measured."""
    from clavain import fastjson
    from clavain.guards import reservations

    held = reservations.listed(conn, run_key, kind=reservations.SUBAGENT,
                               state=reservations.HELD)
    workflow = agent_type == WORKFLOW_AGENT_TYPE
    match = next((r for r in held if (r["detail"].get("tool") == "Workflow") == workflow
                  and (workflow or r["detail"].get("subagent_type") == agent_type)), None)
    if match is None:
        return None
    detail = match["detail"]
    left = int(detail.get("left") or 1)
    if left <= 1:
        reservations.release(conn, run_key, match["holder"])
        return detail
    detail["left"] = left - 1
    conn.execute("UPDATE budget_reservations SET tokens = tokens - ?, cost_usd = cost_usd - ?, "
                 "detail_json = ? WHERE run_key = ? AND holder = ?",
                 (match["tokens"] // left, match["cost_usd"] / left, fastjson.dumps(detail),
                  run_key, match["holder"]))
    return detail
