"""SessionStart, SubagentStop and UserPromptSubmit import none of the heavy standard library
modules they do not need (issue 37: a hook costs at most 3x a bare interpreter start). Each runs
as bin/clavain-hook runs it (`-I -S`), on its main path, and what it left in `sys.modules` is
checked."""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import REPO, clavain_project, start_sprint

# What each of these hooks once imported and does not need: `dataclasses` drags in `inspect`
# (ast, dis, tokenize, linecache), `tempfile` drags in `shutil` (bz2, lzma) and `random`,
# `typing` drags in `contextlib`, `copy` drags in `weakref`. SubagentStop writes JSON (`json`
# pretty-prints it); the other two read theirs with `clavain.fastjson`.
FORBIDDEN = {"dataclasses", "inspect", "ast", "dis", "tokenize", "linecache", "tempfile",
             "shutil", "bz2", "lzma", "random", "typing", "contextlib", "datetime", "hashlib",
             "copy", "weakref"}

# The hook as bin/clavain-hook starts it, then the names of every module it imported.
RUN_HOOK = ("import sys; sys.path.insert(0, sys.argv.pop(1))\n"
            "from clavain.hooks import main; main()\n"
            "sys.stderr.write('\\n'.join(['MODULES', *sorted(sys.modules)]))")

REVIEW = ("Lens: quality\n\nNothing to fix.\n\n**TYPE:** verdict\n**STATUS:** CLEAN\n"
          "**FINDINGS_COUNT:** 0\n**SUMMARY:** the change is small and tested\n")


def _agent_transcript(path: Path) -> None:
    """A reviewer's transcript as the host writes it: its prompt, then responses with usage."""
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [{"type": "user", "isSidechain": True, "sessionId": "s1",
              "message": {"role": "user", "content": "Lens: quality\nReview the change."}}]
    for turn in range(3):
        lines.append({"type": "assistant", "isSidechain": True, "requestId": f"req_{turn}",
                      "message": {"id": f"msg_{turn}", "model": "claude-sonnet-4-5",
                                  "role": "assistant",
                                  "content": [{"type": "text", "text": REVIEW}],
                                  "usage": {"input_tokens": 100, "output_tokens": 20}}})
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")


def _run(event: str, payload: dict, project: Path, home: Path) -> tuple[str, set[str]]:
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home),
           "CLAUDE_PROJECT_DIR": str(project), "CLAUDE_CONFIG_DIR": str(home / ".claude"),
           "CLAUDE_ENV_FILE": str(home / "env-file.sh"), "CLAVAIN_BOOTSTRAP": "0"}
    result = subprocess.run([sys.executable, "-I", "-S", "-c", RUN_HOOK, str(REPO / "lib"),
                             event], input=json.dumps(payload), capture_output=True, text=True,
                            env=env, cwd=project, timeout=60)
    assert result.returncode == 0, result.stderr[-2000:]
    modules = result.stderr.partition("MODULES\n")[2]
    assert modules, result.stderr[-2000:]
    hooks_log = project / ".clavain" / "logs" / "hooks.log"
    assert not hooks_log.exists(), hooks_log.read_text()  # the main path, without a failure
    return result.stdout, set(modules.splitlines())


@pytest.fixture
def setting(tmp_path: Path) -> dict:
    """An initialised project, a session transcript and a reviewer at work in it."""
    from clavain.paths import StatePaths
    from clavain.project import init_state

    project = clavain_project(tmp_path)
    init_state(StatePaths.discover(project))
    home = tmp_path / "home"
    transcript = home / ".claude" / "projects" / "p" / "s1.jsonl"
    transcript.parent.mkdir(parents=True)
    transcript.write_text("", encoding="utf-8")
    agent = transcript.parent / "s1" / "subagents" / "agent-a1b2c3.jsonl"
    _agent_transcript(agent)
    base = {"session_id": "s1", "transcript_path": str(transcript), "cwd": str(project)}
    return {"project": project, "home": home, "agent": agent, "base": base}


def _offenders(modules: set[str], *also: str) -> list[str]:
    return sorted(modules & (FORBIDDEN | set(also)))


@functools.cache
def _pathlib_brings() -> frozenset[str]:
    """What pathlib, imported as the hooks import it (`lean_import`), imports on this
    interpreter: nothing heavy on 3.10 and 3.11; from 3.12 pathlib itself uses `functools` and
    `fnmatch` (hence `re`) as it is imported. The hooks are held to add nothing to it."""
    code = ("import sys; sys.path.insert(0, sys.argv[1]); before = set(sys.modules)\n"
            "from clavain import lean_import; lean_import.import_pathlib()\n"
            "print(' '.join(sorted(set(sys.modules) - before)))")
    done = subprocess.run([sys.executable, "-I", "-S", "-c", code, str(REPO / "lib")],
                          capture_output=True, text=True, timeout=60, check=True)
    return frozenset(done.stdout.split())


def _hook_offenders(modules: set[str], *also: str) -> list[str]:
    """Heavy modules the hook imported beyond what its pathlib brings."""
    return [name for name in _offenders(modules, *also) if name not in _pathlib_brings()]


def test_session_start_imports_no_heavy_module(setting: dict) -> None:
    payload = {**setting["base"], "hook_event_name": "SessionStart", "source": "startup"}
    out, modules = _run("SessionStart", payload, setting["project"], setting["home"])
    assert "Agents at work" in out and "clavain.session.inflight" in modules
    assert "clavain.session.companions" in modules  # the env file was written
    # pathlib, without the `re` it drags in (`lean_import`); `collections` neither.
    assert "pathlib" in modules
    assert not _hook_offenders(modules, "json", "re", "enum", "fnmatch", "urllib.parse",
                               "ipaddress", "collections", "functools", "_hashlib")


def test_subagent_stop_imports_no_heavy_module(setting: dict) -> None:
    payload = {**setting["base"], "hook_event_name": "SubagentStop", "agent_id": "a1b2c3",
               "agent_type": "clavain:reviewer", "agent_transcript_path": str(setting["agent"]),
               "stop_hook_active": False, "last_assistant_message": REVIEW}
    _, modules = _run("SubagentStop", payload, setting["project"], setting["home"])
    verdict = setting["project"] / ".clavain" / "verdicts" / \
        "clavain-reviewer-quality--a1b2c3.json"
    recorded = json.loads(verdict.read_text())
    assert recorded["tokens_source"] == "measured" and recorded["tokens_spent"] == 360
    # It reads the answer, the lens and the model without `re`, writes the verdict with
    # `fastjson`, not `json`, and measures without `datetime`; its pathlib globs nothing.
    assert "pathlib" in modules
    assert not _hook_offenders(modules, "json", "re", "enum", "fnmatch", "urllib.parse",
                               "ipaddress", "collections", "functools", "datetime", "_hashlib")
    # The run's context without command descriptions (no test patterns to compile) and
    # without the PreToolUse gate.
    assert "clavain.guards.counting" in modules
    assert "clavain.guards.gate" not in modules and "clavain.guards.commands" not in modules


def test_user_prompt_submit_imports_no_heavy_module(setting: dict) -> None:
    from clavain.paths import StatePaths
    from clavain.sprint import typed_request

    payload = {**setting["base"], "hook_event_name": "UserPromptSubmit",
               "prompt": "/clavain:sprint add a flag", "prompt_id": "p1"}
    _, modules = _run("UserPromptSubmit", payload, setting["project"], setting["home"])
    state = StatePaths.discover(setting["project"])
    assert typed_request.take(state, "s1") == "add a flag"
    # It writes its record with `os.path` alone: no `pathlib`, nor the `re` that drags in.
    assert not _offenders(modules, "json", "pathlib", "re", "enum", "fnmatch", "urllib.parse")


def test_stop_after_a_plain_turn_imports_no_pathlib(setting: dict) -> None:
    """Stop runs after every turn: without a loop or a sprint it decides on `os.path` alone
    (the dispatcher does not hand it pathlib); with a sprint's handoff to ask for, it still
    asks."""
    from clavain.paths import StatePaths
    from clavain.session.handoff import mark_worked

    payload = {**setting["base"], "hook_event_name": "Stop", "stop_hook_active": False}
    _, modules = _run("Stop", payload, setting["project"], setting["home"])
    assert not _offenders(modules, "pathlib", "re", "json")
    sprint = start_sprint(setting["project"])
    mark_worked(StatePaths.discover(setting["project"]), sprint["sprint_id"], "s1")
    (setting["project"] / "work.txt").write_text("uncommitted\n", encoding="utf-8")
    out, modules = _run("Stop", payload, setting["project"], setting["home"])
    assert json.loads(out)["decision"] == "block" and "pathlib" in modules


def test_the_check_sees_a_heavy_import(tmp_path: Path) -> None:
    """The checks above can fail: a module imported before the hook runs shows up in the same
    list."""
    result = subprocess.run([sys.executable, "-I", "-S", "-c", "import dataclasses\n" + RUN_HOOK,
                             str(REPO / "lib"), "SessionStart"], input="{}", capture_output=True,
                            text=True, cwd=tmp_path, timeout=60,
                            env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"),
                                 "HOME": str(tmp_path), "CLAUDE_PROJECT_DIR": str(tmp_path),
                                 "CLAVAIN_BOOTSTRAP": "0"})
    modules = set(result.stderr.partition("MODULES\n")[2].splitlines())
    assert {"dataclasses", "inspect"} <= set(_offenders(modules))


# What replaced a standard module on these paths does what the module did.

def test_the_path_lookup_agrees_with_shutil_which(tmp_path: Path, monkeypatch) -> None:
    import shutil

    from clavain.session.companions import _on_path

    tool, plain, folder = tmp_path / "x" / "bd", tmp_path / "y" / "bd", tmp_path / "z" / "bd"
    for path in (tool, plain):
        path.parent.mkdir()
        path.write_text("#!/bin/sh\n")
    tool.chmod(0o755)
    folder.mkdir(parents=True)
    monkeypatch.chdir(tool.parent)
    for path in (str(tool.parent), str(plain.parent), str(folder.parent), "", ":", "/nowhere",
                 f"{plain.parent}:{folder.parent}:{tool.parent}", None):
        assert _on_path("bd", path) is (shutil.which("bd", path=path) is not None), path


def test_the_temporary_file_is_new_private_and_named_as_before(tmp_path: Path) -> None:
    import stat

    from clavain.fsutil import _temp_file

    fd, name = _temp_file(str(tmp_path), ".state.json.", ".tmp")
    os.close(fd)
    assert Path(name).parent == tmp_path and Path(name).name.startswith(".state.json.")
    assert name.endswith(".tmp") and stat.S_IMODE(os.stat(name).st_mode) == 0o600
    other_fd, other = _temp_file(str(tmp_path), ".state.json.", ".tmp")
    os.close(other_fd)
    assert other != name


def test_the_config_copy_is_deep() -> None:
    import copy

    from clavain import config

    copied = config._copied(config.DEFAULTS)
    assert copied == copy.deepcopy(config.DEFAULTS)
    copied["loop"]["breaker"]["noProgress"] = -1
    copied["checks"].append("x")
    assert config.DEFAULTS["loop"]["breaker"]["noProgress"] == 3 and config.DEFAULTS["checks"] == []
