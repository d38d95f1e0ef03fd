"""Shared fixtures: a real project folder (git repo) per test, and the CLI run in-process or as a
real subprocess through bin/clavain."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
BIN = REPO / "bin"

# Env vars that would point a test at the developer's real state or plugin session.
_LEAKY_ENV = ("CLAVAIN_STATE_DIR", "CLAVAIN_DB", "CLAVAIN_PROJECT_DIR", "CLAUDE_PROJECT_DIR",
              "CLAUDE_PLUGIN_ROOT", "CLAUDE_PLUGIN_DATA", "CLAUDE_ENV_FILE", "CLAVAIN_NODE_ID",
              "CLAVAIN_RUN_ID", "CLAVAIN_FENCE", "CLAVAIN_PARENT_NODE_ID",
              "CLAVAIN_ARTIFACTS_DIR", "CLAVAIN_BIN",
              "CLAVAIN_HOOK_TRACE", "CLAVAIN_PLUGIN_DATA", "CLAVAIN_PYTHON", "CLAVAIN_GRAPH",
              "CLAUDECODE", "CLAUDE_CODE_SESSION_ID", "CLAUDE_CODE_ENTRYPOINT")


@pytest.fixture(autouse=True)
def _isolated_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in _LEAKY_ENV:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh git repository that the CLI and library treat as the project."""
    root = tmp_path / "project"
    root.mkdir()
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    monkeypatch.setenv("CLAVAIN_PROJECT_DIR", str(root))
    monkeypatch.chdir(root)
    return root


def subprocess_env(**extra: str) -> dict[str, str]:
    """The environment for a real `bin/clavain` run: this interpreter, the current env."""
    env = dict(os.environ)
    env["CLAVAIN_PYTHON"] = sys.executable
    env.update(extra)
    return env


@pytest.fixture
def run_cli(project: Path) -> Callable[..., subprocess.CompletedProcess[str]]:
    """Run `bin/clavain ARGS` as a real subprocess in the project."""

    def run(*args: str, input: str | None = None, env: dict[str, str] | None = None,
            cwd: Path | None = None, person: bool = False) -> subprocess.CompletedProcess[str]:
        """`person`: at a terminal of its own (tests/person.py), for what only a person may
        do; otherwise as an agent's or a script's command is (no terminal)."""
        argv = [str(BIN / "clavain"), *args]
        if person:
            from tests.person import run_as_person

            return run_as_person(argv, cwd=cwd or project, env=subprocess_env(**(env or {})),
                                 input=input)
        return subprocess.run(argv, input=input, capture_output=True, text=True,
                              cwd=cwd or project, env=subprocess_env(**(env or {})), timeout=120)

    return run


@pytest.fixture
def cli_json(run_cli: Callable[..., subprocess.CompletedProcess[str]]) -> Callable[..., object]:
    """Run a command with `--json` appended, assert exit 0, return the parsed output."""

    def run(*args: str, **kwargs: object) -> object:
        result = run_cli(*args, "--json", **kwargs)
        assert result.returncode == 0, result.stderr + result.stdout
        return json.loads(result.stdout)

    return run


# ---------------------------------------------------------------- PostgreSQL backend

_cluster_state: dict[str, object] = {}


@pytest.fixture(scope="session")
def pg_cluster():
    """One throwaway PostgreSQL server for the session (tests/pgserver.py). Outside CI a machine
    without the server binaries or psycopg skips the PostgreSQL half with the reason; in CI
    (CI=true) that is a failure, so the half can never silently vanish."""
    from tests.pgserver import Cluster, missing_reason

    reason = missing_reason()
    if reason is not None:
        if os.environ.get("CI"):
            pytest.fail(f"PostgreSQL tests cannot run in CI: {reason}")
        pytest.skip(reason)
    cluster = Cluster().start()
    yield cluster
    cluster.destroy()


@pytest.fixture
def pg_url(pg_cluster) -> str:
    """A URL to an empty namespace of its own on the session's server."""
    return pg_cluster.new_schema_url()


@pytest.fixture(params=["sqlite", "postgresql"])
def backend(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str | None:
    """Both backends for a test that opens the workgraph through the library or the CLI: for
    "postgresql", CLAVAIN_DB names a fresh namespace on the session's server (every process the
    test starts inherits it). Returns that URL, or None for SQLite."""
    if request.param == "sqlite":
        return None
    url = request.getfixturevalue("pg_url")
    monkeypatch.setenv("CLAVAIN_DB", url)
    return url


def open_project_graph(project: Path):
    """`project`'s workgraph connection on the backend the test runs on (`backend`)."""
    from clavain import locate
    from clavain.paths import StatePaths
    from clavain.store.graph_db import open_graph_db

    return open_graph_db(StatePaths(project / ".clavain", store_url=locate.store_url()))
