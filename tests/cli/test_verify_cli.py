import json
from pathlib import Path

import pytest

# Every test here on both workgraph backends (tests/conftest.py `backend`).
pytestmark = pytest.mark.usefixtures("backend")

NODES = {"nodes": [
    {"id": "task-a", "type": "task", "title": "the task"},
    {"id": "verify-ok", "type": "verify", "dependsOn": ["task-a"],
     "verify": ["echo checking", "test -d .git"]},
    {"id": "verify-bad", "type": "verify", "verify": ["true", "echo nope >&2; exit 4"]},
]}


@pytest.fixture
def graph(run_cli, project: Path) -> Path:
    result = run_cli("graph", "import", "-", input=json.dumps(NODES))
    assert result.returncode == 0, result.stderr
    return project


def _result(stdout: str) -> dict:
    last = stdout.strip().splitlines()[-1]
    assert last.startswith("<result>") and last.endswith("</result>")
    return json.loads(last.removeprefix("<result>").removesuffix("</result>"))


def test_success_without_apply_prints_the_result_last(graph, run_cli, cli_json) -> None:
    result = run_cli("verify", "verify-ok", "--no-apply")
    assert result.returncode == 0, result.stderr
    assert _result(result.stdout)["status"] == "success"
    assert cli_json("graph", "show", "verify-ok")["status"] == "open"


def test_failure_names_the_command_and_exits_1(graph, run_cli) -> None:
    result = run_cli("verify", "verify-bad", "--no-apply")
    assert result.returncode == 1
    verdict = _result(result.stdout)
    assert verdict["status"] == "fail"
    assert "echo nope >&2; exit 4" in verdict["errors"][0] and "nope" in verdict["errors"][0]


def test_apply_records_the_result(graph, run_cli, cli_json) -> None:
    waiting = run_cli("verify", "verify-ok")
    assert waiting.returncode == 2 and "'verify-ok' waits on task-a" in waiting.stderr
    run_cli("graph", "apply", "task-a", "--result", "-", input='{"status":"success",'
            '"summary":"ok"}')
    report = cli_json("verify", "verify-ok")
    assert report["applied"] is True and report["apply"]["to"] == "done"
    assert Path(report["result_path"]).is_file()
    assert cli_json("graph", "show", "verify-ok")["status"] == "done"
    summary = cli_json("kv", "get", "--node", "verify-ok", "--key", "out.summary")
    assert summary["value"] == "all 2 verify commands passed"


def test_timeout_flag(graph, run_cli) -> None:
    run_cli("graph", "add", "--id", "verify-slow", "--type", "verify", "--verify", "sleep 300")
    result = run_cli("verify", "verify-slow", "--no-apply", "--timeout", "1")
    assert result.returncode == 1
    assert "timed out after 1s" in _result(result.stdout)["summary"]


def test_bad_input_is_one_line_and_writes_nothing(graph, run_cli, project) -> None:
    unknown = run_cli("verify", "nope")
    assert unknown.returncode == 2
    assert unknown.stderr.strip() == (
        "clavain: error: unknown node 'nope' in graph 'default'; `clavain graph ls` lists its "
        "nodes (`--all`: every graph's)")
    task = run_cli("verify", "task-a", "--json")
    assert task.returncode == 2
    assert "only verify and final_verify nodes" in json.loads(task.stdout)["error"]
    assert not (project / ".clavain" / "runs").exists() or not any(
        (project / ".clavain" / "runs").iterdir())
    assert run_cli("verify", "verify-ok", "--timeout", "0").returncode == 2


def _wait_for(path: Path, seconds: float = 30) -> str:
    import time

    deadline = time.monotonic() + seconds
    while not (path.exists() and path.read_text().strip()):
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.05)
    return path.read_text().strip()


def _alive(pid: int) -> bool:
    import os

    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie still answers kill(0); it is dead for our purposes.
    status = Path(f"/proc/{pid}/status")
    return not (status.exists() and "State:\tZ" in status.read_text())


@pytest.mark.parametrize("signame", ["SIGTERM", "SIGINT"])
def test_a_signal_to_verify_kills_the_commands_process_group(graph, project, signame) -> None:
    """A supervisor stopping `clavain verify` must not leave `make test` running, and the
    claim goes back without spending an attempt."""
    import signal
    import subprocess
    import time

    from tests.conftest import BIN, subprocess_env

    pid_file = project / "child.pid"
    cmd = f"sleep 300 & echo $! > {pid_file}; wait"
    subprocess.run([str(BIN / "clavain"), "graph", "add", "--id", "verify-hang", "--type",
                    "verify", "--verify", cmd], cwd=project, env=subprocess_env(), check=True,
                   capture_output=True)
    proc = subprocess.Popen([str(BIN / "clavain"), "verify", "verify-hang", "--run-id", "r-sig"],
                            cwd=project, env=subprocess_env(), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    child = int(_wait_for(pid_file))
    assert _alive(child)
    proc.send_signal(getattr(signal, signame))
    _out, err = proc.communicate(timeout=30)
    assert proc.returncode == 128 + getattr(signal, signame)
    assert "interrupted" in err and "Traceback" not in err
    deadline = time.monotonic() + 30  # "gone, not left running": generous on a loaded machine
    while _alive(child):
        assert time.monotonic() < deadline, "the command's child outlived the verifier"
        time.sleep(0.05)
    shown = subprocess.run([str(BIN / "clavain"), "graph", "show", "verify-hang", "--json"],
                           cwd=project, env=subprocess_env(), capture_output=True, text=True)
    node = json.loads(shown.stdout)
    assert (node["status"], node["attempts"], node["lock_run_id"]) == ("open", 0, None)


def test_a_verifier_killed_outright_counts_as_a_crash_not_an_attempt(graph, project,
                                                                     cli_json) -> None:
    """kill -9 leaves the lock with a dead pid: the next scheduling step gives it back as a
    crash (no attempt spent; `defaults.maxCrashes` bounds a crash loop)."""
    import os
    import signal
    import subprocess
    import time

    from tests.conftest import BIN, subprocess_env

    started = project / "started"
    cli_json("graph", "add", "--id", "verify-crash", "--type", "verify", "--verify",
             f"touch {started}; sleep 300")
    proc = subprocess.Popen([str(BIN / "clavain"), "verify", "verify-crash"], cwd=project,
                            env=subprocess_env(), start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    while not started.exists():
        assert proc.poll() is None
        time.sleep(0.02)
    held = cli_json("graph", "show", "verify-crash")
    assert held["status"] == "in_progress" and held["lock_pid"] == proc.pid
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    step = cli_json("graph", "next")
    assert "verify-crash" in step["released"]
    after = cli_json("graph", "show", "verify-crash")
    assert (after["status"], after["attempts"], after["crashes"]) == ("open", 0, 1)
    assert after["blocked_until"] is None


def test_graph_apply_refuses_a_verify_node(run_cli, project) -> None:
    import json

    run_cli("graph", "import", "-", input=json.dumps({"nodes": [
        {"id": "t", "type": "task", "verify": ["false"]}]}))
    run_cli("graph", "scaffold")
    run_cli("graph", "next", "--claim", "--run-id", "r1")
    run_cli("graph", "apply", "t", "--run-id", "r1", "--result", "-",
            input='{"status":"success","summary":"s"}')
    claimed = run_cli("graph", "next", "--claim", "--run-id", "r1", "--json")
    assert json.loads(claimed.stdout)["node"]["id"] == "verify-t"
    refused = run_cli("graph", "apply", "verify-t", "--run-id", "r1", "--result", "-",
                      input='{"status":"success","summary":"trust me"}')
    assert refused.returncode == 2
    assert "only the shell verifier records its result (`clavain verify verify-t`)" in \
        refused.stderr
