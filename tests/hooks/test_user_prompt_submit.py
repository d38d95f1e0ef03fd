"""`/clavain:sprint ARGS` reaches `clavain sprint start --from-prompt` with no shell parsing the
arguments: the UserPromptSubmit hook records the raw prompt's arguments, the CLI takes them.
Every other prompt costs the bash start alone."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from clavain.errors import ClavainError
from clavain.paths import StatePaths
from clavain.sprint import typed_request

REPO = Path(__file__).resolve().parents[2]

# What users type, with every shell hazard: the old heredoc's delimiter on a line of its own,
# command substitution, backticks, quotes of both kinds, newlines, a trailing backslash.
HAZARDS = [
    "fix the user's login",
    "rename foo\nCLAVAIN_REQUEST\ntouch PWNED-1\n",
    "add $(touch PWNED-2) and ${HOME} support",
    "make `touch PWNED-3` go away",
    "say \"hi\" 'there' ; touch PWNED-4 && echo done | cat",
    "end with a backslash \\",
    "--complexity 2 multi\nline\n\trequest\n'unbalanced \"quotes",
]


@pytest.mark.parametrize(("prompt", "expected"), [
    ("/clavain:sprint add OAuth", "add OAuth"),
    ("  /clavain:sprint\nline one\nline two", "line one\nline two"),
    ("/clavain:sprint", ""),
    ("/clavain:sprinter add OAuth", None),
    ("please /clavain:sprint add OAuth", None),
    ("/clavain:status", None),
    (None, None),
])
def test_the_arguments_of_the_command_only(prompt, expected) -> None:
    assert typed_request.arguments_of(prompt) == expected


def _submit(run_hook, project: Path, prompt: str, session: str = "sess-1", env=None):
    payload = {"session_id": session, "transcript_path": str(project / "t.jsonl"),
               "cwd": str(project), "hook_event_name": "UserPromptSubmit", "prompt": prompt}
    result = run_hook("UserPromptSubmit", payload, cwd=project, env=env)
    assert result.returncode == 0 and result.stdout == "" and result.stderr == ""
    return result


def _start(project: Path, session: str = "sess-1") -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, CLAVAIN_PYTHON=sys.executable, CLAVAIN_PROJECT_DIR=str(project),
               CLAUDE_CODE_SESSION_ID=session)
    from tests.person import run_below_host

    # As the host runs the command's `!` line: below `claude`, after the hook recorded.
    return run_below_host([str(REPO / "bin" / "clavain"), "sprint", "start", "--from-prompt",
                           "--json"], cwd=project, env=env, tmp=project.parent, timeout=60)


@pytest.mark.parametrize("typed", HAZARDS)
def test_no_shell_ever_parses_the_request(run_hook, tmp_path: Path, typed: str) -> None:
    project = tmp_path / "project"
    project.mkdir()
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    _submit(run_hook, project, f"/clavain:sprint {typed}")
    started = _start(project)
    assert started.returncode == 0, started.stderr
    description = json.loads(started.stdout)["description"]
    words = typed.split()
    if words[:2] == ["--complexity", "2"]:
        words = words[2:]
    assert description == " ".join(words)
    assert not list(project.glob("PWNED*")) and not list(tmp_path.glob("PWNED*"))
    # Taken once: a second start has nothing recorded.
    again = _start(project)
    assert again.returncode == 2
    assert "no request recorded for session sess-1" in json.loads(again.stdout)["error"]


def test_sessions_keep_their_own_request_and_resume_passes_through(run_hook,
                                                                   tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    _submit(run_hook, project, "/clavain:sprint --complexity 2 first request", session="a")
    _submit(run_hook, project, "/clavain:sprint --resume", session="b")
    started = _start(project, "a")
    assert json.loads(started.stdout)["complexity"] == 2
    resumed = _start(project, "b")
    assert resumed.returncode == 0, resumed.stderr
    assert json.loads(resumed.stdout)["description"] == "first request"


def test_other_prompts_start_no_interpreter(run_hook, tmp_path: Path) -> None:
    project = tmp_path / "project"
    (project / ".clavain").mkdir(parents=True)
    trace = tmp_path / "trace.jsonl"
    _submit(run_hook, project, "please refactor the parser", env={"CLAVAIN_HOOK_TRACE":
                                                                 str(trace)})
    assert not trace.exists()
    _submit(run_hook, project, "/clavain:sprint do it", env={"CLAVAIN_HOOK_TRACE": str(trace)})
    assert [json.loads(line)["event"] for line in trace.read_text().splitlines()] == [
        "UserPromptSubmit"]


def test_a_missing_record_or_a_bad_session_is_one_line(tmp_path: Path) -> None:
    state = StatePaths(tmp_path / ".clavain", project=tmp_path)
    with pytest.raises(ClavainError, match="no request recorded for session s1"):
        typed_request.take(state, "s1")
    for bad in ("../../etc/passwd", "", "a b", "x" * 300):
        with pytest.raises(ClavainError, match="is not a Claude Code session id"):
            typed_request.record(state, bad, "text")
    typed = state.root / typed_request.TYPED_FOLDER
    typed.mkdir(parents=True)
    (typed / "sprint-request-s2.txt").write_bytes(b"\xff\xfe bad bytes")
    with pytest.raises(ClavainError, match="not UTF-8"):
        typed_request.take(state, "s2")


def test_a_fifo_in_place_of_the_record_does_not_hang(tmp_path: Path) -> None:
    state = StatePaths(tmp_path / ".clavain", project=tmp_path)
    typed = state.root / typed_request.TYPED_FOLDER
    typed.mkdir(parents=True)
    os.mkfifo(typed / "sprint-request-s3.txt")
    with pytest.raises(ClavainError, match="no request recorded"):
        typed_request.take(state, "s3")
