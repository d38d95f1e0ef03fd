"""First-run venv bootstrap: real venvs, real pip, real concurrent processes."""

from __future__ import annotations

import json
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from clavain import bootstrap

REPO = Path(__file__).resolve().parents[2]


def test_dependencies_mirror_pyproject() -> None:
    tomllib = pytest.importorskip("tomllib")
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert tuple(project["dependencies"]) == bootstrap.DEPENDENCIES


def test_key_changes_with_dependencies(monkeypatch: pytest.MonkeyPatch) -> None:
    before = bootstrap.wanted_key()
    monkeypatch.setattr(bootstrap, "DEPENDENCIES", (*bootstrap.DEPENDENCIES, "six"))
    assert bootstrap.wanted_key() != before


def test_the_key_is_the_one_older_versions_stamped() -> None:
    """The digest no longer comes from `hashlib` (OpenSSL costs SessionStart ~2 ms): it is
    still its SHA-256, so a venv an earlier Clavain stamped is not reinstalled."""
    import hashlib

    digest = hashlib.sha256("\n".join(bootstrap.DEPENDENCIES).encode()).hexdigest()[:16]
    assert bootstrap.wanted_key().endswith("+" + digest)
    for data in (b"", b"abc", bytes(range(256)) * 9):
        assert bootstrap._sha256(data) == hashlib.sha256(data).hexdigest()


def test_checking_a_stamp_loads_no_openssl(tmp_path: Path) -> None:
    (tmp_path / "venv").mkdir()
    (tmp_path / "venv" / bootstrap.READY_MARKER).write_text("0.0.0+old")  # compared: a key
    code = ("import sys; sys.path.insert(0, sys.argv[1])\n"
            "from clavain import bootstrap\n"
            "from pathlib import Path\n"
            "print(bootstrap.is_ready(Path(sys.argv[2])), '_hashlib' in sys.modules)")
    result = subprocess.run([sys.executable, "-I", "-S", "-c", code, str(REPO / "lib"),
                             str(tmp_path)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["False", "False"]


def test_stale_stamp_is_not_ready(tmp_path: Path) -> None:
    venv = bootstrap.venv_dir(tmp_path)
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").write_text("")
    (venv / bootstrap.READY_MARKER).write_text("0.0.0+old")
    assert not bootstrap.is_ready(tmp_path)
    (venv / bootstrap.READY_MARKER).write_text(bootstrap.wanted_key())
    assert bootstrap.is_ready(tmp_path)


def test_failure_is_reported_not_raised(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    # A file where the venv folder must go: `python -m venv` fails for real.
    bootstrap.venv_dir(data).write_text("in the way")
    state = bootstrap.ensure(data, REPO, wait_seconds=60)
    assert state.startswith("failed: ")
    assert "venv" in state
    assert bootstrap.failure(data) == state[len("failed: "):]
    assert not bootstrap.is_ready(data)


def _session_start(data: Path, project: Path, wait: str = "120") -> dict:
    """The SessionStart hook as a fresh process, without CLAVAIN_PYTHON (which skips bootstrap)."""
    env = {"PATH": "/usr/bin:/bin", "HOME": str(project), "CLAUDE_PLUGIN_DATA": str(data),
           "CLAUDE_PLUGIN_ROOT": str(REPO), "CLAUDE_PROJECT_DIR": str(project),
           "CLAVAIN_BOOTSTRAP_WAIT": wait, "PYTHONPATH": str(REPO / "lib")}
    payload = {"session_id": "s", "cwd": str(project), "source": "startup"}
    # As bin/clavain-hook runs it: `-c` with the current folder dropped from sys.path.
    hook = ("import sys; sys.path = [p for p in sys.path if p]\n"
            "from clavain.hooks import main; sys.exit(main())")
    result = subprocess.run([sys.executable, "-c", hook, "SessionStart"],
                            input=json.dumps(payload), capture_output=True, text=True, env=env,
                            cwd=project, timeout=300)
    assert result.returncode == 0 and result.stderr == ""
    return json.loads(result.stdout) if result.stdout else {}


def test_session_start_reports_failure_once_as_system_message(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    bootstrap.venv_dir(data).write_text("in the way")
    # The project's own modules named like the standard library's must not reach the detached
    # installer (it used to run `-m clavain.bootstrap` in the project folder, crash on import,
    # and leave the hook waiting out its whole wait for a result that never came).
    for name in ("pathlib", "subprocess", "shutil", "json"):
        (tmp_path / f"{name}.py").write_text("raise ImportError('the project shadows stdlib')\n")
    out = _session_start(data, tmp_path, wait="60")
    assert out["systemMessage"].startswith("Clavain: installing its Python dependencies failed")
    assert "hookSpecificOutput" not in out  # an idle project: nothing for the model


@pytest.mark.slow
def test_concurrent_sessions_install_once(tmp_path: Path) -> None:
    """Two sessions start at once: one install, both see a working venv."""
    data = tmp_path / "data"
    with ThreadPoolExecutor(2) as pool:
        outputs = list(pool.map(lambda _: _session_start(data, tmp_path, "280"), range(2)))
    for out in outputs:
        assert "systemMessage" not in out, out
    assert bootstrap.is_ready(data)
    log = (data / bootstrap.LOG_NAME).read_text()
    assert log.count(" installing ") == 1, log
    python = bootstrap.venv_python(data)
    probe = subprocess.run([str(python), "-c", "import pydantic, jsonschema, filelock"],
                           capture_output=True, text=True)
    assert probe.returncode == 0, probe.stderr
    # A third session finds it ready and starts no installer.
    assert "systemMessage" not in _session_start(data, tmp_path, "0")
    assert (data / bootstrap.LOG_NAME).read_text() == log
