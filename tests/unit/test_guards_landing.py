"""Where a path lands (`guards.landing`), what a command writes (`guards.writes`), what a patch
or an archive would write (`guards.archives`), and the Bash walk that puts them together
(`guards.command_landing`), on real folders, links and files."""

from __future__ import annotations

import io
import os
import tarfile
from pathlib import Path

import pytest

from clavain.guards import archives, command_landing, landing
from clavain.guards.shell_words import split_parts
from clavain.guards.writes import code_writes, written_words


@pytest.fixture
def project(tmp_path: Path) -> Path:
    project = tmp_path / "project"
    state = project / ".clavain"
    (state / "scratch").mkdir(parents=True)
    (state / "config.json").write_text("{}")
    (state / "checkpoint.json").write_text("{}")
    (project / "st").symlink_to(".clavain")
    (project / "src").mkdir()
    landing._PLACES.clear()
    return project


def _real(path: Path) -> str:
    return os.path.realpath(path)


# ---------------------------------------------------------------------------------- the resolver

def test_land_follows_links_dots_and_parents(project: Path) -> None:
    cwd = _real(project)
    root = _real(project / ".clavain")
    assert landing.land("st/config.json", cwd) == f"{root}/config.json"
    assert landing.land("src/../st/./config.json", cwd) == f"{root}/config.json"
    assert landing.land("./st", cwd) == root
    assert landing.land(f"{project}/st/x/y.txt", None) == f"{root}/x/y.txt"  # absolute
    assert landing.land("..", _real(project / "src")) == cwd
    assert landing.land("st/../src", cwd) == _real(project / "src")  # `..` after the link's target


def test_land_takes_a_missing_part_as_spelled(project: Path) -> None:
    cwd = _real(project)
    assert landing.land("new/dir/../file", cwd) == f"{cwd}/new/file"
    assert landing.land("x", None) is None  # relative to a folder no one can tell
    assert landing.land("~/f", cwd) == os.path.join(os.path.expanduser("~"), "f")


def test_judge_places(project: Path, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(tmp_path / "cfg"))
    monkeypatch.setenv("CLAUDE_PLUGIN_ROOT", str(tmp_path / "plugin"))
    monkeypatch.setenv("CLAUDE_PLUGIN_DATA", str(tmp_path / "data"))
    found = landing.places(str(project), str(project / ".clavain"))
    root = _real(project / ".clavain")
    assert landing.judge(f"{root}/config.json", found) == landing.STATE
    assert landing.judge(root, found) == landing.STATE
    assert landing.judge(f"{root}/scratch/handoff.md", found) is None
    assert landing.judge(_real(project / "src"), found) is None
    assert landing.judge(_real(project), found, removing=True) == landing.HOLDS
    assert landing.judge(_real(project / "src"), found, removing=True) is None
    assert landing.judge(f"{_real(project)}/.claude/settings.local.json", found) == \
        landing.SETTINGS
    assert landing.judge(f"{_real(tmp_path)}/cfg/settings.json", found) == landing.SETTINGS
    assert landing.judge(f"{_real(tmp_path)}/plugin/lib/clavain/x.py", found) == landing.PLUGIN
    assert landing.judge(f"{_real(tmp_path)}/data/venv/bin/python", found) == landing.PLUGIN
    assert landing.judge(None, found) is None


def test_a_link_planted_in_the_agents_folder_does_not_make_the_state_theirs(project: Path) -> None:
    (project / ".clavain" / "scratch" / "up").symlink_to("..")
    found = landing.places(str(project), str(project / ".clavain"))
    landed = landing.land("st/scratch/up/config.json", _real(project))
    assert landing.judge(landed, found) == landing.STATE


def test_linked_state_files_and_their_other_names(project: Path) -> None:
    root = str(project / ".clavain")
    assert landing.linked_state_files(root) == []
    os.link(project / ".clavain" / "config.json", project / "src" / "cfg")
    assert landing.linked_state_files(root) == [(f"{root}/config.json", 2)]
    assert landing.other_names(f"{root}/config.json", str(project)) == [
        str(project / "src" / "cfg")]
    assert landing.same_inode_as_state(str(project / "src" / "cfg"), root) == \
        f"{root}/config.json"
    assert landing.same_inode_as_state(str(project / ".clavain" / "checkpoint.json"),
                                       root) is None  # one name only


# --------------------------------------------------------------------------- what a command writes

@pytest.mark.parametrize(("words", "written"), [
    (["sed", "-n", "1,5p", "c.json"], []),
    (["sed", "-i", "s/a/b/", "c.json"], ["c.json"]),
    (["sed", "-n", "w out.txt", "c.json"], ["out.txt"]),
    (["json.tool", "in.json"], []),
    (["json.tool", "in.json", "out.json"], ["out.json"]),
    (["cp", "-r", "src", "/tmp/x"], ["/tmp/x"]),
    (["cp", "-t", "dest", "a", "b"], ["b", "dest"]),
    (["tar", "-czf", "/tmp/v.tgz", "src"], ["/tmp/v.tgz"]),
    (["tar", "czf", "/tmp/v.tgz", "src"], ["/tmp/v.tgz"]),
    (["tar", "-czf", "/tmp/v.tgz", "--remove-files", "src"], ["/tmp/v.tgz", "src"]),
    (["tar", "-xf", "a.tar"], []),
    (["zip", "-r", "/tmp/v.zip", "src"], ["/tmp/v.zip"]),
    (["rsync", "-a", "src/", "/tmp/v/"], ["/tmp/v/"]),
    (["sort", "-o", "out", "in"], ["out"]),
    (["uniq", "in", "out"], ["out"]),
    (["awk", "{print $1}", "f"], []),
    (["awk", "{print > \"x\"}", "f"], ["{print > \"x\"}", "f", "x"]),
    (["rm", "-rf", "build"], ["build"]),
    (["touch", "--reference=a", "b"], ["a", "b"]),
    (["git", "status"], []),
    (["pytest", "-q", "tests"], []),
    (["find", ".", "-name", "*.json", "-exec", "cat", "{}", "+"], []),
    (["find", ".", "-name", "*.pyc", "-delete"], [".", "*.pyc"]),
])
def test_written_words(words: list[str], written: list[str]) -> None:
    assert written_words(words) == written


@pytest.mark.parametrize(("code", "writes"), [
    ("import json; print(json.load(open('c.json')))", False),
    ("import sys; sys.stdout.write(open('c.json').read())", False),
    ("print(open('c.json').read().replace('a', 'b'))", False),
    ("open('c.json', 'w').write('{}')", True),
    ("open('c.json', mode='a')", True),
    ("import pathlib; pathlib.Path('x').write_text('')", True),
    ("import sqlite3; sqlite3.connect('s.sqlite')", True),
    ("import os; os.remove('x')", True),
    ("import shutil; shutil.copy('a', 'b')", True),
    ("require('fs').writeFileSync('x', '{}')", True),
    ("import subprocess; subprocess.run(['rm', 'x'])", True),
])
def test_inline_code_writes_only_when_it_says_so(code: str, writes: bool) -> None:
    assert bool(code_writes(code)) is writes


# ---------------------------------------------------------------------------- patches, archives

def test_patch_names_and_strip() -> None:
    text = ("diff --git a/src/x.py b/src/x.py\n--- a/src/x.py\n+++ b/src/x.py\n@@ -1 +1 @@\n"
            "--- /dev/null\n+++ b/new.txt\t2024-01-01\nrename to docs/y.md\n")
    assert archives.patch_names(text) == ["a/src/x.py", "b/src/x.py", "a/src/x.py",
                                          "b/src/x.py", "b/new.txt", "docs/y.md"]
    assert archives.stripped("a/src/x.py", 1) == "src/x.py"
    assert archives.stripped("x.py", 1) is None
    assert archives.patch_plan(["patch", "-p0", "-i", "f"]) == {
        "input": "f", "dir": None, "strip": 0, "writes": []}
    assert archives.patch_plan(["patch", "--input=f", "-dsub", "--strip=2"])["dir"] == "sub"
    assert archives.patch_plan(["patch", "orig.c", "fix.diff"])["writes"] == ["orig.c"]
    assert archives.apply_plan(["git", "apply", "--check", "f"]) is None
    assert archives.apply_plan(["git", "apply", "-p2", "a", "b"])["inputs"] == ["a", "b"]


def test_tar_plan_and_members(tmp_path: Path) -> None:
    assert archives.tar_plan(["tar", "-czf", "out.tgz", "src"]) is None
    assert archives.tar_plan(["tar", "xzf", "a.tgz", "-C", "d"]) == {
        "archive": "a.tgz", "dir": "d", "strip": 0}
    assert archives.tar_plan(["tar", "-xf", "a.tar", "--strip-components=1"])["strip"] == 1
    assert archives.tar_plan(["tar", "--extract", "--file=a.tar", "--directory", "d"]) == {
        "archive": "a.tar", "dir": "d", "strip": 0}
    path = tmp_path / "a.tar"
    with tarfile.open(path, "w") as archive:
        info = tarfile.TarInfo("up")
        info.type, info.linkname = tarfile.SYMTYPE, ".clavain"
        archive.addfile(info)
        data = tarfile.TarInfo("src/x.py")
        data.size = 1
        archive.addfile(data, io.BytesIO(b"x"))
    assert archives.tar_members(str(path)) == [("up", ".clavain", False),
                                               ("src/x.py", None, False)]
    os.mkfifo(tmp_path / "fifo")
    assert archives.open_bounded(str(tmp_path / "fifo"), 10) is None  # never blocks


# --------------------------------------------------------------------------------- the Bash walk

def _lands(project: Path, command: str, cwd: Path | None = None) -> str | None:
    return command_landing.lands(command, str(cwd or project), str(project),
                                 str(project / ".clavain"), [])


@pytest.mark.parametrize("command", [
    "echo x > st/config.json", "cd st && echo x > f", "cd src/../st/. && touch y",
    "pushd src && pushd ../st && touch y", "mv ../project ../p2", "rm -r ../project",
    "ln st/config.json hard", "git stash -u", "git stash push --include-untracked",
    "find . -name 'config.json' -exec cp x {} \\;", "find st/ -delete",
    "ln -s st s2 && echo x > s2/config.json", "echo x > st/*.json",
])
def test_the_walk_finds_the_state(project: Path, command: str) -> None:
    assert _lands(project, command) == landing.STATE, command


@pytest.mark.parametrize("command", [
    "echo x > out.txt", "cd src && echo x > f", "pushd st && popd && touch y", "rm st",
    "mv st st2", "ln -s st s2", "git stash", "find . -name '*.pyc' -delete",
    "find . -path ./.clavain -prune -o -name '*.json' -delete", "cd st/scratch && touch n",
    "cp -r st/ /tmp/copy", "cd \"$(ls -A | grep lava)\" && echo x > f",
])
def test_the_walk_lets_other_writes_be(project: Path, command: str) -> None:
    assert _lands(project, command) is None, command


def test_a_pipe_past_noclobber_is_a_redirection() -> None:
    assert split_parts("echo '{}' >| .clavain/config.json") == [
        "echo '{}' >| .clavain/config.json"]


def test_doctor_names_a_state_file_with_a_second_name(project: Path) -> None:
    from clavain import doctor
    from clavain.paths import StatePaths

    state = StatePaths.discover(project)
    assert doctor._state_links(state)["status"] == doctor.OK
    os.link(project / ".clavain" / "checkpoint.json", project / "src" / "cp")
    row = doctor._state_links(state)
    assert row["status"] == doctor.FAIL
    assert "checkpoint.json has 2 links" in row["detail"]
    assert str(project / "src" / "cp") in row["detail"] and "remove the other link" in \
        row["detail"]
    assert any(r["check"] == "state_links" for r in doctor.run(state)["checks"])


def test_the_plugin_is_guarded_unless_the_project_is_the_plugin(tmp_path: Path,
                                                                monkeypatch) -> None:
    monkeypatch.delenv("CLAUDE_PLUGIN_DATA", raising=False)
    monkeypatch.delenv("CLAVAIN_PLUGIN_DATA", raising=False)
    clone = tmp_path / "clavain"
    (clone / "lib").mkdir(parents=True)
    monkeypatch.setenv("CLAUDE_PLUGIN_ROOT", str(clone))
    landing._PLACES.clear()
    assert landing.places(str(clone), str(clone / ".clavain"))["plugin"] == []  # its own clone
    vendored = tmp_path / "app"
    (vendored / "plugins" / "clavain").mkdir(parents=True)
    monkeypatch.setenv("CLAUDE_PLUGIN_ROOT", str(vendored / "plugins" / "clavain"))
    landing._PLACES.clear()
    assert _real(vendored / "plugins" / "clavain") in landing.places(
        str(vendored), str(vendored / ".clavain"))["plugin"]


def test_the_spelling_check_takes_a_cd_the_way_the_shell_does() -> None:
    """`cd .claude/.` ended in `.`, which the spelling check once took for the folder."""
    from clavain.guards.state_paths import writes_host_settings

    assert writes_host_settings("mkdir -p .claude && cd .claude/. && echo '{}' > settings.json")
    assert writes_host_settings("cd .claude/agents/.. && echo '{}' > settings.local.json")
    assert not writes_host_settings("cd .claude/agents && echo x > settings.json")


def test_listing_a_compressed_archive_stops_at_its_deadline(tmp_path, monkeypatch) -> None:
    """A small .tgz can hold gigabytes to decompress just to skip them: the hook lists for
    `TAR_SECONDS` at most and judges what it saw (the host kills a hook at 10 s)."""
    import io
    import tarfile

    from clavain.guards import archives

    path = tmp_path / "a.tgz"
    with tarfile.open(path, "w:gz") as archive:
        for name in ("src/a.py", ".clavain/config.json"):
            info = tarfile.TarInfo(name)
            info.size = 2
            archive.addfile(info, io.BytesIO(b"{}"))
    names = [name for name, _, _ in archives.tar_members(str(path))]
    assert names == ["src/a.py", ".clavain/config.json"]
    monkeypatch.setattr(archives, "TAR_SECONDS", -1.0)  # a deadline already past
    assert archives.tar_members(str(path)) is None
