"""The CLI opens nothing under `.clavain/` but regular files: a FIFO database, config or
checkpoint is one line naming it (never a command that waits for ever), and a database planted
as a symlink to a file outside the project is refused, never written through."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from clavain.store import db
from tests.checks import PASSES
from tests.conftest import BIN, subprocess_env

BOUND = 20  # seconds: "returned, did not hang"


def _clavain(project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """TimeoutExpired (a failed test) past BOUND."""
    return subprocess.run([str(BIN / "clavain"), *args], capture_output=True, text=True,
                          cwd=project, env=subprocess_env(), timeout=BOUND)


@pytest.fixture
def spec(tmp_path: Path) -> Path:
    path = tmp_path / "plan.json"
    path.write_text(json.dumps({"nodes": [{"id": "t1", "type": "task", "verify": [PASSES]}]}))
    return path


@pytest.mark.parametrize("name", ["state.sqlite", "state.sqlite-wal", "config.json",
                                  "checkpoint.json"])
def test_a_fifo_state_file_is_named_by_every_command_never_waited_on(project: Path, spec: Path,
                                                                     name: str) -> None:
    state = project / ".clavain"
    state.mkdir()
    db.connect(state / "state.sqlite").close()
    fifo = state / name
    fifo.unlink(missing_ok=True)
    os.mkfifo(fifo)
    doctor = _clavain(project, "doctor", "--json")
    failed = [row for row in json.loads(doctor.stdout)["checks"] if row["status"] == "fail"
              and str(fifo) in row["detail"]]
    assert failed, doctor.stdout
    for args in (("status",), ("graph", "import", str(spec)), ("graph", "ls")):
        result = _clavain(project, *args)
        if name == "checkpoint.json" and args == ("status",):
            assert f"{fifo} is not a regular file" in result.stdout  # the sprint's line
            continue
        assert result.returncode != 0, (args, result.stdout)
        assert str(fifo) in result.stderr and ("FIFO" in result.stderr
                                               or "not a regular file" in result.stderr)
    if name != "checkpoint.json":  # nothing was imported past the refusal
        fifo.unlink()
        assert _clavain(project, "graph", "ls", "--json").stdout.count('"t1"') == 0


@pytest.mark.parametrize("args", [
    ("graph", "import", "SPEC"),
    ("graph", "add", "--id", "t2", "--type", "task"),
    ("kv", "put", "--run", "--key", "ctx.goal", "--value", "x"),
    ("graph", "ls"),
])
def test_a_database_planted_as_a_symlink_out_of_the_project_is_refused(
        project: Path, tmp_path: Path, spec: Path, args: tuple[str, ...]) -> None:
    outside = tmp_path / "elsewhere.sqlite"
    db.connect(outside).close()
    before = outside.read_bytes()
    state = project / ".clavain"
    state.mkdir()
    (state / "state.sqlite").symlink_to(outside)
    result = _clavain(project, *(str(spec) if arg == "SPEC" else arg for arg in args))
    assert result.returncode == 1, result.stdout + result.stderr
    assert result.stderr.strip() == (
        f"clavain: error: {state / 'state.sqlite'} is a symlink (to {outside}); Clavain does "
        "not follow one there: replace it with a real file, or remove it")
    assert outside.read_bytes() == before
    assert not list(tmp_path.glob("elsewhere.sqlite-*"))
