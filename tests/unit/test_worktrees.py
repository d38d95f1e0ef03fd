"""worktrees: real git repositories in tmp_path, no git config needed (the module brings its own
identity)."""

from __future__ import annotations

import subprocess
import threading
from pathlib import Path

import pytest

from clavain.errors import ClavainError
from clavain.supervisor import worktrees
from clavain.supervisor.worktrees import commit_all, create, merge, remove, require_clean


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True,
                          env=worktrees.git_env()).stdout.strip()


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    # No user or system git config: the module must not depend on one.
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(tmp_path / "no-gitconfig"))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    root = tmp_path / "project"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    (root / "shared.txt").write_text("line one\nline two\n")
    (root / ".gitignore").write_text(".clavain/\n")
    git(root, "add", "-A")
    git(root, "-c", "commit.gpgsign=false", "commit", "-q", "-m", "initial")
    return root


@pytest.fixture
def state_root(project: Path) -> Path:
    return project / ".clavain"


def lock(state_root: Path) -> Path:
    return worktrees.merge_lock(state_root)


def status(project: Path) -> str:
    return git(project, "status", "--porcelain", "--untracked-files=no")


def test_two_worktrees_on_different_files_both_merge(project: Path, state_root: Path):
    first = create(project, state_root, "task-1", "run-1")
    second = create(project, state_root, "task-2", "run-1")
    assert first.path == (project / ".clavain-worktrees" / "run-1" / "task-1").resolve()
    assert (first.branch, second.branch) == ("clavain/run-1/task-1", "clavain/run-1/task-2")
    assert first.base == second.base == git(project, "rev-parse", "HEAD")
    (first.path / "a.py").write_text("A = 1\n")
    (second.path / "b.py").write_text("B = 2\n")
    assert commit_all(first, "clavain: task-1")
    assert commit_all(second, "clavain: task-2")

    one = merge(project, first, lock_path=lock(state_root))
    two = merge(project, second, lock_path=lock(state_root))
    assert one.merged and two.merged and not one.conflicts and not two.conflicts
    assert two.commit == git(project, "rev-parse", "HEAD")
    assert (project / "a.py").read_text() == "A = 1\n"
    assert (project / "b.py").read_text() == "B = 2\n"
    merges = git(project, "log", "--merges", "--format=%s%x09%an <%ae>").splitlines()
    assert len(merges) == 2
    assert all(line.endswith("Clavain <clavain@localhost>") for line in merges)
    assert git(project, "symbolic-ref", "--short", "HEAD") == "main"
    assert status(project) == ""

    remove(project, first)
    remove(project, second)
    assert not first.path.exists()
    assert git(project, "branch", "--list", "clavain/*") == ""
    assert git(project, "worktree", "list", "--porcelain").count("worktree ") == 1


def test_conflict_is_aborted_and_named(project: Path, state_root: Path):
    first = create(project, state_root, "edit-a", "run-2")
    second = create(project, state_root, "edit-b", "run-2")
    (first.path / "shared.txt").write_text("line one\nchanged by first\n")
    (second.path / "shared.txt").write_text("line one\nchanged by second\n")
    (second.path / "extra.txt").write_text("new file from second\n")
    commit_all(first, "first")
    commit_all(second, "second")

    one = merge(project, first, lock_path=lock(state_root))
    head_after_first = git(project, "rev-parse", "HEAD")
    two = merge(project, second, lock_path=lock(state_root))

    assert one.merged and one.commit == head_after_first
    assert not two.merged and two.commit is None
    assert two.conflicts == ["shared.txt"]
    assert "shared.txt" in two.message and "aborted" in two.message
    assert git(project, "status", "--porcelain") == ""
    assert git(project, "rev-parse", "HEAD") == head_after_first
    assert (project / "shared.txt").read_text() == "line one\nchanged by first\n"
    assert not (project / "extra.txt").exists()
    assert not (project / ".git" / "MERGE_HEAD").exists()


def test_nothing_changed_merges_without_a_commit(project: Path, state_root: Path):
    tree = create(project, state_root, "noop", "run-3")
    head = git(project, "rev-parse", "HEAD")
    assert commit_all(tree, "nothing") is False
    outcome = merge(project, tree, lock_path=lock(state_root))
    assert outcome.merged and outcome.commit is None and outcome.conflicts == []
    assert git(project, "rev-parse", "HEAD") == head


def test_runner_commits_of_its_own_are_merged(project: Path, state_root: Path):
    tree = create(project, state_root, "self-commit", "run-3")
    (tree.path / "c.txt").write_text("c\n")
    git(tree.path, "add", "c.txt")
    git(tree.path, "-c", "commit.gpgsign=false", "commit", "-q", "-m", "runner's own")
    assert commit_all(tree, "nothing more") is False
    outcome = merge(project, tree, lock_path=lock(state_root))
    assert outcome.merged and outcome.commit and (project / "c.txt").exists()


def test_commit_all_takes_untracked_and_deleted_files_but_not_clavain_state(
        project: Path, state_root: Path):
    tree = create(project, state_root, "mixed", "run-4")
    (tree.path / "shared.txt").unlink()
    (tree.path / "pkg").mkdir()
    (tree.path / "pkg" / "new.py").write_text("x = 1\n")
    (tree.path / ".gitignore").unlink()  # so .clavain/ would be picked up if not excluded
    (tree.path / ".clavain").mkdir()
    (tree.path / ".clavain" / "state.db").write_text("runner state\n")
    assert commit_all(tree, "mixed changes")
    changed = git(tree.path, "show", "--name-status", "--format=", "HEAD").splitlines()
    assert sorted(changed) == ["A\tpkg/new.py", "D\t.gitignore", "D\tshared.txt"]
    assert git(tree.path, "log", "-1", "--format=%an <%ae>|%cn <%ce>") == (
        "Clavain <clavain@localhost>|Clavain <clavain@localhost>")


def test_stale_worktree_of_a_crashed_run_is_replaced(project: Path, state_root: Path):
    stale = create(project, state_root, "task-9", "run-5")
    (stale.path / "half-done.txt").write_text("left by a crashed runner\n")
    commit_all(stale, "half")
    (stale.path / "uncommitted.txt").write_text("also left\n")
    git(project, "worktree", "lock", str(stale.path))

    fresh = create(project, state_root, "task-9", "run-5")
    assert fresh.path == stale.path and fresh.branch == stale.branch
    assert git(fresh.path, "rev-parse", "HEAD") == git(project, "rev-parse", "HEAD")
    assert not (fresh.path / "half-done.txt").exists()
    assert not (fresh.path / "uncommitted.txt").exists()


def test_stale_plain_folder_and_orphan_branch_are_replaced(project: Path, state_root: Path):
    folder = project / ".clavain-worktrees" / "run-6" / "task-7"
    folder.mkdir(parents=True)
    (folder / "junk").write_text("not a worktree\n")
    git(project, "branch", "clavain/run-6/task-7")
    tree = create(project, state_root, "task-7", "run-6")
    assert (tree.path / "shared.txt").exists() and not (tree.path / "junk").exists()


def test_worktrees_live_beside_the_state_folder_and_ignore_themselves(project: Path,
                                                                     state_root: Path):
    (project / ".gitignore").write_text("")  # an older init: nothing names the folder
    git(project, "commit", "-qam", "no ignores")
    tree = create(project, state_root, "task-1", "run-1")
    assert tree.path.is_relative_to(project / ".clavain-worktrees")
    assert not tree.path.is_relative_to(state_root)
    assert tree.lock == worktrees.admin_lock(state_root) and tree.lock.parent == state_root
    assert ".clavain-worktrees" not in git(project, "status", "--porcelain",
                                           "--untracked-files=all")
    remove(project, tree)
    assert [p.name for p in (project / ".clavain-worktrees").iterdir()] == [".gitignore"]


def test_a_linked_worktrees_folder_is_refused_and_never_cleaned_through(
        project: Path, state_root: Path, tmp_path: Path):
    elsewhere = tmp_path / "elsewhere" / "run-x" / "keep"
    elsewhere.mkdir(parents=True)
    (project / ".clavain-worktrees").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(ClavainError, match="not a folder of Clavain's"):
        create(project, state_root, "task-1", "run-1")
    found = worktrees.leftovers(project, state_root, live=set(), kept=set())
    assert found["worktrees"] == []
    worktrees.clean_leftovers(project, state_root, live=set(), kept=set())
    assert elsewhere.is_dir()


def test_an_older_clavains_worktrees_in_the_state_folder_are_still_cleaned(
        project: Path, state_root: Path):
    """Before hard mode allowed parallel runs, worktrees lived in `.clavain/worktrees/`."""
    legacy = state_root / "worktrees" / "run-old" / "task-1"
    legacy.parent.mkdir(parents=True)
    git(project, "worktree", "add", "-q", "-b", "clavain/run-old/task-1", str(legacy))
    (state_root / "worktrees" / ".merge.lock").write_text("")
    found = worktrees.leftovers(project, state_root, live=set(), kept=set())
    assert found["worktrees"] == [str(legacy)]
    assert found["branches"] == ["clavain/run-old/task-1"]
    cleaned = worktrees.clean_leftovers(project, state_root, live=set(), kept=set())
    assert str(legacy) in cleaned["removed"]
    assert not (state_root / "worktrees").exists()
    assert git(project, "worktree", "list").count("\n") == 0


def test_a_runner_cannot_commit_the_hosts_settings(project: Path, state_root: Path):
    tree = create(project, state_root, "task-1", "run-1")
    (tree.path / ".claude").mkdir()
    (tree.path / ".claude" / "settings.json").write_text('{"disableAllHooks": true}')
    (tree.path / "work.txt").write_text("w\n")
    assert commit_all(tree, "work")
    shown = git(tree.path, "show", "--name-only", "--format=", "HEAD")
    assert shown.split() == ["work.txt"]
    remove(project, tree)


def test_odd_ids_give_valid_branches_and_safe_folders(project: Path, state_root: Path):
    tree = create(project, state_root, "../weird id:..lock", "run 7/x")
    assert tree.path.parent.parent == (project / ".clavain-worktrees").resolve()
    assert tree.path.parent.name == "run_7_x"
    git(project, "check-ref-format", "--branch", tree.branch)
    assert tree.branch.startswith("clavain/run_7_x/")
    remove(project, tree)


def test_remove_can_keep_the_branch(project: Path, state_root: Path):
    tree = create(project, state_root, "keep", "run-8")
    (tree.path / "k.txt").write_text("k\n")
    commit_all(tree, "keep me")
    remove(project, tree, delete_branch=False)
    assert not tree.path.exists()
    assert git(project, "branch", "--list", tree.branch).strip().endswith(tree.branch)


def test_require_clean_refuses_modified_tracked_files(project: Path):
    (project / "shared.txt").write_text("edited by a person\n")
    with pytest.raises(ClavainError, match=r"shared\.txt"):
        require_clean(project)
    git(project, "add", "shared.txt")
    with pytest.raises(ClavainError, match="uncommitted changes to tracked files"):
        require_clean(project)


def test_require_clean_refuses_untracked_files_but_not_ignored_ones_or_clavain_state(
        project: Path):
    """A parallel run commits and merges its work; a file outside what it commits could make
    its checks pass on something that does not ship."""
    (project / "notes.txt").write_text("untracked\n")
    with pytest.raises(ClavainError, match=r"untracked files \(notes.txt\).*before a parallel"):
        require_clean(project)
    (project / ".gitignore").write_text("notes.txt\n")
    git(project, "add", ".gitignore")
    git(project, "-c", "commit.gpgsign=false", "commit", "-q", "-m", "ignore notes")
    (project / ".clavain").mkdir()
    (project / ".clavain" / "x").write_text("state\n")
    require_clean(project)
    # Even tracked files under .clavain/ never count.
    git(project, "add", "-f", ".clavain/x")
    git(project, "-c", "commit.gpgsign=false", "commit", "-q", "-m", "track state")
    (project / ".clavain" / "x").write_text("changed state\n")
    require_clean(project)


def test_not_a_repository_and_no_commit(tmp_path: Path):
    plain = tmp_path / "plain"
    plain.mkdir()
    with pytest.raises(ClavainError, match="not a git repository"):
        create(plain, tmp_path / "state", "n", "r")
    git(plain, "init", "-q")
    with pytest.raises(ClavainError, match="no commit yet"):
        create(plain, tmp_path / "state", "n", "r")


def test_git_refusing_to_start_a_merge_is_reported(project: Path, state_root: Path):
    tree = create(project, state_root, "clash", "run-9")
    (tree.path / "notes.txt").write_text("from the runner\n")
    commit_all(tree, "notes")
    (project / "notes.txt").write_text("a person's untracked notes\n")
    outcome = merge(project, tree, lock_path=lock(state_root))
    assert not outcome.merged and outcome.conflicts == []
    assert "notes.txt" in outcome.message
    assert (project / "notes.txt").read_text() == "a person's untracked notes\n"


def test_concurrent_merges_are_serialised(project: Path, state_root: Path):
    trees = []
    for number in range(6):
        tree = create(project, state_root, f"par-{number}", "run-10")
        (tree.path / f"file-{number}.txt").write_text(f"{number}\n")
        commit_all(tree, f"par {number}")
        trees.append(tree)
    outcomes: list[worktrees.MergeOutcome] = []
    failures: list[BaseException] = []
    start = threading.Barrier(len(trees))

    def run(tree: worktrees.Worktree) -> None:
        try:
            start.wait()
            outcomes.append(merge(project, tree, lock_path=lock(state_root)))
        except BaseException as exc:  # collected and asserted below
            failures.append(exc)

    threads = [threading.Thread(target=run, args=(tree,)) for tree in trees]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert failures == []
    assert len(outcomes) == len(trees) and all(o.merged and o.commit for o in outcomes)
    assert len(git(project, "log", "--merges", "--format=%H").splitlines()) == len(trees)
    assert all((project / f"file-{n}.txt").exists() for n in range(len(trees)))
    assert status(project) == ""


def test_merge_waits_for_a_lock_held_by_another_process(project: Path, state_root: Path):
    import sys
    import time

    tree = create(project, state_root, "proc", "run-11")
    (tree.path / "p.txt").write_text("p\n")
    commit_all(tree, "p")
    holder = subprocess.Popen(
        [sys.executable, "-c",
         "import fcntl, sys, time\n"
         "f = open(sys.argv[1], 'a+')\n"
         "fcntl.flock(f.fileno(), fcntl.LOCK_EX)\n"
         "print('locked', flush=True)\n"
         "time.sleep(0.6)\n", str(lock(state_root))],
        stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        started = time.monotonic()
        outcome = merge(project, tree, lock_path=lock(state_root))
        waited = time.monotonic() - started
    finally:
        holder.wait(timeout=10)
    assert outcome.merged and waited >= 0.3


def test_merge_refuses_a_project_a_person_is_editing(project: Path, state_root: Path):
    tree = create(project, state_root, "task-9", "run-9")
    (tree.path / "new.txt").write_text("the runner's work\n")
    assert commit_all(tree, "work")
    (project / "shared.txt").write_text("a person's edit\n")  # tracked, not committed
    outcome = merge(project, tree, lock_path=worktrees.merge_lock(state_root))
    assert not outcome.merged and outcome.dirty == ["shared.txt"]
    assert (project / "shared.txt").read_text() == "a person's edit\n"
    assert not (project / "new.txt").exists()


def test_a_planted_link_for_a_node_or_a_run_never_leads_the_clean_up_elsewhere(
        project: Path, state_root: Path, tmp_path: Path):
    victim = tmp_path / "persons-docs"
    victim.mkdir()
    (victim / "notes.txt").write_text("keep me")
    root = project / worktrees.WORKTREES_DIR_NAME
    (root / "run-8").mkdir(parents=True)
    (root / "run-8" / "task-1").symlink_to(victim)
    tree = create(project, state_root, "task-1", "run-8")  # the link goes, not its target
    assert (victim / "notes.txt").read_text() == "keep me"
    assert tree.path.is_dir() and not tree.path.is_symlink()
    remove(project, tree)
    (root / "run-9").symlink_to(victim)
    with pytest.raises(ClavainError, match="not a folder of Clavain's"):
        create(project, state_root, "notes.txt", "run-9")
    assert (victim / "notes.txt").read_text() == "keep me"
