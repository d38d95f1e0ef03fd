"""`clavain graph …` through the real bin/clavain launcher."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.checks import PASSES
from tests.conftest import BIN, subprocess_env

# Every test here on both workgraph backends (tests/conftest.py `backend`).
pytestmark = pytest.mark.usefixtures("backend")


def _state(project: Path):
    from clavain import locate
    from clavain.paths import StatePaths

    return StatePaths(project / ".clavain", store_url=locate.store_url())


def _db_counts(project: Path) -> tuple[int, ...]:
    from clavain.store.graph_db import graph_store_exists, open_graph_db

    state = _state(project)
    if not graph_store_exists(state):
        return (0, 0, 0)
    conn = open_graph_db(state)
    try:
        return tuple(conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
                     for t in ("nodes", "deps", "events"))
    finally:
        conn.close()


def _seed(project: Path) -> None:
    """In-process (cheaper than one more subprocess per case) but the same library call."""
    from clavain.store.graph_db import open_graph_db
    from clavain.workgraph import edits
    from clavain.workgraph.graphs import DEFAULT_GRAPH, Graph

    state = _state(project)
    conn = open_graph_db(state)
    edits.add_nodes(Graph(conn, DEFAULT_GRAPH, state), [{"id": "seed", "type": "task"}])
    conn.close()


def test_add_ls_show_next_apply_round_trip(run_cli, cli_json, project) -> None:
    assert cli_json("graph", "add", "--id", "t1", "--type", "task", "--title", "First",
                    "--verify", "true", "--verify", "test -f x")["verify"] == ["true", "test -f x"]
    cli_json("graph", "add", "--id", "t2", "--type", "task", "--dep", "t1", "--runner", "claude")
    listed = cli_json("graph", "ls")
    assert [(n["id"], n["depends_on"]) for n in listed] == [("t1", []), ("t2", ["t1"])]
    table = run_cli("graph", "ls").stdout.splitlines()
    assert table[0].split()[:3] == ["ID", "TYPE", "STATUS"] and table[1].startswith("t1 ")
    assert cli_json("graph", "show", "t2")["runner"] == "claude"
    assert "status:         open" in run_cli("graph", "show", "t1").stdout

    peek = cli_json("graph", "next")
    assert peek["node"]["id"] == "t1" and peek["node"]["status"] == "open"
    assert (peek["claimed"], peek["run_id"]) == (False, None)
    claimed = cli_json("graph", "next", "--claim", "--run-id", "r1")
    assert claimed["node"]["status"] == "in_progress" and claimed["node"]["lock_run_id"] == "r1"
    assert (claimed["claimed"], claimed["run_id"]) == (True, "r1")

    result = run_cli("graph", "apply", "t1", "--result", "-", "--run-id", "r1",
                     input='log\n<result>{"status": "success", "summary": "done"}</result>\n')
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "t1: in_progress -> done"
    assert cli_json("graph", "next")["node"]["id"] == "t2"
    assert _snapshot_settles(project) == {"t1": "done", "t2": "open"}


def _snapshot_settles(project: Path) -> dict[str, str]:
    """The snapshot's statuses once it stopped changing (it may lag the database by <= 1 s)."""
    import time

    path = project / ".clavain" / "workgraph.json"
    deadline, seen = time.monotonic() + 20, None
    while time.monotonic() < deadline:
        statuses = {n["id"]: n["status"] for n in json.loads(path.read_text())["nodes"]}
        if statuses == seen:
            return statuses
        seen = statuses
        time.sleep(1.2)
    return seen or {}


def test_unknown_runner_is_refused_naming_the_configured_ones(run_cli, project) -> None:
    refused = run_cli("graph", "add", "--id", "t", "--type", "task", "--runner", "codex")
    assert refused.returncode == 2
    assert refused.stderr.strip() == ("clavain: error: node 't': unknown runner 'codex' "
                                      "(configured runners: shellVerify, shell, claude)")
    assert not (project / ".clavain").exists()


def test_next_exits_3_when_nothing_is_runnable(run_cli) -> None:
    empty = run_cli("graph", "next")
    assert empty.returncode == 3 and "the workgraph 'default' has no nodes yet" in empty.stderr
    as_json = run_cli("graph", "next", "--claim", "--json")
    assert as_json.returncode == 3
    assert json.loads(as_json.stdout) == {"graph_id": "default", "node": None, "run_id": None,
                                          "claimed": False, "released": [], "reset": [],
                                          "reason": "empty",
                                          "message": "the workgraph 'default' has no nodes yet"}


def test_next_reports_a_deadlock_with_its_chain(run_cli, cli_json) -> None:
    cli_json("graph", "import", "-", input=json.dumps({"nodes": [
        {"id": "a", "type": "task", "retryPolicy": {"maxAttempts": 1}},
        {"id": "b", "type": "task", "dependsOn": ["a"]}]}))
    run_cli("graph", "apply", "a", "--result", "-", input='{"status":"fail","summary":"x"}')
    # The escalation planner may run (its edge is satisfied by failure); make it finish.
    run_cli("graph", "apply", "plan-escalate-a", "--result", "-",
            input='{"status":"success","summary":"gave up"}')
    stuck = run_cli("graph", "next", "--json")
    assert stuck.returncode == 3
    report = json.loads(stuck.stdout)
    assert report["reason"] == "deadlock"
    assert report["deadlock"]["chains"][0]["chain"] == ["b", "a"]
    assert "b -> a" in report["message"]
    assert "b -> a" in run_cli("graph", "next").stderr
    reported = run_cli("graph", "deadlock", "--json")
    assert reported.returncode == 3  # like `graph next`: there is work that cannot run
    [blocker] = json.loads(reported.stdout)["deadlock"]["blockers"]
    assert (blocker["id"], blocker["status"], blocker["error"]) == ("a", "failed", "x")
    assert "its escalation is done without replacing it" in blocker["reason"]
    assert blocker["fix"] == "clavain graph reset a"
    assert "to unblock: clavain graph reset a" in run_cli("graph", "deadlock").stdout
    off = run_cli("graph", "deadlock", "--auto-reset")
    assert off.returncode == 3
    assert "nothing reopened: auto-reset is off (defaults.autoResetFailedMax is 0)" in off.stdout


def test_next_auto_resets_a_failed_blocker_when_configured(run_cli, cli_json, project) -> None:
    (project / ".clavain").mkdir(exist_ok=True)
    (project / ".clavain" / "config.json").write_text(
        json.dumps({"defaults": {"autoResetFailedMax": 1, "maxEscalations": 0}}))
    cli_json("graph", "import", "-", input=json.dumps({"nodes": [
        {"id": "plan-escalate-a", "type": "plan"},  # pre-empts the escalation of `a`
        {"id": "a", "type": "task", "retryPolicy": {"maxAttempts": 1}},
        {"id": "b", "type": "task", "dependsOn": ["a"]}]}))
    run_cli("graph", "apply", "plan-escalate-a", "--result", "-",
            input='{"status":"success","summary":"-"}')
    run_cli("graph", "apply", "a", "--result", "-", input='{"status":"fail","summary":"x"}')
    step = cli_json("graph", "next")
    assert step["node"]["id"] == "a" and step["reset"] == ["a"]


def test_import_scaffold_answer_reset_export_mermaid(run_cli, cli_json, project,
                                                     tmp_path: Path) -> None:
    spec = tmp_path / "plan.json"
    spec.write_text(json.dumps({"nodes": [
        {"id": "t1", "type": "task", "verify": [PASSES]},
        {"id": "t2", "type": "task", "dependsOn": ["t1"]}]}))
    assert cli_json("graph", "import", str(spec)) == {
        "graph_id": "default", "added": ["t1", "t2"], "updated": {}, "unchanged": [],
        "done": [], "lint": [], "lint_accepted": None}
    report = cli_json("graph", "scaffold")
    assert report["verify"] == ["verify-t1", "verify-t2"] and report["final"] == "final-verify"
    assert run_cli("graph", "scaffold").stdout.strip() == "scaffolding already complete"

    run_cli("graph", "apply", "t1", "--result", "-",
            input='{"status":"checkpoint","summary":"?","question":"Which port?"}')
    assert cli_json("graph", "show", "t1")["status"] == "needs_human"
    answered = cli_json("graph", "answer", "t1", "--answer", "8080")
    assert answered["status"] == "open" and answered["human_question"]["answer"] == "8080"
    run_cli("graph", "apply", "t1", "--result", "-", input='{"status":"fail","summary":"no"}')
    assert cli_json("graph", "show", "t1")["attempts"] == 1
    assert cli_json("graph", "reset", "t1")["attempts"] == 0

    exported = cli_json("graph", "export")
    assert exported["nodes"] == 6 and Path(exported["path"]).exists()
    chart = run_cli("graph", "mermaid")
    assert chart.returncode == 0 and chart.stdout.startswith("flowchart TD")
    assert "verify-t1" in chart.stdout


@pytest.mark.parametrize(("args", "stdin", "message"), [
    (("graph", "show", "ghost"), None, "unknown node 'ghost'"),
    (("graph", "add", "--id", "x", "--type", "task", "--dep", "ghost"), None,
     "node 'x' depends on unknown node 'ghost'"),
    (("graph", "add", "--id", "seed", "--type", "task"), None, "node 'seed' already exists"),
    (("graph", "import", "-"), "{nope", "not valid JSON"),
    (("graph", "import", "-"), json.dumps({"nodes": [
        {"id": "x", "type": "task", "dependsOn": ["y"]},
        {"id": "y", "type": "task", "dependsOn": ["x"]}]}), "node 'x' is in a dependency cycle"),
    (("graph", "import", "-"), json.dumps({"nodes": [
        {"id": "x", "type": "task"}, {"id": "x", "type": "task"}]}), "duplicate node id 'x'"),
    (("graph", "import", "/no/such/file.json"), None, "cannot read /no/such/file.json"),
    (("graph", "apply", "seed", "--result", "-"), "<result>{bad</result>", "not valid JSON"),
    (("graph", "apply", "ghost", "--result", "-"), '{"status":"success","summary":"s"}',
     "unknown node 'ghost'"),
    (("graph", "apply", "seed", "--result", "-"), json.dumps({
        "status": "success", "summary": "s",
        "next": {"addNodes": [{"id": "n", "type": "task", "dependsOn": ["ghost"]}]}}),
     "node 'n' depends on unknown node 'ghost'"),
    (("graph", "answer", "seed", "--answer", "x"), None, "not needs_human"),
    (("graph", "reset", "ghost"), None, "unknown node 'ghost'"),
])
def test_bad_input_is_one_line_exit_2_and_writes_nothing(run_cli, cli_json, project, args,
                                                          stdin, message) -> None:
    _seed(project)
    before = _db_counts(project)
    snapshot = (project / ".clavain" / "workgraph.json").read_text()
    result = run_cli(*args, input=stdin)
    assert result.returncode == 2, result.stdout + result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("clavain: error: ") and message in lines[0]
    assert _db_counts(project) == before
    assert (project / ".clavain" / "workgraph.json").read_text() == snapshot
    as_json = run_cli(*args, "--json", input=stdin)
    assert as_json.returncode == 2 and message in json.loads(as_json.stdout)["error"]


@pytest.mark.parametrize(("args", "code", "out"), [
    (("graph", "ls", "--json"), 0, "[]"),
    (("graph", "show", "ghost"), 2, "unknown node 'ghost'"),
    (("graph", "next"), 3, "the workgraph 'default' has no nodes yet"),
    (("graph", "next", "--claim"), 3, "the workgraph 'default' has no nodes yet"),
    (("graph", "deadlock"), 0, "no deadlock"),
    (("graph", "mermaid"), 0, "flowchart TD"),
    (("graph", "apply", "ghost", "--result", "-"), 2, "no workgraph yet"),
    (("graph", "answer", "ghost", "--answer", "x"), 2, "no workgraph yet"),
    (("graph", "reset", "ghost"), 2, "no workgraph yet"),
    (("graph", "add", "--id", "bad id", "--type", "task"), 2, "node 'bad id': id:"),
    (("graph", "import", "-"), 2, "node 'x': type:"),
])
def test_reads_and_refusals_never_create_the_state_folder(run_cli, project, args, code,
                                                          out, backend) -> None:
    if backend and out == "no workgraph yet":
        code, out = 2, "unknown node 'ghost'"  # a shared store always has its graph
    stdin = ('{"status":"success","summary":"s"}' if "apply" in args
             else json.dumps({"nodes": [{"id": "x", "type": "bogus"}]}))
    result = run_cli(*args, input=stdin)
    assert result.returncode == code, result.stdout + result.stderr
    assert out in result.stdout + result.stderr
    assert not (project / ".clavain").exists()
    assert not (project / ".gitignore").exists()


def test_a_runner_log_with_bytes_that_are_not_utf8_still_applies(run_cli, cli_json, project,
                                                                 tmp_path: Path) -> None:
    """Runner output is whatever the tools printed; only the <result> block has to be JSON."""
    _seed(project)
    log = tmp_path / "runner.log"
    log.write_bytes(b"compiler said \xff\xfe\x80\n"
                    b'<result>{"status": "fail", "summary": "red"}</result>\n')
    result = run_cli("graph", "apply", "seed", "--result", str(log))
    assert result.returncode == 0, result.stderr
    piped = subprocess.run(
        [str(BIN / "clavain"), "graph", "apply", "seed", "--result", "-"], cwd=project,
        input=b'\xff<result>{"status": "success", "summary": "ok \xff"}</result>',
        capture_output=True, env=subprocess_env(), timeout=120)
    assert piped.returncode == 0, piped.stderr
    node = cli_json("graph", "show", "seed")
    assert (node["status"], node["attempts"]) == ("done", 1)


def test_an_import_file_that_is_not_utf8_is_one_line_exit_2(run_cli, project,
                                                             tmp_path: Path) -> None:
    _seed(project)
    before = _db_counts(project)
    spec = tmp_path / "plan.json"
    spec.write_bytes(b'{"nodes": [{"id": "x", "type": "task", "title": "caf\xe9"}]}')
    result = run_cli("graph", "import", str(spec))
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "not UTF-8" in lines[0]
    assert _db_counts(project) == before


@pytest.mark.parametrize("pid", ["0", "-1"])
def test_a_claim_pid_must_be_a_real_process_id(run_cli, project, pid) -> None:
    _seed(project)
    result = run_cli("graph", "next", "--claim", f"--pid={pid}")
    assert result.returncode == 2 and "--pid" in result.stderr, result.stderr
    assert _db_counts(project)[2] == 1  # no claim event


def test_a_node_waiting_on_a_person_is_named_with_its_question(run_cli, cli_json) -> None:
    cli_json("graph", "add", "--id", "t1", "--type", "task")
    run_cli("graph", "apply", "t1", "--result", "-",
            input='{"status":"checkpoint","summary":"?","question":"red or blue?"}')
    step = json.loads(run_cli("graph", "next", "--json").stdout)
    assert step["reason"] == "needs_human"
    assert step["questions"] == [{"id": "t1", "question": "red or blue?"}]
    reported = run_cli("graph", "deadlock", "--json")
    [blocker] = json.loads(reported.stdout)["deadlock"]["blockers"]
    assert (blocker["id"], blocker["status"], blocker["error"]) == ("t1", "needs_human",
                                                                    "red or blue?")
    assert blocker["fix"] == "clavain graph answer t1 --answer TEXT"


def test_a_stale_lock_released_by_next_is_said_in_text_mode(run_cli, cli_json) -> None:
    import subprocess
    import sys

    cli_json("graph", "add", "--id", "t", "--type", "task")
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    cli_json("graph", "next", "--claim", "--run-id", "r1", "--pid", str(dead.pid))
    step = run_cli("graph", "next")
    assert "gave back the stale claim of t (its holder is gone: a crash, no attempt spent)" \
        in step.stderr


def test_argument_errors_are_json_when_json_was_asked_for(run_cli) -> None:
    result = run_cli("graph", "next", "--json", "--bogus")
    assert result.returncode == 2 and result.stderr == ""
    assert json.loads(result.stdout)["error"].startswith("unrecognized arguments: --bogus")


# ---------------------------------------------------------------- one workgraph per sprint

def _ls_ids(cli_json, *args: str, **kwargs: object) -> list[tuple[str, str]]:
    return [(n["graph_id"], n["id"]) for n in cli_json("graph", "ls", *args, **kwargs)]


def test_graph_ls_shows_the_current_graph_and_all_shows_every_graph(run_cli, cli_json) -> None:
    assert run_cli("graph", "add", "--id", "a", "--type", "task",
                   "--title", "in default").stdout.strip() == "added a to graph default"
    # Two graphs may hold the same node id: each is its own node.
    added = run_cli("graph", "add", "--id", "a", "--type", "task", "--title", "in other",
                    "--graph", "other")
    assert added.returncode == 0 and added.stdout.strip() == "added a to graph other"
    cli_json("graph", "add", "--id", "b", "--type", "task", "--graph", "other")

    assert _ls_ids(cli_json) == [("default", "a")]
    assert _ls_ids(cli_json, "--graph", "other") == [("other", "a"), ("other", "b")]
    assert sorted(_ls_ids(cli_json, "--all")) == [("default", "a"), ("other", "a"),
                                                  ("other", "b")]
    table = run_cli("graph", "ls", "--all").stdout.splitlines()
    assert table[0].split()[:2] == ["GRAPH", "ID"]
    assert sorted(line.split()[:2] for line in table[1:]) == [["default", "a"], ["other", "a"],
                                                              ["other", "b"]]
    assert [line.split()[0] for line in run_cli("graph", "ls").stdout.splitlines()[1:]] == ["a"]

    assert cli_json("graph", "show", "a")["title"] == "in default"
    assert cli_json("graph", "show", "a", "--graph", "other")["title"] == "in other"
    # Work on one graph's `a` leaves the other's alone.
    done = run_cli("graph", "apply", "a", "--graph", "other", "--result", "-",
                   input='{"status":"success","summary":"ok"}')
    assert done.returncode == 0, done.stderr
    assert cli_json("graph", "show", "a", "--graph", "other")["status"] == "done"
    assert cli_json("graph", "show", "a")["status"] == "open"
    assert cli_json("graph", "next")["node"]["id"] == "a"
    assert cli_json("graph", "next", "--graph", "other")["node"]["id"] == "b"
    assert {g["id"]: g["nodes"] for g in cli_json("graph", "graphs")} == {"default": 1,
                                                                          "other": 2}

    refused = run_cli("graph", "ls", "--all", "--graph", "other")
    assert refused.returncode == 2 and refused.stderr.strip() == (
        "clavain: error: --all lists every graph; leave out --graph")


def test_clavain_graph_in_the_environment_picks_the_graph_and_graph_flag_wins(
        run_cli, cli_json) -> None:
    env = {"CLAVAIN_GRAPH": "from-env"}
    added = run_cli("graph", "add", "--id", "t", "--type", "task", env=env)
    assert added.returncode == 0 and added.stdout.strip() == "added t to graph from-env"
    assert _ls_ids(cli_json, env=env) == [("from-env", "t")]
    assert cli_json("graph", "ls") == []  # without it: the default graph, still empty
    assert cli_json("graph", "show", "t", env=env)["graph_id"] == "from-env"
    missing = run_cli("graph", "show", "t")
    assert missing.returncode == 2 and missing.stderr.strip() == (
        "clavain: error: unknown node 't' in graph 'default'; `clavain graph ls` lists its "
        "nodes (`--all`: every graph's)")
    cli_json("graph", "add", "--id", "t", "--type", "task", "--graph", "default", env=env)
    assert _ls_ids(cli_json, "--graph", "default", env=env) == [("default", "t")]

    bad = run_cli("graph", "ls", env={"CLAVAIN_GRAPH": "no spaces"})
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1
    assert "graph id 'no spaces' is not" in bad.stderr


def test_the_active_sprints_graph_is_the_current_one(run_cli, cli_json) -> None:
    cli_json("graph", "add", "--id", "before", "--type", "task")
    sprint = cli_json("sprint", "start", "--complexity", "2", "add a login page",
                      person=True)["sprint_id"]
    assert (run_cli("graph", "add", "--id", "t1", "--type", "task").stdout.strip()
            == f"added t1 to graph {sprint}")
    # A new sprint does not see the open work added before it.
    assert _ls_ids(cli_json) == [(sprint, "t1")]
    assert cli_json("graph", "next")["node"]["id"] == "t1"
    assert _ls_ids(cli_json, "--graph", "default") == [("default", "before")]
    kinds = {g["id"]: (g["kind"], g["status"]) for g in cli_json("graph", "graphs")}
    assert kinds == {"default": ("default", "active"), sprint: ("sprint", "active")}


@pytest.mark.parametrize("outcome", ["abandoned", "shipped"])
def test_a_closed_graph_refuses_new_nodes_in_one_line(run_cli, cli_json, project,
                                                      outcome) -> None:
    if outcome == "abandoned":
        closed = cli_json("sprint", "start", "--complexity", "2", "try a thing",
                          person=True)["sprint_id"]
        cli_json("graph", "add", "--id", "t1", "--type", "task")
        assert run_cli("sprint", "abandon").returncode == 0
    else:
        from clavain.clock import now_iso
        from clavain.store import db
        from clavain.store.graph_db import open_graph_db
        from clavain.workgraph import graphs

        closed = "shipped-run"
        cli_json("graph", "add", "--id", "t1", "--type", "task", "--graph", closed)
        state = _state(project)
        conn = open_graph_db(state)
        with db.transaction(conn):
            graphs.close(graphs.Graph(conn, closed, state), "shipped", at=now_iso(), note="test")
        conn.close()
    assert {g["id"]: g["status"] for g in cli_json("graph", "graphs")}[closed] == outcome
    before = _db_counts(project)

    expected = (f"clavain: error: graph {closed!r} was {outcome}: its sprint is over and "
                "nothing is added to it; start a new sprint, or use another graph (--graph)")
    for args, stdin in ((("graph", "add", "--id", "t2", "--type", "task"), None),
                        (("graph", "import", "-"),
                         json.dumps({"nodes": [{"id": "t3", "type": "task"}]})),
                        (("graph", "scaffold"), None)):
        refused = run_cli(*args, "--graph", closed, input=stdin)
        assert refused.returncode == 2, refused.stdout + refused.stderr
        assert refused.stderr.strip() == expected and refused.stdout == ""
        as_json = run_cli(*args, "--graph", closed, "--json", input=stdin)
        assert as_json.returncode == 2 and f"was {outcome}" in json.loads(as_json.stdout)["error"]
    assert _db_counts(project) == before
    # Its nodes are still listed (the unfinished one cancelled), and other graphs take work.
    assert [(n["id"], n["status"]) for n in cli_json("graph", "ls", "--graph", closed)] == [
        ("t1", "cancelled")]
    assert ("t1", "cancelled") in [(n["id"], n["status"]) for n in cli_json("graph", "ls",
                                                                            "--all")]
    assert (run_cli("graph", "add", "--id", "t1", "--type", "task").stdout.strip()
            == "added t1 to graph default")


def test_a_removed_state_folder_stays_removed(run_cli, project: Path) -> None:
    """The deferred snapshot writer a burst of changes started never makes `.clavain/` again
    once a person removed it."""
    import shutil
    import time

    for n in range(3):  # the second and third change defer the snapshot to a writer process
        assert run_cli("graph", "add", "--id", f"t{n}", "--type", "task").returncode == 0
    shutil.rmtree(project / ".clavain")
    time.sleep(2.5)  # past the writer's due time (snapshotMaxLagSeconds, 1 s)
    assert not (project / ".clavain").exists()


def test_commands_over_every_graph_work_with_a_damaged_checkpoint(run_cli, project: Path
                                                                   ) -> None:
    assert run_cli("graph", "add", "--id", "a", "--type", "task").returncode == 0
    (project / ".clavain" / "checkpoint.json").write_text("{damaged")
    for args in (("graph", "ls", "--all"), ("graph", "export"), ("graph", "graphs")):
        result = run_cli(*args)
        assert result.returncode == 0, (args, result.stderr)
    assert run_cli("graph", "ls").returncode == 2  # which graph is current cannot be told
