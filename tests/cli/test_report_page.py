"""`clavain report --html FILE` and `clavain run --html FILE` through the real launcher: what
the page holds for a run, a sprint and a loop run (read back from the file), that it keeps
nothing of its own, every refusal, the page rewritten while a run is live, and a page that is
never torn."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.checks import PASSES
from tests.conftest import BIN, subprocess_env
from tests.page_scenarios import finished_run, loop_run, sprint_with_verdicts_and_waiver


def _page(run_cli, target: Path, *args: str) -> str:
    result = run_cli("report", "--html", str(target), *args)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(f"Wrote {target} (")
    return target.read_text()


def _values(text: str, attribute: str) -> list[str]:
    return re.findall(rf'{attribute}="([^"]*)"', text)


def test_a_finished_run_shows_its_graph_lanes_and_budgets(run_cli, project: Path,
                                                          tmp_path: Path) -> None:
    finished_run(project, run_cli)
    text = _page(run_cli, tmp_path / "run.html", "--run", "demo")
    assert 'data-subject-kind="run" data-subject-id="demo"' in text
    assert set(_values(text, "data-node-id")) == {
        "task-greet", "task-farewell", "task-cli", "verify-task-greet", "verify-task-farewell",
        "verify-task-cli", "integrate", "final-verify"}
    assert _values(text, "data-lane") == ["worker 1", "worker 2"]
    metrics = json.loads((project / ".clavain/runs/demo/metrics.json").read_text())
    # One bar per runner call the run measured; the figures are the run's own.
    assert len(_values(text, "data-outcome")) == len(metrics["timeline"]) == 8
    assert "<b>2</b><span>peak concurrency</span>" in text
    assert 'id="critical-path">task-' in text and "final-verify</span>" in text
    budgets = text[text.index('<table class="budgets">'):]
    assert "<td>Test runs</td><td class=num>4</td><td class=num>8</td>" in budgets
    assert 'data-live="false"' in text and 'http-equiv="refresh"' not in text
    # The default subject is what started last: this run.
    assert _page(run_cli, tmp_path / "default.html").count('data-subject-id="demo"') == 1


def test_a_sprint_shows_its_route_waiver_and_verdicts(run_cli, project: Path,
                                                      tmp_path: Path) -> None:
    sprint_id = sprint_with_verdicts_and_waiver(project, run_cli)
    text = _page(run_cli, tmp_path / "sprint.html")  # the active sprint, by default
    assert f'data-subject-kind="sprint" data-subject-id="{sprint_id}"' in text
    steps = dict(re.findall(r'data-step="([^"]+)" data-state="([^"]+)"', text))
    assert steps == {"plan": "done", "execute": "waived", "test": "current",
                     "quality-gates": "pending", "resolve": "pending", "ship": "pending"}
    waivers = text[text.index('<table class="waivers">'):]
    waivers = waivers[:waivers.index("</table>")]
    assert "ran it on staging by hand" in waivers and "a person at /dev/" in waivers
    verdicts = text[text.index('<table class="verdicts">'):]
    verdicts = verdicts[:verdicts.index("</table>")]
    assert verdicts.count("<tr>") == 3  # the header and two verdicts
    assert '<span class="status-NEEDS_ATTENTION">NEEDS_ATTENTION</span>' in verdicts
    detail = (project / ".clavain/verdicts/clavain-fd-safety--d2.md").resolve()
    assert f'href="{detail.as_uri()}"' in verdicts
    # Text from agents is text: their markup is escaped, never parsed.
    assert "<img src=x" not in text and "escapes &lt;img src=x onerror=" in text
    assert "task-flag" in _values(text, "data-node-id")
    assert "add --verbose to &lt;export&gt; &amp; co" in text
    assert 'data-live="true"' in text  # an active sprint may still change
    # The same sprint named, once it ended: read from its archive.
    assert run_cli("sprint", "abandon").returncode == 0
    ended = _page(run_cli, tmp_path / "ended.html", "--sprint", sprint_id)
    assert 'data-live="false"' in ended and f'href="file://{project}/.clavain/runs/' in ended
    assert dict(re.findall(r'data-step="([^"]+)" data-state="([^"]+)"', ended)) == steps


def test_a_loop_run_shows_each_iteration(run_cli, project: Path, tmp_path: Path) -> None:
    loop_run(project, run_cli)
    text = _page(run_cli, tmp_path / "loop.html", "--run", "loop-t")
    iterations = text[text.index('<table class="iterations">'):]
    iterations = iterations[:iterations.index("</table>")]
    assert iterations.count("<tr>") == 5  # the header and four iterations
    assert "task_completed=check:greeting status=COMPLETE" in iterations
    assert "exit_signal=false" in iterations and "exit_signal=true" in iterations
    assert "True" not in iterations and "<td>nothing actionable</td>" in iterations
    assert _values(text, "data-lane") == ["loop loop-t"]
    assert 'data-loop="loop-t"' in text and "<b>3</b><span>confirmed done</span>" in text


def test_rate_limit_waits_and_breaker_transitions_come_from_the_loop_files(
        run_cli, project: Path, tmp_path: Path) -> None:
    loop_run(project, run_cli)
    record_path = project / ".clavain/runs/loop-t/loop.json"
    record = json.loads(record_path.read_text())
    record["waits"] = [{"at": "2026-11-27T10:00:00.000Z", "why": "calls per hour: 2",
                        "seconds": 1740.0}]
    record_path.write_text(json.dumps(record))
    last = project / ".clavain/runs/loop-t/iteration-4.json"
    iteration = json.loads(last.read_text())
    last.write_text(json.dumps({**iteration, "breaker": "HALF_OPEN"}))
    text = _page(run_cli, tmp_path / "loop.html", "--run", "loop-t")
    waits = text[text.index('<table class="waits">'):]
    assert "calls per hour: 2" in waits[:waits.index("</table>")]
    breaker = text[text.index('<table class="breaker">'):]
    assert "<td class=num>4</td><td>CLOSED</td><td>HALF_OPEN</td>" in breaker.replace(
        "<td>4</td>", "<td class=num>4</td>")


def test_damaged_files_are_named_on_the_page_and_the_rest_still_shows(
        run_cli, project: Path, tmp_path: Path) -> None:
    import os

    finished_run(project, run_cli)
    metrics = project / ".clavain/runs/demo/metrics.json"
    metrics.write_bytes(b"\xff\xfe not json")
    text = _page(run_cli, tmp_path / "a.html", "--run", "demo")
    assert set(_values(text, "data-node-id")) >= {"integrate", "final-verify"}
    assert '<section id="timeline"' not in text  # nothing recorded: no empty section
    metrics.unlink()
    os.mkfifo(metrics)  # a FIFO must not hang the page
    (project / ".clavain/runs/demo/supervisor.json").write_text("{")
    text = _page(run_cli, tmp_path / "b.html", "--run", "demo")
    assert "What could not be read" in text and "neither supervisor.json nor" in text


@pytest.mark.parametrize(("args", "message"), [
    (("--sprint", "x"), "--sprint is for the HTML page; add --html FILE"),
    (("--watch",), "--watch is for the HTML page; add --html FILE"),
    (("--html", "{tmp}/p.html", "--run", "a", "--graph", "b"),
     "--run and --graph each name what the page shows; give one"),
    (("--html", "{tmp}/p.html", "--interval", "2"), "--interval sets how often --watch"),
    (("--html", "{tmp}/p.txt"), "the page's file name must end in .html, got"),
    (("--html", "{tmp}/no/such/p.html"), "no folder {tmp}/no/such for the page"),
    (("--html", "{project}/.clavain/p.html"), "the page is not written into the state folder"),
    (("--html", "{tmp}/p.html", "--run", "nope"), "no run 'nope' in"),
    (("--html", "{tmp}/p.html", "--sprint", "nope"), "no sprint 'nope': not the active one"),
    (("--html", "{tmp}/p.html", "--graph", "nope"), "no such graph 'nope' (known: default"),
    (("--html", "{tmp}/p.html", "--watch", "--interval", "0"),
     "argument --interval: must be between 0.2 and 3600 seconds"),
])
def test_bad_requests_are_one_line_exit_2_and_write_nothing(
        run_cli, project: Path, tmp_path: Path, args: tuple[str, ...], message: str) -> None:
    assert run_cli("graph", "add", "--id", "a", "--type", "task", "--title", "a").returncode == 0
    filled = [arg.format(tmp=tmp_path, project=project) for arg in args]
    result = run_cli("report", *filled)
    assert result.returncode == 2, result.stdout + result.stderr
    assert message.format(tmp=tmp_path, project=project) in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert not list(tmp_path.rglob("*.html")) and not list(tmp_path.rglob("p.txt"))
    assert not (project / ".clavain" / "p.html").exists()


def test_a_file_clavain_did_not_write_is_never_replaced(run_cli, project: Path,
                                                        tmp_path: Path) -> None:
    assert run_cli("graph", "add", "--id", "a", "--type", "task", "--title", "a").returncode == 0
    notes = tmp_path / "notes.html"
    notes.write_text("<p>my notes</p>\n")
    refused = run_cli("report", "--html", str(notes))
    assert refused.returncode == 2 and "is not a page Clavain wrote" in refused.stderr
    assert notes.read_text() == "<p>my notes</p>\n"
    link = tmp_path / "link.html"
    link.symlink_to(notes)
    assert run_cli("report", "--html", str(link)).returncode == 2
    assert notes.read_text() == "<p>my notes</p>\n"
    into_state = tmp_path / "state-link"
    into_state.symlink_to(project / ".clavain")  # a folder that leads into the state folder
    refused = run_cli("report", "--html", str(into_state / "checkpoint.html"))
    assert refused.returncode == 2 and "not written into the state folder" in refused.stderr
    assert not (project / ".clavain" / "checkpoint.html").exists()
    page = tmp_path / "page.html"
    _page(run_cli, page)
    _page(run_cli, page)  # its own page: replaced
    shown = json.loads(run_cli("report", "--html", str(page), "--json").stdout)
    assert shown["path"] == str(page) and shown["subject"] == {"kind": "graph", "id": "default"}
    assert (shown["live"], shown["nodes"], shown["problems"]) == (False, 1, [])


def _slow_graph(project: Path, run_cli, seconds: float) -> None:
    """Two task nodes whose shell commands take `seconds`, on two workers."""
    nodes = [{"id": f"slow-{n}", "type": "task", "title": f"slow {n}",
              "commands": [f"sleep {seconds}"], "verify": [PASSES],
              "ownership": [f"slow-{n}.txt"]} for n in (1, 2)]
    (project / "plan.json").write_text(json.dumps({"nodes": nodes}))
    assert run_cli("init").returncode == 0
    assert run_cli("graph", "import", "plan.json").returncode == 0


def test_watch_rewrites_the_page_while_the_run_is_live_then_stops(
        run_cli, project: Path, tmp_path: Path) -> None:
    _slow_graph(project, run_cli, 4)
    target = tmp_path / "live.html"
    env = subprocess_env()
    run = subprocess.Popen([str(BIN / "clavain"), "run", "--runner", "shell", "--run-id", "live"],
                           cwd=project, env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
    try:
        record = project / ".clavain/runs/live/supervisor.json"
        deadline = time.monotonic() + 60
        while not record.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        watcher = subprocess.Popen(
            [str(BIN / "clavain"), "report", "--html", str(target), "--run", "live", "--watch",
             "--interval", "0.5"], cwd=project, env=env, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True)
        seen_live = []
        while watcher.poll() is None and time.monotonic() < deadline:
            if target.exists():
                text = target.read_text()
                if 'data-live="true"' in text:
                    seen_live.append(text)
            time.sleep(0.1)
        out, err = watcher.communicate(timeout=60)
    finally:
        run.wait(timeout=120)
    assert watcher.returncode == 0, err
    assert seen_live, "the page was never seen live"
    live = seen_live[0]
    assert '<meta http-equiv="refresh" content="1">' in live  # 0.5 s, at least a second
    # Runners at work are drawn as they run, on their worker's lane.
    assert any('data-lane="worker 1"' in text and 'data-outcome="running"' in text
               for text in seen_live)
    assert {lane for text in seen_live for lane in _values(text, "data-lane")} == {"worker 1"}
    assert not any("What could not be read" in text for text in seen_live)
    assert err.count("(live)") >= 2 and err.rstrip().endswith("(finished)")
    assert err.startswith(f"clavain: watching; open {target.as_uri()}\n")
    final = target.read_text()
    assert 'data-live="false"' in final and 'http-equiv="refresh"' not in final
    assert "slow-1" in _values(final, "data-node") and "slow-2" in _values(final, "data-node")
    assert out.startswith(f"Wrote {target} (run live, ")


def test_a_mistyped_graph_is_no_such_graph_for_a_run_too(run_cli, project: Path,
                                                          tmp_path: Path) -> None:
    _slow_graph(project, run_cli, 0)
    refused = run_cli("run", "--runner", "shell", "--graph", "nosuch", "--html",
                      str(tmp_path / "p.html"))
    assert refused.returncode == 2 and "no such graph 'nosuch' (known: " in refused.stderr
    assert not (tmp_path / "p.html").exists()
    assert not list((project / ".clavain/runs").glob("*/supervisor.json"))


def test_a_dry_run_has_no_page(run_cli, project: Path, tmp_path: Path) -> None:
    _slow_graph(project, run_cli, 0)
    refused = run_cli("run", "--dry-run", "--html", str(tmp_path / "p.html"))
    assert refused.returncode == 2 and "--dry-run runs nothing" in refused.stderr
    assert not (tmp_path / "p.html").exists()


def test_run_html_keeps_the_page_of_the_run(run_cli, project: Path, tmp_path: Path) -> None:
    target = tmp_path / "run.html"
    finished_run(project, run_cli, extra=("--html", str(target)))
    text = target.read_text()
    assert 'data-subject-id="demo"' in text and 'data-live="false"' in text
    assert _values(text, "data-lane") == ["worker 1", "worker 2"]


def test_a_reader_never_sees_a_torn_page(run_cli, project: Path, tmp_path: Path) -> None:
    """Rewritten five times a second while a sprint is active, the file read in a tight loop
    is always a whole page."""
    assert run_cli("init").returncode == 0
    assert run_cli("sprint", "start", "--complexity", "2",
                   "add a --verbose flag to the export command").returncode == 0
    target = tmp_path / "page.html"
    watcher = subprocess.Popen(
        [str(BIN / "clavain"), "report", "--html", str(target), "--watch", "--interval", "0.2"],
        cwd=project, env=subprocess_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True)
    reads, torn = 0, []
    try:
        deadline = time.monotonic() + 60
        while reads < 300 and time.monotonic() < deadline:
            if target.exists():
                text = target.read_text()
                reads += 1
                if not text.startswith("<!DOCTYPE html>") or not text.endswith("</html>\n"):
                    torn.append(len(text))
    finally:
        watcher.send_signal(2)  # Ctrl-C: the watcher leaves a still page
        _, err = watcher.communicate(timeout=60)
    assert reads >= 300 and torn == []
    assert watcher.returncode == 130 and "is a still page now" in err
    assert 'http-equiv="refresh"' not in target.read_text()


def test_a_watcher_killed_or_hung_up_leaves_a_still_page(run_cli, project: Path,
                                                         tmp_path: Path) -> None:
    assert run_cli("init").returncode == 0
    assert run_cli("sprint", "start", "--complexity", "2",
                   "add a --verbose flag to the export command").returncode == 0
    for number, sig in enumerate((signal.SIGTERM, signal.SIGHUP)):
        target = tmp_path / f"page-{number}.html"
        watcher = subprocess.Popen(
            [str(BIN / "clavain"), "report", "--html", str(target), "--watch", "--interval",
             "0.2"], cwd=project, env=subprocess_env(), stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 60
        while not (target.exists() and 'data-live="true"' in target.read_text()) \
                and time.monotonic() < deadline:
            time.sleep(0.05)
        watcher.send_signal(sig)
        _, err = watcher.communicate(timeout=60)
        assert watcher.returncode == 130, err
        assert f"stopped watching ({sig.name})" in err
        text = target.read_text()
        assert 'http-equiv="refresh"' not in text and 'data-live="true"' in text
        assert "still at work when written; this page is not rewritten" in text


def test_a_watcher_never_follows_its_folder_into_the_state_folder(
        run_cli, project: Path, tmp_path: Path) -> None:
    """Checked before every write, not once: the folder swapped for a link into `.clavain/`
    while the watcher runs stops it, and nothing is written there."""
    assert run_cli("init").returncode == 0
    assert run_cli("sprint", "start", "--complexity", "2",
                   "add a --verbose flag to the export command").returncode == 0
    pages = tmp_path / "pages"
    pages.mkdir()
    target = pages / "checkpoint.html"
    watcher = subprocess.Popen(
        [str(BIN / "clavain"), "report", "--html", str(target), "--watch", "--interval", "0.2"],
        cwd=project, env=subprocess_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True)
    deadline = time.monotonic() + 60
    while not target.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    (pages / "checkpoint.html").unlink()
    pages.rmdir()
    pages.symlink_to(project / ".clavain")
    _, err = watcher.communicate(timeout=60)
    assert watcher.returncode == 2 and "not written into the state folder" in err
    assert not (project / ".clavain" / "checkpoint.html").exists()


def _edit_json(path: Path, edit) -> None:
    data = json.loads(path.read_text())
    edit(data)
    path.write_text(json.dumps(data))


def test_hand_edited_run_files_never_cost_the_page(run_cli, project: Path,
                                                   tmp_path: Path) -> None:
    """Whatever types a hand-edited record holds, the page is written (a part it cannot use
    is left out or named), and a non-finite time never hangs it."""
    finished_run(project, run_cli)
    run = project / ".clavain/runs/demo"
    metrics, record = run / "metrics.json", run / "supervisor.json"
    original = {path: path.read_text() for path in (metrics, record)}
    damages = [
        (metrics, lambda d: d["timeline"][0].update(end_epoch=float("inf"))),
        (metrics, lambda d: d["timeline"][0].update(tokens="12k", cost_usd=[1])),
        (metrics, lambda d: d["timeline"][1].update(worker="²", node=None, outcome=7)),
        (metrics, lambda d: d.update(timeline=5, wall_seconds="abc")),
        (record, lambda d: d.update(options="x", runners=[1], status="running")),
    ]
    for number, (path, damage) in enumerate(damages):
        for kept, text in original.items():
            kept.write_text(text)
        _edit_json(path, damage)
        result = subprocess.run([str(BIN / "clavain"), "report", "--html",
                                 str(tmp_path / f"p{number}.html"), "--run", "demo"],
                                cwd=project, env=subprocess_env(), capture_output=True,
                                text=True, timeout=60)
        assert result.returncode == 0, (number, result.stderr)
        text = (tmp_path / f"p{number}.html").read_text()
        assert text.endswith("</html>\n") and 'data-node-id="integrate"' in text, number


def test_hand_edited_sprint_and_loop_files_never_cost_the_page(run_cli, project: Path,
                                                              tmp_path: Path) -> None:
    sprint_id = sprint_with_verdicts_and_waiver(project, run_cli)
    assert run_cli("sprint", "abandon").returncode == 0
    archive = project / ".clavain/runs" / sprint_id / "checkpoint.json"
    _edit_json(archive, lambda d: d.update(
        skipped=["x"], completed_steps=5, person_decisions=5, route=["plan", ["x"], 3],
        waivers=[{"step": ["x"]}, {"step": "plan", "decided_by": 5, "problems": "p"}]))
    text = _page(run_cli, tmp_path / "sprint.html", "--sprint", sprint_id)
    assert 'data-step="plan" data-state="waived"' in text
    loop_dir = project / ".clavain/runs/loop-x"
    loop_dir.mkdir()
    (loop_dir / "loop.json").write_text(json.dumps(
        {"run_id": "loop-x", "status": "done", "waits": 5, "graph_id": 3, "pid": "me"}))
    (loop_dir / "iteration-1.json").write_text(json.dumps(
        {"iteration": 1, "status": "COMPLETE", "progress": {"why": "a string"},
         "items": "x", "started_at": 5, "breaker": ["OPEN"]}))
    text = _page(run_cli, tmp_path / "loop.html", "--run", "loop-x")
    assert 'data-loop="loop-x"' in text and "a string" in text


def test_a_damaged_active_checkpoint_is_named_on_any_page(run_cli, project: Path,
                                                          tmp_path: Path) -> None:
    finished_run(project, run_cli)
    (project / ".clavain" / "checkpoint.json").write_text("{ not json")
    text = _page(run_cli, tmp_path / "p.html")  # the run that started last
    assert 'data-subject-id="demo"' in text
    assert "the active sprint&#x27;s checkpoint is unreadable" in text


def test_a_loop_run_records_the_graph_it_came_to_work_on(run_cli, project: Path) -> None:
    loop_run(project, run_cli)
    record = json.loads((project / ".clavain/runs/loop-t/loop.json").read_text())
    last = json.loads((project / ".clavain/runs/loop-t/iteration-4.json").read_text())
    assert last["graph_id"] == "default" and record["graph_id"] == "default"


def test_only_sections_with_content_are_drawn(run_cli, project: Path, tmp_path: Path) -> None:
    """A graph with no nodes and no runs: no empty workgraph, timeline, budgets or verdicts
    section, and no link to one (issue 34)."""
    assert run_cli("init").returncode == 0
    text = _page(run_cli, tmp_path / "empty.html", "--graph", "default")
    for anchor in ("graph", "timeline", "budgets", "verdicts", "attention", "cost"):
        assert f'<section id="{anchor}"' not in text and f'href="#{anchor}"' not in text
    assert "no nodes yet" not in text and "None." not in text
    assert '<section id="standing"' in text
