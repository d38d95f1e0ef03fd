"""SessionStart: make sure the plugin venv exists (first run), export what Bash tool calls need
(`bin/` on the PATH, the venv, `CLAVAIN_COMPANIONS`), and put in the model's context only what
it can act on (the active sprint or, after a compaction or resume, its recovery note; the
handoff note; agents at work), capped; nothing at all when nothing is actionable. Stdlib only."""

from __future__ import annotations

import os
from pathlib import Path

from clavain import bootstrap
from clavain.paths import StatePaths, plugin_data_dir, plugin_root

DEFAULT_BOOTSTRAP_WAIT_SECONDS = 45.0
# hooks/hooks.json gives SessionStart 300 s; stop waiting well before the host kills the hook.
MAX_BOOTSTRAP_WAIT_SECONDS = 280.0

RECOVERY_SOURCES = ("compact", "resume")


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


def _env_file_lines(state: StatePaths) -> list[str]:
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
    from clavain.paths import claude_config_dir
    from clavain.session.companions import detect

    companions = detect(claude_config_dir(), project=state.project)
    if companions:
        lines.append(f"export CLAVAIN_COMPANIONS={shell_quote(','.join(companions))}")
    return lines


def shell_quote(value: str) -> str:
    """`value` as one literal shell word: the host sources the env file, so a `$(…)`, a quote
    or a space in a plugin path must neither run nor break (shlex costs an import)."""
    return "'" + value.replace("'", "'\"'\"'") + "'"


def _write_env_file(state: StatePaths) -> None:
    target = os.environ.get("CLAUDE_ENV_FILE")
    lines = _env_file_lines(state)
    if target and lines:
        with open(Path(target), "a", encoding="utf-8") as handle:
            handle.write("\n".join(lines) + "\n")


def max_context_tokens(state: StatePaths) -> int:
    """CLAVAIN_CONTEXT_MAX_TOKENS, else `session.contextMaxTokens` in the config; a bad value
    falls back to the default (the hook must still start the session)."""
    from clavain.session.context import DEFAULT_MAX_TOKENS, MAX_TOKENS_CEILING

    explicit = os.environ.get("CLAVAIN_CONTEXT_MAX_TOKENS")
    if explicit:
        try:
            return min(max(0, int(explicit)), MAX_TOKENS_CEILING)
        except ValueError:
            return DEFAULT_MAX_TOKENS
    from clavain import config
    from clavain.errors import ClavainError

    try:
        return int(config.get(config.load(state.config), "session.contextMaxTokens",
                              DEFAULT_MAX_TOKENS))
    except ClavainError:
        return DEFAULT_MAX_TOKENS


def recording_problem(state: StatePaths) -> str:
    """One line when tool calls cannot be recorded here (a read-only `.clavain/`, its database
    read-only): the PreToolUse hook lets such calls run uncounted, and a person must know."""
    root, db = str(state.root), str(state.db)
    if not os.path.isdir(root):
        return ""
    blocked = [path for path in (root, db) if os.path.exists(path) and not os.access(path, os.W_OK)]
    if not blocked:
        return ""
    from clavain.store.health import read_only_fix  # the one wording of a read-only state

    return (f"Clavain cannot record tool calls here, so budgets and loop guards are not "
            f"counted; ask the user to fix it: {read_only_fix(blocked[0])}.")


def _sections(state: StatePaths, payload: dict) -> dict[str, str | list[str]]:
    """Each section on its own: one that fails is logged and left out, not the whole context."""
    from clavain.session import handoff, inflight, recovery

    builders = {
        "recording": lambda: recording_problem(state),
        "sprint": lambda: recovery.sprint_section(state),
        "handoff": lambda: handoff.handoff_section(state),
        "agents": lambda: inflight.agents_section(state.project, payload.get("transcript_path")),
    }
    source = payload.get("source")
    if source in RECOVERY_SOURCES:
        session_id = payload.get("session_id")

        def recovery_note() -> list[str]:
            note = recovery.for_session(state, session_id if isinstance(session_id, str)
                                        else None, source)
            return recovery.alternatives(note) if note else []
        builders["recovery"] = recovery_note
    sections = {}
    for name, build in builders.items():
        try:
            sections[name] = build()
        except Exception as exc:
            from clavain.hook_log import log_failure  # only once something failed

            log_failure("SessionStart", f"{name} section: {type(exc).__name__}: {exc}", payload)
    if sections.get("recovery"):
        sections.pop("sprint", None)  # the recovery note holds the sprint's lines
    return sections


def context_text(state: StatePaths, payload: dict) -> str:
    from clavain.session.context import fit

    text, _dropped = fit(_sections(state, payload), max_context_tokens(state))
    return text


def handle(payload: dict) -> dict | None:
    from clavain.locate import payload_cwd

    state = StatePaths.discover(payload_cwd(payload))
    message = _bootstrap_message()
    _write_env_file(state)
    output: dict = {}
    text = context_text(state, payload)
    if text:
        output["hookSpecificOutput"] = {"hookEventName": "SessionStart",
                                        "additionalContext": text}
    if message:
        output["systemMessage"] = message
    return output or None
