"""The projects the HTML page is tested on, made the way a person makes them — through the real
`bin/clavain` in a real git repository: a finished headless run of the greeter example on two
workers, a sprint with verdicts and a gate a person waived, and a loop run of the loop example."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

from clavain.verdicts import files as verdict_files

REPO = Path(__file__).resolve().parents[1]
GIT = ["git", "-c", "user.name=t", "-c", "user.email=t@localhost"]
RunCli = Callable[..., subprocess.CompletedProcess[str]]

PLAN = """# Plan

```json
{"nodes": [{"id": "task-flag", "type": "task", "title": "add --verbose to <export> & co",
            "verify": ["test -f flag.txt"], "ownership": ["flag.txt"]}]}
```
"""


def _ok(result: subprocess.CompletedProcess[str]) -> subprocess.CompletedProcess[str]:
    assert result.returncode == 0, result.stdout + result.stderr
    return result


def _commit_all(project: Path, message: str) -> None:
    subprocess.run([*GIT, "add", "-A"], cwd=project, check=True)
    subprocess.run([*GIT, "commit", "-qm", message], cwd=project, check=True)


def finished_run(project: Path, run_cli: RunCli, *, run_id: str = "demo",
                 extra: tuple[str, ...] = ()) -> str:
    """examples/greeter planned and run to the end by `clavain run --workers 2` (shell runner,
    no API key), as scripts/demo.sh does."""
    shutil.copytree(REPO / "examples" / "greeter", project, dirs_exist_ok=True)
    _commit_all(project, "greeter")
    _ok(run_cli("init"))
    _commit_all(project, "clavain init")
    (project / ".clavain" / "config.json").write_text(
        '{"defaults": {"snapshotMaxLagSeconds": 0}}\n')
    _ok(run_cli("graph", "import", "plan.json"))
    _ok(run_cli("graph", "scaffold"))
    _ok(run_cli("run", "--runner", "shell", "--workers", "2", "--run-id", run_id, *extra))
    return run_id


def _verdict(project: Path, sprint_id: str, agent: str, status: str, tokens: int,
             summary: str, dispatch: str) -> None:
    folder = project / ".clavain" / "verdicts"
    short = verdict_files.safe_agent_name(agent)
    verdict_files.write_detail(folder, agent, dispatch, f"# {agent}\n\n{summary}\n")
    verdict_files.write(folder, verdict_files.build(
        {"type": "verdict", "status": status, "summary": summary, "tokens_spent": tokens,
         "sprint_id": sprint_id, "detail_path": f".clavain/verdicts/{short}--{dispatch}.md"},
        agent=agent, agent_id=dispatch, tokens_source="measured"), dispatch)


def sprint_with_verdicts_and_waiver(project: Path, run_cli: RunCli) -> str:
    """A complexity-2 sprint: plan recorded, two reviewers' verdicts filed (one wants
    attention, its summary hostile HTML), and the execute gate waived by a person at a
    terminal. Returns the sprint's id."""
    _ok(run_cli("init"))
    started = _ok(run_cli("sprint", "start", "--complexity", "2",
                          "add a --verbose flag to the export command"))
    sprint_id = started.stdout.split()[1].rstrip(".")
    (project / "plan.md").write_text(PLAN)
    _ok(run_cli("sprint", "done", "plan", "--plan", "plan.md"))
    _verdict(project, sprint_id, "clavain:fd-quality", "CLEAN", 1200, "reads well", "d1")
    _verdict(project, sprint_id, "clavain:fd-safety", "NEEDS_ATTENTION", 3400,
             'escapes <img src=x onerror="alert(1)"> & friends', "d2")
    _ok(run_cli("sprint", "done", "execute", "--waive", "ran it on staging by hand",
                person=True))
    return sprint_id


def loop_run(project: Path, run_cli: RunCli, *, run_id: str = "loop-t") -> str:
    """examples/loop-demo driven by its scripted agent until every check passes."""
    shutil.copytree(REPO / "examples" / "loop-demo", project, dirs_exist_ok=True)
    _commit_all(project, "loop demo: checks fail")
    _ok(run_cli("init"))
    shutil.copyfile(project / "clavain-config.json", project / ".clavain" / "config.json")
    done = _ok(run_cli("loop", "--runner", "agent", "--run-id", run_id, "--json"))
    assert json.loads(done.stdout)["status"] == "done"
    return run_id
