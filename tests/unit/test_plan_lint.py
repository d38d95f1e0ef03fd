"""Plan lint (plans.lint): each rule fires on a plan that has the problem and stays quiet on a
near miss; the plans the examples, skills and tests already use are clean."""

from __future__ import annotations

import copy
import itertools
import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from clavain.config import DEFAULTS
from clavain.errors import ClavainError
from clavain.plans import findings as plan_findings
from clavain.plans import lint
from clavain.plans.nodes_block import nodes_blocks
from clavain.plans.project_files import ProjectFiles, glob_regex, walk
from clavain.plans.verify_check import always_passes, programs
from clavain.workgraph.ownership import glob_matches

REPO = Path(__file__).resolve().parents[2]


def _task(task_id: str, *, verify: list[str] | None = None, ownership: list[str] | None = None,
          deps: list[str] | None = None, **extra: Any) -> dict[str, Any]:
    return {"id": task_id, "type": "task", "title": task_id,
            "verify": ["test -f a.txt"] if verify is None else verify,
            "ownership": [f"{task_id}.txt"] if ownership is None else ownership,
            "dependsOn": deps or [], **extra}


def _lint(project: Path, specs: list[dict[str, Any]],
          **settings: Any) -> list[plan_findings.Finding]:
    known_ids = settings.pop("known_ids", ())
    config = copy.deepcopy(DEFAULTS)
    config["plans"].update(settings)
    return lint.lint_specs(specs, project=project, config=config, known_ids=known_ids)


def _codes(findings: list[plan_findings.Finding]) -> list[tuple[str, str | None]]:
    return [(f.code, f.task) for f in findings]


def _files(project: Path, *names: str) -> None:
    for name in names:
        path = project / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("x\n")


# ---------------------------------------------------------------- verify always passes

@pytest.mark.parametrize("command", [
    "true", ":", "", "   ", "echo ok", "printf 'done\\n'", "exit 0", "pytest -q || true",
    "pytest -q || :", "make test || exit 0", "true && echo ok", "pytest; true",
    "pytest -q; echo finished", "FOO=1", "! false", "(true)", "{ echo a; }",
    "pytest | echo", "echo a && echo b", "exit 0; pytest", "pytest -q || true # why",
])
def test_a_command_that_cannot_fail_always_passes(command: str) -> None:
    assert always_passes(command)


@pytest.mark.parametrize("command", [
    "pytest -q", "echo ok > out.txt && pytest", "true && pytest", "pytest && echo ok",
    "echo ok; pytest", "! true", "false", "exit 1", "exit", "test -f a.txt",
    "grep -q x f || false", "pytest -k 'a || true'", "pytest # || true", "pytest | tee log",
    "cat <<EOF\ntrue\nEOF", "true || pytest && false", "echo \"x; true\" && make",
    "! grep -rqw foo src", "OUT=$(pytest -q)",
])
def test_a_command_that_can_fail_is_not_always_passing(command: str) -> None:
    assert not always_passes(command)


def test_programs_are_the_first_word_of_each_simple_command() -> None:
    assert programs("FOO=1 BAR=2 pytets -q") == ["pytets"]
    assert programs("cd sub && make test") == ["make"]
    assert programs("if grep -q x f; then pytest; fi") == ["grep", "pytest"]
    assert programs("$PY -m mod; ~/bin/tool; `which x`") == []
    assert programs("python -m mymod | grep -qx ok") == ["python", "grep"]
    assert programs("test -f x && [ -d y ] && ! rg foo") == ["rg"]
    assert programs("env -i A=1 pytest; time ./run.sh; exec make") == ["pytest", "./run.sh",
                                                                        "make"]
    assert programs("for f in *.py; do ruff check $f; done") == ["ruff"]
    # After a `cd`, a relative path names a file somewhere else: not looked up.
    assert programs("./a.sh && cd sub && ./run.sh && /bin/sh x") == ["./a.sh", "/bin/sh"]


def test_a_verify_that_always_passes_is_an_error_naming_the_task(project: Path) -> None:
    findings = _lint(project, [_task("task-a", verify=["pytest -q || true", "test -f a"]),
                               _task("task-b", verify=["echo ok > out.txt && test -f a"])])
    assert _codes(findings) == [("verify_always_passes", "task-a")]
    assert findings[0].severity == plan_findings.ERROR
    assert findings[0].message.startswith("task-a: verify 'pytest -q || true' always passes")
    assert findings[0].line().startswith("error: task-a:")


def test_only_tasks_verify_is_linted(project: Path) -> None:
    specs = [_task("task-a"), {"id": "verify-a", "type": "verify", "verify": ["true"],
                               "dependsOn": ["task-a"]}]
    assert _lint(project, specs) == []


# ---------------------------------------------------------------- programs found

def test_a_verify_whose_program_is_not_found_is_an_error(project: Path) -> None:
    findings = _lint(project, [_task("task-a", verify=["pytets -q"]),
                               _task("task-b", verify=["./scripts/missing.sh"])])
    assert _codes(findings) == [("verify_program_missing", "task-a"),
                                ("verify_program_missing", "task-b")]
    assert "'pytets'" in findings[0].message


def test_programs_are_found_on_path_in_the_venv_and_in_the_repository(project: Path) -> None:
    _files(project, "scripts/check.sh", ".venv/bin/mytool", "gradlew")
    specs = [_task("task-a", verify=["./scripts/check.sh", "mytool --strict",
                                     "gradlew test", "git status", "sh -c 'exit 1'",
                                     "./made.sh"], ownership=["made.sh"]),
             _task("task-b", verify=["python3 -m no_such_module"])]
    assert _lint(project, specs) == []


# ---------------------------------------------------------------- dependencies

def test_an_unknown_dependency_is_an_error_unless_the_graph_knows_it(project: Path) -> None:
    specs = [_task("task-a", deps=["task-zz"])]
    findings = _lint(project, specs)
    assert _codes(findings) == [("unknown_dependency", "task-a")]
    assert "'task-zz'" in findings[0].message
    assert _lint(project, specs, known_ids=["task-zz"]) == []


def test_a_dependency_cycle_names_its_tasks(project: Path) -> None:
    specs = [_task("a", deps=["c"]), _task("b", deps=["a"]), _task("c", deps=["b"]),
             _task("d", deps=["a"]), _task("e", deps=["e"])]
    findings = _lint(project, specs)
    assert _codes(findings) == [("dependency_cycle", "a"), ("dependency_cycle", "e")]
    assert "(a, b, c)" in findings[0].message
    assert _lint(project, [_task("a"), _task("b", deps=["a"]),
                           _task("c", deps=["a", "b"])]) == []


def test_a_missing_verify_is_an_error_only_when_the_config_requires_one(project: Path) -> None:
    specs = [_task("task-a", verify=[])]
    assert _lint(project, specs) == []
    findings = _lint(project, specs, requireVerify=True)
    assert _codes(findings) == [("verify_missing", "task-a")]


# ---------------------------------------------------------------- ownership

def test_ownership_that_matches_nothing_and_nobody_creates_warns(project: Path) -> None:
    _files(project, "src/a.py", "pkg/__init__.py")
    specs = [_task("t1", ownership=["src/*.rs"]),  # nothing, nobody creates one
             _task("t2", ownership=["scr/app.py"]),  # a typo: no such directory
             _task("t3", ownership=["src/*.py", "src/new.py"]),  # exists; parent exists
             _task("t4", ownership=["newpkg", "newpkg/sub/x.py"], deps=["t3"]),
             _task("t5", ownership=["src/*.go"], deps=["t6"]),
             _task("t6", ownership=["src/main.go"])]  # created: its directory exists
    findings = _lint(project, specs)
    assert _codes(findings) == [("ownership_matches_nothing", "t1"),
                                ("ownership_matches_nothing", "t2")]
    assert all(f.severity == plan_findings.WARNING for f in findings)
    assert "directory scr does not exist" in findings[1].message
    assert "more path" not in findings[1].message


def test_files_in_one_missing_directory_are_one_warning(project: Path) -> None:
    findings = _lint(project, [_task(f"t{i}", ownership=[f"src/pkg/f{i}.py"])
                               for i in range(5)])
    assert _codes(findings) == [("ownership_matches_nothing", "t0")]
    assert findings[0].message == ("t0: ownership 'src/pkg/f0.py': no such file, and the "
                                   "directory src does not exist (4 more path(s) there, of 4 "
                                   "other task(s))")


def test_two_unordered_tasks_owning_one_file_warn(project: Path) -> None:
    _files(project, "src/x.py", "src/y.js")
    findings = _lint(project, [_task("a", ownership=["src/**"]),
                               _task("b", ownership=["src/x.py"])])
    assert _codes(findings) == [("ownership_overlap", "a")]
    assert "a: owns 'src/**' and b owns 'src/x.py'" in findings[0].message
    # Ordered (directly or through another node), or owning different files: no warning.
    assert _lint(project, [_task("a", ownership=["src/**"]),
                           _task("b", ownership=["src/x.py"], deps=["a"])]) == []
    assert _lint(project, [_task("a", ownership=["src/**"]),
                           {"id": "mid", "type": "epic", "dependsOn": ["a"]},
                           _task("b", ownership=["src/x.py"], deps=["mid"])]) == []
    assert _lint(project, [_task("a", ownership=["src/*.py"]),
                           _task("b", ownership=["src/*.js"])]) == []


def test_overlap_is_one_line_per_task_naming_the_others(project: Path) -> None:
    _files(project, "docs/a.md")
    findings = _lint(project, [_task(f"t{i}", ownership=["docs/*.md"]) for i in range(8)])
    assert _codes(findings) == [("ownership_overlap", f"t{i}") for i in range(7)]
    assert "(and 6 more task(s): t2, t3, t4, t5, t6, ...)" in findings[0].message


def test_a_task_far_larger_than_the_others_warns(project: Path) -> None:
    _files(project, *[f"big/f{i}.py" for i in range(25)], "s1.py", "s2.py", "s3.py")
    specs = [_task("big", ownership=["big/**"]), _task("s1", ownership=["s1.py"]),
             _task("s2", ownership=["s2.py"]), _task("s3", ownership=["s3.py"])]
    findings = _lint(project, specs)
    assert _codes(findings) == [("task_too_large", "big")]
    assert "owns 25 existing files" in findings[0].message
    # 19 files is under the floor, however small the others are.
    (project / "big/f0.py").unlink()
    for i in range(1, 6):
        (project / f"big/f{i}.py").unlink()
    assert _lint(project, specs) == []


def test_more_tasks_than_the_setting_warns(project: Path) -> None:
    specs = [_task(f"t{i}") for i in range(3)]
    findings = _lint(project, specs, maxTasks=2)
    assert _codes(findings) == [("too_many_tasks", None)]
    assert _lint(project, specs, maxTasks=3) == []


def test_errors_come_before_warnings(project: Path) -> None:
    findings = _lint(project, [_task("a", ownership=["nowhere/*.py"]),
                               _task("b", verify=["true"])])
    assert [f.severity for f in findings] == [plan_findings.ERROR, plan_findings.WARNING]


def test_judge_refuses_errors_unless_a_person_accepted_them(project: Path) -> None:
    findings = _lint(project, [_task("a", verify=["true"], ownership=["nowhere/*.py"])])
    with pytest.raises(plan_findings.PlanRefused) as refused:
        plan_findings.judge(findings, accepted_by=None)
    assert "error: a: verify 'true' always passes" in str(refused.value)
    assert plan_findings.judge(findings, accepted_by={"by": "person"}) == findings
    warnings = [f for f in findings if f.severity == plan_findings.WARNING]
    assert plan_findings.judge(warnings, accepted_by=None) == warnings


def test_odd_input_never_raises(project: Path) -> None:
    specs: list[Any] = ["x", {"type": "task"}, {"id": "a", "type": "task", "verify": "true",
                                                 "ownership": [3], "dependsOn": None}]
    assert _lint(project, specs) == []


# ---------------------------------------------------------------- files and globs

def test_glob_regex_agrees_with_the_ownership_matcher() -> None:
    globs = ["src", "src/*.py", "src/**", "**/x.py", "a/**/b", "**", "", "a/[bc]*", "a/[!b]?",
             "a/[]x]", "a/[", "*.py", "src/a**b", "a/**/**/c", "./src/", "[a-c]/*"]
    paths = ["src", "src/x.py", "src/a/x.py", "x.py", "a/b", "a/q/r/b", "a/c", "a/bb", "a/]",
             "a/[", "a/x/c", "src/ab", "src/aXb", "b/y", "a/b/c", "srcx/x.py", ".hidden/x.py"]
    for glob, path in itertools.product(globs, paths):
        pattern = glob_regex(glob)
        mine = True if pattern is None else bool(pattern.fullmatch(path))
        assert mine == glob_matches(glob, path), (glob, path)


def test_the_walk_uses_git_and_skips_state_and_venvs(tmp_path: Path) -> None:
    _files(tmp_path, "a.py", "sub/b.py", ".venv/bin/x", "node_modules/m.js", ".clavain/s",
           "ignored.log", ".clavain-worktrees/w1/a.py")
    assert sorted(walk(tmp_path)) == ["a.py", "ignored.log", "sub/b.py"]
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    (tmp_path / ".gitignore").write_text("*.log\n.venv/\nnode_modules/\n")
    assert sorted(walk(tmp_path)) == [".gitignore", "a.py", "sub/b.py"]
    files = ProjectFiles.of(tmp_path)
    assert files.dir_exists("sub") and not files.dir_exists("nope")
    assert [files.files[i] for i in files.owned("sub")] == ["sub/b.py"]


def test_a_plan_of_thousands_of_tasks_is_linted(project: Path) -> None:
    _files(project, "src/mod_0.py", "docs/a.md")
    specs = [_task(f"task-{i}", verify=[f"python3 -m pytest -q tests/test_{i}.py"],
                   ownership=[f"src/mod_{i}.py", f"tests/test_{i}.py"],
                   deps=[f"task-{i - 1}"] if i % 3 else [])
             for i in range(3000)]
    specs[10]["ownership"].append("docs/*.md")
    specs[20]["ownership"].append("docs/a.md")
    findings = _lint(project, specs, maxTasks=5000)
    assert [(f.code, f.task) for f in findings if f.code != "ownership_matches_nothing"] == [
        ("ownership_overlap", "task-10")]


# ---------------------------------------------------------------- reading plans

def test_plan_nodes_reads_markdown_and_json() -> None:
    markdown = "# Plan\n\n```json\n{\"nodes\": [{\"id\": \"a\"}]}\n```\n"
    assert lint.plan_nodes(markdown, "plan.md") == [{"id": "a"}]
    assert lint.plan_nodes(json.dumps({"nodes": [{"id": "b"}]}), "g.json") == [{"id": "b"}]
    for text in ("# no block", "{\"nodes\": 3}", "{bad json", "```json\n{\"nodes\": [}\n```\n",
                 "```json\n{\"nodes\": []}\n```\n```json\n{\"nodes\": []}\n```\n"):
        with pytest.raises(ClavainError) as bad:
            lint.plan_nodes(text, "p.md")
        assert "\n" not in str(bad.value) and str(bad.value).startswith("p.md")


def _git_project(root: Path, *names: str) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    _files(root, *names)
    return root


def test_the_plans_the_examples_skills_and_tests_use_are_clean(tmp_path: Path) -> None:
    greeter = tmp_path / "greeter"
    shutil.copytree(REPO / "examples" / "greeter", greeter)
    subprocess.run(["git", "init", "-q", str(greeter)], check=True)
    text = (greeter / "plan.json").read_text()
    assert lint.lint_plan_text(text, "plan.json", project=greeter, config=DEFAULTS) == []
    # The skills' sample plans, in a project holding what they name (and a python).
    sample = _git_project(tmp_path / "sample", "src/app.py", "app/models/user.py",
                          "app/api/users.py", "migrations/0001.py", ".venv/bin/python")
    os.chmod(sample / ".venv/bin/python", 0o755)
    for name in ("skills/writing-plans/SKILL.md",
                 "skills/writing-plans/references/task-sizing.md"):
        for block in nodes_blocks((REPO / name).read_text()):
            found = lint.lint_specs(json.loads(block)["nodes"], project=sample,
                                    config=DEFAULTS)
            assert found == [], (name, found)
    # The plans the sprint tests record.
    from tests.cli.test_sprint_cli import PLAN

    e2e = (REPO / "tests/e2e/test_sprint_gates_e2e.py").read_text()
    for text in (PLAN, e2e):
        (block,) = nodes_blocks(text)
        found = lint.lint_specs(json.loads(block)["nodes"], project=sample, config=DEFAULTS)
        assert found == [], found
