"""`clavain loop` with no API key: `scripts/demo.sh --loop` and the example behind it
(examples/loop-demo) really run the loop — a scripted agent fixes every failing check and the
loop ends done through its exit gate; an agent that only claims the work opens the breaker."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "loop-demo"
CLAVAIN = REPO / "bin" / "clavain"


def _env(**extra: str) -> dict[str, str]:
    return dict(os.environ, CLAVAIN=str(CLAVAIN), CLAVAIN_PYTHON=sys.executable, **extra)


def _section(out: str, start: str, end: str | None = None) -> str:
    begin = out.index(start)
    return out[begin:out.index(end, begin)] if end else out[begin:]


def test_demo_loop_runs_to_done_then_shows_the_breaker_open(tmp_path: Path) -> None:
    page = tmp_path / "clavain-demo-loop.html"  # where it goes by default: in $TMPDIR
    result = subprocess.run([str(REPO / "scripts" / "demo.sh"), "--loop"], capture_output=True,
                            text=True, env=_env(TMPDIR=str(tmp_path)), timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    assert "[HIGH] check:greeting" in out and "---CLAVAIN_STATUS---" in out
    honest = _section(out, "== clavain loop --runner agent", "== the reply")
    assert "#1 offered: check:greeting, check:tests, check:usage" in honest
    assert "#4 offered: nothing actionable: asking to confirm exit" in honest
    assert "Loop loop-demo: done — nothing actionable and the agent signalled exit" in honest
    assert ("confirmed done (checks passed / graph says done): check:greeting, check:tests, "
            "check:usage") in honest
    assert "claimed by the agent, not confirmed: none" in honest
    reply = _section(out, "== the reply of iteration 1", "== clavain loop --runner pretender")
    assert "TASK_COMPLETED: check:greeting\nSTATUS: COMPLETE" in reply
    pretend = _section(out, "== clavain loop --runner pretender", "== a new run")
    assert pretend.count("exit yes; no progress (claimed, not seen") == 3, pretend
    assert "breaker HALF_OPEN → OPEN" in pretend and "Loop loop-pretend: breaker_open" in pretend
    assert "(exit 3:" in pretend
    again = _section(out, "== a new run")
    assert "Loop loop-again: breaker_open" in again and "iterations: 0" in again
    assert "circuit OPEN" in again and "(exit 3)" in again
    # It ends with the honest run's page, and says where it is.
    assert out.rstrip().splitlines()[-1].startswith(f"Wrote {page} (loop loop-demo, ")
    text = page.read_text()
    assert 'data-loop="loop-demo"' in text and text.count('<tr><td class=num>') >= 4
    # The honest run's files were in a throwaway folder: nothing is left behind.
    assert not (EXAMPLE / ".clavain").exists() and not (EXAMPLE / "greeting.txt").exists()


def test_the_example_agent_makes_every_configured_check_pass(tmp_path: Path) -> None:
    """The commands under the demo, in a copy of the example: afterwards each check in its config
    passes when run here, outside Clavain."""
    project = tmp_path / "p"
    shutil.copytree(EXAMPLE, project)
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@localhost"]
    subprocess.run(["git", "init", "-q", "."], cwd=project, check=True)
    subprocess.run([*git, "add", "-A"], cwd=project, check=True)
    subprocess.run([*git, "commit", "-qm", "start"], cwd=project, check=True)
    env = _env(CLAVAIN_PROJECT_DIR=str(project))

    def clavain(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(CLAVAIN), *args], cwd=project, env=env, capture_output=True,
                              text=True, timeout=120)

    assert clavain("init").returncode == 0
    shutil.copyfile(project / "clavain-config.json", project / ".clavain" / "config.json")
    checks = json.loads((project / "clavain-config.json").read_text())["checks"]

    def passing() -> list[str]:
        return [c["id"] for c in checks if subprocess.run(
            c["cmd"], shell=True, cwd=project, capture_output=True).returncode == 0]

    assert passing() == []  # the example starts with every check failing
    done = clavain("loop", "--runner", "agent", "--run-id", "loop-t", "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    result = json.loads(done.stdout)
    assert result["status"] == "done" and result["summary"]["iterations"] == 4
    assert passing() == ["greeting", "tests", "usage"]
    iteration = json.loads((project / ".clavain/runs/loop-t/iteration-3.json").read_text())
    assert iteration["status"]["task_completed"] == "check:usage"
    assert iteration["progress"]["progress"] is True
    # Confirming the exit is no stall: the task's next run starts with no count against it.
    [breaker] = (project / ".clavain" / "loops" / "limits").glob("breaker-*.json")
    assert json.loads(breaker.read_text())["counts"]["no_progress"] == 0
