"""Hard mode as a person's decision: on by default where the machine can sandbox, off when a
person says so, and never either at an agent's word.

A person's plain `clavain init` turns it on (`enable`) where `confine.host_problem` finds
nothing missing, unless a person turned it off before; `clavain init --no-sandbox` takes away
what Clavain added (`disable`), keeping the person's other settings. What was added, and the
last decision, are recorded in `.clavain/hard-mode.json` (inside the folder hard mode keeps
from the agent). `status` is the one answer to "which of the two does this project have",
for `init`, `doctor` and the status line's marker.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from clavain import sandbox

ON, OFF = "on", "off"
HARD, BEST_EFFORT = "hard mode", "best effort"
TURN_OFF = "`clavain init --no-sandbox` turns it off"


def record_file(state_root: Path) -> Path:
    return Path(state_root) / sandbox.RECORD_NAME


def read_record(state_root: Path) -> dict[str, Any]:
    from clavain.fsutil import read_json_object

    return read_json_object(record_file(state_root)) or {}


def _write_record(state_root: Path, record: dict[str, Any]) -> None:
    from clavain.clock import now_iso
    from clavain.fsutil import write_json_atomic

    write_json_atomic(record_file(state_root), {**record, "at": now_iso()}, inside=state_root)


def turned_off_by_person(state_root: Path) -> bool:
    """Whether the last decision recorded is a person's `--no-sandbox` (a record with no
    person's provenance in it decides nothing)."""
    record = read_record(state_root)
    by = record.get("by")
    return record.get("mode") == OFF and isinstance(by, dict) and by.get("by") == "person"


def _union(first: dict[str, Any], second: dict[str, Any]) -> dict[str, Any]:
    """Two records of what was added, as one (the earliest "before" of a value wins)."""
    result = {**second, **first, "scalars": {**(second.get("scalars") or {}),
                                             **(first.get("scalars") or {})}}
    for label, _path, _key in sandbox.LISTS:
        result[label] = list(dict.fromkeys([*(first.get(label) or []),
                                            *(second.get(label) or [])]))
    result["network"] = bool(first.get("network") or second.get("network"))
    return result


def enable(state_root: Path, project: Path, by: dict[str, Any] | None = None) -> dict[str, Any]:
    """Turn hard mode on for `project`: check the host, merge the block into the settings file
    (written atomically), record what was added, keep that file out of git (it holds this
    machine's paths). Returns what was done, for printing."""
    from clavain.confine import host_problem  # subprocess, shutil: only for this answer
    from clavain.errors import ClavainError
    from clavain.fsutil import write_json_atomic

    problem = host_problem()
    if problem is not None:
        raise ClavainError(f"hard mode is not available: {problem}", exit_code=1)
    path = sandbox.settings_file(project)
    created = not path.exists()
    record = read_record(state_root)
    if record.get("mode") == ON:
        prior = record.get("added") or {}
    elif sandbox.hard_mode(project, state_root):  # an older Clavain's, with no record
        prior = sandbox.clavains_own(state_root, project)
    else:
        prior = {}
    added: dict[str, Any] = {}
    settings, changes = sandbox.merge(sandbox.read_settings(path), state_root, str(path),
                                      project, added)
    if changes:
        write_json_atomic(path, settings)
    _write_record(state_root, {
        "mode": ON, "added": _union(prior, added), "by": by or {},
        "created_file": record.get("created_file", created) if record.get("mode") == ON
        else created})
    return {"mode": ON, "settings": str(path), "changed": changes,
            "git_excluded": exclude_from_git(path),
            "masked_names_excluded": exclude_masked_names(project),
            "deny_write": sandbox.deny_entry(state_root),
            "protected": [str(p) for p in sandbox.protected_paths(state_root, project)],
            "path_inside_project": path_entries_inside(project)}


def disable(state_root: Path, project: Path, by: dict[str, Any] | None = None
            ) -> dict[str, Any]:
    """Take away what Clavain added to the settings (the record's, else Clavain's own entries
    for settings an older Clavain wrote), keep the rest, and record the person's decision so a
    later plain `clavain init` leaves it off."""
    from clavain.fsutil import write_json_atomic

    path = sandbox.settings_file(project)
    record = read_record(state_root)
    if record.get("mode") == ON:
        added = record.get("added") or {}
    elif sandbox.hard_mode(project, state_root):
        added = sandbox.clavains_own(state_root, project)
    else:
        added = {}
    changes: list[str] = []
    if added and path.exists():
        settings, changes = sandbox.unmerge(sandbox.read_settings(path), added, str(path))
        if changes:
            if not settings and record.get("created_file"):
                path.unlink()
            else:
                write_json_atomic(path, settings)
    _write_record(state_root, {"mode": OFF, "by": by or {}})
    return {"mode": OFF, "settings": str(path), "changed": changes,
            "masked_names_excluded": forget_masked_names(project)}


BEST_EFFORT_WORDS = "person-only decisions are best effort against shortcuts"


def status(project: Path, state_root: Path, *, probe: bool = True) -> dict[str, str]:
    """{"mode": HARD or BEST_EFFORT, "why", "detail"}: whether the sandbox enforces hard mode
    here (why "on"), or why the person-only decisions hold only against shortcuts: the host
    cannot sandbox ("host", with what to install), a person turned it off ("person"), or no
    person's `init` turned it on ("not_on"). `probe`: ask the host (runs bubblewrap once)."""
    if sandbox.hard_mode(project, state_root):
        return {"mode": HARD, "why": "on", "detail": "the sandbox enforces it (.clavain/, "
                "Clavain's code and Claude Code's settings are read-only to the agent); "
                + TURN_OFF}
    from clavain.confine import host_problem

    problem = host_problem() if probe else None
    if problem is not None:
        why, detail = "host", f"hard mode cannot run here. {problem}"
    elif turned_off_by_person(state_root):
        why, detail = "person", ("a person turned hard mode off (`clavain init --sandbox` "
                                 "turns it on)")
    else:
        why, detail = "not_on", ("hard mode is not on (a person's `clavain init` in a "
                                 "terminal turns it on)")
    return {"mode": BEST_EFFORT, "why": why, "detail": f"{BEST_EFFORT_WORDS}: {detail}"}


def path_entries_inside(project: Path, path_value: str | None = None) -> list[str]:
    """PATH folders inside the project. Claude Code puts the plugin's `bin/` *after* the
    person's PATH, and the exemption matches the name `clavain`: a `clavain` the agent writes
    into such a folder (an activated `.venv/bin`, `node_modules/.bin`) would run unsandboxed."""
    root = Path(project).resolve()
    found = []
    for entry in (os.environ.get("PATH", "") if path_value is None else path_value).split(":"):
        folder = Path(entry or ".").resolve()
        if (folder == root or root in folder.parents) and entry not in found:
            found.append(entry or ".")
    return found


def exclude_from_git(path: Path) -> bool:
    """Add the settings file to the repository's local exclude list (`.git/info/exclude`: this
    clone only, since it names this machine's paths) unless git ignores it already. True when
    it was added."""
    import subprocess

    folder = path.parent
    folder.mkdir(parents=True, exist_ok=True)
    try:
        ignored = subprocess.run(["git", "-C", str(folder), "check-ignore", "-q", path.name],
                                 capture_output=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return False
    found = git_exclude(folder)
    if ignored.returncode != 1 or found is None:  # 0: ignored already; 128: not in git
        return False
    exclude_file, top = found
    append_lines(exclude_file, ["/" + path.resolve().relative_to(top).as_posix()])
    return True


def git_exclude(folder: Path) -> tuple[Path, Path] | None:
    """(the repository's local exclude list, its top folder) for `folder`, or None outside
    git."""
    import subprocess

    try:
        done = subprocess.run(["git", "-C", str(folder), "rev-parse", "--path-format=absolute",
                               "--git-path", "info/exclude", "--show-toplevel"],
                              capture_output=True, text=True, timeout=30, check=True)
    except (OSError, subprocess.SubprocessError):
        return None
    exclude, top = [*done.stdout.splitlines(), "", ""][:2]
    return (Path(exclude), Path(top).resolve()) if exclude and top else None


def append_lines(exclude: Path, lines: list[str]) -> None:
    exclude.parent.mkdir(parents=True, exist_ok=True)
    existing = exclude.read_text(encoding="utf-8") if exclude.exists() else ""
    with exclude.open("a", encoding="utf-8") as handle:
        handle.write(("" if not existing or existing.endswith("\n") else "\n")
                     + "\n".join(lines) + "\n")


# Names Claude Code 2.1.330's sandbox covers with /dev/null in the project's top folder (and in
# its `.claude/`, which hard mode's settings file makes exist) while they do not exist, so a
# sandboxed command cannot create them. To git each is a device, and `git add -A` in a sandboxed
# session fails on it ("can only add regular files"): hard mode would cost the agent its commits.
# Observed with bubblewrap; kept in git's local exclude list under MASKED_MARK, only for names
# missing when hard mode is turned on.
MASKED_NAMES = (".bash_profile", ".bashrc", ".gitconfig", ".gitmodules", ".idea", ".mcp.json",
                ".profile", ".ripgreprc", ".vscode", ".zprofile", ".zshrc",
                *(f".claude/{name}" for name in (
                    "agents", "commands", "hooks", "launch.json", "loop.md", "output-styles",
                    "routines", "scheduled_tasks.json", "settings.json", "skills",
                    "workflows")))
MASKED_MARK = "# clavain hard mode: the sandbox masks these while they do not exist"


def _exclude_file(project: Path) -> Path | None:
    """The repository's local exclude list when `project` is its top folder, else None (a
    project below the top: its names are not masked)."""
    found = git_exclude(project)
    return found[0] if found and found[1] == Path(project).resolve() else None


def exclude_masked_names(project: Path) -> list[str]:
    """Add the masked names missing from `project` to git's local exclude list (once); the
    names added."""
    exclude = _exclude_file(project)
    if exclude is None:
        return []
    existing = exclude.read_text(encoding="utf-8") if exclude.exists() else ""
    if MASKED_MARK in existing:
        return []
    names = [name for name in MASKED_NAMES if not os.path.lexists(Path(project) / name)]
    if not names:
        return []
    append_lines(exclude, [MASKED_MARK, *(f"/{name}" for name in names)])
    return names


def forget_masked_names(project: Path) -> list[str]:
    """Take the block `exclude_masked_names` added out of git's local exclude list; the names
    taken out."""
    exclude = _exclude_file(project)
    if exclude is None or not exclude.exists():
        return []
    lines = exclude.read_text(encoding="utf-8").splitlines()
    if MASKED_MARK not in lines:
        return []
    start = lines.index(MASKED_MARK)
    end = start + 1
    while end < len(lines) and lines[end].lstrip("/") in MASKED_NAMES:
        end += 1
    from clavain.fsutil import write_atomic

    kept = lines[:start] + lines[end:]
    write_atomic(exclude, "\n".join(kept) + ("\n" if kept else ""))
    return [line.lstrip("/") for line in lines[start + 1:end]]
