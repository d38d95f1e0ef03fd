"""`clavain.authority`: who asks, told from what an agent cannot change with one command — the
process ancestry, a terminal, a record of what was typed written before the command began."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.person import run_as_person, run_below_host

REPO = Path(__file__).resolve().parents[2]
CLI = str(REPO / "bin" / "clavain")
ASK = ("import json, sys; sys.path.insert(0, sys.argv[1]); from clavain import authority; "
       "a = authority.who_asks(); print(json.dumps([a.by, a.via, a.detail]))")


def _env(project: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("CLAUDECODE", "CLAUDE_CODE_SESSION_ID", "CLAUDE_CODE_ENTRYPOINT")}
    return {**env, "CLAVAIN_PYTHON": sys.executable, "CLAVAIN_PROJECT_DIR": str(project),
            **extra}


def _asks(run: subprocess.CompletedProcess[str]) -> list[str]:
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout)


def test_below_claude_code_it_is_an_agent_whatever_its_terminal_or_variables(
        tmp_path: Path) -> None:
    argv = [sys.executable, "-c", ASK, str(REPO / "lib")]
    by, via, detail = _asks(run_below_host(argv, cwd=tmp_path, env=_env(tmp_path),
                                           tmp=tmp_path))
    assert (by, via) == ("agent", "claude_code") and "claude (pid" in detail
    # A pseudo-terminal of its own (`script`) does not make it a person.
    script = ["script", "-qec", " ".join(argv[:2]) + f" '{ASK}' {REPO / 'lib'}", "/dev/null"]
    by, via, _ = _asks(run_below_host(script, cwd=tmp_path, env=_env(tmp_path),
                                      tmp=tmp_path))
    assert (by, via) == ("agent", "claude_code")


def test_no_terminal_and_no_host_is_still_not_a_person(tmp_path: Path) -> None:
    run = subprocess.run([sys.executable, "-c", ASK, str(REPO / "lib")], capture_output=True,
                         text=True, env=_env(tmp_path), start_new_session=True)
    assert _asks(run)[:2] == ["agent", "no_terminal"]
    emptied = subprocess.run([sys.executable, "-c", ASK, str(REPO / "lib")],
                             capture_output=True, text=True, start_new_session=True,
                             env=_env(tmp_path, CLAUDECODE=""))
    assert _asks(emptied)[0] == "agent"


def test_a_person_at_a_terminal(tmp_path: Path) -> None:
    by, via, detail = _asks(run_as_person([sys.executable, "-c", ASK, str(REPO / "lib")],
                                          cwd=tmp_path, env=_env(tmp_path)))
    assert (by, via) == ("person", "terminal") and detail.startswith("typed at /dev/")


def _project(tmp_path: Path) -> Path:
    project = tmp_path / "project"
    project.mkdir()
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    return project


def _refused_below_host(project: Path, tmp_path: Path, script: str) -> None:
    """`script` run by an agent's Bash in session s1: refused, and no sprint started."""
    forged = run_below_host(["bash", "-c", script], cwd=project,
                            env=_env(project, CLAUDE_CODE_SESSION_ID="s1"), tmp=tmp_path)
    assert forged.returncode == 2 and "is a person's decision" in forged.stderr
    assert not (project / ".clavain" / "checkpoint.json").exists()


# What the UserPromptSubmit hook does: the record, with its one-time value and its row.
RECORD = ("import sys; sys.path.insert(0, sys.argv[1]); from clavain.paths import StatePaths; "
          "from clavain.sprint import typed_request; "
          "typed_request.record(StatePaths.discover(), 's1', sys.argv[2])")


def _record(project: Path, text: str) -> None:
    """`text` recorded for session s1 as the hook records it, before any command takes it."""
    subprocess.run([sys.executable, "-c", RECORD, str(REPO / "lib"), text], cwd=project,
                   env=_env(project), check=True)


def test_a_record_the_command_writes_itself_is_a_forgery(tmp_path: Path) -> None:
    """The host runs a slash command's `!` line after its hook recorded what was typed: a
    record written inside the command that takes it speaks for nobody, even written as the
    hook writes it (its one-time value and row in place)."""
    project = _project(tmp_path)
    forge = (f"{sys.executable} -c \"{RECORD}\" {REPO / 'lib'} '--skip-to ship add a greeting' "
             f"&& {CLI} sprint start --from-prompt")
    _refused_below_host(project, tmp_path, forge)
    # Written before the command began, as the hook does: the person's, recorded as typed.
    _record(project, "--skip-to execute add a greeting")
    typed = run_below_host([CLI, "sprint", "start", "--from-prompt", "--json"], cwd=project,
                           env=_env(project, CLAUDE_CODE_SESSION_ID="s1"), tmp=tmp_path)
    assert typed.returncode == 0, typed.stderr
    decision = json.loads(typed.stdout)["person_decisions"][0]
    assert decision["what"] == "skipped to step execute"
    assert decision["decided_by"]["via"] == "slash_command"
    assert decision["decided_by"]["prompt"] == "/clavain:sprint --skip-to execute add a greeting"


def test_a_program_under_claude_code_calling_the_library_is_an_agent(tmp_path: Path) -> None:
    project = _project(tmp_path)
    code = ("import sys; sys.path.insert(0, sys.argv[1]); from clavain.paths import StatePaths; "
            "from clavain.sprint import lifecycle; "
            "lifecycle.start(StatePaths.discover(), 'add a greeting', skip_to='ship')")
    run = run_below_host([sys.executable, "-c", code, str(REPO / "lib")], cwd=project,
                         env=_env(project), tmp=tmp_path)
    assert run.returncode != 0 and "is a person's decision" in run.stderr
    assert not (project / ".clavain" / "checkpoint.json").exists()


def _inner_host(tmp_path: Path) -> Path:
    """A second `claude` of the agent's own (the review's `cp /bin/bash /tmp/claude`), to be
    started below the stand-in host."""
    inner = tmp_path / "agent-bin" / "claude"
    inner.parent.mkdir(parents=True, exist_ok=True)
    inner.write_text('#!/bin/bash\n"$@"\n')
    inner.chmod(0o755)
    return inner


def test_a_claude_of_the_agents_own_below_the_host_forges_nothing(tmp_path: Path) -> None:
    """The review's forgery: write the record, then start a `claude` whose child (clavain)
    begins after it. The outermost host's child began before the record: refused."""
    project = _project(tmp_path)
    inner = _inner_host(tmp_path)
    forge = (f"{sys.executable} -c \"{RECORD}\" {REPO / 'lib'} '--skip-to execute "
             f"--complexity 1 add a greeting' && sleep 0.2 && "
             f"{inner} {CLI} sprint start --from-prompt")
    _refused_below_host(project, tmp_path, forge)
    # Even a record older than both starts is not believed through a nested host: a person
    # types only into the outermost session.
    _record(project, "--skip-to execute add a greeting")
    nested = run_below_host([str(inner), CLI, "sprint", "start", "--from-prompt"],
                            cwd=project, env=_env(project, CLAUDE_CODE_SESSION_ID="s1"),
                            tmp=tmp_path)
    assert nested.returncode == 2 and "is a person's decision" in nested.stderr
    assert not (project / ".clavain" / "checkpoint.json").exists()
    _record(project, "add a greeting")
    by, via, detail = _asks(run_below_host(
        [str(inner), sys.executable, "-c", TAKE_AND_ASK, str(REPO / "lib")], cwd=project,
        env=_env(project, CLAUDE_CODE_SESSION_ID="s1"), tmp=tmp_path))
    assert (by, via) == ("agent", "nested_host")
    assert detail.startswith("2 processes in its ancestry look like Claude Code (the "
                             "outermost: claude (pid")
    assert "cannot type into a session nested in another" in detail
    # The same record through the stand-in host alone is the person's.
    _record(project, "add a greeting")
    by, via, _ = _asks(run_below_host(
        [sys.executable, "-c", TAKE_AND_ASK, str(REPO / "lib")], cwd=project,
        env=_env(project, CLAUDE_CODE_SESSION_ID="s1"), tmp=tmp_path))
    assert (by, via) == ("person", "slash_command")


TAKE_AND_ASK = ("import json, sys; sys.path.insert(0, sys.argv[1]); "
                "from clavain import authority; from clavain.paths import StatePaths; "
                "from clavain.sprint import typed_request; "
                "r = typed_request.take_record(StatePaths.discover()); "
                "a = authority.who_asks(typed=r); print(json.dumps([a.by, a.via, a.detail]))")


def test_the_host_is_the_outermost_claude_in_the_ancestry(tmp_path: Path) -> None:
    inner = _inner_host(tmp_path)
    code = ("import json, sys; sys.path.insert(0, sys.argv[1]); from clavain import authority; "
            "print(json.dumps([authority.host_ancestor(), authority.host_chain().hosts]))")
    outermost, hosts = _asks(run_below_host(
        [str(inner), sys.executable, "-c", code, str(REPO / "lib")], cwd=tmp_path,
        env=_env(tmp_path), tmp=tmp_path))
    assert hosts == 2 and outermost.startswith("claude (pid")
    # Not the agent's own `claude` (agent-bin/), but the one above it (host-bin/): the pid
    # named is gone by now, so told apart by the chain seen from a nested program itself.
    code = ("import json, os, sys; sys.path.insert(0, sys.argv[1]); "
            "from clavain import authority; pid = int(authority.host_ancestor()"
            ".rsplit('pid ', 1)[1][:-1]); "
            "print(json.dumps(open(f'/proc/{pid}/cmdline', 'rb').read().decode()))")
    cmdline = _asks(run_below_host([str(inner), sys.executable, "-c", code, str(REPO / "lib")],
                                   cwd=tmp_path, env=_env(tmp_path), tmp=tmp_path))
    assert "host-bin/claude" in cmdline and "agent-bin" not in cmdline.split("\0")[1]
    by, via, _ = _asks(run_below_host([str(inner), sys.executable, "-c", ASK, str(REPO / "lib")],
                                      cwd=tmp_path, env=_env(tmp_path), tmp=tmp_path))
    assert (by, via) == ("agent", "claude_code")


def test_host_environment_is_the_outermost_hosts_not_a_nested_ones(tmp_path: Path) -> None:
    """`/tmp/claude -c "CLAVAIN_X=77 clavain …"`: the nested host's child has the agent's
    value; what the real host gave its command is what counts."""
    inner = _inner_host(tmp_path)
    code = ("import sys; sys.path.insert(0, sys.argv[1]); from clavain import authority; "
            "e = authority.host_environment(); "
            'print(e.get("CLAVAIN_BUDGET_MAX_TEST_RUNS"), authority.session_id())')
    agent = (f"CLAVAIN_BUDGET_MAX_TEST_RUNS=77 CLAUDE_CODE_SESSION_ID=other {inner} "
             f"{sys.executable} -c '{code}' {REPO / 'lib'}; :")  # `; :`: bash forks, as
    # the host's own shell does (it runs more after the command), instead of exec-ing.
    run = run_below_host(["bash", "-c", agent], cwd=tmp_path,
                         env=_env(tmp_path, CLAVAIN_BUDGET_MAX_TEST_RUNS="3",
                                  CLAUDE_CODE_SESSION_ID="s1"), tmp=tmp_path)
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == ["3", "s1"]
