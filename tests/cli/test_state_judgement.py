"""A damaged or read-only state is judged the same way by every command (`store.health`): the
same kind and the same recovery line from status, graph ls, doctor, the write commands and
`clavain run`; a damaged database takes no write (its bytes unchanged, exit non-zero) and a run
stops before it starts; a read-only `.clavain/` is called read-only with the fix, never damaged
and never a raw exception."""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path

import pytest

from clavain.store import health
from tests.checks import PASSES
from tests.unwritable import unwritable

NODES = 300


def _build(run_cli, tmp_path: Path, project: Path) -> Path:
    assert run_cli("init").returncode == 0
    spec = tmp_path / "nodes.json"
    spec.write_text(json.dumps({"nodes": [
        {"id": f"t-{i:04d}", "type": "task", "title": f"task {i} " + "x" * 200,
         "commands": ["true"], "verify": [PASSES]} for i in range(NODES)]}))
    done = run_cli("graph", "import", str(spec))
    assert done.returncode == 0, done.stderr
    return project / ".clavain" / "state.sqlite"


def damage_page_of(database: Path, table: str) -> int:
    """Overwrite one leaf page of `table` (found through `dbstat`, else its root page) with
    bytes no b-tree page has, after moving the WAL into the file."""
    conn = sqlite3.connect(database)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    page_size = conn.execute("PRAGMA page_size").fetchone()[0]
    try:
        pages = [row[0] for row in conn.execute(
            "SELECT pageno FROM dbstat WHERE name = ? AND pagetype = 'leaf' ORDER BY pageno",
            (table,))]
    except sqlite3.OperationalError:  # no dbstat in this SQLite
        pages = []
    if not pages:
        pages = [conn.execute("SELECT rootpage FROM sqlite_master WHERE name = ?",
                              (table,)).fetchone()[0]]
    conn.close()
    page = pages[len(pages) // 2]
    with open(database, "r+b") as handle:
        handle.seek((page - 1) * page_size)
        handle.write(bytes([0x0D]) + b"\xff" * (page_size - 1))
    return page


def _checkpoint(database: Path) -> None:
    """Everything moved into the file, and no -wal or -shm left beside it."""
    conn = sqlite3.connect(database)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()


def _restore(database: Path, damaged: bytes) -> tuple[bytes, int]:
    """The damaged file as first made, with nothing beside it (no marker, no -wal): each
    command must find the damage by itself."""
    for suffix in ("-wal", "-shm", "-journal", "-damage.json"):
        Path(f"{database}{suffix}").unlink(missing_ok=True)
    database.write_bytes(damaged)
    return damaged, database.stat().st_mtime_ns


@pytest.mark.parametrize("table", ["nodes", "events"])
def test_every_command_gives_one_judgement_of_a_damaged_page(run_cli, tmp_path: Path,
                                                             project: Path, table: str) -> None:
    database = _build(run_cli, tmp_path, project)
    damage_page_of(database, table)
    damaged = database.read_bytes()
    recovery = health.recovery(str(database))
    extra = tmp_path / "more.json"
    extra.write_text(json.dumps({"nodes": [{"id": "extra", "type": "task", "title": "x"}]}))
    commands = [("status",), ("graph", "ls"), ("sprint", "start", "fix the parser"),
                ("graph", "import", str(extra)), ("graph", "add", "--id", "new", "--type", "task"),
                ("kv", "put", "--run", "--key", "k", "--value", "v"),
                ("run", "--runner", "shell", "--graph", "default")]
    for args in commands:
        before, mtime = _restore(database, damaged)
        result = run_cli(*args)
        said = result.stderr + result.stdout
        assert result.returncode != 0, (args, said)
        assert f"the state database {database} is damaged" in said, (args, said)
        assert recovery in said, (args, said)
        assert "move it aside to start over" not in said and "Done:" not in said, (args, said)
        assert "Traceback" not in said
        assert database.read_bytes() == before and database.stat().st_mtime_ns == mtime, args
    assert not (project / ".clavain" / "checkpoint.json").exists()  # no sprint started

    _restore(database, damaged)
    doctor = run_cli("doctor", "--json")
    assert doctor.returncode == 1
    row = next(r for r in json.loads(doctor.stdout)["checks"] if r["check"] == "database")
    assert row["status"] == "fail" and row["state"] == health.DAMAGED
    assert recovery in row["detail"]
    assert database.read_bytes() == damaged


def test_damage_seen_once_is_refused_by_every_later_open(run_cli, tmp_path: Path,
                                                         project: Path) -> None:
    """The marker: a hook's open (no page check of its own) refuses the file a command found
    damaged; a recovered file put in its place is used again."""
    from clavain.store import db
    from clavain.store.faults import StoreDamaged

    database = _build(run_cli, tmp_path, project)
    _checkpoint(database)
    recovered = tmp_path / "recovered.sqlite"  # a file put in its place by hand
    recovered.write_bytes(database.read_bytes())
    damage_page_of(database, "nodes")
    assert run_cli("graph", "ls").returncode == 1
    assert db.CHECK_ON_OPEN is False  # as on the hook path
    with pytest.raises(StoreDamaged) as refused:
        db.connect(database)
    assert health.recovery(str(database)) in str(refused.value)
    os.replace(database, f"{database}.damaged")
    Path(f"{database}-wal").unlink(missing_ok=True)
    os.replace(recovered, database)
    assert run_cli("graph", "add", "--id", "after", "--type", "task").returncode == 0
    assert not Path(f"{database}-damage.json").exists()


def test_a_read_only_state_folder_is_read_only_not_damaged(run_cli, tmp_path: Path,
                                                           project: Path) -> None:
    database = _build(run_cli, tmp_path, project)
    _checkpoint(database)
    with unwritable(project / ".clavain"):
        doctor = run_cli("doctor", "--json")
        added = run_cli("graph", "add", "--id", "new", "--type", "task")
    rows = {r["check"]: r for r in json.loads(doctor.stdout)["checks"]}
    for name, row in rows.items():
        assert "damaged" not in row["detail"] or name == "sprint", row
        assert "Error" not in row["detail"] and "db recover" not in row["detail"], row
    for name in ("state_dir", "database"):
        assert rows[name]["status"] == "fail" and "read-only" in rows[name]["detail"]
        assert "is not writable by" in rows[name]["detail"] and "chmod" in rows[name]["detail"]
    assert rows["database"]["state"] == health.READ_ONLY
    assert added.returncode == 1
    assert "read-only" in added.stderr and "damaged" not in added.stderr
    assert "is not writable by" in added.stderr


def test_db_recover_keeps_every_readable_row_and_the_damaged_file(run_cli, tmp_path: Path,
                                                                  project: Path) -> None:
    """The advice's one command: the rows SQLite can still read come back, the damaged file is
    kept beside the new one, writes work again, and nothing waits on a lost edge."""
    database = _build(run_cli, tmp_path, project)
    chain = tmp_path / "chain.json"  # edges, so a lost node leaves dependents to recount
    chain.write_text(json.dumps({"nodes": [
        {"id": f"c-{i:03d}", "type": "task", "verify": ["test -f c.txt"],
         "dependsOn": [f"t-{i * 7 % NODES:04d}"]} for i in range(60)]}))
    assert run_cli("graph", "import", str(chain)).returncode == 0
    _checkpoint(database)
    before = sqlite3.connect(database)
    nodes_before = before.execute("SELECT count(*) FROM nodes").fetchone()[0]
    events_before = before.execute("SELECT count(*) FROM events").fetchone()[0]
    before.close()
    damage_page_of(database, "nodes")
    assert run_cli("graph", "ls").returncode == 1
    recovered = run_cli("db", "recover", "--json")
    assert recovered.returncode == 0, recovered.stderr
    report = json.loads(recovered.stdout)
    kept = Path(report["kept"])
    assert kept.is_file() and kept.name.startswith("state.sqlite.damaged-")
    copied, lost = report["tables"]["nodes"]["copied"], report["tables"]["nodes"]["lost"]
    assert 0 < copied < nodes_before and lost > 0
    assert report["tables"]["events"]["copied"] == events_before
    after = sqlite3.connect(database)
    assert after.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    assert after.execute("SELECT count(*) FROM nodes").fetchone()[0] == copied
    stuck = after.execute(
        "SELECT count(*) FROM nodes n WHERE n.unmet_deps <> (SELECT count(*) FROM deps e "
        "LEFT JOIN nodes d ON d.graph_id = e.graph_id AND d.id = e.depends_on_id WHERE "
        "e.graph_id = n.graph_id AND e.node_id = n.id AND coalesce(d.status, '') <> 'done')"
    ).fetchone()[0]
    after.close()
    assert stuck == 0
    assert not Path(f"{database}-damage.json").exists()
    assert run_cli("graph", "add", "--id", "after", "--type", "task").returncode == 0
    assert run_cli("doctor").returncode in (0, 1)
    assert "damaged" not in run_cli("doctor").stdout.split("database", 1)[1].splitlines()[0]


def test_db_recover_of_a_healthy_file_copies_every_row(run_cli, tmp_path: Path,
                                                      project: Path) -> None:
    database = _build(run_cli, tmp_path, project)
    _checkpoint(database)

    def contents(path: Path) -> dict[str, list]:
        conn = sqlite3.connect(path)
        tables = [row[0] for row in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")]
        found = {name: sorted(map(repr, conn.execute(f'SELECT * FROM "{name}"')))
                 for name in tables}
        found["_schema"] = sorted(row[0] for row in conn.execute(
            "SELECT sql FROM sqlite_master WHERE sql IS NOT NULL"))
        conn.close()
        return found

    wanted = contents(database)
    assert run_cli("db", "recover").returncode == 0
    assert contents(database) == wanted
