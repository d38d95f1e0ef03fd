"""The words a node's status and a claim's release reason are stored as, named once: Python code
says `NodeStatus.DONE`, never `"done"`. SQL text keeps its literals (its CHECK constraint,
`store/migrations/0004_graphs.sql`, is the other list; a test keeps the two equal). Members are
`str`s: they compare and hash as their value, bind as SQL parameters and dump to JSON as it,
so nothing stored or printed changes. Stdlib only (`enum`), no Clavain import: cheap anywhere.
"""

from __future__ import annotations

from enum import Enum


class _Word(str, Enum):
    """A member that is its value as text everywhere: `str()` and f-strings give "done", not
    "NodeStatus.DONE" (what a `(str, Enum)` says on some Pythons; the floor is 3.10, before
    `enum.StrEnum`)."""

    __str__ = str.__str__
    __format__ = str.__format__


class NodeStatus(_Word):
    """A workgraph node's status (`nodes.status`)."""

    OPEN = "open"  # may run once its dependencies are done
    IN_PROGRESS = "in_progress"  # claimed: a runner holds it
    DONE = "done"
    FAILED = "failed"  # attempts spent, or the result said so
    NEEDS_HUMAN = "needs_human"  # waits for a person's answer
    CANCELLED = "cancelled"  # an abandoned sprint's node that was still open: it never runs


# Not finished yet: the node (and so its graph) still has work ahead of it.
UNFINISHED = (NodeStatus.OPEN, NodeStatus.IN_PROGRESS, NodeStatus.NEEDS_HUMAN)
# Nothing more will happen to it.
SETTLED = (NodeStatus.DONE, NodeStatus.CANCELLED)


class ClaimReleaseReason(_Word):
    """Why a claim on a node ended."""

    FINISHED = "finished"  # its result was recorded
    GIVEN_BACK = "given_back"  # handed back unspent: stopped, rate-limited, cannot finish yet
    CRASHED = "crashed"  # its holder died: a crash counted, no attempt spent
    STALE = "stale"  # its lease ran out with nobody renewing it
