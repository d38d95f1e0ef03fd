"""Hard mode's library (`clavain.sandbox`): the settings merge, the host check, and `confine`,
run for real under bubblewrap (skipped, with the reason, where it cannot run)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from clavain import sandbox
from clavain.errors import ClavainError
from clavain.fsutil import write_json_atomic
from clavain.workgraph.shell import run_command

HOST_PROBLEM = sandbox.host_problem()
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
    assert settings == {"sandbox": sandbox.sandbox_block(state)}
    assert settings["sandbox"]["filesystem"]["denyWrite"] == ["/" + str(state.resolve())]
    assert settings["sandbox"]["filesystem"]["denyWrite"][0].startswith("//")
    assert len(changes) == 5 and "sandbox.enabled: unset -> true" in changes


def test_merge_keeps_the_persons_settings_and_is_idempotent(state: Path) -> None:
    mine = {"permissions": {"allow": ["Bash(ls)"]}, "env": {"A": "1"},
            "sandbox": {"excludedCommands": ["docker *", "clavain"],
                        "allowUnsandboxedCommands": True,
                        "network": {"allowedDomains": ["github.com"]},
                        "filesystem": {"denyWrite": ["~/secrets"], "denyRead": ["~/.ssh"]}}}
    before = json.loads(json.dumps(mine))
    settings, changes = sandbox.merge(mine, state)
    assert mine == before  # the input is not changed in place
    assert settings["permissions"] == mine["permissions"] and settings["env"] == mine["env"]
    box = settings["sandbox"]
    assert box["excludedCommands"] == ["docker *", "clavain", "clavain *"]
    assert box["network"] == {"allowedDomains": ["github.com"]}
    assert box["filesystem"]["denyWrite"] == ["~/secrets", sandbox.deny_entry(state)]
    assert box["filesystem"]["denyRead"] == ["~/.ssh"]
    assert box["allowUnsandboxedCommands"] is False
    assert "sandbox.allowUnsandboxedCommands: true -> false" in changes
    assert "sandbox.excludedCommands: + clavain *" in changes
    again, changes_again = sandbox.merge(settings, state)
    assert (again, changes_again) == (settings, [])


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
    report = sandbox.enable(state, project)
    written = json.loads(path.read_text())
    assert written["model"] == "opus" and written["sandbox"]["enabled"] is True
    assert sandbox.hard_mode(project, state)
    assert report["git_excluded"] is True
    assert [p.name for p in path.parent.iterdir()] == ["settings.local.json"]  # no temp left
    status = subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"],
                            cwd=project, capture_output=True, text=True, check=True).stdout
    assert "settings.local.json" not in status
    again = sandbox.enable(state, project)
    assert again["changed"] == [] and again["git_excluded"] is False
    exclude = (project / ".git" / "info" / "exclude").read_text()
    assert exclude.splitlines().count("/.claude/settings.local.json") == 1


@needs_bwrap
def test_enable_leaves_a_file_it_cannot_read_as_it_was(project: Path, state: Path) -> None:
    path = sandbox.settings_file(project)
    path.parent.mkdir()
    path.write_bytes(b'{"permissions": {,}}')
    with pytest.raises(ClavainError, match="not valid JSON"):
        sandbox.enable(state, project)
    assert path.read_bytes() == b'{"permissions": {,}}'


def test_enable_refuses_without_bubblewrap_and_writes_nothing(
        project: Path, state: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", _no_bwrap_path(tmp_path))
    assert "bwrap and socat are not on PATH" in (sandbox.host_problem() or "")
    with pytest.raises(ClavainError, match="apt-get install bubblewrap socat"):
        sandbox.enable(state, project)
    assert not sandbox.settings_file(project).exists()


def test_path_folders_inside_the_project_are_named(project: Path) -> None:
    inside = f"{project}/.venv/bin"
    found = sandbox.path_entries_inside(project, f"/usr/bin:{inside}:{project}/../x:{inside}")
    assert found == [inside]
    os.chdir(project)
    assert sandbox.path_entries_inside(project, "/usr/bin::/bin") == ["."]  # empty = cwd


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
    assert sandbox.confine(["bash", "-c", "true"], project, state) == ["bash", "-c", "true"]


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
    argv = sandbox.confine(["bash", "-c", script], project, state)
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
        sandbox.confine(["bash", "-c", "true"], project, state)


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


def test_a_parallel_run_is_refused_in_hard_mode_before_anything_runs(
        project: Path, state: Path, run_cli) -> None:
    nodes = {"nodes": [{"id": "task-a", "type": "task", "title": "a"},
                       {"id": "task-b", "type": "task", "title": "b"}]}
    assert run_cli("graph", "import", "-", input=json.dumps(nodes)).returncode == 0
    _hard_mode_on(project, state)
    refused = run_cli("run", "--runner", "shell", "--workers", "2")
    assert refused.returncode != 0
    assert "hard mode" in refused.stderr and "--workers 1" in refused.stderr
    assert not (state / "worktrees").exists() or not any((state / "worktrees").iterdir())
    listed = json.loads(run_cli("graph", "ls", "--json").stdout)
    assert {node["status"] for node in listed} == {"open"}
