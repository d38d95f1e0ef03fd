"""The README's first command ends in scripts/demo.sh: it must really run a graph to the end."""

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_demo_runs_a_headless_sprint_to_the_end(tmp_path: Path) -> None:
    page = tmp_path / "clavain-demo.html"  # where it goes by default: in $TMPDIR
    env = dict(os.environ, CLAVAIN=str(REPO / "bin" / "clavain"), CLAVAIN_PYTHON=sys.executable,
               TMPDIR=str(tmp_path))
    env.pop("CLAVAIN_DEMO_PAGE", None)
    result = subprocess.run([str(REPO / "scripts" / "demo.sh")], capture_output=True, text=True,
                            env=env, timeout=300)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    run = out[out.index("== run"):out.index("== graph")]
    nodes = {"task-greet", "task-farewell", "task-cli", "verify-task-greet",
             "verify-task-farewell", "verify-task-cli", "integrate", "final-verify"}
    rows = [line.split() for line in run.splitlines() if line.split()[:1]
            and line.split()[0] in nodes]
    assert {row[0] for row in rows} == nodes, run
    assert all(row[5] == "done" for row in rows), run
    assert "no API key needed" in out
    assert "LLM calls: 0; verify with no LLM: 4" in run and "peak concurrency: 2" in run
    assert "flowchart TD" in out and "Supervised run demo" in out
    assert "Hello, Ada!\nGoodbye, Ada.\n" in out
    # It ends by saying where the run's page is; the page shows both workers' lanes.
    assert out.rstrip().endswith(f"open {page} in a browser (or: file://{page})")
    assert f"the run's page: {page.as_uri()}" in result.stderr
    text = page.read_text()
    assert 'data-lane="worker 1"' in text and 'data-lane="worker 2"' in text
    assert 'data-live="false"' in text and 'http-equiv="refresh"' not in text
