"""Bad input is one line, exit 2, nothing written; broken state is one line, never a traceback;
a bad argument never dumps the usage block (slash commands put it in the prompt)."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import pytest

from tests.checks import PASSES

NOT_UTF8 = b"task-\xff".decode("utf-8", "surrogateescape")


@pytest.mark.parametrize("args", [
    ("graph", "add", "--id", NOT_UTF8, "--type", "task"),
    ("graph", "add", "--id", "t", "--type", "task", "--parent", NOT_UTF8),
    ("graph", "add", "--id", "t", "--type", "task", "--runner", NOT_UTF8),
    ("graph", "add", "--id", "t", "--type", "task", f"--verify={NOT_UTF8}"),
    ("graph", "add", "--id", "t", "--type", "task", "--title", NOT_UTF8),
    ("kv", "put", "--run", "--key", "k", "--value", NOT_UTF8),
    ("graph", "show", NOT_UTF8),
])
def test_an_argument_that_is_not_utf8_is_one_line_and_writes_nothing(run_cli, project,
                                                                      args) -> None:
    result = run_cli(*args)
    assert result.returncode == 2
    [line] = result.stderr.splitlines()
    assert line.startswith("clavain: error: argument ") and "not UTF-8 text" in line
    assert not (project / ".clavain").exists()


def test_a_stored_value_cannot_break_verify_later(run_cli, cli_json) -> None:
    """The case that used to slip through: a bad --verify stored today, verify crashing later."""
    run_cli("graph", "add", "--id", "v", "--type", "verify", "--verify", f"echo {NOT_UTF8}")
    assert run_cli("graph", "show", "v").returncode == 2  # never stored
    cli_json("graph", "add", "--id", "v", "--type", "verify", "--verify", "true")
    assert cli_json("verify", "v")["result"]["status"] == "success"


@pytest.mark.parametrize("args", [
    ("graph", "add", "--id", "x", "--type", "nope"),
    ("graph", "next", "--pid", "many"),
    ("verdicts", "show"),
    ("no-such-command",),
    ("graph", "ls", "--bogus"),
])
def test_argparse_errors_are_one_line(run_cli, args) -> None:
    result = run_cli(*args)
    assert result.returncode == 2
    [line] = result.stderr.splitlines()
    assert line.startswith("clavain: error: ") and "--help`)" in line
    assert "usage:" not in result.stderr


def _config(value: str):
    def make(state: Path) -> None:
        state.mkdir(exist_ok=True)
        (state / "config.json").write_text(value)
    return make


def _state_is_a_file(state: Path) -> None:
    state.write_text("not a folder")


def _garbage_database(state: Path) -> None:
    state.mkdir(exist_ok=True)
    (state / "state.sqlite").write_bytes(os.urandom(8192))


def _truncated_database(state: Path) -> None:
    from clavain.store import db

    db.connect(state / "state.sqlite").close()
    data = (state / "state.sqlite").read_bytes()
    (state / "state.sqlite").write_bytes(data[:100])


def _database_is_a_folder(state: Path) -> None:
    (state / "state.sqlite").mkdir(parents=True)


def _symlinked_verdicts(state: Path) -> None:
    state.mkdir(exist_ok=True)
    elsewhere = state.parent.parent / "elsewhere"
    elsewhere.mkdir(exist_ok=True)
    (state / "verdicts").symlink_to(elsewhere)


def _snapshot_lock_is_a_folder(state: Path) -> None:
    (state / "workgraph.json.lock").mkdir(parents=True)


def _config_is_a_folder(state: Path) -> None:
    (state / "config.json").mkdir(parents=True)


BROKEN = {
    "config: wrong type": _config('{"defaults": {"maxAttempts": "abc"}}'),
    "config: a list": _config("[]"),
    "config: defaults not an object": _config('{"defaults": 5}'),
    "config: not JSON": _config("{nope"),
    "config: not UTF-8": _config('{"defaults": {"verifyRunner": "\udcff"}}'
                                 .encode("utf-8", "surrogateescape").decode("latin-1")),
    "config: a folder": _config_is_a_folder,
    ".clavain is a file": _state_is_a_file,
    "garbage state.sqlite": _garbage_database,
    "truncated state.sqlite": _truncated_database,
    "state.sqlite is a folder": _database_is_a_folder,
    "symlink planted in .clavain": _symlinked_verdicts,
    "snapshot lock is a folder": _snapshot_lock_is_a_folder,
}
COMMANDS = [
    ("graph", "ls"),
    ("graph", "add", "--id", "t", "--type", "task"),
    ("graph", "next", "--claim"),
    ("kv", "ls"),
    ("verdicts", "summary"),
    ("status",),
    ("init",),
    ("doctor",),
]


@pytest.mark.parametrize("setup", list(BROKEN), ids=list(BROKEN))
@pytest.mark.parametrize("args", COMMANDS, ids=[" ".join(c) for c in COMMANDS])
def test_broken_state_is_one_line_never_a_traceback(run_cli, project, setup, args) -> None:
    BROKEN[setup](project / ".clavain")
    result = run_cli(*args)
    assert "Traceback" not in result.stderr, result.stderr
    assert result.returncode in (0, 1, 2, 3), result.stderr
    if result.returncode in (1, 2) and args[0] != "doctor":
        lines = [line for line in result.stderr.splitlines() if line]
        assert len(lines) == 1 and lines[0].startswith("clavain: error: "), result.stderr


def test_a_snapshot_failure_after_the_commit_is_a_warning_and_success(run_cli, cli_json,
                                                                       project) -> None:
    """The change is committed; a retry must not apply it twice."""
    cli_json("graph", "add", "--id", "a", "--type", "task")
    _config('{"defaults": {"snapshotMaxLagSeconds": 0}}')(project / ".clavain")
    (project / ".clavain" / "workgraph.json").unlink()
    (project / ".clavain" / "workgraph.json").mkdir()
    result = run_cli("graph", "apply", "a", "--result", "-",
                     input='{"status": "success", "summary": "ok"}')
    assert result.returncode == 0, result.stderr
    assert "a: open -> done" in result.stdout
    assert result.stderr.startswith("clavain: warning: ") and "graph export" in result.stderr
    again = run_cli("graph", "apply", "a", "--result", "-",
                    input='{"status": "success", "summary": "ok"}')
    assert again.returncode == 2 and "'a' is done" in again.stderr
    with sqlite3.connect(project / ".clavain" / "state.sqlite") as conn:
        assert conn.execute("SELECT count(*) FROM events WHERE node_id = 'a' "
                            "AND to_status = 'done'").fetchone()[0] == 1


def test_doctor_names_a_bad_config_in_full(run_cli, project) -> None:
    _config('{"defaults": {"maxAttempts": 0}}')(project / ".clavain")
    result = run_cli("doctor")
    assert result.returncode == 1
    [row] = [line for line in result.stdout.splitlines() if line.startswith("config ")]
    assert row.split()[1] == "fail"
    assert row.endswith("defaults.maxAttempts: 0 (expected a whole number from 1 to 100) "
                        "(fix the file, or remove it for the defaults)")


def test_table_cells_are_cut_so_one_long_list_cannot_blow_up_the_output(run_cli, cli_json,
                                                                         project) -> None:
    """`graph ls` used to pad every row to the widest dependency list (146 MB at 2,000 tasks)."""
    import json

    tasks = [{"id": f"t{i:04d}", "type": "task", "verify": [PASSES]} for i in range(400)]
    cli_json("graph", "import", "-", input=json.dumps({"nodes": tasks}))
    cli_json("graph", "scaffold")
    table = run_cli("graph", "ls")
    assert table.returncode == 0
    widest = max(len(line) for line in table.stdout.splitlines())
    assert widest < 300, widest
    integrate = [line for line in table.stdout.splitlines() if line.startswith("integrate ")]
    assert "(400) verify-t0000, verify-t0001" in integrate[0] and "…" in integrate[0]
    # The whole list stays available.
    assert len(cli_json("graph", "show", "integrate")["depends_on"]) == 400


def test_values_out_of_range_are_one_line(run_cli, cli_json, project) -> None:
    huge_pid = run_cli("graph", "next", "--claim", "--pid", "9" * 20)
    assert huge_pid.returncode == 2 and "--pid must be a positive process id" in huge_pid.stderr
    cli_json("graph", "add", "--id", "t", "--type", "task")
    _config('{"defaults": {"retryBackoffSeconds": 1e12, "retryBackoffMaxSeconds": 1e13, '
            '"maxAttempts": 3.0}}')(
        project / ".clavain")  # schema-valid: 3.0 is an integer, the wait a long one
    failed = run_cli("graph", "apply", "t", "--result", "-",
                     input='{"status":"fail","summary":"x"}')
    assert failed.returncode == 0, failed.stderr
    assert "retry after 9999-12-31" in failed.stdout


def test_a_verdict_file_with_a_lone_surrogate_is_an_error_row(run_cli, project) -> None:
    folder = project / ".clavain" / "verdicts"
    folder.mkdir(parents=True)
    (folder / "clavain-fd-x--d1.json").write_text(
        '{"type": "verdict", "status": "CLEAN", "summary": "bad \\ud800 text", '
        '"agent": "clavain:fd-x", "timestamp": "2026-01-01T00:00:00Z"}')
    for args in (("verdicts", "summary"), ("verdicts", "ls"), ("status",)):
        result = run_cli(*args)
        assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr
        assert "ERROR" in result.stdout


def test_a_busy_database_is_not_called_damaged(run_cli, cli_json, project) -> None:
    import sqlite3 as sql

    cli_json("graph", "add", "--id", "t", "--type", "task")
    holder = sql.connect(project / ".clavain" / "state.sqlite", isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        result = run_cli("graph", "add", "--id", "u", "--type", "task",
                         env={"CLAVAIN_BUSY_TIMEOUT_MS": "200"})
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert result.returncode == 1
    assert "stayed busy (another clavain process holds it); try again" in result.stderr
    assert "damaged" not in result.stderr
