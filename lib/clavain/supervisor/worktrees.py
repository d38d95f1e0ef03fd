"""One git worktree per parallel LLM runner, merged back into the project one at a time.

Runners working side by side in one checkout would edit each other's files mid-task and fight
over git's index. Each gets its own worktree on its own branch (`clavain/<run>/<node>`) from
the project's HEAD; when it succeeds, its work is committed there and merged into the branch
checked out in the project. Merges are serialised by an exclusive `flock` (threads and
processes alike), because two `git merge`s in one checkout fail on `index.lock` instead of
waiting. A merge that conflicts is aborted, so the project is left exactly as it was and the
node can be retried on top of the work merged before it.

Worktrees live in `<project>/.clavain-worktrees/<run>/<node>` (`paths.WORKTREES_DIR_NAME`
says why); their locks stay in the state folder, which only Clavain writes. Those an older
Clavain left in `.clavain/worktrees/` are still found and removed.

Every git call runs without a prompt (`GIT_TERMINAL_PROMPT=0`), with a fixed identity
(`Clavain <clavain@localhost>`, so it works with no git config), without commit signing, hooks
or automatic gc: a person's hooks may need a terminal or tools a runner lacks (the workgraph's
verify nodes check the work instead), and a background gc would take repository-wide locks
while other runners commit.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import shutil
import subprocess
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from clavain.errors import ClavainError
from clavain.gitstatus import changed_paths
from clavain.paths import WORKTREES_DIR_NAME, safe_path_part
from clavain.textio import clip

NAME = "Clavain"
EMAIL = "clavain@localhost"
BRANCH_PREFIX = "clavain"
STATE_DIR = ".clavain"  # Clavain's own state in the project: never the person's work
LEGACY_WORKTREES_DIR = "worktrees"  # under the state folder, before hard mode allowed runs
ADMIN_LOCK = "worktrees.lock"  # in the state folder: one `git worktree` change at a time
MERGE_LOCK = "merge.lock"  # in the state folder: one merge into the project at a time
# Never the runners' work: merged, an agent's edit of the host's settings could turn it off.
NEVER_COMMITTED = (STATE_DIR, WORKTREES_DIR_NAME, ".claude/settings.json",
                   ".claude/settings.local.json")
CONFIG = ("-c", "commit.gpgsign=false", "-c", "gc.auto=0", "-c", "maintenance.auto=false",
          "-c", "core.quotepath=false")
# Set by git for hooks and by some shells; they would point our calls at another repository.
INHERITED_GIT_VARIABLES = ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_PREFIX",
                           "GIT_COMMON_DIR", "GIT_OBJECT_DIRECTORY")
SHOWN_NAMES = 8


@dataclass(frozen=True)
class Worktree:
    path: Path
    branch: str
    base: str  # the project commit the worktree started from
    lock: Path  # the state folder's lock on `git worktree` changes


@dataclass(frozen=True)
class MergeOutcome:
    merged: bool
    commit: str | None  # the merge commit; None when nothing was merged
    conflicts: list[str] = field(default_factory=list)
    message: str = ""
    dirty: list[str] = field(default_factory=list)  # a person's changes: nothing was merged


def git_env() -> dict[str, str]:
    """The environment of every git call: no prompts, a fixed identity, no inherited repo."""
    env = {k: v for k, v in os.environ.items() if k not in INHERITED_GIT_VARIABLES}
    env.update({"GIT_TERMINAL_PROMPT": "0", "GIT_MERGE_AUTOEDIT": "no",
                "GIT_AUTHOR_NAME": NAME, "GIT_AUTHOR_EMAIL": EMAIL,
                "GIT_COMMITTER_NAME": NAME, "GIT_COMMITTER_EMAIL": EMAIL})
    return env


def _git(cwd: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    try:
        # Its own session: a Ctrl-C in the terminal is the supervisor's to handle, not git's
        # to die of halfway through a commit or a merge.
        done = subprocess.run(["git", *CONFIG, *args], cwd=cwd, capture_output=True, text=True,
                              encoding="utf-8", errors="replace", env=git_env(),
                              start_new_session=True, stdin=subprocess.DEVNULL)
    except FileNotFoundError as exc:
        raise ClavainError("git is not installed (or not on PATH): parallel runners need it "
                           "for their worktrees") from exc
    except NotADirectoryError as exc:
        raise ClavainError(f"cannot run git in {cwd}: not a directory") from exc
    if check and done.returncode != 0:
        why = clip(done.stderr or done.stdout, 300) or f"exit {done.returncode}"
        raise ClavainError(f"git {' '.join(args)} failed in {cwd}: {why}")
    return done


def _names(output: str) -> list[str]:
    """File names from a `-z` listing."""
    return [name for name in output.split("\0") if name]


def _ref_part(name: str) -> str:
    """A run or node id as one component of a branch name (git's check-ref-format rules)."""
    cleaned = re.sub(r"[^A-Za-z0-9._-]+", "_", name)
    cleaned = re.sub(r"\.{2,}", ".", cleaned).strip(".")
    if cleaned.endswith(".lock"):
        cleaned = cleaned[: -len(".lock")] + "_lock"
    cleaned = cleaned.lstrip("-")
    return cleaned or "_"


def branch_name(run_id: str, node_id: str) -> str:
    return f"{BRANCH_PREFIX}/{_ref_part(run_id)}/{_ref_part(node_id)}"


def _branch_exists(project: Path, branch: str) -> bool:
    return _git(project, "rev-parse", "--verify", "--quiet", f"refs/heads/{branch}",
                check=False).returncode == 0


@contextlib.contextmanager
def _exclusive(lock_path: Path) -> Iterator[None]:
    """Hold an exclusive flock on `lock_path`: one holder across threads and processes (each
    open() is its own lock owner), released when the file closes, even if the holder dies."""
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    # Never through a symlink planted in .clavain/ (as `fsutil.open_inside` writes).
    fd = os.open(lock_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND
                 | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0), 0o666)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock


def _project_head(project: Path) -> str:
    done = _git(project, "rev-parse", "--verify", "--quiet", "HEAD^{commit}", check=False)
    if done.returncode != 0:
        inside = _git(project, "rev-parse", "--is-inside-work-tree", check=False)
        if inside.returncode != 0:
            raise ClavainError(f"{project} is not a git repository: parallel runners work in "
                               "git worktrees (run `git init` and commit, or use one worker)")
        raise ClavainError(f"{project} has no commit yet: git worktrees start from HEAD "
                           "(make a first commit, or use one worker)")
    return done.stdout.strip()


def worktrees_root(project: Path) -> Path:
    return Path(project) / WORKTREES_DIR_NAME


def admin_lock(state_root: Path) -> Path:
    return Path(state_root) / ADMIN_LOCK


def merge_lock(state_root: Path) -> Path:
    return Path(state_root) / MERGE_LOCK


def _make_root(project: Path) -> Path:
    """The worktrees folder, ignoring itself in git (an older `init` did not name it), and
    never a link (the agent can write the project: one here could lead removals elsewhere)."""
    root = worktrees_root(project)
    if root.is_symlink() or (root.exists() and not root.is_dir()):
        raise ClavainError(f"{root} is not a folder of Clavain's (a symlink or a file): remove "
                           "it; parallel runners keep their worktrees there")
    root.mkdir(exist_ok=True)
    ignore = root / ".gitignore"
    if not ignore.is_file() or ignore.is_symlink():
        from clavain.fsutil import write_atomic

        write_atomic(ignore, "# Clavain's runners' git worktrees: none of it is committed\n*\n")
    return root


def create(project: Path, state_root: Path, node_id: str, run_id: str) -> Worktree:
    """A fresh worktree for one node's runner, on a new branch from the project's HEAD.

    A worktree or branch of the same name is a leftover of a crashed run (a live one would
    hold the node's claim): it is removed first, its uncommitted work with it.
    """
    project = project.resolve()
    base = _project_head(project)
    # Per run: two runs on different graphs may both have a `task-a`. Never resolved: a link
    # the agent planted for the run or the node must not lead the clean-up elsewhere.
    run_folder = _make_root(project) / safe_path_part(run_id)
    if run_folder.is_symlink() or (run_folder.exists() and not run_folder.is_dir()):
        raise ClavainError(f"{run_folder} is not a folder of Clavain's (a symlink or a file): "
                           "remove it; parallel runners keep their worktrees there")
    folder = run_folder / safe_path_part(node_id)
    branch = branch_name(run_id, node_id)
    _git(project, "check-ref-format", "--branch", branch)
    folder.parent.mkdir(parents=True, exist_ok=True)
    lock = admin_lock(state_root)
    with _exclusive(lock):
        _discard(project, folder, branch)
        _git(project, "worktree", "add", "-b", branch, str(folder), base)
    return Worktree(folder, branch, base, lock)


def _discard(project: Path, folder: Path, branch: str | None) -> None:
    if folder.is_symlink():  # planted: removing the link leaves what it points at alone
        folder.unlink()
    elif folder.exists():
        _git(project, "worktree", "remove", "--force", "--force", str(folder), check=False)
        if folder.exists():  # not (or no longer) a registered worktree: a plain leftover folder
            shutil.rmtree(folder)
    _git(project, "worktree", "prune")
    if branch is not None and _branch_exists(project, branch):
        _git(project, "branch", "-D", branch)


def remove(project: Path, wt: Worktree, *, delete_branch: bool = True) -> None:
    """Drop a runner's worktree (and by default its branch: merged work lives on in the
    project; keep it to let a person look at unmerged work)."""
    project = project.resolve()
    with _exclusive(wt.lock):
        _discard(project, wt.path, wt.branch if delete_branch else None)
    with contextlib.suppress(OSError):
        wt.path.parent.rmdir()  # the run's folder, once its last worktree is gone


def commit_all(wt: Worktree, message: str) -> bool:
    """Commit every change in the worktree, untracked files too; False when nothing changed.

    `.clavain/` is left out (a runner's session may write Clavain state there, and merging it
    would clobber the project's own), and so are Claude Code's settings (`NEVER_COMMITTED`).
    """
    _git(wt.path, "add", "-A", "--", ".", *(f":(exclude){name}" for name in NEVER_COMMITTED))
    staged = _git(wt.path, "diff", "--cached", "--quiet", check=False)
    if staged.returncode == 0:
        return False
    if staged.returncode != 1:
        raise ClavainError(f"git diff --cached failed in {wt.path}: "
                           f"{clip(staged.stderr, 300) or f'exit {staged.returncode}'}")
    _git(wt.path, "commit", "--quiet", "--no-verify", "-m", message.strip() or "clavain: work")
    return True


def _current_branch(project: Path) -> str:
    done = _git(project, "symbolic-ref", "--short", "--quiet", "HEAD", check=False)
    return done.stdout.strip() or "the detached HEAD"


def merge(project: Path, wt: Worktree, *, lock_path: Path) -> MergeOutcome:
    """Merge the worktree's branch into the branch checked out in `project` (`--no-ff`).

    One merge at a time (flock on `lock_path`). A project with uncommitted changes to tracked
    files (a person at work) is not merged into: `dirty` names them. On a conflict the merge is
    aborted and the conflicting files named; the project is left as it was. A merge git
    refuses to start (an untracked file in the way) is reported the same way, without
    conflicts.
    """
    project = project.resolve()
    with _exclusive(lock_path):
        # Checked under the lock: another worker's merge in progress is not a person's edit.
        dirty = modified_tracked_files(project)
        if dirty:
            return MergeOutcome(False, None, [], "the project has uncommitted changes to "
                                f"tracked files ({_listing(dirty)})", dirty)
        target = _current_branch(project)
        ahead = _git(project, "rev-list", "--count", f"HEAD..refs/heads/{wt.branch}")
        if int(ahead.stdout.strip() or 0) == 0:
            return MergeOutcome(True, None, [], f"{wt.branch} has nothing to merge")
        before = _project_head(project)
        done = _git(project, "merge", "--no-ff", "--no-edit", "--no-verify",
                    f"refs/heads/{wt.branch}", check=False)
        if done.returncode == 0:
            commit = _project_head(project)
            return MergeOutcome(True, commit, [], f"merged {wt.branch} into {target}")
        return _undo_failed_merge(project, wt, target, before, done)


def _undo_failed_merge(project: Path, wt: Worktree, target: str, before: str,
                       done: subprocess.CompletedProcess[str]) -> MergeOutcome:
    conflicts = _names(_git(project, "diff", "--name-only", "--diff-filter=U", "-z",
                            check=False).stdout)
    in_progress = _git(project, "rev-parse", "--verify", "--quiet", "MERGE_HEAD",
                       check=False).returncode == 0
    if in_progress:
        aborted = _git(project, "merge", "--abort", check=False)
        if aborted.returncode != 0:
            raise ClavainError(f"git merge --abort failed in {project} after merging "
                               f"{wt.branch} failed: {clip(aborted.stderr, 300)}; the project "
                               "is mid-merge: resolve or abort it by hand")
    if _project_head(project) != before:
        raise ClavainError(f"merging {wt.branch} into {target} moved HEAD although it failed "
                           f"(was {before[:12]}); look at {project} by hand")
    why = clip(done.stderr or done.stdout, 300) or f"git merge exit {done.returncode}"
    if conflicts:
        shown = ", ".join(conflicts[:SHOWN_NAMES]) + (" …" if len(conflicts) > SHOWN_NAMES
                                                      else "")
        message = (f"merging {wt.branch} into {target} conflicts in {shown}; aborted, the "
                   "project is unchanged")
    else:
        message = f"git refused to merge {wt.branch} into {target}: {why}"
    return MergeOutcome(False, None, conflicts, message)


def modified_tracked_files(project: Path) -> list[str]:
    """Tracked files with uncommitted changes (staged or not), `.clavain/` left out."""
    done = _git(project.resolve(), "status", "--porcelain=v1", "-z", "--untracked-files=no")
    return [name for name in changed_paths(done.stdout.encode("utf-8", "surrogateescape"))
            if not _is_state(name)]


def _is_state(name: str) -> bool:
    return any(name == folder or name.startswith(folder + "/")
               for folder in (STATE_DIR, WORKTREES_DIR_NAME))


def require_clean(project: Path) -> None:
    """Refuse a project with uncommitted changes or untracked files (ignored ones and
    `.clavain/` aside): merging runner work into such a tree could overwrite or entangle a
    person's work, and checks run in the project would pass on files that are not in what the
    run commits (what ships)."""
    _project_head(project)  # not a repository, or no commit: its one line, not git's output
    names = modified_tracked_files(project)
    if names:
        raise ClavainError(
            f"{project} has uncommitted changes to tracked files ({_listing(names)}): commit "
            "or stash them before a parallel run, whose merges could otherwise lose them")
    untracked = untracked_files(project)
    if untracked:
        raise ClavainError(
            f"{project} has untracked files ({_listing(untracked)}): commit them (or add them "
            "to .gitignore) before a parallel run — its runners start from the last commit and "
            "its checks would pass on files that are not in what it commits")


def untracked_files(project: Path) -> list[str]:
    """Untracked files git does not ignore, `.clavain/` left out."""
    done = _git(project.resolve(), "ls-files", "--others", "--exclude-standard", "-z")
    return [name for name in _names(done.stdout) if not _is_state(name)]


def leftovers(project: Path, state_root: Path, *, live: set[str], kept: set[str]
              ) -> dict[str, list[str]]:
    """What runs that ended left in git: their worktree folders (`worktrees`) and branches
    (`branches`: a crash's, whose node was given back and runs again), apart from the branches
    a run kept on purpose (`kept`: a conflict's or a dirty tree's only copy of that work).
    Runs in `live` (run ids) are still at work and left alone. Empty outside a git
    repository."""
    found: dict[str, list[str]] = {"worktrees": [], "branches": [], "kept": []}
    if _git(project, "rev-parse", "--verify", "--quiet", "HEAD^{commit}",
            check=False).returncode != 0:
        return found
    live_folders = {safe_path_part(run) for run in live}
    live_refs = {_ref_part(run) for run in live}
    for base in (worktrees_root(project), state_root / LEGACY_WORKTREES_DIR):
        # Never through a link (the agent can write the project): only real folders are ours.
        if base.is_symlink() or not base.is_dir():
            continue
        for run_folder in sorted(base.iterdir()):
            if _real_dir(run_folder) and run_folder.name not in live_folders:
                found["worktrees"] += [str(path) for path in sorted(run_folder.iterdir())
                                       if _real_dir(path)]
    refs = _git(project, "for-each-ref", "--format=%(refname:short)",
                f"refs/heads/{BRANCH_PREFIX}/", check=False).stdout.split()
    for branch in refs:
        parts = branch.split("/")
        if len(parts) != 3 or parts[1] in live_refs:
            continue
        found["kept" if branch in kept else "branches"].append(branch)
    return found


def clean_leftovers(project: Path, state_root: Path, *, live: set[str], kept: set[str]
                    ) -> dict[str, list[str]]:
    """Remove what ended runs left (`leftovers`) but the branches kept on purpose: returns
    what was `removed` and what is `kept`."""
    project = project.resolve()
    found = leftovers(project, state_root, live=live, kept=kept)
    removed = []
    if found["worktrees"] or found["branches"]:
        with _exclusive(admin_lock(state_root)):
            for folder in found["worktrees"]:
                with contextlib.suppress(ClavainError, OSError):
                    _discard(project, Path(folder), None)
                    removed.append(folder)
            for branch in found["branches"]:
                if _git(project, "branch", "-D", branch, check=False).returncode == 0:
                    removed.append(branch)
            _git(project, "worktree", "prune", check=False)
        for run_folder in {Path(folder).parent for folder in found["worktrees"]}:
            with contextlib.suppress(OSError):
                run_folder.rmdir()
        legacy = state_root / LEGACY_WORKTREES_DIR
        if legacy.is_dir() and not any(_real_dir(path) for path in legacy.iterdir()):
            for name in (".admin.lock", ".merge.lock"):  # an older Clavain's folder goes
                with contextlib.suppress(OSError):
                    (legacy / name).unlink()
            with contextlib.suppress(OSError):
                legacy.rmdir()
    return {"removed": removed, "kept": found["kept"]}


def _real_dir(path: Path) -> bool:
    return path.is_dir() and not path.is_symlink()

def _listing(names: Sequence[str]) -> str:
    shown = ", ".join(names[:SHOWN_NAMES])
    return shown + (f" and {len(names) - SHOWN_NAMES} more" if len(names) > SHOWN_NAMES else "")
