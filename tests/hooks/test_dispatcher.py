"""The dispatcher never lets a failure reach the host: exit 0, nothing printed, one log line."""

import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

import clavain.hooks
from clavain.hooks import EVENTS, module_name

from .conftest import payload_for, start_sprint


@pytest.mark.parametrize(
    ("event", "stdin", "logged"),
    [
        ("SessionStart", "", "ValueError: stdin is not a JSON object"),
        ("SessionStart", "{not json", "BadText: stdin: not valid JSON"),
        ("SessionStart", "[" * 100_000, "BadText: stdin: JSON nested too deeply"),
        ("SessionStart", "[1, 2]", "ValueError: stdin is not a JSON object (list)"),
        ("NoSuchEvent", "{}", "LookupError: unknown hook event 'NoSuchEvent'"),
        ("", "{}", "LookupError: unknown hook event ''"),
    ],
)
def test_bad_input_is_logged_not_raised(run_hook, tmp_path: Path, event, stdin, logged) -> None:
    args = (event,) if event else ()
    result = run_hook(*args, stdin) if args else run_hook("", stdin)
    assert result.returncode == 0
    assert result.stdout == ""
    assert result.stderr == ""
    log = (tmp_path / ".clavain" / "logs" / "hooks.log").read_text()
    assert len(log.splitlines()) == 1
    assert logged in log


def test_handler_exception_is_logged(run_hook, tmp_path: Path) -> None:
    """A handler that blows up (here: CLAUDE_ENV_FILE points into a missing folder)."""
    result = run_hook("SessionStart", payload_for("SessionStart", tmp_path),
                      env={"CLAUDE_ENV_FILE": str(tmp_path / "missing" / "env.sh"),
                           "CLAUDE_PLUGIN_ROOT": str(tmp_path / "elsewhere")})
    assert result.returncode == 0 and result.stdout == "" and result.stderr == ""
    assert "FileNotFoundError" in (tmp_path / ".clavain" / "logs" / "hooks.log").read_text()


def test_log_goes_to_payload_cwd_project(run_hook, tmp_path: Path) -> None:
    project = tmp_path / "proj"
    project.mkdir()
    run_hook("NoSuchEvent", {"cwd": str(project)}, env={"CLAUDE_PROJECT_DIR": str(project)})
    assert (project / ".clavain" / "logs" / "hooks.log").exists()


def test_every_registered_event_has_a_handler_module() -> None:
    import importlib

    for event in EVENTS:
        module = importlib.import_module(f"clavain.hooks.{module_name(event)}")
        assert callable(module.handle)


def test_hooks_json_registers_exactly_the_dispatched_events() -> None:
    hooks = json.loads((Path(__file__).parents[2] / "hooks" / "hooks.json").read_text())["hooks"]
    assert set(hooks) == set(EVENTS)
    for event, groups in hooks.items():
        for group in groups:
            for hook in group["hooks"]:
                # `bash` by name, the launcher as its argument: the host spawns bash itself
                # (exec form, no shell), sparing the `/usr/bin/env` hop of the launcher's
                # shebang on every tool call (~0.6 ms, benchmarks/hook_latency.py).
                assert hook["command"] == "bash"
                assert hook["args"] == ["${CLAUDE_PLUGIN_ROOT}/bin/clavain-hook", event]


def test_module_names() -> None:
    assert module_name("SubagentStop") == "subagent_stop"
    assert module_name("PreToolUse") == "pre_tool_use"
    assert module_name("SessionStart") == "session_start"


def test_trace_records_interpreter(run_hook, tmp_path: Path) -> None:
    trace = tmp_path / "trace.jsonl"
    run_hook("SessionStart", payload_for("SessionStart", tmp_path),
             env={"CLAVAIN_HOOK_TRACE": str(trace)})
    record = json.loads(trace.read_text().splitlines()[0])
    assert record["event"] == "SessionStart" and record["python"] and record["ms"] >= 0


def test_project_files_cannot_shadow_the_standard_library(run_hook, run_cli_in) -> None:
    """A project with its own json.py: the hook and the CLI still run on the real stdlib."""
    project = run_cli_in
    (project / "json.py").write_text("raise SystemExit('shadowed json imported')\n")
    (project / "clavain").mkdir()
    (project / "clavain" / "__init__.py").write_text("raise SystemExit('shadowed clavain')\n")
    start_sprint(project)
    result = run_hook("SessionStart", payload_for("SessionStart", project), cwd=project)
    assert json.loads(result.stdout)["hookSpecificOutput"]["hookEventName"] == "SessionStart"
    import subprocess
    import sys

    cli = subprocess.run([str(Path(__file__).parents[2] / "bin" / "clavain"), "--version"],
                         cwd=project, capture_output=True, text=True,
                         env={"PATH": "/usr/bin:/bin", "CLAVAIN_PYTHON": sys.executable})
    assert cli.returncode == 0 and cli.stdout.startswith("clavain "), cli.stderr


@pytest.fixture
def run_cli_in(tmp_path: Path) -> Path:
    project = tmp_path / "shadowed"
    project.mkdir()
    return project


def test_no_python_at_all_still_exits_0(tmp_path: Path) -> None:
    """No interpreter anywhere: the launcher fails open with exit 0 and prints nothing."""
    import subprocess

    hook = Path(__file__).parents[2] / "bin" / "clavain-hook"
    result = subprocess.run(["/bin/bash", str(hook), "SessionStart"], input="{}",
                            capture_output=True, text=True, cwd=tmp_path,
                            env={"PATH": str(tmp_path / "empty")})
    assert result.returncode == 0
    assert result.stdout == ""


def test_a_logged_failure_first_does_not_stop_later_init(run_hook, tmp_path: Path) -> None:
    """hooks.log may create `.clavain/logs/` before anything else; the first hook that needs the
    state folder must still set it up (and git-ignore it)."""
    from clavain.paths import StatePaths
    from clavain.project import ensure_state

    (tmp_path / ".git").mkdir()
    run_hook("NoSuchEvent", {"cwd": str(tmp_path)})
    assert (tmp_path / ".clavain" / "logs").is_dir()
    ensure_state(StatePaths(tmp_path / ".clavain"))
    assert (tmp_path / ".clavain" / "verdicts").is_dir()
    assert "/.clavain/verdicts/" in (tmp_path / ".gitignore").read_text()


def _log_lines(project: Path) -> list[str]:
    log = project / ".clavain" / "logs" / "hooks.log"
    return log.read_text().splitlines() if log.exists() else []


@pytest.mark.parametrize("raised", [SystemExit(3), KeyboardInterrupt(), GeneratorExit()])
def test_a_handler_raising_a_base_exception_never_reaches_the_host(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, raised: BaseException) -> None:
    """SystemExit/KeyboardInterrupt are not `Exception`s: a dispatcher catching only those
    would let the handler's exit code (or a traceback) reach the host."""
    from clavain.hooks import subagent_stop

    def explode(payload: dict) -> None:
        raise raised

    monkeypatch.setattr(subagent_stop, "handle", explode)
    (tmp_path / ".git").mkdir()
    stdin = io.TextIOWrapper(io.BytesIO(json.dumps({"cwd": str(tmp_path)}).encode()))
    monkeypatch.setattr(sys, "stdin", stdin)
    assert clavain.hooks.main(["SubagentStop"]) == 0
    [line] = _log_lines(tmp_path)
    assert f"SubagentStop {type(raised).__name__}" in line


def test_stdin_with_a_byte_order_mark_is_read(run_hook, tmp_path: Path) -> None:
    start_sprint(tmp_path)
    result = run_hook("SessionStart", "\ufeff" + json.dumps(payload_for("SessionStart", tmp_path)))
    assert json.loads(result.stdout)["hookSpecificOutput"]["hookEventName"] == "SessionStart"
    assert _log_lines(tmp_path) == []


def test_stdin_that_is_not_utf8_is_one_log_line(tmp_path: Path) -> None:
    from .conftest import REPO

    result = subprocess.run([str(REPO / "bin" / "clavain-hook"), "SessionStart"],
                            input=b'{"cwd": "\xff"}', capture_output=True, cwd=tmp_path,
                            env={"PATH": "/usr/bin:/bin", "CLAVAIN_PYTHON": sys.executable,
                                 "CLAUDE_PROJECT_DIR": str(tmp_path), "CLAVAIN_BOOTSTRAP": "0"})
    assert (result.returncode, result.stdout, result.stderr) == (0, b"", b"")
    [line] = _log_lines(tmp_path)
    assert "BadText: stdin: not UTF-8 text" in line


@pytest.mark.parametrize("cwd", [5, ["a"], None, "x" * 5000, "relative/missing", "file",
                                 "missing"])
def test_an_unusable_payload_cwd_logs_to_the_project_dir(run_hook, tmp_path: Path,
                                                         cwd: object) -> None:
    """The log goes to CLAUDE_PROJECT_DIR when the payload's cwd names no existing folder; a
    missing folder named there is never created."""
    project = tmp_path / "project"
    project.mkdir()
    (tmp_path / "file").write_text("a file, not a folder")
    named = str(tmp_path / cwd) if cwd in ("file", "missing") else cwd
    result = run_hook("NoSuchEvent", {"cwd": named}, cwd=project)
    assert (result.returncode, result.stdout, result.stderr) == (0, "", "")
    assert len(_log_lines(project)) == 1
    assert not (tmp_path / "missing").exists() and not (project / "relative").exists()


def test_hooks_log_never_follows_a_planted_symlink(run_hook, tmp_path: Path) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("keep me\n")
    project = tmp_path / "project"
    (project / ".clavain" / "logs").mkdir(parents=True)
    (project / ".clavain" / "logs" / "hooks.log").symlink_to(outside)
    result = run_hook("NoSuchEvent", {"cwd": str(project)}, cwd=project)
    assert (result.returncode, result.stdout, result.stderr) == (0, "", "")
    assert outside.read_text() == "keep me\n"


@pytest.mark.parametrize(("event", "collector"), [("PreToolUse", False),
                                                   ("SubagentStop", False), ("Stop", True)])
def test_a_hook_process_runs_without_the_cycle_collector(tmp_path: Path, event: str,
                                                         collector: bool) -> None:
    """`main_and_exit` (the hook process, which ends with `os._exit`) turns the cycle
    collector off before the handler runs, except for Stop, which may run a loop's checks for
    minutes."""
    lib = str(Path(__file__).parents[2] / "lib")
    probe = ("import sys; sys.path.insert(0, sys.argv.pop(1))\n"
             "import gc\n"
             "import clavain.hooks as hooks\n"
             "print('before', gc.isenabled(), flush=True)\n"
             "hooks.main = lambda: print('during', gc.isenabled(), flush=True) or 0\n"
             "hooks.main_and_exit()\n"
             "print('never here', flush=True)\n")
    done = subprocess.run([sys.executable, "-I", "-S", "-c", probe, lib, event], input="{}",
                          capture_output=True, text=True, cwd=tmp_path, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[:2] == ["before True", f"during {collector}"]
    assert "never here" not in done.stdout
