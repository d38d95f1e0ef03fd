"""Hard mode in the real Claude Code (bubblewrap on Linux): after the person turns it on
(`clavain init --sandbox`; a plain `init` does too), the agent's Bash cannot write `.clavain/`
by any means its sandbox holds (a script, `dangerouslyDisableSandbox`, a verify command
Clavain runs for it, renaming the folder), nor Clavain's code or the user's settings (the file
tools refuse them too), while the slash command's `!` line and the agent's own plain
`clavain …` commands still record the sprint. The same script run with hard mode off
(`init --no-sandbox`) writes there: what only the sandbox stops."""

from __future__ import annotations

import json
import sys
from typing import Any

import pytest

from clavain import sandbox
from tests.e2e.conftest import REPO, ClaudeRunner, require_sandbox
from tests.e2e.scripted_model import assistant_turns, bash, text, tool_use
from tests.person import run_as_person

pytestmark = pytest.mark.e2e

CLI = str(REPO / "bin" / "clavain")
FORGE = ("import pathlib\n"
         "pathlib.Path('.clavain/forged.txt').write_text('the agent wrote this')\n"
         "print('forged')\n")
PLAN = """# Plan: a greeting

```json
{"nodes": [{"id": "task-greet", "type": "task", "title": "greet() says hello",
            "verify": ["echo forged-by-verify > .clavain/forged-by-verify.txt && test -e .git"],
            "ownership": ["greet.txt"]}]}
```
"""
RESULT = '<result>{"status": "success", "summary": "greet.txt written", "errors": []}</result>\n'
HINT = "ran inside Claude Code's sandbox"


def _person(runner: ClaudeRunner, *args: str) -> str:
    done = run_as_person([CLI, *args], cwd=runner.project,
                         env=runner.env({"CLAVAIN_PYTHON": sys.executable}), timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def _calls(*blocks: dict[str, Any]):
    def script(request: dict[str, Any]) -> list[dict[str, Any]]:
        turn = assistant_turns(request)
        return [blocks[turn]] if turn < len(blocks) else [text("done")]
    return script


def test_hard_mode_keeps_clavain_state_out_of_the_agents_bash(
        claude_runner: ClaudeRunner) -> None:
    require_sandbox()
    project, state = claude_runner.project, claude_runner.project / ".clavain"
    env = {"CLAVAIN_PYTHON": sys.executable}
    off = _person(claude_runner, "init", "--no-sandbox")
    assert "best effort against shortcuts" in off, off

    # Before hard mode: the hook cannot see into a script, so the write lands; and the agent
    # cannot turn hard mode on (or off) for the person.
    write_forge = tool_use("Write", {"file_path": str(project / "forge.py"), "content": FORGE})
    forge, enable = bash("python3 forge.py"), bash("clavain init --sandbox")
    before = claude_runner.run("write the state yourself", _calls(write_forge, forge, enable),
                               allowed_tools=("Bash", "Write"), env=env).check()
    assert "forged" in before.tool_result(forge["id"])
    assert (state / "forged.txt").exists()
    assert "a person's decision, not an agent's" in before.tool_result(enable["id"])
    assert not sandbox.settings_file(project).exists()
    (state / "forged.txt").unlink()

    out = _person(claude_runner, "init", "--sandbox")
    assert "hard mode on" in out, out

    probe = bash("echo sandbox=${SANDBOX_RUNTIME:-off}")
    # Spelled so the hook cannot read it: only the sandbox stops it.
    rename = bash("d=$(printf '.cla%sain' v); mv \"$d\" .zz")
    probe_file = REPO / "lib" / "clavain" / f".e2e-probe-{project.parent.name}"
    patch_plugin = bash('p=$(dirname "$(dirname "$(command -v clavain)")"); '
                        f"echo '# patched' > \"$p/lib/clavain/{probe_file.name}\"")
    user_settings = tool_use("Write", {"file_path": str(claude_runner.home / ".claude"
                                                        / "settings.json"),
                                       "content": '{"disableAllHooks": true}'})
    status = bash("clavain status")
    forge_again = bash("python3 forge.py")
    unsandboxed = tool_use("Bash", {"command": "python3 forge.py", "description": "forge",
                                    "dangerouslyDisableSandbox": True})
    write_plan = tool_use("Write", {"file_path": str(project / "plan.md"), "content": PLAN})
    plan = bash("clavain sprint done plan --plan plan.md")
    chained = bash("mkdir -p notes && clavain sprint done execute")
    claim = bash("clavain graph claim task-greet --run-id r1")
    write_result = tool_use("Write", {"file_path": str(project / "result.txt"),
                                      "content": RESULT})
    apply = bash("clavain graph apply task-greet --run-id r1 --result result.txt")
    verify = bash("clavain verify verify-task-greet --run-id r1")
    run = claude_runner.run("/clavain:sprint add a greeting to the README",
                            _calls(probe, rename, patch_plugin, user_settings, status,
                                   forge_again, unsandboxed, write_plan, plan, chained, claim,
                                   write_result, apply, verify),
                            allowed_tools=("Bash", "Write", "Read"), env=env,
                            timeout=300).check()

    assert "sandbox=1" in run.tool_result(probe["id"])
    plugin_written = probe_file.exists()
    probe_file.unlink(missing_ok=True)  # never leave anything in the checkout
    assert "Device or resource busy" in run.tool_result(rename["id"])
    assert state.is_dir() and not (project / ".zz").exists()
    assert "Read-only file system" in run.tool_result(patch_plugin["id"])
    assert not plugin_written
    assert "denied by your permission settings" in run.tool_result(user_settings["id"])
    assert not (claude_runner.home / ".claude" / "settings.json").exists()
    # The slash command's `!` line started the sprint; the agent's plain commands run free.
    assert "add a greeting to the README" in run.tool_result(status["id"])
    assert "plan done" in run.tool_result(plan["id"])
    assert "claimed task-greet" in run.tool_result(claim["id"])
    assert "in_progress -> done" in run.tool_result(apply["id"])
    # Everything else the agent's Bash tried stayed in the sandbox.
    for call in (forge_again, unsandboxed):
        assert "Read-only file system" in run.tool_result(call["id"])
    assert not (state / "forged.txt").exists()
    chained_result = run.tool_result(chained["id"])
    assert HINT in chained_result and "as a Bash command of its own" in chained_result
    verified = run.tool_result(verify["id"])
    assert "Read-only file system" in verified, verified
    assert not (state / "forged-by-verify.txt").exists()
    checkpoint = json.loads((state / "checkpoint.json").read_text())
    assert checkpoint["current_step"] == "execute"  # the chained `sprint done execute` did not
    assert checkpoint["description"] == "add a greeting to the README"
