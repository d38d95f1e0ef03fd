"""The foundation, end to end: the real `claude` binary loads the plugin and its pieces reach
the model, the Bash tool and a brand-new user's HOME."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from clavain import __version__
from tests.e2e.conftest import REPO, ClaudeRunner
from tests.e2e.scripted_model import (
    assistant_turns,
    bash,
    system_messages,
    text,
    tool_results,
    user_texts,
)

pytestmark = pytest.mark.e2e


def _one_bash_call(command: str, final: str = "done"):
    """A script: the first turn runs `command` with Bash, the next one ends with `final`."""
    calls: list[dict[str, Any]] = []

    def script(request: dict[str, Any]):
        if assistant_turns(request) == 0:
            call = bash(command)
            calls.append(call)
            return [call]
        return [text(final)]

    script.calls = calls  # type: ignore[attr-defined]
    return script


def _start_sprint(runner: ClaudeRunner) -> None:
    import os
    import subprocess
    import sys

    subprocess.run([str(REPO / "bin" / "clavain"), "sprint", "start", "--complexity", "2",
                    "rename foo to bar"], check=True, capture_output=True,
                   env={**os.environ, "CLAVAIN_PROJECT_DIR": str(runner.project),
                        "CLAVAIN_PYTHON": sys.executable})


def test_session_start_context_reaches_the_first_request(claude_runner: ClaudeRunner) -> None:
    _start_sprint(claude_runner)
    run = claude_runner.run("say hello", lambda request: [text("hello")]).check()
    assert run.result_text == "hello"
    first = run.requests[0]
    assert "say hello" in user_texts(first)
    contexts = [m for m in system_messages(first) if "Clavain sprint" in m]
    assert contexts, f"SessionStart context missing from {system_messages(first)!r}"
    assert contexts[0].startswith("SessionStart hook additional context:")
    # Measured downstream: the run reports the tokens the scripted model said it used.
    assert run.output["usage"]["input_tokens"] > 0
    assert run.output["usage"]["output_tokens"] > 0


def test_bash_tool_finds_clavain_on_path_through_plugin_bin(
        claude_runner: ClaudeRunner) -> None:
    script = _one_bash_call("command -v clavain && clavain --version")
    run = claude_runner.run("what version is clavain?", script).check()
    output = run.tool_result(script.calls[0]["id"])
    lines = output.splitlines()
    assert lines[0] == str(REPO / "bin" / "clavain"), output
    assert f"clavain {__version__}" in lines, output


def test_plugin_slash_command_expands_with_arguments(claude_runner: ClaudeRunner) -> None:
    seen: list[str] = []
    calls: list[dict[str, Any]] = []

    def script(request: dict[str, Any]):
        if assistant_turns(request) == 0:
            prompt = "\n".join(user_texts(request))
            seen.append(prompt)
            # Do what the expanded command says: run the command it names.
            start = prompt.index("Run `") + len("Run `")
            call = bash(prompt[start:prompt.index("`", start)])
            calls.append(call)
            return [call]
        return [text("all rows ok")]

    run = claude_runner.run("/clavain:doctor --json", script).check()
    assert seen, "the script never saw the first turn"
    assert "Run `clavain doctor --json` with the Bash tool" in seen[0]
    assert "$ARGUMENTS" not in seen[0]
    assert calls[0]["input"]["command"] == "clavain doctor --json"
    report = json.loads(run.tool_result(calls[0]["id"]))
    assert report["version"] == __version__
    assert {row["check"] for row in report["checks"]} >= {"python", "venv", "dependencies"}


def _clean_checkout(target: Path) -> Path:
    """What a user gets from git: the tracked and new (not ignored) files, no .venv or caches."""
    import shutil
    import subprocess

    listed = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=REPO,
                            capture_output=True, check=True).stdout.decode().split("\0")
    for name in filter(None, listed):
        source = REPO / name
        if source.is_file():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / name)
    return target


@pytest.mark.slow
def test_fresh_home_installs_plugin_bootstraps_venv_and_runs_doctor(
        claude_runner: ClaudeRunner, tmp_path: Path) -> None:
    """A new user with only python3 and claude: add the marketplace, install, start a session.

    The first session's SessionStart builds the venv (from PyPI) and exports CLAVAIN_PYTHON to
    later Bash calls; `clavain doctor --json` in Bash then runs from the venv. A second session
    in the same HOME runs SessionStart itself from the venv interpreter.
    """
    source = _clean_checkout(tmp_path / "clavain")
    added = claude_runner.cli("plugin", "marketplace", "add", str(source))
    assert added.returncode == 0, added.stdout + added.stderr
    installed = claude_runner.cli("plugin", "install", "clavain@clavain")
    assert installed.returncode == 0, installed.stdout + installed.stderr
    listed = claude_runner.cli("plugin", "list")
    assert "clavain@clavain" in listed.stdout, listed.stdout + listed.stderr

    data_dir = claude_runner.home / ".claude" / "plugins" / "data" / "clavain-clavain"
    venv_python = data_dir / "venv" / "bin" / "python"
    trace = tmp_path / "hook-trace.jsonl"
    env = {"CLAVAIN_PYTHON": None, "CLAVAIN_BOOTSTRAP_WAIT": "240",
           "CLAVAIN_HOOK_TRACE": str(trace)}

    script = _one_bash_call("clavain doctor --json")
    first = claude_runner.run("check my clavain install", script, plugin_dir=None, env=env,
                              timeout=300).check()

    marker = data_dir / "venv" / ".clavain-ready"
    assert marker.is_file(), sorted(p.name for p in data_dir.iterdir())
    assert marker.read_text(encoding="utf-8").startswith(f"{__version__}+py")
    assert not (data_dir / "bootstrap.failed").exists()

    report = json.loads(first.tool_result(script.calls[0]["id"]))
    checks = {row["check"]: row for row in report["checks"]}
    assert report["healthy"] is True, report
    assert checks["dependencies"]["status"] == "ok", checks["dependencies"]
    assert set(checks["dependencies"]["versions"]) == {"pydantic", "jsonschema", "filelock"}
    assert checks["python"]["executable"] == str(venv_python), checks["python"]
    # A directory marketplace's plugin runs in place (2.1.330); a copy also lands in the cache.
    plugin_cache = claude_runner.home / ".claude" / "plugins" / "cache"
    assert checks["plugin_root"]["path"] == str(source) or \
        checks["plugin_root"]["path"].startswith(str(plugin_cache)), checks["plugin_root"]

    runs = [json.loads(line) for line in trace.read_text(encoding="utf-8").splitlines()]
    assert [r["event"] for r in runs].count("SessionStart") == 1, runs

    _start_sprint(claude_runner)  # something for SessionStart to say
    second = claude_runner.run("hello again", lambda request: [text("hi")], plugin_dir=None,
                               env=env, timeout=180).check()
    assert any("Clavain sprint" in m for m in system_messages(second.requests[0]))
    runs = [json.loads(line) for line in trace.read_text(encoding="utf-8").splitlines()]
    session_starts = [r for r in runs if r["event"] == "SessionStart"]
    assert len(session_starts) == 2, runs
    assert session_starts[-1]["python"] == str(venv_python), runs
    assert not tool_results(second.requests[-1])
