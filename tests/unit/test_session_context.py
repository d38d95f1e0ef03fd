"""What SessionStart injects: sections under a hard cap, dropped whole in a fixed order; the
sprint, handoff, in-flight agent and recovery sections built from real files; companions."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clavain.paths import StatePaths
from clavain.session import companions, handoff, inflight, recovery
from clavain.session.context import DROP_ORDER, SHOW_ORDER, fit, max_chars
from clavain.session.token_estimate import estimate_tokens
from clavain.sprint import lifecycle

NAMES = [name for name in SHOW_ORDER if name != "recording"]  # one line, never dropped


def _section(name: str, tokens: int) -> str:
    return f"{name}:" + " ab" * tokens  # each " ab" is one estimated token


def test_everything_fits_in_show_order() -> None:
    sections = {name: _section(name, 10) for name in reversed(NAMES)}
    text, dropped = fit(sections, 500)
    assert dropped == []
    assert [line.split(":")[0] for line in text.split("\n\n")] == NAMES


def test_sections_are_dropped_whole_in_the_fixed_order_with_a_pointer() -> None:
    sections = {name: _section(name, 150) for name in NAMES}
    text, dropped = fit(sections, 500)
    assert dropped == ["handoff", "agents"]
    assert estimate_tokens(text) <= 500
    assert "handoff:" not in text and "agents:" not in text
    assert "recovery:" + " ab" * 150 in text and "sprint:" + " ab" * 150 in text
    assert text.endswith("Left out to keep this short: the handoff note: read "
                         ".clavain/scratch/handoff.md; agents still running in this project.")


def test_an_oversized_low_priority_section_does_not_push_out_a_small_important_one() -> None:
    text, dropped = fit({"sprint": _section("sprint", 20),
                         "handoff": _section("handoff", 5000)}, 500)
    assert dropped == ["handoff"]
    assert text.startswith("sprint:") and "read .clavain/scratch/handoff.md" in text


def test_nothing_actionable_is_nothing_at_all() -> None:
    assert fit({}, 500) == ("", [])
    assert fit({name: "" for name in NAMES}, 500) == ("", [])


def test_a_cap_too_small_for_anything_injects_nothing() -> None:
    assert fit({"sprint": _section("sprint", 50)}, 5)[0] == ""


@settings(max_examples=200, deadline=None)
@given(sizes=st.dictionaries(st.sampled_from(NAMES), st.integers(0, 600)),
       cap=st.integers(0, 2000))
def test_fit_against_a_naive_model(sizes: dict[str, int], cap: int) -> None:
    """Whatever the sizes: never over the cap; a kept section is whole; what is dropped is a
    prefix of DROP_ORDER among the non-empty sections (so a higher-priority section is dropped
    only after every lower one)."""
    sections = {name: _section(name, size) if size else "" for name, size in sizes.items()}
    text, dropped = fit(sections, cap)
    assert estimate_tokens(text) <= cap
    present = [name for name in DROP_ORDER if sections.get(name)]
    assert dropped == present[:len(dropped)]
    for name in present:
        if name not in dropped and text:
            assert sections[name] in text


# ctok 4.7 counts of each text alone (its count of an empty message, 12, subtracted), measured
# with benchmarks/context_cost.py's ctok venv on 2026-11-23.
CTOK_SAMPLES = [
    (92, 'Clavain sprint sprint-20261123T170200Z-a1b2c3 "add OAuth login to the web app" at step '
         "execute (2/7). Next: step execute: run the plan's tasks; then `clavain sprint done "
         "execute`. Resume with /clavain:sprint --resume."),
    (44, "/root/.claude/plugins/cache/clavain-local/clavain/0.1.0/skills/executing-plans/SKILL.md"),
    (48, "a1b2c3d4e5f60718293a4b5c6d7e8f9012345678 7f3e9a 0x1F 1234567890 98765"),
    (21, "日本語のテキストはトークンが多い。これはテストです。"),
    (29, "{}[]()<>;:'\",.!?@#$%^&*-_=+|\\/~`"),
    (66, "Handoff: Implemented the token refresh in src/auth/refresh.py; tests in "
         "tests/test_refresh.py fail on clock skew (see TODO). Next: fix skew, then run quality "
         "gates."),
    (11, "SECRET API KEY VALUE"),
    (20, "        return self.conn.execute(x)\n        if y:\n            z()\n"),
]


@pytest.mark.parametrize(("real", "text"), CTOK_SAMPLES)
def test_estimate_errs_high_against_ctok(real: int, text: str) -> None:
    assert estimate_tokens(text) >= real


def test_estimate_shape() -> None:
    assert estimate_tokens("") == 0
    assert estimate_tokens("abcd") == 2
    assert estimate_tokens("abcde") == 3
    assert estimate_tokens("ABCD") == 4
    assert estimate_tokens("a1b2") == 4
    assert estimate_tokens("日本") == 4
    assert estimate_tokens("😀") == 4
    assert estimate_tokens("a b\nc") == 4


def test_characters_are_capped_whatever_the_estimate() -> None:
    """Spaces are nearly free to the estimate, not to the host's 10,000-character limit."""
    padded = "a" + " " * 9000 + "b"
    assert estimate_tokens(padded) < 10
    assert fit({"handoff": padded}, 2000)[0] == \
        "Left out to keep this short: the handoff note: read .clavain/scratch/handoff.md."
    assert max_chars(2000) <= 8000


def test_a_long_recovery_note_is_shortened_before_it_is_dropped() -> None:
    versions = [_section("recovery", 700), _section("recovery", 400), _section("recovery", 50)]
    text, dropped = fit({"recovery": versions, "handoff": _section("handoff", 100)}, 500)
    assert dropped == ["handoff"] and versions[1] in text
    text, dropped = fit({"recovery": versions}, 100)
    assert dropped == [] and text == versions[2]


# -- sections built from real state ---------------------------------------------------------

@pytest.fixture
def state(project: Path) -> StatePaths:
    return StatePaths.discover()


def test_sprint_section_names_step_next_action_and_resume(state: StatePaths) -> None:
    assert recovery.sprint_section(state) == ""
    active = lifecycle.start(state, "add OAuth login", complexity=2)
    text = recovery.sprint_section(state)
    assert f"Clavain sprint {active['sprint_id']} \"add OAuth login\": step plan" in text
    assert "Next: step plan:" in text and "/clavain:sprint --resume" in text


def test_a_broken_checkpoint_is_one_line_not_a_crash(state: StatePaths) -> None:
    state.root.mkdir(parents=True, exist_ok=True)
    state.sprint_checkpoint.write_bytes(b"\xff{not json")
    text = recovery.sprint_section(state)
    assert text.startswith("Clavain: the sprint checkpoint cannot be read:")
    assert "\n" not in text


def test_handoff_section_shows_at_most_40_lines(state: StatePaths) -> None:
    assert handoff.handoff_section(state) == ""
    state.handoff_note.parent.mkdir(parents=True)
    state.handoff_note.write_text("".join(f"line {i}\n" for i in range(100)))
    text = handoff.handoff_section(state)
    assert text.splitlines()[0] == ("Handoff from the last session (.clavain/scratch/handoff.md, "
                                    "written just now):")
    assert text.splitlines()[1:] == [f"line {i}" for i in range(40)]
    state.handoff_note.write_text("\n\n  \n")
    assert handoff.handoff_section(state) == ""
    state.handoff_note.write_bytes(b"ok \xff\xfe bytes\n    indented   and  spaced\n")
    text = handoff.handoff_section(state)
    assert "ok \ufffd\ufffd bytes\nindented and spaced" in text
    stamp = time.time() - 3 * 3600
    os.utime(state.handoff_note, (stamp, stamp))
    assert "written 3 h ago" in handoff.handoff_section(state)


def test_a_planted_handoff_is_never_read(state: StatePaths, tmp_path: Path) -> None:
    """A symlink must not put another file in the context; a FIFO must not hang the hook."""
    state.scratch.mkdir(parents=True)
    secret = tmp_path / "secret.txt"
    secret.write_text("SECRET=hunter2\n")
    state.handoff_note.symlink_to(secret)
    assert handoff.handoff_section(state) == ""
    state.handoff_note.unlink()
    os.mkfifo(state.handoff_note)
    assert handoff.handoff_section(state) == ""  # returns at once instead of blocking
    state.handoff_note.unlink()
    state.handoff_note.mkdir()
    assert handoff.handoff_section(state) == ""
    state.handoff_note.rmdir()
    os.mkfifo(state.scratch / "recovery.json")
    assert recovery.load(state) is None


def test_the_handoff_is_archived_with_its_sprint(state: StatePaths) -> None:
    active = lifecycle.start(state, "add OAuth login", complexity=2)
    state.scratch.mkdir(parents=True, exist_ok=True)
    state.handoff_note.write_text("done: x; next: y\n")
    lifecycle.abandon(state)
    assert not state.handoff_note.exists()
    assert (state.runs / active["sprint_id"] / "handoff.md").read_text() == "done: x; next: y\n"
    assert handoff.handoff_section(state) == ""


def _agent_transcript(folder: Path, session: str, agent: str, prompt: str, age: float) -> Path:
    (folder / f"{session}.jsonl").write_text("{}\n")
    path = folder / session / "subagents" / f"agent-{agent}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"type": "user", "isSidechain": True, "agentId": agent,
                                "message": {"role": "user", "content": prompt}}) + "\n")
    stamp = time.time() - age
    os.utime(path, (stamp, stamp))
    return path


def test_in_flight_agents_are_those_written_in_the_last_two_minutes(tmp_path: Path) -> None:
    folder = tmp_path / "projects" / "-p"
    folder.mkdir(parents=True)
    _agent_transcript(folder, "sess-one", "a1", "review src/app.py for safety", 5)
    _agent_transcript(folder, "sess-two", "b2", "x" * 300, 60)
    _agent_transcript(folder, "sess-two", "old", "finished long ago", 600)
    (folder / "not-a-session.jsonl").write_text("{}\n")
    found = inflight.running_agents(folder)
    assert [a["agent_id"] for a in found] == ["a1", "b2"]
    text = inflight.agents_section(Path("/p"), str(folder / "sess-one.jsonl"))
    assert "2 wrote in the last 120 s" in text
    assert "agent a1 (session sess-one" in text and "review src/app.py for safety" in text
    assert "x" * 79 + "…" in text and "x" * 81 not in text
    assert "finished long ago" not in text


def test_no_transcripts_folder_is_no_section(tmp_path: Path) -> None:
    assert inflight.agents_section(tmp_path, str(tmp_path / "missing" / "s.jsonl")) == ""


def test_transcripts_folder_follows_the_hosts_naming(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(tmp_path))
    assert inflight.transcripts_dir(Path("/tmp/a_b.c/project")) == \
        tmp_path / "projects" / "-tmp-a-b-c-project"
    assert inflight.transcripts_dir(Path("/x"), "/t/proj/s.jsonl") == Path("/t/proj")


def test_companions_are_bd_and_other_installed_enabled_plugins(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "bd").write_text("#!/bin/sh\n")
    (bin_dir / "bd").chmod(0o755)
    config = tmp_path / "config"
    cache = config / "plugins" / "cache"
    for marketplace, plugin in (("m1", "superpowers"), ("m1", "clavain"), ("m2", "ralph-loop"),
                                ("m2", "bad,name"), ("m2", ".hidden")):
        (cache / marketplace / plugin / "1.0").mkdir(parents=True)
    # No installed_plugins.json: the cache is the list.
    assert companions.detect(config, str(bin_dir)) == ["bd", "ralph-loop", "superpowers"]
    # With it (as 2.1.330 writes it), only what is installed, minus what a settings file
    # disables (user or project).
    installed = {"clavain@clavain": [], "superpowers@m1": [], "beads@m3": [], "old@m2": []}
    (config / "plugins" / "installed_plugins.json").write_text(
        json.dumps({"version": 2, "plugins": installed}))
    (config / "settings.json").write_text(json.dumps({"enabledPlugins": {"old@m2": False}}))
    project = tmp_path / "project"
    (project / ".claude").mkdir(parents=True)
    (project / ".claude" / "settings.json").write_text(
        json.dumps({"enabledPlugins": {"beads@m3": False}}))
    assert companions.detect(config, "/nonexistent") == ["beads", "superpowers"]
    assert companions.detect(config, "/nonexistent", project) == ["superpowers"]
    (config / "plugins" / "installed_plugins.json").write_text("{broken")
    assert companions.detect(config, "/nonexistent") == ["ralph-loop", "superpowers"]
    assert companions.detect(tmp_path / "nowhere", "/nonexistent") == []


# -- recovery note ----------------------------------------------------------------------------

def _transcript(path: Path, *entries: dict) -> str:
    path.write_text("".join(json.dumps(e) + "\n" for e in entries))
    return str(path)


def test_last_request_skips_tool_results_reminders_and_summaries(tmp_path: Path) -> None:
    path = _transcript(
        tmp_path / "t.jsonl",
        {"type": "user", "message": {"role": "user", "content": "add OAuth login"}},
        {"type": "assistant", "message": {"role": "assistant", "content": "ok"}},
        {"type": "user", "message": {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "t", "content": "out"}]}},
        {"type": "user", "isMeta": True, "message": {"role": "user", "content": "meta"}},
        {"type": "user", "message": {"role": "user", "content": [
            {"type": "text", "text": "<command-name>/compact</command-name>"}]}},
        "not json at all")
    assert recovery.last_request(path) == "add OAuth login"
    assert recovery.last_request(str(tmp_path / "missing.jsonl")) is None


def test_record_then_show_after_compaction(state: StatePaths, tmp_path: Path) -> None:
    active = lifecycle.start(state, "add OAuth login", complexity=2)
    (state.project / "docs").mkdir()
    (state.project / "docs" / "plan.md").write_text(
        '# Plan\n\n```json\n{"nodes": [{"id": "task-login", "type": "task", '
        '"verify": ["test -e .git"], '
        '"ownership": ["src/**"]}]}\n```\n')
    lifecycle.done(state, "plan", plan_path="docs/plan.md", decision="tokens in a cookie")
    transcript = _transcript(tmp_path / "t.jsonl", {"type": "user", "message": {
        "role": "user", "content": "now wire the refresh endpoint"}})
    recovery.record(state, {"session_id": "s1", "transcript_path": transcript,
                            "trigger": "auto"})
    saved = json.loads((state.scratch / "recovery.json").read_text())
    assert saved["sprint"]["current_step"] == "execute"
    assert saved["last_request"] == "now wire the refresh endpoint"

    lifecycle.done(state, "execute", waive="ran by hand")  # moved on after the compaction
    text = recovery.render(recovery.for_session(state, "s1", "compact"))
    assert f"sprint {active['sprint_id']}" in text and "step test" in text
    assert "- Plan: docs/plan.md" in text and "tokens in a cookie" in text
    assert "now wire the refresh endpoint" in text
    # On a later resume the request is old news: not shown as the last one.
    resumed = recovery.render(recovery.for_session(state, "s1", "resume"))
    assert "step test" in resumed and "refresh endpoint" not in resumed
    # Another session's note lends it no last request; the live state is still shown.
    other = recovery.render(recovery.for_session(state, "s2", "compact"))
    assert "step test" in other and "refresh endpoint" not in other


def test_recovery_lists_claimed_nodes_and_attention_verdicts(state: StatePaths,
                                                             run_cli) -> None:
    run_cli("graph", "import", "-", input=json.dumps({"nodes": [
        {"id": "task-a", "type": "task", "title": "wire the endpoint"}]}))
    assert run_cli("graph", "next", "--claim", "--run-id", "r7").returncode == 0
    from clavain.verdicts import files

    state.verdicts.mkdir(parents=True, exist_ok=True)
    files.write(state.verdicts, files.build(
        {"type": "verdict", "status": "NEEDS_ATTENTION", "summary": "token leaks to logs",
         "findings_count": 1}, agent="clavain:reviewer/safety"))
    note = recovery.for_session(state, None)
    text = recovery.render(note)
    assert "- In progress: task-a (run r7, attempt 1): wire the endpoint" in text
    assert "- Needs attention: clavain:reviewer/safety NEEDS_ATTENTION: token leaks to logs" \
        in text


def test_nothing_to_recover_is_none(state: StatePaths) -> None:
    assert recovery.for_session(state, "s1") is None
    assert not state.db.exists()  # looking did not create a database


def test_a_damaged_database_or_checkpoint_loses_one_part_not_the_note(
        state: StatePaths, tmp_path: Path) -> None:
    lifecycle.start(state, "add OAuth login", complexity=2)
    state.db.write_bytes(b"this is not a database" * 100)
    note = recovery.for_session(state, "s1")
    assert note["in_progress"] == [] and note["sprint"]["current_step"] == "plan"
    state.sprint_checkpoint.write_text("{broken")
    transcript = _transcript(tmp_path / "t.jsonl", {"type": "user", "message": {
        "role": "user", "content": "keep going"}})
    recorded = recovery.record(state, {"session_id": "s1", "transcript_path": transcript,
                                       "trigger": 7})
    assert recorded["last_request"] == "keep going" and recorded["trigger"] is None
    assert recorded["sprint"] is None and recorded["sprint_problem"]
    assert "The sprint checkpoint cannot be read" in recovery.render(recorded)


def test_bad_transcript_paths_give_no_request(tmp_path: Path) -> None:
    assert recovery.last_request("a\0b") is None
    os.mkfifo(tmp_path / "fifo")
    assert recovery.last_request(str(tmp_path / "fifo")) is None
    assert recovery.last_request(str(tmp_path)) is None


def test_recovery_alternatives_get_shorter_down_to_the_sprint_lines(state: StatePaths) -> None:
    lifecycle.start(state, "add OAuth login", complexity=2)
    note = recovery.for_session(state, "s1")
    note["last_request"] = "x" * 300
    note["attention"] = [{"agent": "clavain:reviewer/safety", "status": "NEEDS_ATTENTION",
                          "summary": "s" * 200, "detail_path": "d" * 200}] * 3
    versions = recovery.alternatives(note)
    assert [len(v) for v in versions] == sorted((len(v) for v in versions), reverse=True)
    assert versions[-1] == recovery.sprint_section(state)


def test_clavains_own_gitignore_block_is_not_uncommitted_work(project: Path, run_cli) -> None:
    """An older `clavain init` added its block to .gitignore: that alone asks for no
    handoff (today's goes to .git/info/exclude, nothing in the tree)."""
    from clavain.project import GITIGNORE_MARKER

    assert run_cli("sprint", "start", "--complexity", "4", "add OAuth login").returncode == 0
    assert not (project / ".gitignore").exists()
    assert not handoff.tree_is_dirty(project)
    (project / ".gitignore").write_text(f"{GITIGNORE_MARKER}\n/.clavain/state.sqlite\n")
    assert not handoff.tree_is_dirty(project)
    with open(project / ".gitignore", "a") as handle:
        handle.write("node_modules/\n")
    assert handoff.tree_is_dirty(project)


def test_changed_paths_reads_porcelain_z() -> None:
    assert handoff.changed_paths(b" M a.py\0R  new name.py\0old.py\0?? b c\0") == \
        ["a.py", "new name.py", "b c"]
    assert handoff.changed_paths(b"") == []


def test_tree_is_dirty_ignores_clavain_state(project: Path) -> None:
    state = StatePaths.discover()
    assert not handoff.tree_is_dirty(project)
    state.root.mkdir()
    (state.root / "checkpoint.json").write_text("{}")
    assert not handoff.tree_is_dirty(project)
    (project / "app.py").write_text("x = 1\n")
    assert handoff.tree_is_dirty(project)
    assert not handoff.tree_is_dirty(project / "nonexistent")


def test_an_agent_whose_verdict_is_in_is_not_at_work(tmp_path: Path) -> None:
    folder = tmp_path / "projects" / "-p"
    folder.mkdir(parents=True)
    _agent_transcript(folder, "sess-one", "a1", "review src/app.py for safety", 5)
    _agent_transcript(folder, "sess-one", "a2", "review src/db.py", 5)
    verdicts = tmp_path / "project" / ".clavain" / "verdicts"
    verdicts.mkdir(parents=True)
    (verdicts / "clavain-reviewer-safety--a1.json").write_text("{}")
    text = inflight.agents_section(tmp_path / "project", str(folder / "sess-one.jsonl"))
    assert "agent a2" in text and "agent a1" not in text and "1 wrote" in text
