"""`clavain init --statusline`: the `statusLine` setting in the project's
`.claude/settings.local.json` (with `sandbox.read_settings`' checks), beside a person's own or in
its place. Apart from `clavain.statusline`, which the host runs every 300 ms and which needs none
of this."""

from __future__ import annotations


def install(project: str, command: str, *, force: bool = False, combine: bool = False) -> dict:
    """Put `{"type": "command", "command": command}` in the project's settings.local.json,
    keeping every other key. A different status line already there is a person's own: refused
    (ClavainError naming it and both ways on) unless `force` (replaced) or `combine` (kept: the
    command becomes `command --with THEIRS`, theirs printed first, their other keys such as
    `padding` kept). {"settings", "changed", "replaced", "combined"}."""
    import shlex
    from pathlib import Path

    from clavain import hard_mode, sandbox
    from clavain.errors import ClavainError
    from clavain.fsutil import write_json_atomic

    path = sandbox.settings_file(Path(project))
    settings = sandbox.read_settings(path)
    wanted: dict = {"type": "command", "command": command}
    current = settings.get("statusLine")
    theirs = current.get("command") if isinstance(current, dict) \
        and current.get("type") == "command" else None
    ours = isinstance(theirs, str) and (theirs == command or theirs.startswith(
        command + " --with "))
    if ours:  # already set (combined or not), with its own padding, say
        return {"settings": str(path), "changed": False, "replaced": None, "combined": None}
    if current is not None and combine and isinstance(theirs, str) and theirs.strip():
        wanted = {**current, "command": f"{command} --with {shlex.quote(theirs)}"}
    elif current is not None and not force:
        shown = current.get("command") if isinstance(current, dict) else current
        raise ClavainError(f"{path} already has a status line of its own ({shown!r}): "
                           "`clavain init --statusline --combine` shows yours and then "
                           "Clavain's; `--force` replaces yours")
    write_json_atomic(path, {**settings, "statusLine": wanted})
    # It names this machine's paths, as hard mode's settings do: kept out of git.
    combined_with = theirs if wanted["command"] != command else None
    return {"settings": str(path), "changed": True,
            "replaced": None if combined_with else current, "combined": combined_with,
            "git_excluded": hard_mode.exclude_from_git(path)}
