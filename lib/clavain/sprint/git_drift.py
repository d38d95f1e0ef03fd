"""What moved in git since a sprint's checkpoint, for `sprint resume` to warn about before the
next step builds on it."""

from __future__ import annotations

from typing import Any

from clavain.paths import StatePaths
from clavain.sprint import checkpoint as store


def git_warning(state: StatePaths, active: dict[str, Any]) -> str | None:
    """What moved in git since the checkpoint: another branch ("checkpoint made on X, now on
    Y"), or commits on the same one ("N commits since"); None when nothing did."""
    recorded_sha, recorded_branch = active["git_sha"], active.get("branch")
    head = store.git_head(state.project)
    branch = store.git_branch(state.project)
    if recorded_branch and branch != recorded_branch:
        now = f"now on {branch}" if branch else "HEAD is now detached"
        return (f"checkpoint made on branch {recorded_branch}, {now}: the work may be on the "
                f"other branch (`git switch {recorded_branch}`)")
    if not recorded_sha or not head or head == recorded_sha:
        return None
    since = store.commits_since(state.project, recorded_sha)
    if since is not None:
        return (f"{since} commit(s) since the checkpoint on {branch or 'this branch'} (HEAD was "
                f"{recorded_sha[:12]}, now {head[:12]}); re-check what the next step builds on")
    return (f"the code changed since the checkpoint (HEAD was {recorded_sha[:12]}, now "
            f"{head[:12]}, not a descendant: history was rewritten); re-check what the next "
            "step builds on")
