"""The environment pointers a runner process gets, so its agent loads context from the database on
demand instead of receiving it all in the packet."""

from __future__ import annotations

import os
import secrets
import shutil
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from clavain.errors import ClavainError
from clavain.paths import StatePaths, plugin_root

RUNNER_ENV_VARS = (
    "CLAVAIN_DB",
    "CLAVAIN_GRAPH",
    "CLAVAIN_NODE_ID",
    "CLAVAIN_RUN_ID",
    "CLAVAIN_PARENT_NODE_ID",
    "CLAVAIN_ARTIFACTS_DIR",
    "CLAVAIN_STATE_DIR",
    "CLAVAIN_PROJECT_DIR",
    "CLAVAIN_BIN",
    "CLAVAIN_PYTHON",
    "PATH",
)


def new_run_id(prefix: str = "run") -> str:
    """`<prefix>-<UTC stamp>-<hex>`: sorts by start time, unique across processes."""
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    return f"{prefix}-{stamp}-{secrets.token_hex(3)}"


def current_run_id(explicit: str | None = None, *, prefix: str = "run") -> str:
    """The run a command works for: given explicitly, else the runner's $CLAVAIN_RUN_ID, else a
    new one (`new_run_id`)."""
    if explicit:
        return explicit
    return os.environ.get("CLAVAIN_RUN_ID") or new_run_id(prefix)


def parent_of(node: dict[str, Any]) -> str:
    """The node's parent id, or "" for a root node (so the variable is always set)."""
    return str(node.get("parent_id") or "")


def clavain_bin() -> str:
    """A `clavain` executable that exists: the plugin's launcher when this code runs from the
    plugin (or a checkout), else the console script a pip install put beside this interpreter,
    else the one on PATH."""
    candidates = [plugin_root() / "bin" / "clavain", Path(sys.executable).parent / "clavain"]
    for candidate in candidates:
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    found = shutil.which("clavain")
    if found:
        return found
    raise ClavainError("no `clavain` executable found (neither the plugin's bin/clavain, nor a "
                       f"console script beside {sys.executable}, nor one on PATH) for the "
                       "runner to call back with")


def run_env(state: StatePaths, run_id: str, graph_id: str) -> dict[str, str]:
    """The `CLAVAIN_*` variables of any process working for run `run_id` on graph `graph_id`
    (a node's runner adds its node; a loop iteration has none), to merge over `os.environ`.

    Paths are absolute: the runner may change directory, and `CLAVAIN_DB` is also what makes
    `clavain kv` inside the runner open this database (or the team's shared server, by its
    URL) rather than rediscover one; `CLAVAIN_GRAPH` keeps its commands on the graph even after
    its sprint ends.
    """
    executable = clavain_bin()
    return {
        "CLAVAIN_DB": state.store_url or str(state.db.resolve()),
        "CLAVAIN_GRAPH": graph_id,
        "CLAVAIN_RUN_ID": run_id,
        "CLAVAIN_ARTIFACTS_DIR": str(state.artifacts.resolve()),
        # So a runner that changes directory still finds this project's config and artifacts.
        "CLAVAIN_STATE_DIR": str(state.root.resolve()),
        "CLAVAIN_PROJECT_DIR": str(state.project.resolve()),
        "CLAVAIN_BIN": executable,
        # The launcher's interpreter for the runner's `clavain` calls: this one, which has what
        # this process has (psycopg for a shared store), not whatever python3 is on PATH.
        "CLAVAIN_PYTHON": os.environ.get("CLAVAIN_PYTHON") or sys.executable,
        # Packets say `clavain …`, as in a Claude Code session.
        "PATH": os.pathsep.join([os.path.dirname(executable), os.environ.get("PATH", "")]),
    }


def runner_env(state: StatePaths, node: dict[str, Any], run_id: str,
               graph_id: str) -> dict[str, str]:
    """`run_env` plus the node: `CLAVAIN_NODE_ID`, `CLAVAIN_PARENT_NODE_ID` and, for a node
    claimed for the runner, `CLAVAIN_FENCE` (the claim's generation: its `graph apply` and
    `heartbeat` carry it, so they are refused once the claim is not the node's any more)."""
    env = {**run_env(state, run_id, graph_id), "CLAVAIN_NODE_ID": str(node["id"]),
           "CLAVAIN_PARENT_NODE_ID": parent_of(node)}
    if node.get("lock_run_id") == run_id and node.get("lock_generation"):
        env["CLAVAIN_FENCE"] = str(node["lock_generation"])
    return env


def refuse_other_node(node_id: str | None, action: str, *, own: str | None = None) -> None:
    """A runner touches only its own node: inside a runner's environment (`CLAVAIN_NODE_ID`, or
    `own` when the caller names the writer) `action` on any other node (`node_id` None: on
    whichever node would come next) is refused. A person, outside any runner, may act on every
    node. Every front door that writes for a runner (apply, heartbeat, KV, verify, claims) asks
    this one function."""
    own = own if own is not None else os.environ.get("CLAVAIN_NODE_ID")
    if own and node_id != own:
        which = f"node {node_id!r}" if node_id is not None else "another node"
        raise ClavainError(f"this runner works on node {own!r} (CLAVAIN_NODE_ID): it may not "
                           f"{action} {which}; a person, outside any runner, may")


def fence_from_env(node_id: str) -> int | None:
    """The claim generation a runner was given for `node_id` (none for another node, or for a
    runner given none). A value blanked or bent on the way is refused, never read as "no
    fence": that would let a runner whose claim ran out write anyway."""
    if os.environ.get("CLAVAIN_NODE_ID") != node_id or "CLAVAIN_FENCE" not in os.environ:
        return None
    try:
        return int(os.environ["CLAVAIN_FENCE"])
    except ValueError:
        raise ClavainError(f"CLAVAIN_FENCE {os.environ['CLAVAIN_FENCE']!r} is not the claim "
                           f"generation of node {node_id!r}; nothing was written") from None
