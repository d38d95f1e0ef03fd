"""`clavain init`: create `.clavain/` and keep its volatile parts out of git (the clone's
`.git/info/exclude`: nothing in the work tree for a parallel run to refuse)."""

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


def ensure_gitignore(state: StatePaths) -> Path | None:
    """Keep Clavain's volatile paths out of git: in the repository's local exclude list
    (`.git/info/exclude`) under GITIGNORE_MARKER, so `init` leaves no file in the work tree,
    and a parallel `clavain run`, which refuses untracked or changed files, starts straight
    after it. A `.gitignore` an older Clavain wrote its block into keeps it; only lines neither
    file has are added. Where git cannot say where its exclude list is, the project's
    `.gitignore` as before. Outside a git work tree there is nothing to ignore for. The file
    written, or None when nothing was added."""
    if not in_git_work_tree(state.project):
        return None
    from clavain.hard_mode import append_lines, git_exclude

    gitignore = state.project / ".gitignore"
    found = git_exclude(state.project)
    lines = gitignore_lines(state)
    if found is not None:
        exclude, top = found
        try:
            below = state.project.resolve().relative_to(top).as_posix()
        except ValueError:  # git says the project is outside its own work tree: .gitignore
            found = None
        else:  # the exclude list's patterns are relative to the repository's top folder
            lines = [f"/{below}{line}" if below != "." else line for line in lines]
    present = set(_read(gitignore).splitlines()) if GITIGNORE_MARKER in _read(gitignore) \
        else set()
    if found is None:
        return gitignore if _append_block(gitignore, [ln for ln in lines
                                                      if ln not in present]) else None
    listed = _read(exclude)
    missing = [line for line in lines if line not in present | set(listed.splitlines())]
    if not missing:
        return None
    append_lines(exclude, ([] if GITIGNORE_MARKER in listed else [GITIGNORE_MARKER]) + missing)
    return exclude


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (FileNotFoundError, NotADirectoryError):
        return ""


def _append_block(gitignore: Path, lines: list[str]) -> bool:
    if not lines:
        return False
    existing = _read(gitignore)
    head = [] if GITIGNORE_MARKER in existing else [GITIGNORE_MARKER]
    separator = "" if not existing or existing.endswith("\n") else "\n"
    spacer = "\n" if existing and head else ""
    write_atomic(gitignore, existing + separator + spacer + "\n".join([*head, *lines]) + "\n")
    return True


def init_state(state: StatePaths) -> dict[str, object]:
    """Create the state folder tree; idempotent. Returns what was done, for printing."""
    created = not state.root.exists()
    for folder in (state.root, state.verdicts, state.artifacts, state.runs, state.scratch,
                   state.logs):
        folder.mkdir(parents=True, exist_ok=True)
    written = ensure_gitignore(state)
    return {
        "state_dir": str(state.root),
        "created": created,
        "gitignore_updated": written is not None,
        # Where the ignores went: .git/info/exclude (this clone), or .gitignore without git.
        "gitignore": str(written) if written is not None else None,
    }


def ensure_state(state: StatePaths) -> StatePaths:
    """What the first command or hook that needs `.clavain/` calls."""
    # Not `state.root`: a hook failure may already have made `.clavain/logs/` alone.
    if not state.verdicts.exists():
        init_state(state)
    return state
