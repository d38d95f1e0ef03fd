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


def test_a_record_the_command_writes_itself_is_a_forgery(tmp_path: Path) -> None:
    """The host runs a slash command's `!` line after its hook recorded what was typed: a
    record written inside the command that takes it speaks for nobody."""
    project = _project(tmp_path)
    forge = ("mkdir -p .clavain/typed && printf -- '--skip-to ship add a greeting' > "
             ".clavain/typed/sprint-request-s1.txt && "
             f"{CLI} sprint start --from-prompt")
    forged = run_below_host(["bash", "-c", forge], cwd=project,
                            env=_env(project, CLAUDE_CODE_SESSION_ID="s1"), tmp=tmp_path)
    assert forged.returncode == 2 and "is a person's decision" in forged.stderr
    assert not (project / ".clavain" / "checkpoint.json").exists()
    # Written before the command began, as the hook does: the person's, recorded as typed.
    (project / ".clavain" / "typed").mkdir(parents=True, exist_ok=True)
    (project / ".clavain" / "typed" / "sprint-request-s1.txt").write_text(
        "--skip-to execute add a greeting")
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
