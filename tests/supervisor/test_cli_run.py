"""The front doors: `clavain run` and `clavain microcall` as a person and a tool call them."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from tests.checks import PASSES
from tests.supervisor import kit


def _cli(state, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(kit.REPO / "bin" / "clavain"), *args], cwd=state.project,
                          env=kit.cli_env(state, **env), capture_output=True, text=True,
                          timeout=120)


def test_help_names_every_option(tmp_path: Path) -> None:
    state = kit.make_project(tmp_path / "p")
    out = _cli(state, "run", "--help").stdout
    for option in ("--workers", "--max-iterations", "--once", "--dry-run", "--runner",
                   "--resume", "--json"):
        assert option in out
    assert "--store-key" in _cli(state, "microcall", "--help").stdout


def test_dry_run_prints_a_plan_and_runs_nothing(tmp_path: Path) -> None:
    state = kit.make_project(tmp_path / "p")
    kit.add(state, [{"id": "task-a", "type": "task", "title": "a", "verify": [PASSES]}])
    shown = _cli(state, "run", "--dry-run")
    assert shown.returncode == 0, shown.stderr
    assert "executor" in shown.stdout and "claude" in shown.stdout
    assert "within budget" in shown.stdout and "1 LLM call(s)" in shown.stdout
    as_json = json.loads(_cli(state, "run", "--dry-run", "--json").stdout)
    assert as_json["totals"]["llm_calls"] == 1
    assert all(n["status"] == "open" for n in kit.nodes(state).values())
    assert not state.runs.exists() or not list(state.runs.glob("*/supervisor.json"))


def test_bad_input_is_one_line_and_nothing_runs(tmp_path: Path) -> None:
    state = kit.make_project(tmp_path / "p")
    kit.add(state, [{"id": "task-a", "type": "task", "title": "a", "verify": [PASSES]}])
    for args, needle in ((["--workers", "0"], "at least 1"),
                         (["--runner", "nope"], "unknown work runner 'nope'"),
                         (["--runner", "shellVerify"], "unknown work runner"),
                         (["--resume", "run-missing"], "no run 'run-missing'")):
        done = _cli(state, "run", *args)
        assert done.returncode == 2, (args, done.stderr)
        assert needle in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert kit.node(state, "task-a")["status"] == "open"


def test_a_run_prints_progress_and_a_final_table(tmp_path: Path) -> None:
    state = kit.make_project(tmp_path / "p")
    kit.add(state, [{"id": "task-a", "type": "task", "title": "a", "commands": ["true"],
                     "verify": [PASSES]}])
    done = _cli(state, "run", "--runner", "shell")
    assert done.returncode == 0, done.stderr
    assert "▶ task-a" in done.stderr and "✔ verify-task-a" in done.stderr
    assert "peak concurrency: 1" in done.stdout and "complete" in done.stdout
    for column in ("node", "role", "runner", "worker", "seconds", "outcome"):
        assert column.upper() in done.stdout.splitlines()[0]


def test_nothing_to_run_says_why(tmp_path: Path) -> None:
    state = kit.make_project(tmp_path / "p")
    kit.add(state, [{"id": "q", "type": "task", "title": "q", "verify": [PASSES]}],
            scaffold=False)
    from clavain.store.graph_db import open_graph_db
    from clavain.workgraph.graphs import Graph
    from clavain.workgraph.results import apply_result

    conn = open_graph_db(state)
    apply_result(Graph(conn, "default", state), "q",
                 {"status": "checkpoint", "summary": "which colour?", "question": "red or blue?"})
    conn.close()
    done = _cli(state, "run", "--runner", "shell", "--json")
    report = json.loads(done.stdout)
    assert done.returncode == 1 and report["reason"] == "needs_human"
    assert "red or blue?" in report["message"]


def test_microcall_prints_and_stores_the_json_answer(tmp_path: Path) -> None:
    fake = kit.script(tmp_path / "claude", kit.FAKE_CLAUDE)
    log = tmp_path / "calls.log"
    state = kit.make_project(tmp_path / "p")
    kit.add(state, [{"id": "task-a", "type": "task", "title": "a", "verify": [PASSES]}],
            scaffold=False)
    env = {"CLAVAIN_CLAUDE_BIN": str(fake), "FAKE_CLAUDE_LOG": str(log),
           "FAKE_CLAUDE_RESULT": '{"label": "bugfix"}'}
    done = _cli(state, "microcall", "--prompt", "Classify: fix the crash", "--store-key",
                "ctx.kind", "--run", "--json", "--graph", "default", **env)
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    assert answer["value"] == {"label": "bugfix"} and answer["model"] == "haiku"
    assert answer["stored"] == {"node_id": "__run__", "key": "ctx.kind"}
    call = json.loads(log.read_text())
    assert call["argv"][call["argv"].index("--model") + 1] == "haiku"
    assert call["argv"][call["argv"].index("--max-turns") + 1] == "1"
    got = _cli(state, "kv", "get", "--run", "--key", "ctx.kind", "--graph", "default")
    assert json.loads(got.stdout) == {"label": "bugfix"}
    inside = _cli(state, "microcall", "--prompt", "again", "--store-key", "out.kind",
                  "--graph", "default", CLAVAIN_NODE_ID="task-a", **env)
    assert inside.returncode == 0, inside.stderr
    assert json.loads(inside.stdout) == {"label": "bugfix"}


def test_microcall_without_json_in_the_reply_fails_clearly(tmp_path: Path) -> None:
    fake = kit.script(tmp_path / "claude", kit.FAKE_CLAUDE)
    state = kit.make_project(tmp_path / "p")
    done = _cli(state, "microcall", "--prompt", "hi", CLAVAIN_CLAUDE_BIN=str(fake),
                FAKE_CLAUDE_RESULT="not json at all")
    assert done.returncode == 1 and "holds no JSON" in done.stderr


def test_a_retry_line_says_when_the_node_runs_again(tmp_path: Path) -> None:
    """A task failing once: its line names the back-off's end (the node's retry time, from
    metrics.json), not only how long the failed attempt took."""
    state = kit.make_project(tmp_path / "p", {"defaults": {"retryBackoffSeconds": 1}})
    marker = tmp_path / "failed-once"
    kit.add(state, [{"id": "task-a", "type": "task", "title": "a", "verify": [PASSES],
                     "commands": [f"test -f {marker} || {{ touch {marker}; exit 3; }}"]}])
    done = _cli(state, "run", "--runner", "shell")
    assert done.returncode == 0, done.stderr
    metrics = json.loads(next(state.runs.glob("*/metrics.json")).read_text())
    retries = [e for e in metrics["timeline"] if e["outcome"] == "retry"]
    assert len(retries) == 1 and retries[0]["retry_at"]
    line = next(x for x in done.stderr.splitlines() if x.startswith("✖ task-a"))
    assert f"failed attempt 1 after {retries[0]['seconds']:.1f}s, retries at " \
           f"{retries[0]['retry_at'][11:19]}Z (in " in line
    assert "retry in" not in line


def test_the_final_line_names_a_few_left_nodes_and_counts_the_rest(tmp_path: Path) -> None:
    state = kit.make_project(tmp_path / "p", {"defaults": {"maxAttempts": 1}})
    kit.add(state, [{"id": "task-root", "type": "task", "title": "root", "verify": [PASSES],
                     "commands": ["exit 3"]}]
            + [{"id": f"task-{n}", "type": "task", "title": str(n), "verify": [PASSES],
                "commands": ["true"], "dependsOn": ["task-root"]} for n in range(12)])
    done = _cli(state, "run", "--runner", "shell")
    assert done.returncode == 1, done.stderr
    final = next(x for x in done.stdout.splitlines() if x.startswith("Done: "))
    left = len([n for n in kit.nodes(state).values() if n["status"] != "done"])
    assert left > 20  # the tasks, their verify nodes, integrate, final verify
    assert "; left: task-root (failed), " in final
    assert final.count(" (open)") + final.count(" (failed)") == 5
    assert f" and {left - 5} more ({left - 5} open); `clavain graph ls` lists them" in final


def test_left_summary_orders_what_needs_a_person_first() -> None:
    from clavain.supervisor.progress import left_summary

    left = [{"id": f"n{i}", "status": "open"} for i in range(8)] + [
        {"id": "q", "status": "needs_human"}, {"id": "f", "status": "failed"}]
    assert left_summary(left, named=3) == (
        "f (failed), q (needs_human), n0 (open) and 7 more (7 open); `clavain graph ls` lists "
        "them")
    assert left_summary(left[:2]) == "n0 (open), n1 (open)"
    assert left_summary([]) == "nothing"


def _fresh_repo(root: Path):
    """A git repository with one commit and nothing of Clavain's yet."""
    from clavain import locate
    from clavain.paths import StatePaths

    root.mkdir(parents=True)
    kit.git(root, "init", "-q", "-b", "main")
    (root / "README.md").write_text("project\n")
    kit.git(root, "add", "-A")
    kit.git(root, "commit", "-qm", "start")
    return StatePaths(root / ".clavain", project=root, store_url=locate.store_url())


def test_init_then_a_parallel_run_starts_at_once(tmp_path: Path) -> None:
    """`clavain init` leaves nothing in the work tree that `clavain run --workers 2` refuses
    (its ignores go to .git/info/exclude), and git still ignores the state's volatile parts."""
    state = _fresh_repo(tmp_path / "p")
    done = _cli(state, "init")
    assert done.returncode == 0, done.stderr
    assert kit.git(state.project, "status", "--porcelain", "--untracked-files=all") == ""
    kit.add(state, [{"id": f"task-{n}", "type": "task", "title": n, "verify": [PASSES],
                     "commands": ["true"]} for n in ("a", "b")])
    done = _cli(state, "run", "--workers", "2", "--runner", "shell")
    assert done.returncode == 0, done.stderr
    assert "untracked" not in done.stderr and "complete" in done.stdout


def test_a_persons_untracked_file_still_stops_a_parallel_run(tmp_path: Path) -> None:
    state = _fresh_repo(tmp_path / "p")
    assert _cli(state, "init").returncode == 0
    kit.add(state, [{"id": "task-a", "type": "task", "title": "a", "verify": [PASSES],
                     "commands": ["true"]}])
    (state.project / "notes.txt").write_text("my own work\n")
    done = _cli(state, "run", "--workers", "2", "--runner", "shell")
    assert done.returncode != 0
    assert "has untracked files (notes.txt)" in done.stderr
    assert kit.node(state, "task-a")["status"] == "open"


def test_a_resumed_run_s_dry_run_shows_the_runner_it_would_go_on_with(tmp_path: Path) -> None:
    """`--resume RUN --dry-run` projects the run as `--resume RUN` would run it: with the runner
    it was started with, unless another is named now."""
    state = kit.make_project(tmp_path / "p", {"runners": {"lim": {"command": ["true"]}}})
    kit.add(state, [{"id": "task-a", "type": "task", "title": "a", "verify": [PASSES]}])
    folder = state.runs / "run-old"
    folder.mkdir(parents=True)
    (folder / "supervisor.json").write_text(json.dumps({
        "run_id": "run-old", "graph_id": "default", "status": "interrupted",
        "options": {"runner": "lim", "workers": 1, "packet_mode": None}, "runners": {}}))

    def runner(*args: str) -> str:
        done = _cli(state, "run", "--dry-run", "--json", *args)
        assert done.returncode == 0, done.stderr
        return next(row["runner"] for row in json.loads(done.stdout)["nodes"]
                    if row["id"] == "task-a")

    assert runner("--resume", "run-old") == "lim"
    assert runner("--resume", "run-old", "--runner", "claude") == "claude"
    assert runner() == "claude"
