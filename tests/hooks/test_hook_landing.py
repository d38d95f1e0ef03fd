"""Issue 32: the PreToolUse hook judges a write where it LANDS, on a real project with a real
`.clavain/`: a symlink to the state folder (`st -> .clavain`), `cd .claude/.`, a hard link,
`find -exec`, a patch, a tar or zip archive, git taking the folder away, a move or removal of a
folder holding it, and the plugin's own files. Reading the state (any reader, copying or
archiving out of it) goes through. Each attempt is the shape an agent used in the real host."""

from __future__ import annotations

import io
import json
import os
import tarfile
import zipfile
from pathlib import Path

import pytest

from .conftest import REPO, clavain_project, payload_for

EVIL_PATCH = """--- .clavain/config.json
+++ .clavain/config.json
@@ -1 +1 @@
-{}
+{"budgets": {"enabled": false}}
"""
GOOD_PATCH = """diff --git a/src/app.py b/src/app.py
--- a/src/app.py
+++ b/src/app.py
@@ -1 +1 @@
-x = 1
+x = 2
"""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A project with a real state folder, a real link to it and files to copy from."""
    project = clavain_project(tmp_path, {"budgets": {"maxCommands": 500}})
    state = project / ".clavain"
    (state / "checkpoint.json").write_text("{}")
    (state / "verdicts").mkdir()
    (state / "verdicts" / "v.json").write_text("{}")
    (project / "st").symlink_to(".clavain")  # `ln -s "$(ls -A | grep lava)" st`: allowed
    (project / "src").mkdir()
    (project / "src" / "app.py").write_text("x = 1\n")
    (project / "evil.json").write_text('{"budgets": {"enabled": false}}')
    (project / "evil.patch").write_text(EVIL_PATCH)
    (project / "evil.diff").write_text(EVIL_PATCH.replace("--- .clavain", "--- a/.clavain")
                                       .replace("+++ .clavain", "+++ b/.clavain"))
    (project / "good.patch").write_text(GOOD_PATCH)
    (project / "evil.py").write_text("import pathlib\n"
                                     "pathlib.Path('st/config.json').write_text('{}')\n")
    _tar(project / "evil.tar", [(".clavain/config.json", None)])
    _tar(project / "links.tar", [("up", ".clavain"), ("up/config.json", None)])
    _tar(project / "sneaky.tar", [("sub/../.clavain/checkpoint.json", None)])
    _tar(project / "climb.tar", [("up", ".."), ("up/project/.clavain/config.json", None)])
    _tar(project / "good.tar", [("src/new.py", None), ("docs/readme.md", None)])
    with zipfile.ZipFile(project / "evil.zip", "w") as archive:
        archive.writestr(".clavain/config.json", "{}")
    return project


def _tar(path: Path, members: list[tuple[str, str | None]]) -> None:
    with tarfile.open(path, "w") as archive:
        for name, link in members:
            info = tarfile.TarInfo(name)
            if link is not None:
                info.type, info.linkname = tarfile.SYMTYPE, link
                archive.addfile(info)
            else:
                data = b"{}"
                info.size = len(data)
                archive.addfile(info, io.BytesIO(data))


def _decide(run_hook, project: Path, tool: str, tool_input: dict, env=None,
            cwd: Path | None = None) -> dict | None:
    payload = {**payload_for("PreToolUse", cwd or project), "session_id": "s1",
               "hook_event_name": "PreToolUse", "tool_name": tool, "tool_input": tool_input}
    result = run_hook("PreToolUse", payload, cwd=cwd or project, env=env)
    assert result.returncode == 0 and result.stderr == "", result.stderr
    output = json.loads(result.stdout) if result.stdout else None
    return output.get("hookSpecificOutput") if output else None


def _reason(output: dict | None) -> str | None:
    if output and output.get("permissionDecision") == "deny":
        return output["permissionDecisionReason"]
    return None


STATE = "changes only through the `clavain` CLI"
SETTINGS = "Claude Code's settings"
PLUGIN = "its own files (the plugin folder"


# ------------------------------------------------------------------------------ the edit tools

@pytest.mark.parametrize(("tool", "path", "extra"), [
    ("Write", "st/x.txt", {"content": "x"}),
    ("Edit", "st/config.json", {"old_string": "{}", "new_string": '{"budgets": {}}'}),
    ("MultiEdit", "st/checkpoint.json", {"edits": [{"old_string": "{", "new_string": "["}]}),
    ("Write", "src/../st/verdicts/forged.json", {"content": "{}"}),
    ("Write", "{project}/st/typed/sprint-request-s1.txt", {"content": "--waive x"}),
])
def test_an_edit_through_a_link_lands_in_the_state(run_hook, project: Path, tool: str,
                                                   path: str, extra: dict) -> None:
    tool_input = {"file_path": path.format(project=project), **extra}
    assert STATE in (_reason(_decide(run_hook, project, tool, tool_input)) or "")


def test_a_relative_edit_is_resolved_from_the_calls_folder(run_hook, project: Path) -> None:
    """`../st/config.json` from `src/` is the state folder; from the project it is not."""
    output = _decide(run_hook, project, "Write", {"file_path": "../st/config.json",
                                                  "content": "{}"}, cwd=project / "src")
    assert STATE in (_reason(output) or "")


def test_the_agents_folder_through_the_link_is_still_the_agents(run_hook, project: Path) -> None:
    handoff = {"file_path": str(project / "st" / "scratch" / "handoff.md"), "content": "notes"}
    assert _reason(_decide(run_hook, project, "Write", handoff)) is None
    assert _reason(_decide(run_hook, project, "Write", {"file_path": "src/app.py",
                                                        "content": "x = 3"})) is None


def test_an_edit_of_the_settings_spelled_with_a_dot_lands_there(run_hook, project: Path) -> None:
    (project / ".claude").mkdir()
    output = _decide(run_hook, project, "Write", {"file_path": ".claude/./settings.local.json",
                                                  "content": '{"disableAllHooks": true}'})
    assert SETTINGS in (_reason(output) or "")


def test_the_users_own_settings_are_no_agents(run_hook, project: Path, tmp_path: Path) -> None:
    config = tmp_path / "claude-config"  # run_hook's CLAUDE_CONFIG_DIR
    for name in ("settings.json", "settings.local.json"):
        output = _decide(run_hook, project, "Write", {"file_path": str(config / name),
                                                      "content": "{}"})
        assert SETTINGS in (_reason(output) or ""), name
    linked = project / "cfg"
    linked.symlink_to(config)  # and through a link to that folder
    output = _decide(run_hook, project, "Bash", {"command": "echo '{}' > cfg/settings.json"})
    assert SETTINGS in (_reason(output) or "")


def test_the_plugins_own_files_and_data_are_no_agents(run_hook, project: Path,
                                                      tmp_path: Path) -> None:
    plugin, data = tmp_path / "plugin", tmp_path / "plugin-data"
    (plugin / "lib" / "clavain").mkdir(parents=True)
    (data / "venv").mkdir(parents=True)
    env = {"CLAUDE_PLUGIN_ROOT": str(plugin), "CLAUDE_PLUGIN_DATA": str(data)}
    authority = plugin / "lib" / "clavain" / "authority.py"
    for tool, tool_input in (
            ("Write", {"file_path": str(authority), "content": "AGENT = False"}),
            ("Write", {"file_path": str(data / "venv" / "sitecustomize.py"), "content": "x"}),
            ("Bash", {"command": f"python3 -c \"open('{authority}', 'w').write('x = 1')\""}),
            ("Bash", {"command": f"echo x >> {data}/venv/pyvenv.cfg"})):
        output = _decide(run_hook, project, tool, tool_input, env=env)
        assert PLUGIN in (_reason(output) or ""), tool_input


def test_the_plugin_this_hook_runs_from_is_protected_by_default(run_hook,
                                                                project: Path) -> None:
    """No CLAUDE_PLUGIN_ROOT: the root the hook's package runs from (this clone)."""
    target = REPO / "lib" / "clavain" / "authority.py"
    command = f"python3 -c \"import pathlib; pathlib.Path('{target}').write_text('')\""
    output = _decide(run_hook, project, "Bash", {"command": command},
                     env={"CLAUDE_PLUGIN_ROOT": ""})
    assert PLUGIN in (_reason(output) or "")
    # Running the plugin's CLI is no write to it.
    runs = f"python3 -c \"import subprocess; subprocess.run(['{REPO}/bin/clavain', 'status'])\""
    assert _reason(_decide(run_hook, project, "Bash", {"command": runs})) is None


# ------------------------------------------------------------------------------- hard links

def test_a_hard_link_of_a_state_file_refuses_every_change(run_hook, project: Path) -> None:
    os.link(project / ".clavain" / "config.json", project / "cfglink")
    written = _reason(_decide(run_hook, project, "Bash", {"command": "echo '{}' > cfglink"}))
    assert STATE in (written or "")  # that write itself lands in a state file
    for tool, tool_input in (("Write", {"file_path": "src/app.py", "content": "x = 2"}),
                             ("Bash", {"command": "touch src/other.py"})):
        reason = _reason(_decide(run_hook, project, tool, tool_input)) or ""
        assert "config.json has another name" in reason and "clavain doctor" in reason, tool
    assert _reason(_decide(run_hook, project, "Bash", {"command": "ls -la"})) is None


def test_writing_through_another_name_of_a_deeper_state_file_is_refused(run_hook,
                                                                       project: Path) -> None:
    os.link(project / ".clavain" / "verdicts" / "v.json", project / "vlink")
    for tool, tool_input in (("Write", {"file_path": "vlink", "content": "{}"}),
                             ("Bash", {"command": "echo '{}' > vlink"})):
        assert STATE in (_reason(_decide(run_hook, project, tool, tool_input)) or ""), tool


def test_making_a_hard_link_to_a_state_file_is_refused(run_hook, project: Path) -> None:
    output = _decide(run_hook, project, "Bash", {"command": "ln st/config.json cfglink"})
    assert STATE in (_reason(output) or "")
    # A symlink to the folder stays allowed: writes through it are judged where they land.
    assert _reason(_decide(run_hook, project, "Bash", {"command": "ln -s st/verdicts v"})) \
        is None


# -------------------------------------------------------------------- Bash writes, as words

@pytest.mark.parametrize("command", [
    "echo '{}' > st/config.json",
    "cd st && echo x > f",
    "cd src/../st/. && printf '{}' > checkpoint.json",
    "pushd st && touch forged.json && popd",
    "echo '{}' | sort -o st/config.json",
    "cp evil.json st/config.json",
    "sed -i s/a/b/ st/checkpoint.json",
    "find . -path '*lava*/config.json' -exec cp evil.json {} \\;",
    "find . -name 'config.json' -delete",
    "find -L . -name '*.json' -exec sh -c 'cat evil.json > \"$1\"' _ {} \\;",
    "find st/ -type f -exec rm {} +",
    "find . -maxdepth 2 -name '*.json' -delete",
    "patch -p0 -i evil.patch",
    "patch --input=evil.patch",
    "patch -p0 < evil.patch",
    "patch -d st -p1 -i ../evil.patch",
    "git apply evil.diff",
    "git apply --index -p1 evil.diff",
    "tar -xf evil.tar",
    "tar xf evil.tar",
    "tar --extract --file=evil.tar",
    "tar -x -f links.tar",
    "tar -xf sneaky.tar",
    "tar -xf climb.tar",
    "mkdir -p sub && tar -xf evil.tar -C sub/..",
    "unzip -o evil.zip",
    "ln -s st st2 && echo '{}' > st2/config.json",
    "python3 -c \"open('st/config.json', 'w').write('{}')\"",
    "python3 - <<'EOF'\nopen('.clavain/config.json', 'w').write('{}')\nEOF",
    "python3 < evil.py",
    "cat evil.patch | patch -p0",
    "cat evil.tar | tar -x",
    "git apply < evil.diff",
    # A review's finds: a folder the command makes, then `..`; a patch or an archive read
    # from standard input by name.
    "mkdir nd; echo x > nd/../st/config.json",
    "mkdir -p nd && cp /dev/null nd/../st/config.json",
    "mkdir nd && cd nd/../st && echo x > config.json",
    "mkdir nd && rm -rf nd/../st/",
    "patch -p0 -i /dev/stdin < evil.patch",
    "git apply /dev/stdin < evil.diff",
    "patch -p0 -i /dev/stdin <<'EOF'\n" + EVIL_PATCH + "EOF",
    "tar -xf /dev/stdin < evil.tar",
])
def test_a_bash_write_that_lands_in_the_state_is_refused(run_hook, project: Path,
                                                         command: str) -> None:
    assert STATE in (_reason(_decide(run_hook, project, "Bash", {"command": command})) or ""), \
        command


def test_cd_takes_dot_dot_as_typed_as_the_shell_does(run_hook, project: Path,
                                                     tmp_path: Path) -> None:
    """`cd L/../st` is `st` to bash, wherever the link `L` leads (`cd -P` would follow it)."""
    elsewhere = tmp_path / "a" / "b"
    elsewhere.mkdir(parents=True)
    (project / "L").symlink_to(elsewhere)
    command = "cd L/../st && echo x > config.json"
    assert STATE in (_reason(_decide(run_hook, project, "Bash", {"command": command})) or "")
    physical = "cd -P L/.. && echo x > config.json"  # lands in tmp_path/a: no one's state
    assert _reason(_decide(run_hook, project, "Bash", {"command": physical})) is None


def test_cd_into_the_settings_folder_through_a_dot_is_seen(run_hook, project: Path) -> None:
    command = ("mkdir -p .claude && cd .claude/. && "
               "echo '{\"disableAllHooks\": true}' > settings.local.json")
    assert SETTINGS in (_reason(_decide(run_hook, project, "Bash", {"command": command})) or "")


@pytest.mark.parametrize("command", [
    "mv ../project ../elsewhere",
    "rm -rf ../project",
    "cd .. && mv project moved",
    "cd src && rm -r ..",
    "mv st/ .zz",
    "rsync -a --delete /tmp/empty/ ./",
    "rsync -a --delete-after /tmp/empty/ ../project/",
    "git stash push --all",
    "git stash -u",
    "git stash save --include-untracked wip",
    "git -C . stash push -a -m wip",
    "git clean -fdx",
])
def test_taking_the_state_folder_away_is_refused(run_hook, project: Path, command: str) -> None:
    reason = _reason(_decide(run_hook, project, "Bash", {"command": command})) or ""
    assert STATE in reason or "person's decision" in reason, command


# ----------------------------------------------------------------------------- reads go through

@pytest.mark.parametrize("command", [
    "sed -n 1,5p .clavain/config.json",
    "python3 -m json.tool .clavain/config.json",
    "python3 -m json.tool .clavain/config.json /tmp/pretty.json",
    "python3 -c \"import json; print(json.load(open('.clavain/config.json')))\"",
    "python3 -c \"import sys; sys.stdout.write(open('st/checkpoint.json').read())\"",
    "node -e \"console.log(require('fs').readFileSync('.clavain/config.json', 'utf8'))\"",
    "cp -r .clavain/verdicts /tmp/x",
    "tar -czf /tmp/v.tgz .clavain/verdicts",
    "zip -r /tmp/v.zip .clavain/verdicts",
    "rsync -a .clavain/verdicts/ /tmp/v/",
    "cat st/config.json | jq .budgets",
    "awk '{print $1}' .clavain/config.json",
    "find . -name '*.pyc' -delete",
    "find . -maxdepth 1 -name '*.json' -delete",
    "find .clavain -name '*.json' -exec cat {} +",
    "find . -path ./.clavain -prune -o -name '*.json' -exec rm {} +",
    "find . -not -path './.clavain/*' -name '*.json' -delete",
    "tar -xf good.tar",
    "patch -p1 -i good.patch",
    "git apply good.patch",
    "git apply --check evil.diff",
    "git stash",
    "git stash list",
    "mv st st-old",
    "rm st",
    "cd st && cat config.json",
    "echo note > st/scratch/handoff.md",
    "python3 <<'EOF'\nprint(open('.clavain/config.json').read())\nEOF",
    "cat good.patch | patch -p1",
])
def test_reading_the_state_goes_through(run_hook, project: Path, command: str) -> None:
    assert _reason(_decide(run_hook, project, "Bash", {"command": command})) is None, command


def test_landing_denials_hold_with_budgets_off_and_a_broken_database(run_hook,
                                                                      project: Path) -> None:
    """They need no counters (`budget.standing_refusal`)."""
    (project / ".clavain" / "config.json").write_text('{"budgets": {"enabled": false}}')
    assert STATE in (_reason(_decide(run_hook, project, "Bash",
                                     {"command": "echo x > st/checkpoint.json"})) or "")
    (project / ".clavain" / "config.json").write_text("{}")
    (project / ".clavain" / "state.sqlite").write_bytes(b"not a database at all" * 50)
    for tool, tool_input in (("Write", {"file_path": "st/x.txt", "content": "x"}),
                             ("Bash", {"command": "tar -xf evil.tar"})):
        assert STATE in (_reason(_decide(run_hook, project, tool, tool_input)) or ""), tool
    os.link(project / ".clavain" / "checkpoint.json", project / "cplink")
    reason = _reason(_decide(run_hook, project, "Bash", {"command": "touch src/x.py"})) or ""
    assert "checkpoint.json has another name" in reason
