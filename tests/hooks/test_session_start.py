import json
import subprocess
import sys
from pathlib import Path

import pytest

from clavain import bootstrap
from clavain.paths import StatePaths
from clavain.session.token_estimate import estimate_tokens
from clavain.sprint import lifecycle

from .conftest import REPO, payload_for


def _context(result) -> str:
    assert result.returncode == 0 and result.stderr == "", result.stderr
    if not result.stdout:
        return ""
    return json.loads(result.stdout)["hookSpecificOutput"]["additionalContext"]


def _git_project(tmp_path: Path) -> Path:
    project = tmp_path / "project"
    project.mkdir()
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    return project


def test_an_idle_project_gets_nothing_at_all(run_hook, tmp_path: Path) -> None:
    project = _git_project(tmp_path)
    for source in ("startup", "clear", "compact", "resume"):
        payload = {**payload_for("SessionStart", project), "source": source}
        result = run_hook("SessionStart", payload, cwd=project)
        assert result.stdout == "" and result.returncode == 0, (source, result.stdout)
    assert not (project / ".clavain").exists()  # looking created no state


def test_an_active_sprint_is_shown_with_its_next_step(run_hook, tmp_path: Path) -> None:
    project = _git_project(tmp_path)
    active = lifecycle.start(StatePaths.discover(project), "add OAuth login", complexity=2)
    text = _context(run_hook("SessionStart", payload_for("SessionStart", project), cwd=project))
    assert text.startswith(f"Clavain sprint {active['sprint_id']} \"add OAuth login\": step plan")
    assert "/clavain:sprint --resume" in text
    assert estimate_tokens(text) <= 500


def test_compaction_shows_the_recovery_note_precompact_recorded(run_hook, tmp_path: Path) -> None:
    project = _git_project(tmp_path)
    state = StatePaths.discover(project)
    lifecycle.start(state, "add OAuth login", complexity=2)
    transcript = tmp_path / "session.jsonl"
    transcript.write_text(json.dumps({"type": "user", "message": {
        "role": "user", "content": "wire the refresh endpoint next"}}) + "\n")
    base = {**payload_for("SessionStart", project), "session_id": "sess-1",
            "transcript_path": str(transcript)}
    assert run_hook("PreCompact", {**base, "hook_event_name": "PreCompact", "trigger": "auto"},
                    cwd=project).stdout == ""
    assert json.loads((state.scratch / "recovery.json").read_text())["trigger"] == "auto"
    text = _context(run_hook("SessionStart", {**base, "source": "compact"}, cwd=project))
    assert text.startswith("Clavain recovery note")
    assert "step plan" in text and "wire the refresh endpoint next" in text
    assert text.count("Clavain sprint") == 1  # the note stands in for the sprint section
    # A plain startup shows the sprint, not the note.
    startup = _context(run_hook("SessionStart", {**base, "source": "startup"}, cwd=project))
    assert startup.startswith("Clavain sprint") and "refresh endpoint" not in startup


def test_an_oversized_handoff_is_dropped_whole_and_pointed_at(run_hook, tmp_path: Path) -> None:
    project = _git_project(tmp_path)
    state = StatePaths.discover(project)
    lifecycle.start(state, "add OAuth login", complexity=2)
    state.scratch.mkdir(parents=True, exist_ok=True)
    (state.scratch / "handoff.md").write_text("".join(f"step {i}: " + "did a thing " * 4 + "\n"
                                                      for i in range(40)))
    text = _context(run_hook("SessionStart", payload_for("SessionStart", project), cwd=project))
    assert "did a thing" not in text and text.startswith("Clavain sprint")
    assert "read .clavain/scratch/handoff.md" in text
    assert estimate_tokens(text) <= 500
    # A short handoff fits beside the sprint; a larger cap lets the long one in.
    bigger = _context(run_hook("SessionStart", payload_for("SessionStart", project), cwd=project,
                               env={"CLAVAIN_CONTEXT_MAX_TOKENS": "2000"}))
    assert "step 39: did a thing" in bigger


def _long_handoff(project: Path) -> None:
    """A handoff that fits under a 2000-token cap but not under the default 500."""
    scratch = project / ".clavain" / "scratch"
    scratch.mkdir(parents=True, exist_ok=True)
    (scratch / "handoff.md").write_text("".join(f"step {i}: " + "did a thing " * 4 + "\n"
                                                for i in range(40)))


def test_the_cap_comes_from_env_else_config_and_a_bad_value_is_the_default(
        run_hook, tmp_path: Path) -> None:
    project = _git_project(tmp_path)
    lifecycle.start(StatePaths.discover(project), "add OAuth login", complexity=2)
    _long_handoff(project)

    def shown(env: dict | None = None) -> bool:
        text = _context(run_hook("SessionStart", payload_for("SessionStart", project),
                                 cwd=project, env=env or {}))
        assert text.startswith("Clavain sprint")
        return "step 39: did a thing" in text

    config = project / ".clavain" / "config.json"
    assert not shown()  # the default, 500
    config.write_text('{"session": {"contextMaxTokens": 2000}}')
    assert shown()
    assert not shown({"CLAVAIN_CONTEXT_MAX_TOKENS": "500"})  # the env wins
    assert shown({"CLAVAIN_CONTEXT_MAX_TOKENS": "99999"})  # clamped to 2000, still shown
    assert not shown({"CLAVAIN_CONTEXT_MAX_TOKENS": "many"})  # bad: the default
    config.write_text('{"session": {"contextMaxTokens": "x"}}')
    assert not shown()  # a bad config: the default, and the session still starts


def _finish_tasks(state: StatePaths, active: dict) -> None:
    """Record success for every task of the sprint's graph; its verify nodes are run by the
    shell verifier (the only way a check passes)."""
    from clavain.sprint.checkpoint import graph_of
    from clavain.store.db import connect
    from clavain.workgraph.graphs import Graph
    from clavain.workgraph.results import apply_result
    from clavain.workgraph.verifier import run_verify

    conn = connect(state.db)
    try:
        g = Graph(conn, graph_of(active), state)
        for kind in ("task", "verify"):
            for (node_id,) in conn.execute("SELECT id FROM nodes WHERE graph_id = ? AND type = ? "
                                           "ORDER BY id", (g.id, kind)).fetchall():
                if kind == "verify":
                    run_verify(g, node_id)
                else:
                    apply_result(g, node_id, {"status": "success", "summary": "ok"})
    finally:
        conn.close()


def test_a_rich_recovery_note_is_shortened_not_lost(run_hook, tmp_path: Path) -> None:
    """At quality-gates with decisions, verdicts needing attention and a long last request,
    the note is over the default cap: it is trimmed, and always keeps the sprint's step."""
    from clavain.verdicts import files

    project = _git_project(tmp_path)
    state = StatePaths.discover(project)
    active = lifecycle.start(state, "add OAuth login with refresh tokens " * 3, complexity=2)
    (project / "plan.md").write_text('```json\n{"nodes": [{"id": "task-a", "type": "task", '
                                     '"verify": ["test -e .git"], '
                                     '"ownership": ["src/**"]}]}\n```\n')
    for step, extra in (("plan", {"plan_path": "plan.md"}), ("execute", {}), ("test", {})):
        lifecycle.done(state, step, decision=f"decided {step}: " + "because " * 10, **extra)
        if step == "plan":  # the execute and test gates want the task done and verified
            _finish_tasks(state, active)
    for lens in ("safety", "correctness", "quality"):
        files.write(state.verdicts, files.build(
            {"type": "verdict", "status": "NEEDS_ATTENTION", "summary": f"{lens} " + "x" * 90,
             "findings_count": 2, "detail_path": ".clavain/verdicts/" + "d" * 80 + ".md"},
            agent=f"clavain:reviewer/{lens}"))
    transcript = tmp_path / "session.jsonl"
    transcript.write_text(json.dumps({"type": "user", "message": {
        "role": "user", "content": "please also " * 40}}) + "\n")
    base = {**payload_for("SessionStart", project), "session_id": "s1",
            "transcript_path": str(transcript)}
    run_hook("PreCompact", {**base, "trigger": "auto"}, cwd=project)
    text = _context(run_hook("SessionStart", {**base, "source": "compact"}, cwd=project))
    assert estimate_tokens(text) <= 500
    assert f"sprint {active['sprint_id']}" in text and "step quality-gates" in text
    assert "please also" not in text  # the first part trimmed away
    small = _context(run_hook("SessionStart", {**base, "source": "compact"}, cwd=project,
                              env={"CLAVAIN_CONTEXT_MAX_TOKENS": "300"}))
    assert "step quality-gates" in small and estimate_tokens(small) <= 300


@pytest.mark.parametrize("field", ["session_id", "transcript_path", "trigger", "source"])
@pytest.mark.parametrize("value", [None, 7, ["x"], {"a": 1}, "", "a\0b", "x" * 5000])
def test_odd_payload_fields_never_fail_a_hook(run_hook, tmp_path: Path, field: str,
                                              value: object) -> None:
    project = _git_project(tmp_path)
    lifecycle.start(StatePaths.discover(project), "add OAuth login", complexity=2)
    for event in ("PreCompact", "SessionStart"):
        payload = {**payload_for("SessionStart", project), "source": "compact", field: value}
        result = run_hook(event, payload, cwd=project)
        assert result.returncode == 0 and result.stderr == ""
    log = project / ".clavain" / "logs" / "hooks.log"
    assert not log.exists(), log.read_text()
    assert (project / ".clavain" / "scratch" / "recovery.json").is_file()


def test_agents_at_work_are_shown_from_any_session(run_hook, tmp_path: Path) -> None:
    project = _git_project(tmp_path)
    transcripts = tmp_path / "claude-config" / "projects" / "proj"
    agent = transcripts / "other-session" / "subagents" / "agent-abc123.jsonl"
    agent.parent.mkdir(parents=True)
    agent.write_text(json.dumps({"type": "user", "message": {
        "role": "user", "content": "Lens: safety. Review src/auth."}}) + "\n")
    payload = {**payload_for("SessionStart", project),
               "transcript_path": str(transcripts / "this-session.jsonl")}
    text = _context(run_hook("SessionStart", payload, cwd=project))
    assert text.startswith("Agents at work in this project (1 wrote")
    assert "agent abc123 (session other-se" in text and "Lens: safety. Review src/auth." in text


def test_companions_reach_the_env_file_not_the_context(run_hook, tmp_path: Path) -> None:
    project = _git_project(tmp_path)
    (tmp_path / "claude-config" / "plugins" / "cache" / "mkt" / "superpowers" / "5.0").mkdir(
        parents=True)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "bd").write_text("#!/bin/sh\n")
    (bin_dir / "bd").chmod(0o755)
    env_file = tmp_path / "env.sh"
    result = run_hook("SessionStart", payload_for("SessionStart", project), cwd=project, env={
        "CLAUDE_ENV_FILE": str(env_file), "CLAUDE_PLUGIN_ROOT": str(REPO),
        "PATH": f"{REPO / 'bin'}:{bin_dir}:/usr/bin:/bin"})
    assert result.stdout == ""
    assert env_file.read_text() == "export CLAVAIN_COMPANIONS='bd,superpowers'\n"


def test_env_file_gets_path_fallback_only_when_bin_missing(run_hook, tmp_path: Path) -> None:
    env_file = tmp_path / "env.sh"
    env_file.write_text("")
    base = {"CLAUDE_ENV_FILE": str(env_file), "CLAUDE_PLUGIN_ROOT": str(REPO)}
    run_hook("SessionStart", payload_for("SessionStart", tmp_path),
             env={**base, "PATH": f"{REPO / 'bin'}:/usr/bin:/bin"})
    assert env_file.read_text() == ""
    run_hook("SessionStart", payload_for("SessionStart", tmp_path),
             env={**base, "PATH": "/usr/bin:/bin"})
    assert env_file.read_text() == f'export PATH="$PATH":\'{REPO / "bin"}\'\n'


def test_env_file_exports_ready_venv_python(run_hook, tmp_path: Path) -> None:
    data = tmp_path / "data"
    venv = bootstrap.venv_dir(data)
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").symlink_to(sys.executable)
    (venv / bootstrap.READY_MARKER).write_text(bootstrap.wanted_key())
    env_file = tmp_path / "env.sh"
    result = run_hook("SessionStart", payload_for("SessionStart", tmp_path), env={
        "CLAUDE_ENV_FILE": str(env_file), "CLAUDE_PLUGIN_ROOT": str(REPO),
        "CLAUDE_PLUGIN_DATA": str(data), "PATH": f"{REPO / 'bin'}:/usr/bin:/bin",
        "CLAVAIN_BOOTSTRAP": "1", "CLAVAIN_PYTHON": "", "CLAVAIN_HOOK_TRACE": str(tmp_path / "t")})
    assert result.stdout == ""  # no bootstrap message, nothing to put in the context
    assert env_file.read_text() == (f"export CLAVAIN_PLUGIN_DATA='{data}'\n"
                                    f"export CLAVAIN_PYTHON='{venv / 'bin' / 'python'}'\n")
    # The launcher picked the ready venv's interpreter for the hook itself.
    trace = json.loads((tmp_path / "t").read_text())
    assert trace["python"] == str(venv / "bin" / "python")


def test_bash_calls_find_the_venv_through_exported_data_dir(tmp_path: Path) -> None:
    """Bash tool calls lack CLAUDE_PLUGIN_DATA; CLAVAIN_PLUGIN_DATA from the env file is enough
    for the launcher to pick the venv and for doctor to report it."""
    import subprocess

    data = tmp_path / "data"
    venv = bootstrap.venv_dir(data)
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").symlink_to(sys.executable)
    (venv / bootstrap.READY_MARKER).write_text(bootstrap.wanted_key())
    result = subprocess.run([str(REPO / "bin" / "clavain"), "doctor", "--json"], cwd=tmp_path,
                            capture_output=True, text=True,
                            env={"PATH": "/usr/bin:/bin", "CLAVAIN_PLUGIN_DATA": str(data),
                                 "HOME": str(tmp_path)})
    report = json.loads(result.stdout)
    rows = {row["check"]: row for row in report["checks"]}
    assert rows["venv"]["status"] == "ok"
    assert rows["python"]["executable"] == str(venv / "bin" / "python")


def test_env_file_lines_are_shell_quoted(run_hook, tmp_path: Path) -> None:
    """The host sources the env file: a `$(…)`, a quote or a space in a path must round-trip
    exactly and run nothing."""
    import subprocess

    hostile = tmp_path / "plug in's \"$(touch pwned)\" `touch pwned2` $HOME"
    data = hostile / "data"
    venv = bootstrap.venv_dir(data)
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").symlink_to(sys.executable)
    (venv / bootstrap.READY_MARKER).write_text(bootstrap.wanted_key())
    env_file = tmp_path / "env.sh"
    run_hook("SessionStart", payload_for("SessionStart", tmp_path), env={
        "CLAUDE_ENV_FILE": str(env_file), "CLAUDE_PLUGIN_ROOT": str(REPO),
        "CLAUDE_PLUGIN_DATA": str(data), "PATH": "/usr/bin:/bin", "CLAVAIN_PYTHON": ""})
    shown = subprocess.run(
        ["bash", "-c", f'. {env_file} && printf "%s\\n" "$CLAVAIN_PLUGIN_DATA" '
                       '"$CLAVAIN_PYTHON" "${PATH##*:}"'],
        cwd=tmp_path, capture_output=True, text=True, env={"PATH": "/usr/bin:/bin"})
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.splitlines() == [str(data), str(venv / "bin" / "python"),
                                         str(REPO / "bin")]
    assert not (tmp_path / "pwned").exists() and not (tmp_path / "pwned2").exists()
