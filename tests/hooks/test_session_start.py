import json
import sys
from pathlib import Path

from clavain import bootstrap
from clavain.hooks.session_start import CONTEXT

from .conftest import REPO, payload_for


def _context_tokens(text: str) -> int:
    """A conservative token estimate (≈4 characters a token for English and code)."""
    return len(text) // 4 + 1


def test_context_reaches_output_and_stays_small(run_hook, tmp_path: Path) -> None:
    result = run_hook("SessionStart", payload_for("SessionStart", tmp_path))
    out = json.loads(result.stdout)
    assert out["hookSpecificOutput"] == {"hookEventName": "SessionStart",
                                         "additionalContext": CONTEXT}
    assert "systemMessage" not in out
    # The whole plugin's always-on context must stay under 400 tokens; this hook takes < 100.
    assert _context_tokens(CONTEXT) < 100


def test_env_file_gets_path_fallback_only_when_bin_missing(run_hook, tmp_path: Path) -> None:
    env_file = tmp_path / "env.sh"
    env_file.write_text("")
    base = {"CLAUDE_ENV_FILE": str(env_file), "CLAUDE_PLUGIN_ROOT": str(REPO)}
    run_hook("SessionStart", payload_for("SessionStart", tmp_path),
             env={**base, "PATH": f"{REPO / 'bin'}:/usr/bin:/bin"})
    assert env_file.read_text() == ""
    run_hook("SessionStart", payload_for("SessionStart", tmp_path),
             env={**base, "PATH": "/usr/bin:/bin"})
    assert env_file.read_text() == f'export PATH="$PATH":\'{REPO / "bin"}\'\n'


def test_env_file_exports_ready_venv_python(run_hook, tmp_path: Path) -> None:
    data = tmp_path / "data"
    venv = bootstrap.venv_dir(data)
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").symlink_to(sys.executable)
    (venv / bootstrap.READY_MARKER).write_text(bootstrap.wanted_key())
    env_file = tmp_path / "env.sh"
    result = run_hook("SessionStart", payload_for("SessionStart", tmp_path), env={
        "CLAUDE_ENV_FILE": str(env_file), "CLAUDE_PLUGIN_ROOT": str(REPO),
        "CLAUDE_PLUGIN_DATA": str(data), "PATH": f"{REPO / 'bin'}:/usr/bin:/bin",
        "CLAVAIN_BOOTSTRAP": "1", "CLAVAIN_PYTHON": "", "CLAVAIN_HOOK_TRACE": str(tmp_path / "t")})
    assert "systemMessage" not in json.loads(result.stdout)
    assert env_file.read_text() == (f"export CLAVAIN_PLUGIN_DATA='{data}'\n"
                                    f"export CLAVAIN_PYTHON='{venv / 'bin' / 'python'}'\n")
    # The launcher picked the ready venv's interpreter for the hook itself.
    trace = json.loads((tmp_path / "t").read_text())
    assert trace["python"] == str(venv / "bin" / "python")


def test_bash_calls_find_the_venv_through_exported_data_dir(tmp_path: Path) -> None:
    """Bash tool calls lack CLAUDE_PLUGIN_DATA; CLAVAIN_PLUGIN_DATA from the env file is enough
    for the launcher to pick the venv and for doctor to report it."""
    import subprocess

    data = tmp_path / "data"
    venv = bootstrap.venv_dir(data)
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").symlink_to(sys.executable)
    (venv / bootstrap.READY_MARKER).write_text(bootstrap.wanted_key())
    result = subprocess.run([str(REPO / "bin" / "clavain"), "doctor", "--json"], cwd=tmp_path,
                            capture_output=True, text=True,
                            env={"PATH": "/usr/bin:/bin", "CLAVAIN_PLUGIN_DATA": str(data),
                                 "HOME": str(tmp_path)})
    report = json.loads(result.stdout)
    rows = {row["check"]: row for row in report["checks"]}
    assert rows["venv"]["status"] == "ok"
    assert rows["python"]["executable"] == str(venv / "bin" / "python")


def test_env_file_lines_are_shell_quoted(run_hook, tmp_path: Path) -> None:
    """The host sources the env file: a `$(…)`, a quote or a space in a path must round-trip
    exactly and run nothing."""
    import subprocess

    hostile = tmp_path / "plug in's \"$(touch pwned)\" `touch pwned2` $HOME"
    data = hostile / "data"
    venv = bootstrap.venv_dir(data)
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").symlink_to(sys.executable)
    (venv / bootstrap.READY_MARKER).write_text(bootstrap.wanted_key())
    env_file = tmp_path / "env.sh"
    run_hook("SessionStart", payload_for("SessionStart", tmp_path), env={
        "CLAUDE_ENV_FILE": str(env_file), "CLAUDE_PLUGIN_ROOT": str(REPO),
        "CLAUDE_PLUGIN_DATA": str(data), "PATH": "/usr/bin:/bin", "CLAVAIN_PYTHON": ""})
    shown = subprocess.run(
        ["bash", "-c", f'. {env_file} && printf "%s\\n" "$CLAVAIN_PLUGIN_DATA" '
                       '"$CLAVAIN_PYTHON" "${PATH##*:}"'],
        cwd=tmp_path, capture_output=True, text=True, env={"PATH": "/usr/bin:/bin"})
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.splitlines() == [str(data), str(venv / "bin" / "python"),
                                         str(REPO / "bin")]
    assert not (tmp_path / "pwned").exists() and not (tmp_path / "pwned2").exists()
