"""Verify commands for test plans. Plan lint refuses a verify that always passes (`true`,
`echo ok`): a test's task needs one that could fail and passes in its fixture. A task's verify
runs at the project's root (a git repository, or a bare folder holding `.clavain/` in the
library tests) or in a worktree of it (where `.git` is a file)."""

PASSES = "test -e .git || test -d .clavain"  # fails anywhere but in a project
