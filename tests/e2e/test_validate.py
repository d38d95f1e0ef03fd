"""`claude plugin validate` with the strictest profile passes with nothing to report.

Not marked e2e: it needs the binary but no model and takes about a second.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.e2e.conftest import REPO


def _validate(claude_bin: Path, home: Path, target: str,
              *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(claude_bin), "plugin", "validate", target, "--strict", "--profile", "directory",
         *extra],
        cwd=REPO, env={"HOME": str(home), "PATH": "/usr/local/bin:/usr/bin:/bin"},
        capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL,
    )


def test_strict_directory_profile_exits_zero_without_warnings(claude_bin: Path,
                                                               tmp_path: Path) -> None:
    result = _validate(claude_bin, tmp_path, ".")
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert "Validation passed" in output, output
    assert "warning" not in output.lower(), output
    assert "⚠" not in output, output


@pytest.mark.parametrize("target", [".", ".claude-plugin/plugin.json"])
def test_json_report_has_no_errors_warnings_or_findings(claude_bin: Path, tmp_path: Path,
                                                        target: str) -> None:
    result = _validate(claude_bin, tmp_path, target, "--json")
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads(result.stdout)
    assert report["success"] is True
    assert report["strict"] is True
    assert report["manifest"]["errors"] == []
    assert report["manifest"]["warnings"] == []
    for item in report.get("contents") or ():
        assert not item.get("errors") and not item.get("warnings"), item
    directory = report["directory"]
    assert directory["findings"] == [], directory
    assert directory["failure"] is None, directory
    assert directory["incomplete"] is False, directory


def test_validate_sees_the_plugin_components(claude_bin: Path, tmp_path: Path) -> None:
    """Guards against validating an empty shell: the hooks, command and bin/ are found."""
    report = json.loads(_validate(claude_bin, tmp_path, ".", "--json").stdout)
    provides = report["provides"]
    assert {"event": "SessionStart", "type": "command", "command": "bash",
            "args": ["${CLAUDE_PLUGIN_ROOT}/bin/clavain-hook", "SessionStart"]} \
        in provides["hooks"]
    assert "clavain:doctor" in provides["commands"]
    assert {"clavain", "clavain-hook"} <= set(provides["bin"])


def test_installing_from_a_clone_copies_no_venv_or_caches(claude_bin: Path,
                                                          tmp_path: Path) -> None:
    """scripts/install-plugin.sh installs what git tracks: this checkout's .venv/ (CI makes one),
    build/ and caches never reach the plugin cache."""
    junk = REPO / "build" / "clavain-install-test"
    junk.mkdir(parents=True, exist_ok=True)
    (junk / "big.bin").write_bytes(b"x" * 1024)
    try:
        result = subprocess.run(
            [str(REPO / "scripts" / "install-plugin.sh")], cwd=REPO, capture_output=True,
            text=True, timeout=300, stdin=subprocess.DEVNULL,
            env={"HOME": str(tmp_path), "PATH": "/usr/local/bin:/usr/bin:/bin",
                 "CLAVAIN_CLAUDE_BIN": str(claude_bin)})
    finally:
        (junk / "big.bin").unlink()
        junk.rmdir()
    assert result.returncode == 0, result.stdout + result.stderr
    [installed] = (tmp_path / ".claude" / "plugins" / "cache" / "clavain" / "clavain").iterdir()
    names = {path.relative_to(installed).parts[0] for path in installed.rglob("*")}
    assert {"bin", "lib", "hooks", ".claude-plugin"} <= names
    assert not names & {".venv", "build", ".git", ".pytest_cache", ".ruff_cache"}, names
    assert not list(installed.rglob("__pycache__"))
