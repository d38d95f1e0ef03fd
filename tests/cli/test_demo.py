"""The README's first command ends in scripts/demo.sh: it must really run a graph to the end."""

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_demo_runs_every_node_to_done() -> None:
    env = dict(os.environ, CLAVAIN=str(REPO / "bin" / "clavain"), CLAVAIN_PYTHON=sys.executable)
    result = subprocess.run([str(REPO / "scripts" / "demo.sh")], capture_output=True, text=True,
                            env=env, timeout=300)
    assert result.returncode == 0, result.stderr
    rows = [line.split() for line in result.stdout.splitlines()
            if line.split()[:1] and line.split()[0] in
            {"task-greet", "task-docs", "verify-task-greet", "verify-task-docs", "integrate",
             "final-verify"} and len(line.split()) > 3]
    assert len(rows) == 6, result.stdout
    assert all(row[2] == "done" for row in rows), result.stdout
    assert "flowchart TD" in result.stdout
