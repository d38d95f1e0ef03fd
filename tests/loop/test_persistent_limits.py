"""The loop's limits outlive its runs: the calls-per-hour window is the project's and the circuit
breaker is the loop task's, so restarting `clavain loop` (a new run id, a deleted run folder)
gives nothing back; only a person empties the window or closes the breaker. Real `clavain loop`
processes on a real git project, runner scripts standing in for the model."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

from tests.person import run_as_person, run_below_host
from tests.supervisor import kit

BLOCK = ("---CLAVAIN_STATUS---\nTASK_COMPLETED: check:done\nSTATUS: {status}\n"
         "FILES_MODIFIED: {files}\nTESTS_STATUS: NOT_RUN\nEXIT_SIGNAL: false\n"
         "NEXT_RECOMMENDATION: go on\n---END_CLAVAIN_STATUS---")


def _runner(tmp_path: Path, *, progress: bool) -> Path:
    """A runner that counts its calls in `tmp_path/calls`; with `progress` it writes a new
    file each call, else it only says it did (FILES_MODIFIED: 1, nothing touched)."""
    counter = tmp_path / "calls"
    work = 'pathlib.Path(f"work-{calls}.txt").write_text("x")' if progress else "pass"
    return kit.script(tmp_path / "agent.py", f"""
        import pathlib, sys
        sys.stdin.read()
        counter = pathlib.Path({str(counter)!r})
        calls = int(counter.read_text()) + 1 if counter.exists() else 1
        counter.write_text(str(calls))
        {work}
        print({BLOCK.format(status="IN_PROGRESS", files=1)!r})
    """)


def _project(tmp_path: Path, *, progress: bool) -> object:
    runner = _runner(tmp_path, progress=progress)
    return kit.make_project(tmp_path / "p", {
        "runners": {"agent": {"command": [str(runner)]}},
        "checks": [{"id": "done", "cmd": "test -f done.txt"}]})


def _calls(tmp_path: Path) -> int:
    counter = tmp_path / "calls"
    return int(counter.read_text()) if counter.exists() else 0


def _cli(state, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(kit.REPO / "bin" / "clavain"), *args], cwd=state.project,
                          env=kit.cli_env(state), capture_output=True, text=True, timeout=120)


def _as_agent(state, tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """As a Claude Code session's Bash tool runs it (a `claude` process among its ancestors)."""
    return run_below_host([str(kit.REPO / "bin" / "clavain"), *args], cwd=state.project,
                          env=kit.cli_env(state), tmp=tmp_path)


def _as_person(state, *args: str) -> subprocess.CompletedProcess[str]:
    return run_as_person([str(kit.REPO / "bin" / "clavain"), *args], cwd=state.project,
                         env=kit.cli_env(state))


def _loop_until_it_waits(state, *args: str) -> tuple[int, str]:
    return kit.loop_until_it_waits(list(args), cwd=state.project, env=kit.cli_env(state))


def test_three_restarts_at_two_calls_per_hour_make_two_calls(tmp_path: Path) -> None:
    state = _project(tmp_path, progress=True)
    first = _cli(state, "loop", "--runner", "agent", "--rate", "2", "--max-iterations", "2")
    assert first.returncode == 4, first.stderr  # two iterations, both moved the work
    assert _calls(tmp_path) == 2
    for _ in range(2):  # each restart: a new run, the same window, nothing given back
        code, err = _loop_until_it_waits(state, "--runner", "agent", "--rate", "2",
                                         "--max-iterations", "2")
        assert code == 130, err
        assert "⏳ waiting" in err and "calls per hour: 2 for this project's loops" in err
        seconds = float(err.split("⏳ waiting ", 1)[1].split("s", 1)[0])
        assert 3000 < seconds <= 3600, err
    assert _calls(tmp_path) == 2
    window = json.loads(_cli(state, "loop", "--rate-status", "--json").stdout)
    assert window["calls_in_window"] == 2 and window["last_reset"] is None
    # Deleting every run folder gives nothing back either.
    shutil.rmtree(state.runs)
    code, err = _loop_until_it_waits(state, "--runner", "agent", "--rate", "2",
                                     "--max-iterations", "1")
    assert code == 130 and _calls(tmp_path) == 2, err


def test_only_a_person_empties_the_window(tmp_path: Path) -> None:
    state = _project(tmp_path, progress=True)
    assert _cli(state, "loop", "--runner", "agent", "--rate", "1",
                "--max-iterations", "1").returncode == 4
    refused = _as_agent(state, tmp_path, "loop", "--reset-rate")
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1, refused.stderr
    assert "a person's decision" in refused.stderr
    assert "`/clavain:loop --reset-rate`" in refused.stderr
    assert "`clavain loop --reset-rate`" in refused.stderr
    assert json.loads(_cli(state, "loop", "--rate-status", "--json").stdout)[
        "calls_in_window"] == 1
    plain = _cli(state, "loop", "--reset-rate")  # no terminal, no host: not a person either
    assert plain.returncode == 2
    emptied = _as_person(state, "loop", "--reset-rate", "--json")
    assert emptied.returncode == 0, emptied.stderr
    status = json.loads(emptied.stdout)
    assert status["calls_in_window"] == 0
    assert status["last_reset"]["by"].startswith("a person at /dev/")
    again = _cli(state, "loop", "--runner", "agent", "--rate", "1", "--max-iterations", "1")
    assert again.returncode == 4 and _calls(tmp_path) == 2, again.stderr


def test_an_open_breaker_stays_open_for_its_task_across_runs(tmp_path: Path) -> None:
    state = _project(tmp_path, progress=False)
    first = _cli(state, "loop", "--runner", "agent", "--run-id", "loop-1", "--json")
    assert first.returncode == 3, first.stderr  # FILES_MODIFIED: 1 and nothing changed
    assert _calls(tmp_path) == 3
    summary = json.loads(first.stdout)["summary"]
    assert summary["confirmed_done"] == [] and summary["claimed_not_confirmed"] == []
    # A new run of the same task (the project's checks on the default graph): open at once.
    second = _cli(state, "loop", "--runner", "agent", "--run-id", "loop-2", "--json")
    assert second.returncode == 3 and _calls(tmp_path) == 3, second.stderr
    result = json.loads(second.stdout)
    assert "3 iterations in a row with no progress" in result["message"]
    assert "clavain loop --reset-circuit --run loop-2" in result["message"]
    assert result["summary"]["iterations"] == 0 and result["summary"]["breaker_state"] == "OPEN"
    shutil.rmtree(state.runs)  # the run folders are not where the breaker lives
    third = _cli(state, "loop", "--runner", "agent", "--run-id", "loop-3", "--rate", "50")
    assert third.returncode == 3 and _calls(tmp_path) == 3, third.stderr
    # Another task (another graph) has a breaker of its own.
    other = _cli(state, "loop", "--runner", "agent", "--graph", "other", "--run-id", "loop-o")
    assert other.returncode == 3 and _calls(tmp_path) == 6, other.stderr
    # An agent cannot close it; the line says what the person types.
    refused = _as_agent(state, tmp_path, "loop", "--reset-circuit", "--run", "loop-3")
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1, refused.stderr
    assert "/clavain:loop --reset-circuit loop-3" in refused.stderr
    still = _cli(state, "loop", "--runner", "agent", "--run-id", "loop-4")
    assert still.returncode == 3 and _calls(tmp_path) == 6, still.stderr
    # A person closes the task's breaker through any run of it: the next run works again.
    closed = _as_person(state, "loop", "--reset-circuit", "--run", "loop-4", "--json")
    assert closed.returncode == 0, closed.stderr
    status = json.loads(closed.stdout)
    assert status["state"] == "CLOSED" and status["task_key"] == result["task_key"]
    assert "reset by a person at /dev/" in status["history"][-1]["reason"]
    again = _cli(state, "loop", "--runner", "agent", "--run-id", "loop-5", "--max-iterations",
                 "1")
    assert again.returncode == 4 and _calls(tmp_path) == 7, again.stderr
    other_now = json.loads(_cli(state, "loop", "--circuit-status", "--run", "loop-o",
                                "--json").stdout)
    assert other_now["state"] == "OPEN"  # its own task's breaker was not touched


def test_the_summary_separates_what_checks_confirmed_from_claims(tmp_path: Path) -> None:
    state = _project(tmp_path, progress=False)
    done = _cli(state, "loop", "--runner", "agent", "--run-id", "loop-c")
    assert done.returncode == 3
    (tmp_path / "agent.py").write_text((tmp_path / "agent.py").read_text().replace(
        "IN_PROGRESS", "COMPLETE"))
    _as_person(state, "loop", "--reset-circuit", "--run", "loop-c")
    claimed = _cli(state, "loop", "--runner", "agent", "--run-id", "loop-d")
    assert claimed.returncode == 3, claimed.stderr
    assert "claimed by the agent, not confirmed: check:done" in claimed.stdout
    assert "confirmed done (checks passed / graph says done): none" in claimed.stdout
    assert "items done" not in claimed.stdout
    assert "claimed, not seen: FILES_MODIFIED: 1" in claimed.stderr
    shown = json.loads(_cli(state, "loop", "summary", "loop-d", "--json").stdout)
    assert shown["confirmed_done"] == [] and shown["claimed_not_confirmed"] == ["check:done"]
    assert "items_done" not in shown


RECORDER = textwrap.dedent("""
    import sys
    from pathlib import Path
    from clavain.loop.rate_limit import CallRate
    root = Path(sys.argv[1])
    rate = CallRate(root / "loops" / "limits" / "calls.json", state_root=root,
                    per_hour=int(sys.argv[3]))
    taken = 0
    for _ in range(int(sys.argv[2])):
        if sys.argv[4] == "record":
            rate.record_call()
            taken += 1
        elif rate.acquire() == 0:
            taken += 1
    print(taken)
""")


def _side_by_side(state, how: str, each: int, per_hour: int) -> list[int]:
    procs = [subprocess.Popen([sys.executable, "-c", RECORDER, str(state.root), str(each),
                               str(per_hour), how], stdout=subprocess.PIPE, text=True,
                              env=kit.cli_env(state)) for _ in range(2)]
    return [int(proc.communicate(timeout=120)[0]) for proc in procs]


def test_two_processes_recording_at_once_lose_no_call(tmp_path: Path) -> None:
    state = kit.make_project(tmp_path / "p")
    assert _side_by_side(state, "record", 60, 10_000) == [60, 60]
    window = json.loads(_cli(state, "loop", "--rate-status", "--json").stdout)
    assert window["calls_in_window"] == 120


def test_two_processes_never_take_more_than_the_window_together(tmp_path: Path) -> None:
    state = kit.make_project(tmp_path / "p")
    taken = _side_by_side(state, "acquire", 40, 50)
    assert sum(taken) == 50, taken
    window = json.loads(_cli(state, "loop", "--rate-status", "--json").stdout)
    assert window["calls_in_window"] == 50
