"""Helpers for the supervisor tests: a real git project with a `.clavain/` state folder, runners
written as small scripts, and `clavain run` driven in-process or as a real subprocess."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

from clavain import locate
from clavain.paths import StatePaths
from clavain.store.graph_db import open_graph_db
from clavain.supervisor.supervise import RunOptions, supervise
from clavain.workgraph.edits import add_nodes
from clavain.workgraph.graphs import DEFAULT_GRAPH, Graph
from clavain.workgraph.nodes import get_node, list_nodes
from clavain.workgraph.scaffold import ensure_scaffolding

REPO = Path(__file__).resolve().parents[2]
GIT_ENV = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@localhost",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@localhost"}


def git(project: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=project, capture_output=True, text=True,
                          env={**os.environ, **GIT_ENV}, check=True)
    return done.stdout


def make_project(root: Path, config: dict[str, Any] | None = None) -> StatePaths:
    """A git repository with one commit and a state folder; snapshots written at once."""
    root.mkdir(parents=True, exist_ok=True)
    git(root, "init", "-q", "-b", "main")
    (root / "README.md").write_text("project\n")
    (root / ".gitignore").write_text(".clavain/\n")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "start")
    # The backend the test runs on: CLAVAIN_DB=postgresql://… (the `backend` fixture) or SQLite.
    state = StatePaths(root / ".clavain", project=root, store_url=locate.store_url())
    state.root.mkdir()
    settings = {"defaults": {"snapshotMaxLagSeconds": 0, "retryBackoffSeconds": 0}}
    _merge(settings, config or {})
    (state.root / "config.json").write_text(json.dumps(settings))
    return state


def _merge(base: dict[str, Any], extra: dict[str, Any]) -> None:
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(base.get(key), dict):
            _merge(base[key], value)
        else:
            base[key] = value


def script(path: Path, body: str) -> Path:
    """An executable Python script (this interpreter)."""
    path.write_text(f"#!{sys.executable}\n" + textwrap.dedent(body))
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


def add(state: StatePaths, specs: list[dict[str, Any]], *, scaffold: bool = True) -> None:
    conn = open_graph_db(state)
    try:
        g = Graph(conn, DEFAULT_GRAPH, state)
        add_nodes(g, specs)
        if scaffold:
            ensure_scaffolding(g)
    finally:
        conn.close()


def nodes(state: StatePaths) -> dict[str, dict[str, Any]]:
    conn = open_graph_db(state)
    try:
        return {n["id"]: n for n in list_nodes(Graph(conn, DEFAULT_GRAPH, state))}
    finally:
        conn.close()


def node(state: StatePaths, node_id: str) -> dict[str, Any]:
    conn = open_graph_db(state)
    try:
        found = get_node(Graph(conn, DEFAULT_GRAPH, state), node_id)
        assert found is not None
        return found
    finally:
        conn.close()


def run(state: StatePaths, events: list[dict[str, Any]] | None = None,
        **options: Any) -> dict[str, Any]:
    options.setdefault("graph", DEFAULT_GRAPH)
    sink = events if events is not None else []
    return supervise(state, RunOptions(**options), sink.append)


def cli_env(state: StatePaths, **extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update(CLAVAIN_PROJECT_DIR=str(state.project), CLAVAIN_PYTHON=sys.executable, **extra)
    return env


def start_cli(state: StatePaths, *args: str, **extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen([str(REPO / "bin" / "clavain"), *args], cwd=state.project,
                            env=cli_env(state, **extra), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)


FAKE_CLAUDE = """
import json, os, sys, time
packet = sys.stdin.read()
log = os.environ.get("FAKE_CLAUDE_LOG")
if log:
    with open(log, "a") as handle:
        handle.write(json.dumps({"node": os.environ.get("CLAVAIN_NODE_ID"),
                                 "argv": sys.argv[1:], "packet_chars": len(packet)}) + "\\n")
result = os.environ.get("FAKE_CLAUDE_RESULT",
                        '{"status": "success", "summary": "done by the fake model"}')
print(json.dumps({"type": "result", "subtype": "success", "is_error": False,
                  "num_turns": 2, "session_id": "fake-session",
                  "result": "Work done.\\n<result>" + result + "</result>",
                  "total_cost_usd": float(os.environ.get("FAKE_CLAUDE_COST", "0.25")),
                  "usage": {"input_tokens": 1000, "output_tokens": 200,
                            "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0},
                  "modelUsage": {"claude-test": {"inputTokens": 1000, "outputTokens": 200,
                                                 "cacheReadInputTokens": 0,
                                                 "cacheCreationInputTokens": 0}}}))
"""

# What the real binary prints when it is not logged in (tests/fixtures/claude_output has the
# JSON shapes): an API error, no result block, exit 1.
LOGGED_OUT_CLAUDE = """
import json, sys
sys.stdin.read()
print(json.dumps({"type": "result", "subtype": "success", "is_error": True,
                  "terminal_reason": "api_error", "num_turns": 1,
                  "result": "Not logged in · Please run /login"}))
sys.exit(1)
"""
