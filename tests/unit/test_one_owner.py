"""One owner per idea (issue 35, item 5): the active checkpoint has one reader, small JSON files
one reader with one failure policy, `/proc/<pid>/stat` one parse, the stored timestamp one
writer, an id as a folder name one rule, and every caller asks the owner."""

from __future__ import annotations

import json
import os
import threading
from datetime import datetime, timezone
from pathlib import Path

import pytest

from clavain import clock, fsutil, paths, processes
from clavain.paths import StatePaths
from clavain.sprint import checkpoint, lifecycle


def _in_a_thread(action, seconds: float = 10.0):
    """`action()`'s result, failing (not hanging) when it blocks."""
    box: dict = {}

    def run() -> None:
        try:
            box["value"] = action()
        except BaseException as exc:  # handed back to the test
            box["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), "blocked"
    if "error" in box:
        raise box["error"]
    return box["value"]


# ---------------------------------------------------------------- the checkpoint's one reader

def _callers(root: Path) -> dict[str, object]:
    """What each front door makes of the checkpoint in `root`, all through `read_in`."""
    from clavain import statusline
    from clavain.guards import counting
    from clavain.hooks import stop

    state = StatePaths(root)
    notes: list[str] = []
    sprint_id = checkpoint.active_sprint_id(state, notes)
    return {"budgets": counting._active_sprint(str(root)),
            "statusline": statusline._sprint(str(root)),
            "hook": (sprint_id, bool(notes)),
            "stop": stop.handle({"cwd": str(root.parent), "session_id": "s1"})}


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("CLAVAIN_PROJECT_DIR", str(tmp_path))
    monkeypatch.delenv("CLAVAIN_STATE_DIR", raising=False)
    (tmp_path / ".clavain").mkdir()
    return tmp_path / ".clavain"


@pytest.mark.parametrize("damage", ["fifo", "huge", "bytes", "json", "shape", "symlink"])
def test_a_damaged_checkpoint_is_one_answer_for_every_caller(root: Path, damage: str) -> None:
    path = root / "checkpoint.json"
    if damage == "fifo":
        os.mkfifo(path)
    elif damage == "huge":
        path.write_text(" " * (checkpoint.MAX_BYTES + 1))
    elif damage == "bytes":
        path.write_bytes(b'{"sprint_id": "\xff"}')
    elif damage == "json":
        path.write_text('{"sprint_id": "s-1",')
    elif damage == "shape":  # JSON with a sprint id, not a checkpoint: no caller takes it
        path.write_text('{"sprint_id": "s-1", "complexity": 3}')
    else:
        (root / "elsewhere.json").write_text("{}")
        path.symlink_to(root / "elsewhere.json")
    with pytest.raises(checkpoint.DamagedCheckpoint) as raised:
        _in_a_thread(lambda: checkpoint.read_in(root))
    assert str(path) in str(raised.value) and checkpoint.DamagedCheckpoint.FIX in str(raised.value)
    expected = {"fifo": "is not a regular file", "symlink": "is not a regular file",
                "huge": f"is over {checkpoint.MAX_BYTES} bytes", "bytes": "not UTF-8"}
    assert expected.get(damage, "") in raised.value.problem
    assert _in_a_thread(lambda: _callers(root)) == {
        "budgets": (None, None), "statusline": "checkpoint damaged", "hook": (None, True),
        "stop": None}


def test_no_checkpoint_is_none_for_every_caller(root: Path) -> None:
    assert checkpoint.read_in(root) is None
    assert _callers(root) == {"budgets": (None, None), "statusline": "no sprint",
                              "hook": (None, False), "stop": None}


def test_a_good_checkpoint_reads_the_same_everywhere(state: StatePaths) -> None:
    started = lifecycle.start(state, "rename foo to bar", complexity="2")
    active = checkpoint.read_in(state.root)
    assert active == checkpoint.read(state) and active["sprint_id"] == started["sprint_id"]
    from clavain.guards import counting

    assert counting._active_sprint(str(state.root)) == (active["sprint_id"],
                                                           active["complexity"])


# ---------------------------------------------------------------- the one small-JSON reader

def test_the_small_json_reader_never_raises_and_names_why(tmp_path: Path) -> None:
    good = tmp_path / "good.json"
    good.write_text('{"a": 1}')
    problems: list[str] = []
    assert fsutil.read_json_object(good, problems=problems) == {"a": 1} and problems == []
    assert fsutil.read_json_object(tmp_path / "missing.json", problems=problems) is None
    assert problems == []  # a missing file is no problem
    cases = {"fifo": "is a FIFO", "big": "is over 10 bytes", "bad": "is unreadable (",
             "list": "is not a JSON object", "bytes": "is unreadable ("}
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "big").write_text('{"a": "' + "x" * 20 + '"}')
    (tmp_path / "bad").write_text("{broken")
    (tmp_path / "list").write_text("[1]")
    (tmp_path / "bytes").write_bytes(b'{"a": "\xff"}')
    for name, why in cases.items():
        problems = []
        assert _in_a_thread(lambda n=name, p=problems: fsutil.read_json_object(
            tmp_path / n, 10 if n == "big" else fsutil.STATE_FILE_MAX_BYTES, p)) is None
        assert len(problems) == 1 and str(tmp_path / name) in problems[0] and why in problems[0]
        assert fsutil.read_json_object(tmp_path / name, 10 if name == "big" else 1 << 20) is None
    assert not hasattr(fsutil, "read_state_json")  # the other policy is gone


# ---------------------------------------------------------------- /proc/<pid>/stat, once

def test_the_stat_line_is_parsed_past_a_name_with_spaces_and_parentheses() -> None:
    rest = " ".join(str(n) for n in range(6, 53))  # fields 6..52; field 22 is the start
    stat = processes.parse_stat(f"4242 (a (b) ) c)) Z 17 4200 {rest}\n")
    assert stat == processes.ProcStat(comm="a (b) ) c)", state="Z", ppid=17, pgrp=4200,
                                      start_ticks=22)
    assert processes.parse_stat("4242 (name) S 1") is None
    assert processes.parse_stat("no parentheses at all " + rest) is None


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="Linux /proc")
def test_this_process_as_every_caller_sees_it() -> None:
    from clavain import authority

    stat = processes.proc_stat(os.getpid())
    assert stat is not None and stat.ppid == os.getppid() and stat.pgrp == os.getpgrp()
    assert stat.state not in ("Z", "X")
    assert processes.process_identity(os.getpid()) == f"{processes.boot_id()}:{stat.start_ticks}"
    assert processes.group_running(os.getpgrp())
    assert 0 < authority.started_at(os.getpid()) <= datetime.now(timezone.utc).timestamp()
    assert authority._process(os.getpid())[0] == os.getppid()
    assert processes.proc_stat(2 ** 22 + 1) is None  # past the kernel's pid limit


# ---------------------------------------------------------------- the stored timestamp, once

def test_one_writer_of_the_stored_timestamp() -> None:
    from clavain.guards import budget

    moment = datetime(2026, 11, 21, 20, 30, 0, 123000, tzinfo=timezone.utc)
    epoch = 1795293000.125  # exact in binary: no rounding question
    assert clock.now_iso(moment) == "2026-11-21T20:30:00.123Z"
    assert clock.iso_at(epoch) == clock.now_iso(datetime.fromtimestamp(epoch, timezone.utc))
    assert budget.stamp(epoch) == clock.iso_at(epoch)
    assert json.dumps(clock.iso_at(0.5)) == '"1970-01-01T00:00:00.500Z"'


# ---------------------------------------------------------------- an id as a folder name

def test_an_id_as_a_folder_name_has_one_rule() -> None:
    from clavain.supervisor import run_record
    from clavain.workgraph import verifier

    assert paths.safe_path_part("../../etc") == "_.._etc"
    assert paths.safe_path_part("task-a:1") == "task-a:1"
    assert paths.safe_path_part("") == "_" and paths.safe_path_part("...") == "_"
    assert paths.safe_path_part("naïve/🙂") == "na_ve__"
    assert verifier.safe_path_part is paths.safe_path_part
    state = StatePaths(Path("/p/.clavain"))
    assert run_record.run_dir(state, "../x") == state.runs / "_x"


# ---------------------------------------------------------------- statuses, named once

def _allowed_statuses(sql: str) -> tuple[str, ...]:
    import re

    found = re.search(r"status\s+TEXT NOT NULL DEFAULT 'open'\s+CHECK \(status IN \(([^)]*)\)\)",
                      sql)
    assert found, "the nodes table's status constraint"
    return tuple(re.findall(r"'([a-z_]+)'", found.group(1)))


def test_node_statuses_are_the_ones_the_stores_allow() -> None:
    from clavain.workgraph.statuses import NodeStatus

    store = Path(paths.__file__).parent / "store"
    for migration in (store / "migrations" / "0004_graphs.sql",
                      store / "migrations_postgresql" / "0001_workgraph.sql"):
        assert _allowed_statuses(migration.read_text()) == tuple(NodeStatus), migration


def test_a_status_is_its_word_wherever_it_goes() -> None:
    import sqlite3

    from clavain import fastjson
    from clavain.workgraph.statuses import SETTLED, UNFINISHED, ClaimReleaseReason, NodeStatus

    for member in (*NodeStatus, *ClaimReleaseReason):
        word = member.value
        assert member == word and hash(member) == hash(word) and {word: 1}[member] == 1
        assert (str(member), f"{member}", f"{member:>0}", "".join([member])) == (word,) * 4
        assert json.dumps({member: [member]}) == json.dumps({word: [word]})
        assert fastjson.dumps({member: [member]}) == fastjson.dumps({word: [word]})
        assert type(member)(word) is member  # a stored word reads back as its member
    conn = sqlite3.connect(":memory:")
    assert conn.execute("SELECT ?, typeof(?)", (NodeStatus.IN_PROGRESS,) * 2).fetchone() == (
        "in_progress", "text")
    assert set(UNFINISHED) | set(SETTLED) | {NodeStatus.FAILED} == set(NodeStatus)
    assert tuple(ClaimReleaseReason) == ("finished", "given_back", "crashed", "stale")
