"""What must hold when the setup, the account or the person gets in the way: the node goes back
unspent and the run says why, instead of burning attempts or touching what is not its own."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from clavain.supervisor import run_record
from tests.checks import PASSES
from tests.supervisor import kit
from tests.supervisor.test_run import _alive, _tasks, _wait_for

# Both workgraph backends (tests/conftest.py `backend`).
pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("backend")]


def test_a_runner_that_cannot_start_stops_the_run_and_spends_nothing(tmp_path: Path) -> None:
    state = kit.make_project(tmp_path / "p", {"runners": {"typo": {
        "command": [str(tmp_path / "no-such-runner.py")]}}})
    kit.add(state, _tasks(("task-a", [], [PASSES]), ("task-b", [], [PASSES])), scaffold=False)
    report = kit.run(state, runner="typo")
    assert report["status"] == "blocked" and report["reason"] == "runner_unusable"
    assert "no-such-runner.py" in report["message"]
    assert report["metrics"]["llm_invocations"] == 0  # no runner started: no LLM call
    for node in kit.nodes(state).values():
        assert (node["status"], node["attempts"], node["lock_run_id"]) == ("open", 0, None)


def test_a_logged_out_claude_stops_the_run_with_its_own_words(tmp_path: Path) -> None:
    fake = kit.script(tmp_path / "claude", kit.LOGGED_OUT_CLAUDE)
    state = kit.make_project(tmp_path / "p")
    kit.add(state, _tasks(("task-a", [], [PASSES]), ("task-b", [], [PASSES])), scaffold=False)
    os.environ["CLAVAIN_CLAUDE_BIN"] = str(fake)
    try:
        report = kit.run(state, runner="claude", workers=1)
    finally:
        del os.environ["CLAVAIN_CLAUDE_BIN"]
    assert report["reason"] == "runner_unusable" and "Not logged in" in report["message"]
    assert report["metrics"]["llm_invocations"] == 1
    assert all(n["attempts"] == 0 for n in kit.nodes(state).values())


def test_a_limit_whose_reset_has_passed_still_waits(tmp_path: Path) -> None:
    counter = tmp_path / "calls"
    runner = kit.script(tmp_path / "limited.py", f"""
        import pathlib, sys
        sys.stdin.read()
        path = pathlib.Path({str(counter)!r})
        calls = int(path.read_text()) if path.exists() else 0
        path.write_text(str(calls + 1))
        if calls == 0:
            print("Error: rate limit exceeded, retry-after: 0")
            sys.exit(1)
        print('<result>{{"status": "success", "summary": "ok"}}</result>')
    """)
    state = kit.make_project(tmp_path / "p", {"runners": {"lim": {"command": [str(runner)]}}})
    kit.add(state, _tasks(("task-a", [], [PASSES])), scaffold=False)
    events: list[dict] = []
    kit.run(state, events, runner="lim")
    assert counter.read_text() == "2"
    waits = [e["seconds_left"] for e in events if e["event"] == "waiting"]
    assert waits and max(waits) >= 4  # the floor, not a busy loop


def test_recovery_never_kills_a_process_that_reused_a_runners_pid(tmp_path: Path) -> None:
    state = kit.make_project(tmp_path / "p")
    kit.add(state, _tasks(("task-a", [], [PASSES])), scaffold=False)
    bystander = subprocess.Popen(["sleep", "60"], start_new_session=True)
    try:
        folder = state.runs / "run-old"
        folder.mkdir(parents=True)
        (folder / "supervisor.json").write_text(json.dumps({
            "run_id": "run-old", "graph_id": "default", "pid": 999_999_999,
            "host": run_record.this_host(), "status": "running",
            "runners": {"task-a": {"pid": bystander.pid, "identity": "another-boot:1"}}}))
        from clavain.store.graph_db import open_graph_db

        conn = open_graph_db(state)
        recovered = run_record.recover(state, conn)
        conn.close()
        assert recovered[0]["stopped_runners"] == []
        assert bystander.poll() is None, "an unrelated process was killed"
    finally:
        bystander.kill()
        bystander.wait()


def test_a_supervisor_pid_taken_by_another_process_counts_as_dead() -> None:
    record = {"run_id": "r", "graph_id": "default", "pid": os.getpid(),
              "identity": "another-boot:1", "host": run_record.this_host(),
              "status": "running", "runners": {}}
    assert not run_record.supervisor_alive({**record, "pid": os.getppid()})
    assert run_record.supervisor_alive({**record, "pid": os.getppid(),
                                        "identity": run_record.process_identity(os.getppid())})


def test_a_second_ctrl_c_kills_runners_that_ignore_sigterm(tmp_path: Path) -> None:
    pidfile = tmp_path / "pid"
    stubborn = kit.script(tmp_path / "stubborn.py", f"""
        import os, signal, sys, time
        sys.stdin.read()
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        open({str(pidfile)!r}, "w").write(str(os.getpid()))
        time.sleep(600)
    """)
    state = kit.make_project(tmp_path / "p", {"runners": {"s": {"command": [str(stubborn)]}}})
    kit.add(state, _tasks(("task-a", [], [PASSES])), scaffold=False)
    proc = kit.start_cli(state, "run", "--runner", "s", "--graph", "default")
    runner_pid = int(_wait_for(pidfile))
    os.kill(proc.pid, signal.SIGINT)
    time.sleep(0.5)
    began = time.monotonic()
    os.kill(proc.pid, signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130 and time.monotonic() - began < 4, err
    assert "Ctrl-C again" in err and not _alive(runner_pid)
    assert kit.node(state, "task-a")["attempts"] == 0


def test_a_person_editing_during_a_parallel_run_is_never_merged_over(tmp_path: Path) -> None:
    runner = kit.script(tmp_path / "meddle.py", """
        import os, pathlib, sys
        sys.stdin.read()
        project = pathlib.Path(os.environ["CLAVAIN_PROJECT_DIR"])
        (project / "README.md").write_text("a person's edit\\n")  # the person, meanwhile
        pathlib.Path("work.txt").write_text("the runner's work\\n")  # in its worktree
        print('<result>{"status": "success", "summary": "worked"}</result>')
    """)
    state = kit.make_project(tmp_path / "p", {"runners": {"m": {"command": [str(runner)]}}})
    kit.add(state, _tasks(("task-a", [], [PASSES])), scaffold=False)
    report = kit.run(state, runner="m", workers=2)
    assert report["reason"] == "runner_unusable" and "README.md" in report["message"]
    assert (state.project / "README.md").read_text() == "a person's edit\n"
    assert not (state.project / "work.txt").exists()
    node = kit.node(state, "task-a")
    assert (node["status"], node["attempts"]) == ("open", 0)
    branches = kit.git(state.project, "branch", "--list", "clavain/*")
    assert "task-a" in branches  # the runner's work is kept on its branch


def test_resume_goes_on_with_the_runner_the_run_began_with(tmp_path: Path) -> None:
    state = kit.make_project(tmp_path / "p")
    kit.add(state, _tasks(("task-a", ["true"], [PASSES]), ("task-b", ["true"], [PASSES])),
            scaffold=False)
    first = kit.run(state, runner="shell", max_iterations=1)
    again = kit.run(state, resume=first["run_id"])  # no --runner: still the shell runner
    assert again["status"] == "complete"
    runners = {e["runner"] for e in again["metrics"]["timeline"]}
    assert runners == {"shell"}
