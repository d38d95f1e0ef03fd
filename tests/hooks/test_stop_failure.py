"""StopFailure through the real `bin/clavain-hook`: a turn the host ended on a rate limit is
recorded from the structured `error` (never `error_details`, the message text); any other
error, a payload outside a project and a garbage payload record nothing and never fail."""

from __future__ import annotations

import json
from pathlib import Path

from tests.hooks.conftest import clavain_project


def stop_failure(project: Path, **fields: object) -> dict:
    # The shape of 2.1.330's StopFailure input (hook_event_name, error, error_details?,
    # last_assistant_message?, plus the common fields).
    return {"session_id": "s-stop", "transcript_path": str(project / "t.jsonl"),
            "cwd": str(project), "hook_event_name": "StopFailure", "error": "rate_limit",
            "error_details": "429 {\"type\":\"error\",\"error\":{\"type\":\"rate_limit_error\"}}",
            "last_assistant_message": "API Error: You've hit your 5-hour limit", **fields}


def window_file(project: Path) -> Path:
    return project / ".clavain" / "window.json"


def test_a_rate_limit_stop_is_recorded(tmp_path: Path, run_hook) -> None:
    project = clavain_project(tmp_path)
    done = run_hook("StopFailure", stop_failure(project), cwd=project)
    assert done.returncode == 0 and done.stdout == "" and done.stderr == ""
    stop = json.loads(window_file(project).read_text())["stop"]
    assert stop["error"] == "rate_limit" and stop["session_id"] == "s-stop"
    assert isinstance(stop["seen_at"], float)
    assert not (project / ".clavain" / "logs" / "hooks.log").exists()


def test_other_errors_and_text_alone_record_nothing(tmp_path: Path, run_hook) -> None:
    project = clavain_project(tmp_path)
    for error in ("overloaded", "server_error", "unknown", None, ["rate_limit"]):
        done = run_hook("StopFailure", stop_failure(project, error=error), cwd=project)
        assert done.returncode == 0 and done.stdout == ""
    # The words "rate limit" in the message text are not the structured field.
    run_hook("StopFailure", stop_failure(project, error="unknown",
                                         error_details="rate_limit rate limit 429"), cwd=project)
    assert not window_file(project).exists()


def test_outside_a_project_and_garbage(tmp_path: Path, run_hook) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    done = run_hook("StopFailure", stop_failure(outside), cwd=outside,
                    env={"CLAUDE_PROJECT_DIR": str(outside)})
    assert done.returncode == 0 and not (outside / ".clavain").exists()
    project = clavain_project(tmp_path)
    for garbage in ("not json", "[1]", '{"error": "rate_limit", "cwd": 5}'):
        done = run_hook("StopFailure", garbage, cwd=project)
        assert done.returncode == 0 and done.stdout == ""


def test_a_state_folder_that_cannot_be_written_is_logged_not_raised(tmp_path: Path,
                                                                    run_hook) -> None:
    project = clavain_project(tmp_path)
    window_file(project).mkdir()  # a folder where the file goes: the rename fails
    done = run_hook("StopFailure", stop_failure(project), cwd=project)
    assert done.returncode == 0 and done.stdout == ""
    log = (project / ".clavain" / "logs" / "hooks.log").read_text()
    assert "StopFailure" in log


def test_hooks_json_runs_it_only_for_rate_limits() -> None:
    hooks = json.loads((Path(__file__).parents[2] / "hooks" / "hooks.json").read_text())
    (entry,) = hooks["hooks"]["StopFailure"]
    assert entry["matcher"] == "rate_limit"  # the host matches StopFailure on its `error`
    assert entry["hooks"][0]["args"] == ["${CLAUDE_PLUGIN_ROOT}/bin/clavain-hook", "StopFailure"]
