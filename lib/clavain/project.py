"""`clavain init`: create `.clavain/` and keep its volatile parts out of git."""

from __future__ import annotations

from pathlib import Path

from clavain.fsutil import write_atomic
from clavain.paths import STATE_DIR_NAME, VOLATILE_PARTS, WORKTREES_DIR_NAME, StatePaths

GITIGNORE_MARKER = "# clavain: machine state (added by `clavain init`)"


def gitignore_lines(state: StatePaths) -> list[str]:
    try:
        prefix = state.root.relative_to(state.project).as_posix()
    except ValueError:
        prefix = STATE_DIR_NAME
    return [f"/{prefix}/{part}" for part in VOLATILE_PARTS] + [f"/{WORKTREES_DIR_NAME}/"]


def in_git_work_tree(folder: Path) -> bool:
    return any((candidate / ".git").exists() for candidate in (folder, *folder.parents))


def ensure_gitignore(state: StatePaths) -> bool:
    """Append Clavain's block to the project's .gitignore, or the lines a newer Clavain added
    to it (under the same marker). True when something was added. Outside a git work tree
    there is nothing to ignore for, so no .gitignore is created."""
    if not in_git_work_tree(state.project):
        return False
    gitignore = state.project / ".gitignore"
    existing = gitignore.read_text(encoding="utf-8") if gitignore.exists() else ""
    lines = gitignore_lines(state)
    if GITIGNORE_MARKER in existing:
        present = set(existing.splitlines())
        lines = [line for line in lines if line not in present]
        if not lines:
            return False
    block = "\n".join([GITIGNORE_MARKER, *lines]) + "\n"
    separator = "" if not existing or existing.endswith("\n") else "\n"
    spacer = "\n" if existing else ""
    write_atomic(gitignore, existing + separator + spacer + block)
    return True


def init_state(state: StatePaths) -> dict[str, object]:
    """Create the state folder tree; idempotent. Returns what was done, for printing."""
    created = not state.root.exists()
    for folder in (state.root, state.verdicts, state.artifacts, state.runs, state.scratch,
                   state.logs):
        folder.mkdir(parents=True, exist_ok=True)
    gitignore_added = ensure_gitignore(state)
    return {
        "state_dir": str(state.root),
        "created": created,
        "gitignore_updated": gitignore_added,
        "gitignore": str(state.project / ".gitignore"),
    }


def ensure_state(state: StatePaths) -> StatePaths:
    """What the first command or hook that needs `.clavain/` calls."""
    # Not `state.root`: a hook failure may already have made `.clavain/logs/` alone.
    if not state.verdicts.exists():
        init_state(state)
    return state
