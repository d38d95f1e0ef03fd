"""SessionStart: make sure the plugin venv exists (first run), expose `bin/` to Bash tool calls,
and give the model a few lines of always-on context. Stdlib only."""

from __future__ import annotations

import os
from pathlib import Path

from clavain import bootstrap
from clavain.paths import plugin_data_dir, plugin_root

DEFAULT_BOOTSTRAP_WAIT_SECONDS = 45.0
# hooks/hooks.json gives SessionStart 300 s; stop waiting well before the host kills the hook.
MAX_BOOTSTRAP_WAIT_SECONDS = 280.0

CONTEXT = (
    "Clavain is active: the `clavain` CLI is on the Bash PATH (`clavain --help`); its state in "
    "`.clavain/` is read and written through the CLI, not by hand."
)


def _bootstrap_message() -> str | None:
    """A one-line systemMessage when the venv is not ready, else None."""
    data_dir = plugin_data_dir()
    if data_dir is None or os.environ.get("CLAVAIN_PYTHON") or \
            os.environ.get("CLAVAIN_BOOTSTRAP", "1") == "0":
        return None
    try:
        wait = float(os.environ.get("CLAVAIN_BOOTSTRAP_WAIT", DEFAULT_BOOTSTRAP_WAIT_SECONDS))
    except ValueError:
        wait = DEFAULT_BOOTSTRAP_WAIT_SECONDS
    wait = min(max(wait, 0.0), MAX_BOOTSTRAP_WAIT_SECONDS)
    state = bootstrap.ensure(data_dir, plugin_root(), wait)
    if state == "ready":
        return None
    log = data_dir / bootstrap.LOG_NAME
    if state == "installing":
        return ("Clavain: still installing its Python dependencies in the background; "
                f"commands that need them work once it finishes (log: {log}).")
    return (f"Clavain: installing its Python dependencies failed ({state[len('failed: '):]}). "
            f"Hooks keep working without them; see {log} and run `clavain doctor`.")


def _env_file_lines() -> list[str]:
    """Exports for later Bash tool calls, which get none of the hook's CLAUDE_PLUGIN_* variables.

    The host appends the plugin's bin/ to the Bash PATH itself (2.1.330); it is not on the hook's
    PATH, so the PATH line is a fallback that usually repeats it. CLAVAIN_PLUGIN_DATA lets the
    launcher and `clavain doctor` find the venv even when it becomes ready mid-session.
    """
    lines = []
    bin_dir = plugin_root() / "bin"
    if str(bin_dir) not in os.environ.get("PATH", "").split(os.pathsep):
        lines.append(f'export PATH="$PATH":{shell_quote(str(bin_dir))}')
    data_dir = plugin_data_dir()
    if data_dir is not None:
        lines.append(f"export CLAVAIN_PLUGIN_DATA={shell_quote(str(data_dir))}")
        if bootstrap.is_ready(data_dir):
            python = str(bootstrap.venv_python(data_dir))
            lines.append(f"export CLAVAIN_PYTHON={shell_quote(python)}")
    return lines


def shell_quote(value: str) -> str:
    """`value` as one literal shell word: the host sources the env file, so a `$(…)`, a quote
    or a space in a plugin path must neither run nor break (shlex costs an import)."""
    return "'" + value.replace("'", "'\"'\"'") + "'"


def _write_env_file() -> None:
    target = os.environ.get("CLAUDE_ENV_FILE")
    lines = _env_file_lines()
    if target and lines:
        with open(Path(target), "a", encoding="utf-8") as handle:
            handle.write("\n".join(lines) + "\n")


def handle(payload: dict) -> dict:
    message = _bootstrap_message()
    _write_env_file()
    output: dict = {
        "hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext": CONTEXT}
    }
    if message:
        output["systemMessage"] = message
    return output
