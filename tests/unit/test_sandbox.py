"""Hard mode's library (`clavain.sandbox`, `clavain.hard_mode`, `clavain.confine`): the
settings merge and its undoing, the host check, and `confine`, run for real under bubblewrap
(skipped, with the reason, where it cannot run); macOS's profile is checked as text only."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from clavain import confine as confine_mod
from clavain import hard_mode, sandbox
from clavain.errors import ClavainError
from clavain.fsutil import write_json_atomic
from clavain.workgraph.shell import run_command

HOST_PROBLEM = confine_mod.host_problem()
needs_bwrap = pytest.mark.skipif(HOST_PROBLEM is not None,
                                 reason=f"hard mode cannot run here: {HOST_PROBLEM}")


@pytest.fixture
def state(project: Path) -> Path:
    root = project / ".clavain"
    root.mkdir()
    return root


def _hard_mode_on(project: Path, state: Path) -> None:
    """The settings `clavain init --sandbox` writes, without its host check."""
    settings, _ = sandbox.merge({}, state)
    write_json_atomic(sandbox.settings_file(project), settings)


def _no_bwrap_path(tmp_path: Path) -> str:
    """A PATH with bash and nothing else: bubblewrap and socat missing, as on a bare host."""
    folder = tmp_path / "bare-bin"
    folder.mkdir()
    (folder / "bash").symlink_to("/bin/bash")
    return str(folder)


# ------------------------------------------------------------------------------------- merge

def test_merge_into_nothing_gives_the_whole_block(state: Path) -> None:
    settings, changes = sandbox.merge({}, state)
    denied = settings["sandbox"]["filesystem"]["denyWrite"]
    assert settings == {"sandbox": {**sandbox.sandbox_block(state),
                                    "network": {"allowedDomains": ["*"]}},
                        "permissions": {"deny": sandbox.permission_rules(state)}}
    assert denied[0] == "/" + str(state.resolve()) and denied[0].startswith("//")
    assert len(changes) == 7 and "sandbox.enabled: unset -> true" in changes


def test_the_block_denies_the_state_the_plugin_its_data_and_every_settings_file(
        project: Path, state: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import clavain
    from clavain.paths import plugin_root

    config, data = tmp_path / "claude-config", tmp_path / "plugin-data"
    (config).mkdir()
    data.mkdir()
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(config))
    monkeypatch.setenv("CLAUDE_PLUGIN_DATA", str(data))
    denied = sandbox.sandbox_block(state, project)["filesystem"]["denyWrite"]
    root = plugin_root().resolve()
    package = Path(clavain.__file__).resolve().parent
    expected = [state.resolve(), root, *([] if root in package.parents else [package]),
                data.resolve(), config / "settings.json", config / "settings.local.json",
                project / ".claude" / "settings.json",
                project / ".claude" / "settings.local.json"]
    assert denied == ["/" + str(Path(path).resolve()) for path in expected]
    rules = sandbox.permission_rules(state, project)
    assert f"Edit(/{state.resolve()}/config.json)" in rules  # not there yet: by name
    assert f"Edit(/{data.resolve()}/**)" in rules
    assert f"Edit(/{config.resolve()}/settings.json)" in rules  # a file (not there yet)
    assert f"Edit(/{project.resolve()}/.claude/settings.local.json)" in rules


def test_the_file_tools_may_still_write_the_handoff_note(state: Path) -> None:
    """A rule for the whole state folder (or `folder/*`) refuses `scratch/` too (observed):
    the rules name every other part instead, there or not."""
    (state / "verdicts").mkdir()
    (state / "something-new").mkdir()
    rules = sandbox.permission_rules(state)
    root = state.resolve()
    assert f"Edit(/{root}/verdicts/**)" in rules and f"Edit(/{root}/something-new/**)" in rules
    assert f"Edit(/{root}/runs/**)" in rules and f"Edit(/{root}/state.sqlite)" in rules
    assert not any(rule.startswith((f"Edit(/{root}/scratch", f"Edit(/{root}/**",
                                    f"Edit(/{root}/*")) or rule == f"Edit(/{root})"
                   for rule in rules)


def test_a_plugin_folder_holding_the_project_is_not_denied(tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch
                                                           ) -> None:
    """Clavain worked on with itself: denying its code would deny the whole project."""
    monkeypatch.setenv("CLAUDE_PLUGIN_ROOT", str(tmp_path))
    project = tmp_path / "work"
    (project / ".clavain").mkdir(parents=True)
    paths = sandbox.protected_paths(project / ".clavain", project)
    assert tmp_path.resolve() not in paths and project.resolve() not in paths


def test_the_venv_of_the_plugins_data_folder_is_found_outside_a_session(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    from clavain.bootstrap import READY_MARKER

    venv = tmp_path / "data" / "venv"
    venv.mkdir(parents=True)
    monkeypatch.setattr(sys, "prefix", str(venv))
    assert sandbox._data_folder() is None  # no ready marker: not the plugin's venv
    (venv / READY_MARKER).write_text("x")
    assert sandbox._data_folder() == (tmp_path / "data").resolve()


def test_merge_keeps_the_persons_settings_and_is_idempotent(state: Path) -> None:
    mine = {"permissions": {"allow": ["Bash(ls)"], "deny": ["Read(./.env)"]}, "env": {"A": "1"},
            "sandbox": {"excludedCommands": ["docker *", "clavain"],
                        "allowUnsandboxedCommands": True,
                        "network": {"allowedDomains": ["github.com"]},
                        "filesystem": {"denyWrite": ["~/secrets"], "denyRead": ["~/.ssh"]}}}
    before = json.loads(json.dumps(mine))
    settings, changes = sandbox.merge(mine, state)
    assert mine == before  # the input is not changed in place
    assert settings["env"] == mine["env"]
    assert settings["permissions"]["allow"] == ["Bash(ls)"]
    assert settings["permissions"]["deny"] == ["Read(./.env)", *sandbox.permission_rules(state)]
    box = settings["sandbox"]
    assert box["excludedCommands"] == ["docker *", "clavain", "clavain *"]
    assert box["network"] == {"allowedDomains": ["github.com"]}  # theirs: no `*` added
    assert box["filesystem"]["denyWrite"] == [
        "~/secrets", *sandbox.sandbox_block(state)["filesystem"]["denyWrite"]]
    assert box["filesystem"]["denyRead"] == ["~/.ssh"]
    assert box["allowUnsandboxedCommands"] is False
    assert "sandbox.allowUnsandboxedCommands: true -> false" in changes
    assert "sandbox.excludedCommands: + clavain *" in changes
    again, changes_again = sandbox.merge(settings, state)
    assert (again, changes_again) == (settings, [])


def test_a_sandbox_the_person_had_on_keeps_its_network(state: Path) -> None:
    settings, _ = sandbox.merge({"sandbox": {"enabled": True}}, state)
    assert "network" not in settings["sandbox"]


def test_unmerge_takes_away_exactly_what_merge_added(state: Path) -> None:
    mine = {"model": "opus", "permissions": {"deny": ["Read(./.env)"]},
            "sandbox": {"allowUnsandboxedCommands": True, "excludedCommands": ["docker *"],
                        "filesystem": {"denyRead": ["~/.ssh"]}}}
    added: dict = {}
    settings, _ = sandbox.merge(mine, state, added=added)
    restored, changes = sandbox.unmerge(settings, added)
    assert restored == mine
    assert "sandbox.allowUnsandboxedCommands: false -> true" in changes
    empty, _ = sandbox.unmerge(*[sandbox.merge({}, state, added=(fresh := {}))[0]], fresh)
    assert empty == {}
    # A value the person changed since is theirs.
    settings["sandbox"]["enabled"] = False
    kept, _ = sandbox.unmerge(settings, added)
    assert kept["sandbox"]["enabled"] is False


@pytest.mark.parametrize(("settings", "named"), [
    ({"sandbox": ["enabled"]}, "`sandbox` is list"),
    ({"sandbox": {"filesystem": "ro"}}, "`sandbox.filesystem` is str"),
    ({"sandbox": {"excludedCommands": "clavain"}}, "`sandbox.excludedCommands` is str"),
    ({"sandbox": {"filesystem": {"denyWrite": {"a": 1}}}}, "`sandbox.filesystem.denyWrite` is"),
])
def test_merge_refuses_a_shape_claude_code_would_not_read(state: Path, settings: dict,
                                                          named: str) -> None:
    with pytest.raises(ClavainError, match=named):
        sandbox.merge(settings, state)


# ---------------------------------------------------------------------------- settings file

def test_read_settings_missing_is_empty_and_bad_files_are_named(project: Path) -> None:
    path = sandbox.settings_file(project)
    assert sandbox.read_settings(path) == {}
    path.parent.mkdir()
    path.write_text('{"sandbox": {"enabled": tru')
    with pytest.raises(ClavainError, match=r"settings.local.json is not valid JSON"):
        sandbox.read_settings(path)
    path.write_text("[1, 2]")
    with pytest.raises(ClavainError, match="is list, not an object"):
        sandbox.read_settings(path)
    path.unlink()
    path.symlink_to(project / "elsewhere.json")
    with pytest.raises(ClavainError, match="is a symlink"):
        sandbox.read_settings(path)
    path.unlink()
    os.mkfifo(path)
    started = time.monotonic()
    with pytest.raises(ClavainError, match="is a FIFO"):
        sandbox.read_settings(path)
    assert time.monotonic() - started < 30  # returned, did not wait for a writer


@needs_bwrap
def test_enable_writes_atomically_keeps_the_rest_and_excludes_the_file_from_git(
        project: Path, state: Path) -> None:
    path = sandbox.settings_file(project)
    path.parent.mkdir()
    path.write_text(json.dumps({"model": "opus", "sandbox": {"enabled": False}}))
    report = hard_mode.enable(state, project)
    written = json.loads(path.read_text())
    assert written["model"] == "opus" and written["sandbox"]["enabled"] is True
    assert sandbox.hard_mode(project, state)
    assert report["git_excluded"] is True
    assert [p.name for p in path.parent.iterdir()] == ["settings.local.json"]  # no temp left
    status = subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"],
                            cwd=project, capture_output=True, text=True, check=True).stdout
    assert "settings.local.json" not in status
    again = hard_mode.enable(state, project)
    assert again["changed"] == [] and again["git_excluded"] is False
    record = hard_mode.read_record(state)
    assert record["mode"] == "on" and record["added"]["scalars"]["enabled"] == {
        "had": True, "value": False}
    off = hard_mode.disable(state, project)
    assert off["changed"] and not sandbox.hard_mode(project, state)
    assert json.loads(path.read_text()) == {"model": "opus", "sandbox": {"enabled": False}}
    assert hard_mode.read_record(state)["mode"] == "off"
    exclude = (project / ".git" / "info" / "exclude").read_text()
    assert exclude.splitlines().count("/.claude/settings.local.json") == 1


@needs_bwrap
def test_enable_leaves_a_file_it_cannot_read_as_it_was(project: Path, state: Path) -> None:
    path = sandbox.settings_file(project)
    path.parent.mkdir()
    path.write_bytes(b'{"permissions": {,}}')
    with pytest.raises(ClavainError, match="not valid JSON"):
        hard_mode.enable(state, project)
    assert path.read_bytes() == b'{"permissions": {,}}'


def test_enable_refuses_without_bubblewrap_and_writes_nothing(
        project: Path, state: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", _no_bwrap_path(tmp_path))
    assert "bwrap and socat are not on PATH" in (confine_mod.host_problem() or "")
    with pytest.raises(ClavainError, match="apt-get install bubblewrap socat"):
        hard_mode.enable(state, project)
    assert not sandbox.settings_file(project).exists()


def test_only_the_missing_package_is_named(tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    folder = Path(_no_bwrap_path(tmp_path))
    (folder / "bwrap").symlink_to("/bin/true")
    monkeypatch.setenv("PATH", str(folder))
    problem = confine_mod.host_problem() or ""
    assert "socat is not on PATH" in problem and "install socat" in problem
    assert "bubblewrap`" not in problem


def test_an_older_clavains_hard_mode_is_taken_away_without_a_record(
        project: Path, state: Path) -> None:
    _hard_mode_on(project, state)
    done = hard_mode.disable(state, project)
    assert done["changed"] and not sandbox.hard_mode(project, state)
    assert json.loads(sandbox.settings_file(project).read_text()) == {}


def test_path_folders_inside_the_project_are_named(project: Path) -> None:
    inside = f"{project}/.venv/bin"
    found = hard_mode.path_entries_inside(project,
                                          f"/usr/bin:{inside}:{project}/../x:{inside}")
    assert found == [inside]
    os.chdir(project)
    assert hard_mode.path_entries_inside(project, "/usr/bin::/bin") == ["."]  # empty = cwd


# ------------------------------------------------------------------------ hard mode, confine

def test_hard_mode_follows_the_settings(project: Path, state: Path) -> None:
    assert not sandbox.hard_mode(project, state)
    _hard_mode_on(project, state)
    assert sandbox.hard_mode(project, state)
    other = project / "other-state"
    other.mkdir()
    assert not sandbox.hard_mode(project, other)  # another folder is not the one denied
    path = sandbox.settings_file(project)
    settings = json.loads(path.read_text())
    settings["sandbox"]["enabled"] = False
    path.write_text(json.dumps(settings))
    assert not sandbox.hard_mode(project, state)
    assert confine_mod.confine(["bash", "-c", "true"], project, state) == ["bash", "-c", "true"]


@needs_bwrap
def test_a_confined_command_writes_the_project_but_not_clavains_state(
        project: Path, state: Path) -> None:
    (project / ".git" / "hooks").mkdir(exist_ok=True)
    _hard_mode_on(project, state)
    outside = Path("/var/tmp") / f"clavain-confine-{uuid.uuid4().hex}"
    script = ("echo ok > work.txt; echo x > .clavain/checkpoint.json; "
              "echo x > .claude/settings.local.json; echo x > .git/config; "
              "echo x > .git/hooks/pre-commit; "
              f"echo x > {outside}; "
              "f=\"${TMPDIR:-/tmp}/clavain-confine-$$\"; "
              "echo t > \"$f\" && echo tmp-ok; rm -f \"$f\"")
    argv = confine_mod.confine(["bash", "-c", script], project, state)
    assert argv[0].endswith("bwrap")
    settings_before = sandbox.settings_file(project).read_bytes()
    config_before = (project / ".git" / "config").read_bytes()
    try:
        done = subprocess.run(argv, cwd=project, capture_output=True, text=True, timeout=60)
        assert (project / "work.txt").read_text() == "ok\n"
        assert "tmp-ok" in done.stdout
        assert done.stderr.count("Read-only file system") == 5, done.stderr
        assert not (state / "checkpoint.json").exists()
        assert sandbox.settings_file(project).read_bytes() == settings_before
        assert (project / ".git" / "config").read_bytes() == config_before
        assert not (project / ".git" / "hooks" / "pre-commit").exists()
        assert not outside.exists()
    finally:
        outside.unlink(missing_ok=True)


def test_confine_without_bubblewrap_refuses_rather_than_run_free(
        project: Path, state: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _hard_mode_on(project, state)
    monkeypatch.setenv("PATH", _no_bwrap_path(tmp_path))
    with pytest.raises(ClavainError, match="bubblewrap is not installed"):
        confine_mod.confine(["bash", "-c", "true"], project, state)


@needs_bwrap
def test_verify_commands_run_confined_in_hard_mode_only(project: Path, state: Path) -> None:
    """What `clavain verify` runs for an agent's plan: free without hard mode, confined with it
    (the log, written by Clavain itself, still lands in the read-only folder)."""
    command = "echo forged > .clavain/forged.txt"

    def run(name: str):
        return run_command(1, command, cwd=project, log_path=state / "runs" / name / "cmd-1.log",
                           timeout=60, env=dict(os.environ), state_root=state)

    free = run("before")
    assert free.exit_code == 0 and (state / "forged.txt").read_text() == "forged\n"
    (state / "forged.txt").unlink()
    _hard_mode_on(project, state)
    confined = run("after")
    assert confined.exit_code != 0
    assert not (state / "forged.txt").exists()
    assert "Read-only file system" in confined.log_path.read_text()


# ------------------------------------------------------------------------------------ hint

@needs_bwrap
def test_the_hint_appears_only_inside_the_sandbox_with_the_state_read_only(
        project: Path, state: Path) -> None:
    code = ("import json, sys; sys.path.insert(0, sys.argv[1]); from pathlib import Path; "
            "from clavain.sandbox import sandboxed_hint; "
            "print(json.dumps(sandboxed_hint(Path(sys.argv[2]))))")
    lib = str(Path(sandbox.__file__).parents[1])

    def hint(*, read_only: bool, marker: str | None) -> str:
        env = {k: v for k, v in os.environ.items() if k != "SANDBOX_RUNTIME"}
        if marker is not None:
            env["SANDBOX_RUNTIME"] = marker
        wrap = (["bwrap", "--bind", "/", "/", "--ro-bind", str(state), str(state), "--"]
                if read_only else [])
        done = subprocess.run([*wrap, sys.executable, "-c", code, lib, str(state)], env=env,
                              capture_output=True, text=True, timeout=60, check=True)
        return json.loads(done.stdout)

    assert hint(read_only=True, marker="1").startswith("; this `clavain` ran inside")
    assert hint(read_only=False, marker="1") == ""
    assert hint(read_only=True, marker=None) == ""


def test_a_parallel_run_works_in_hard_mode_its_checks_confined_to_their_worktree(
        project: Path, state: Path, run_cli) -> None:
    """Worktrees live beside the state folder: a confined command in one writes there, not in
    `.clavain/`; the run merges the work and leaves no worktree behind."""
    import subprocess as sp

    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@x", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@x"}
    assert run_cli("init").returncode == 0
    _hard_mode_on(project, state)
    (project / "README.md").write_text("x\n")
    sp.run(["git", "add", "-A"], cwd=project, check=True, env={**os.environ, **env})
    sp.run(["git", "commit", "-qm", "init"], cwd=project, check=True, env={**os.environ, **env})
    nodes = {"nodes": [{"id": f"task-{n}", "type": "task", "title": n,
                        "commands": [f"echo {n} > {n}.txt; echo x > {state}/forged-{n}; true"]}
                       for n in ("a", "b")]}
    assert run_cli("graph", "import", "-", input=json.dumps(nodes)).returncode == 0
    done = run_cli("run", "--runner", "shell", "--workers", "2", "--json")
    assert done.returncode in (0, 1), done.stderr
    report = json.loads(done.stdout)
    for name in ("a", "b"):
        assert (project / f"{name}.txt").read_text() == f"{name}\n", report
        assert not (state / f"forged-{name}").exists()
    worktrees = project / ".clavain-worktrees"
    assert [p.name for p in worktrees.iterdir()] == [".gitignore"]
    assert not (state / "worktrees").exists()


@needs_bwrap
def test_confine_in_a_worktree_follows_the_projects_hard_mode(project: Path,
                                                              state: Path) -> None:
    worktree = project / ".clavain-worktrees" / "run-1" / "task-a"
    worktree.mkdir(parents=True)
    assert confine_mod.confine(["true"], worktree, state) == ["true"]
    _hard_mode_on(project, state)
    argv = confine_mod.confine(["bash", "-c", f"echo ok > here.txt; echo x > {state}/forged"],
                           worktree, state)
    done = subprocess.run(argv, cwd=worktree, capture_output=True, text=True, timeout=60)
    assert (worktree / "here.txt").read_text() == "ok\n"
    assert not (state / "forged").exists() and "Read-only file system" in done.stderr


# ------------------------------------------------------------------------ macOS, the runner

def test_macos_confines_with_seatbelt(project: Path, state: Path,
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """Not run on macOS here: the argv and the profile Seatbelt would get."""
    argv = confine_mod.wrap(["bash", "-c", "make"], project, [state, project / ".claude"],
                            platform="darwin")
    assert argv[:2] == ["/usr/bin/sandbox-exec", "-p"] and argv[3:] == ["bash", "-c", "make"]
    profile = argv[2].splitlines()
    assert profile[:3] == ["(version 1)", "(allow default)", "(deny file-write*)"]
    allow = f'(allow file-write* (subpath "{project.resolve()}"))'
    deny = f'(deny file-write* (subpath "{state.resolve()}"))'
    assert allow in profile and deny in profile
    assert profile.index(deny) > profile.index(allow)  # the last matching rule wins
    assert f'(deny file-write* (subpath "{(project / ".claude").resolve()}"))' in profile
    monkeypatch.setattr(confine_mod.sys, "platform", "darwin")
    monkeypatch.setattr(confine_mod, "SANDBOX_EXEC", "/bin/sh")  # stands in for the binary
    assert confine_mod.host_problem() is None
    monkeypatch.setattr(confine_mod, "SANDBOX_EXEC", str(project / "missing"))
    assert "Seatbelt" in (confine_mod.host_problem() or "")


def test_a_quote_in_a_path_cannot_end_the_profiles_string(tmp_path: Path) -> None:
    odd = tmp_path / 'a"b'
    profile = confine_mod.seatbelt_profile([tmp_path], [odd])
    assert f'(subpath "{tmp_path.resolve()}/a\\"b")' in profile


def test_the_runner_gets_the_projects_sandbox_in_hard_mode(project: Path, state: Path) -> None:
    assert sandbox.runner_settings(project, state) is None
    _hard_mode_on(project, state)
    given = json.loads(sandbox.runner_settings(project, state) or "{}")
    assert given["sandbox"]["enabled"] is True
    assert sandbox.deny_entry(state) in given["sandbox"]["filesystem"]["denyWrite"]
    assert f"Edit(/{state.resolve()}/checkpoint.json)" in given["permissions"]["deny"]
    # Each runner's text its own: the host keeps inline settings in a file named by their hash
    # and removes it when a session ends, under a parallel runner that still needs it.
    assert sandbox.runner_settings(project, state, "run-1/task-a") != \
        sandbox.runner_settings(project, state, "run-1/task-b")


def test_a_claude_node_runner_is_started_with_the_sandbox_in_hard_mode(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from clavain import config as config_mod
    from clavain.store.graph_db import open_graph_db
    from clavain.supervisor import invocation
    from clavain.supervisor.routes import Route
    from clavain.workgraph.graphs import Graph
    from tests.supervisor import kit

    fake = tmp_path / "claude"
    fake.write_text("#!/bin/sh\n")
    fake.chmod(0o755)
    monkeypatch.setenv("CLAVAIN_CLAUDE_BIN", str(fake))
    state = kit.make_project(tmp_path / "p")
    kit.add(state, [{"id": "task-a", "type": "task", "title": "a"}])
    cfg = config_mod.load(state.config)
    conn = open_graph_db(state)
    try:
        g = Graph(conn, kit.DEFAULT_GRAPH, state)
        node = kit.node(state, "task-a")

        def argv() -> list[str]:
            return invocation.build(g, cfg, node, Route("executor", "claude", None),
                                    run_id="r1", log_dir=tmp_path / "logs").argv

        assert "--settings" not in argv()
        _hard_mode_on(state.project, state.root)
        started = argv()
    finally:
        conn.close()
    given = json.loads(started[started.index("--settings") + 1])
    assert given["sandbox"]["enabled"] is True
    assert sandbox.deny_entry(state.root) in given["sandbox"]["filesystem"]["denyWrite"]
