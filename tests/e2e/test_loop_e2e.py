"""`clavain loop` with the real `claude -p` as its runner, against the scripted model: every
iteration is a fresh claude process that gets the loop's prompt on stdin, and the scripted model
decides what to do from that prompt alone (which iteration, which items, the exit prompt).

- three iterations without progress open the circuit breaker (exit 3);
- EXIT_SIGNAL true while a check still fails never ends the loop (the dual gate);
- a check made to pass, then EXIT_SIGNAL true on the exit prompt, ends it (exit 0);
- a long unattended run (the seed's success metric) completes;
- a usage/rate limit (HTTP 429, the binary gives up after its retries) is waited out and not
  counted against the breaker.
"""

from __future__ import annotations

import io
import json
import re
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from tests.e2e.conftest import REPO, ClaudeRunner
from tests.e2e.scripted_model import (
    ScriptedModel,
    assistant_turns,
    bash,
    text,
    tool_results,
    user_texts,
)
from tests.supervisor.kit import loop_until_it_waits

pytestmark = pytest.mark.e2e

CONFIG = {"checks": [{"id": "greeting", "cmd": "grep -qx hello greeting.txt",
                      "priority": "high", "description": "greeting.txt says hello"}],
          "supervisor": {"claude": {"maxTurns": 6, "allowedTools": ["Bash", "Read", "Write"]}}}
PROMPT_HEAD = re.compile(r"# Clavain loop(?: — iteration (\d+))?")
# Iterations of the long run: the seed's success metric. 50 + 1 took ~29 s on a 2-core machine
# (about 0.6 s per fresh claude process with two model requests).
LONG_RUN = 50


# ---------------------------------------------------------------------------------------------
# A scripted model that can answer HTTP 429 (a subclass, so the shared harness stays as it is)


class LimitingModel(ScriptedModel):
    """ScriptedModel plus `limit`: `(request) -> message | None`; a message answers that
    /v1/messages request with HTTP 429 and an Anthropic `rate_limit_error` body."""

    def __init__(self) -> None:
        super().__init__()
        self.limit: Callable[[dict[str, Any]], str | None] | None = None
        self.limited = 0

    def _handle(self, handler: BaseHTTPRequestHandler, method: str) -> None:
        limit = self.limit
        if limit is None or method != "POST" or \
                urlsplit(handler.path).path.rstrip("/") != "/v1/messages":
            return super()._handle(handler, method)
        length = int(handler.headers.get("Content-Length") or 0)
        raw = handler.rfile.read(length) if length else b""
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = None
        message = limit(body) if isinstance(body, dict) else None
        if message is None:
            handler.rfile = io.BytesIO(raw)  # the base handler reads the body again
            return super()._handle(handler, method)
        with self._lock:
            self.limited += 1
        payload = json.dumps({"type": "error", "error": {"type": "rate_limit_error",
                                                         "message": message}}).encode()
        self._send(handler, 429, payload, "application/json")
        return None


@pytest.fixture
def scripted_model() -> Iterator[LimitingModel]:
    model = LimitingModel().start()
    try:
        yield model
    finally:
        model.stop()
    assert not model.live_threads(), f"scripted model threads still running: {model.live_threads()}"


# ---------------------------------------------------------------------------------------------
# Helpers


def status_block(*, task: str = "none", status: str = "IN_PROGRESS", files: int = 0,
                 exit_signal: bool = False, next_step: str = "keep going") -> str:
    return "\n".join(["---CLAVAIN_STATUS---", f"TASK_COMPLETED: {task}", f"STATUS: {status}",
                      f"FILES_MODIFIED: {files}", "TESTS_STATUS: NOT_RUN",
                      f"EXIT_SIGNAL: {'true' if exit_signal else 'false'}",
                      f"NEXT_RECOMMENDATION: {next_step}", "---END_CLAVAIN_STATUS---"])


def loop_prompt(request: dict[str, Any]) -> str:
    """The loop's prompt (the claude process's stdin), or '' for any other request."""
    for chunk in user_texts(request):
        if PROMPT_HEAD.search(chunk):
            return chunk
    return ""


def iteration_of(prompt: str) -> int | None:
    found = PROMPT_HEAD.search(prompt)
    return int(found.group(1)) if found and found.group(1) else None


def is_exit_prompt(prompt: str) -> bool:
    return "STATUS: ALL_PASS" in prompt


class Recorder:
    """Wraps a script: keeps each fresh session's prompt (the first request of a claude run)."""

    def __init__(self, script: Callable[[dict[str, Any], str], Any]) -> None:
        self.script = script
        self.prompts: list[str] = []
        self.requests = 0
        self._lock = threading.Lock()

    def __call__(self, request: dict[str, Any]) -> Any:
        prompt = loop_prompt(request)
        with self._lock:
            self.requests += 1
            if prompt and assistant_turns(request) == 0:
                self.prompts.append(prompt)
        return self.script(request, prompt) if prompt else None


def _clavain(env: dict[str, str], cwd: Path, *args: str,
             timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(REPO / "bin" / "clavain"), *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=timeout)


def _project(runner: ClaudeRunner, claude_bin: Path,
             config: dict[str, Any] | None = None) -> dict[str, str]:
    project = runner.project
    env = runner.env({"CLAVAIN_CLAUDE_BIN": str(claude_bin), "CLAVAIN_PYTHON": sys.executable,
                      "CLAVAIN_PROJECT_DIR": str(project)})
    init = _clavain(env, project, "init", "--json")
    assert init.returncode == 0, init.stderr
    (project / ".clavain" / "config.json").write_text(json.dumps(config or CONFIG))
    return env


class LoopRun:
    def __init__(self, done: subprocess.CompletedProcess[str], seconds: float,
                 recorder: Recorder, model: ScriptedModel) -> None:
        self.returncode, self.stdout, self.stderr = done.returncode, done.stdout, done.stderr
        self.seconds = seconds
        self.recorder = recorder
        self.model = model
        try:
            self.result: dict[str, Any] = json.loads(done.stdout)
        except ValueError:
            self.result = {}

    @property
    def run_id(self) -> str:
        return self.result["run_id"]

    def __str__(self) -> str:
        return (f"exit {self.returncode} after {self.seconds:.1f}s\n"
                f"stdout: {self.stdout[-5000:]}\nstderr: {self.stderr[-5000:]}\n"
                f"sessions: {len(self.recorder.prompts)}, requests: {self.recorder.requests}, "
                f"script errors: {self.model.errors}")


def run_loop(runner: ClaudeRunner, env: dict[str, str], script: Recorder, *args: str,
             timeout: float = 300) -> LoopRun:
    runner.model.script = script
    began = time.monotonic()
    done = _clavain(env, runner.project, "loop", "--json", *args, timeout=timeout)
    run = LoopRun(done, time.monotonic() - began, script, runner.model)
    print(f"clavain loop {' '.join(args)}: exit {run.returncode}, "
          f"{len(script.prompts)} session(s), {script.requests} request(s), "
          f"{run.seconds:.1f}s wall")
    return run


def summary(env: dict[str, str], project: Path, run_id: str) -> dict[str, Any]:
    shown = _clavain(env, project, "loop", "summary", run_id, "--json")
    assert shown.returncode == 0, shown.stderr
    return json.loads(shown.stdout)


def iteration_records(project: Path, run_id: str) -> list[dict[str, Any]]:
    folder = project / ".clavain" / "runs" / run_id
    found = sorted(folder.glob("iteration-*.json"),
                   key=lambda path: int(path.stem.split("-")[1]))
    return [json.loads(path.read_text()) for path in found]


# ---------------------------------------------------------------------------------------------
# Scenarios


def test_three_iterations_without_progress_open_the_breaker(
        claude_runner: ClaudeRunner, claude_bin: Path) -> None:
    env = _project(claude_runner, claude_bin)
    script = Recorder(lambda request, prompt: [text("Looked around; nothing done yet.\n\n"
                                                    + status_block())])
    run = run_loop(claude_runner, env, script)

    assert run.returncode == 3, run
    assert run.result["status"] == "breaker_open", run
    assert not claude_runner.model.errors, run
    assert len(script.prompts) == 3, run
    assert [iteration_of(p) for p in script.prompts] == [1, 2, 3], run
    assert all("check:greeting" in p for p in script.prompts), run
    records = iteration_records(claude_runner.project, run.run_id)
    assert [r["progress"]["progress"] for r in records] == [False] * 3, records
    assert [r["status"]["status"] for r in records] == ["IN_PROGRESS"] * 3, records
    shown = summary(env, claude_runner.project, run.run_id)
    assert shown["iterations"] == 3, shown
    assert shown["breaker_trips"] == 1, shown
    assert shown["breaker_state"] == "OPEN", shown
    assert shown["exit_code"] == 3, shown
    assert not (claude_runner.project / "greeting.txt").exists()


def test_exit_signal_while_a_check_fails_does_not_end_the_loop(
        claude_runner: ClaudeRunner, claude_bin: Path) -> None:
    env = _project(claude_runner, claude_bin)
    claim = status_block(task="check:greeting", status="COMPLETE", exit_signal=True,
                         next_step="nothing left")
    script = Recorder(lambda request, prompt: [text("All done, I believe.\n\n" + claim)])
    run = run_loop(claude_runner, env, script)

    assert run.returncode != 0, run
    assert run.returncode == 3, run  # the breaker: the claims moved nothing
    assert run.result["status"] == "breaker_open", run
    assert not claude_runner.model.errors, run
    assert len(script.prompts) == 3, run
    # Every prompt still offered the failing check; none was the exit prompt.
    for prompt in script.prompts:
        assert "check:greeting" in prompt, prompt
        assert not is_exit_prompt(prompt), prompt
    records = iteration_records(claude_runner.project, run.run_id)
    assert all(r["status"]["exit_signal"] for r in records), records
    assert all(r["actionable"] for r in records), records


def test_a_passing_check_and_exit_signal_end_the_loop(
        claude_runner: ClaudeRunner, claude_bin: Path) -> None:
    env = _project(claude_runner, claude_bin)

    def script(request: dict[str, Any], prompt: str):
        if is_exit_prompt(prompt):
            return [text("Agreed, nothing is left.\n\n"
                         + status_block(status="COMPLETE", exit_signal=True,
                                        next_step="none"))]
        if assistant_turns(request) == 0:
            return [bash("printf 'hello\\n' > greeting.txt", "Write the greeting")]
        if tool_results(request):
            return [text("Wrote greeting.txt.\n\n"
                         + status_block(task="check:greeting", status="COMPLETE", files=1,
                                        next_step="confirm exit"))]
        return None

    recorder = Recorder(script)
    run = run_loop(claude_runner, env, recorder)

    assert run.returncode == 0, run
    assert run.result["status"] == "done", run
    assert not claude_runner.model.errors, run
    assert (claude_runner.project / "greeting.txt").read_text() == "hello\n"
    assert len(recorder.prompts) == 2, run
    assert "check:greeting" in recorder.prompts[0] and not is_exit_prompt(recorder.prompts[0])
    assert is_exit_prompt(recorder.prompts[1]), recorder.prompts[1]
    assert "ALL_PASS" in recorder.prompts[1]
    assert recorder.requests == 3, run  # tool call + its answer, then the exit confirmation
    shown = summary(env, claude_runner.project, run.run_id)
    assert shown["iterations"] == 2, shown
    assert shown["confirmed_done"] == ["check:greeting"], shown
    assert shown["claimed_not_confirmed"] == [], shown
    assert shown["tokens"] > 0, shown
    assert shown["breaker_trips"] == 0, shown
    records = iteration_records(claude_runner.project, run.run_id)
    assert records[0]["progress"]["progress"] is True, records[0]
    assert records[1]["actionable"] is False, records[1]
    assert all(r["tokens"] > 0 for r in records), records


def test_a_long_run_completes_without_a_person(
        claude_runner: ClaudeRunner, claude_bin: Path) -> None:
    # The person allows more calls an hour in the config (a higher --rate is theirs to type).
    env = _project(claude_runner, claude_bin, {**CONFIG, "loop": {"callsPerHour": 1000}})

    def script(request: dict[str, Any], prompt: str):
        if is_exit_prompt(prompt):
            return [text(status_block(status="COMPLETE", exit_signal=True, next_step="none"))]
        number = iteration_of(prompt)
        last = number == LONG_RUN
        if assistant_turns(request) == 0:
            command = f"echo 'step {number}' >> progress.txt"
            if last:
                command += " && printf 'hello\\n' > greeting.txt"
            return [bash(command, f"Step {number}")]
        if tool_results(request):
            return [text(status_block(task="check:greeting" if last else "none",
                                      status="COMPLETE" if last else "IN_PROGRESS", files=1,
                                      next_step="next step"))]
        return None

    recorder = Recorder(script)
    run = run_loop(claude_runner, env, recorder, "--max-iterations", str(LONG_RUN + 10),
                   timeout=30 * LONG_RUN + 120)
    print(f"long run: {LONG_RUN} + 1 iterations in {run.seconds:.1f}s "
          f"({run.seconds / (LONG_RUN + 1):.2f}s each)")

    assert run.returncode == 0, run
    assert run.result["status"] == "done", run
    assert not claude_runner.model.errors, run
    assert len(recorder.prompts) == LONG_RUN + 1, run
    assert [iteration_of(p) for p in recorder.prompts] == list(range(1, LONG_RUN + 2))
    assert is_exit_prompt(recorder.prompts[-1])
    lines = (claude_runner.project / "progress.txt").read_text().splitlines()
    assert lines == [f"step {n}" for n in range(1, LONG_RUN + 1)], lines
    shown = summary(env, claude_runner.project, run.run_id)
    assert shown["iterations"] == LONG_RUN + 1, shown
    assert shown["confirmed_done"] == ["check:greeting"], shown
    assert shown["claimed_not_confirmed"] == [], shown
    assert shown["breaker_trips"] == 0, shown
    assert shown["tokens"] > 0, shown


LIMIT_MESSAGE = ("Number of request tokens has exceeded your per-minute rate limit; "
                 "try again in 2 seconds")
LIMITED_RUNS = 2  # as many as this test's breaker noProgress: counted, they would open it
REQUESTS_PER_RUN = 3  # the first request and the 2 retries the loop allows claude


def test_a_rate_limit_is_waited_out_not_counted(
        claude_runner: ClaudeRunner, claude_bin: Path, scripted_model: LimitingModel) -> None:
    config = {**CONFIG, "loop": {"breaker": {"noProgress": LIMITED_RUNS}}}
    env = _project(claude_runner, claude_bin, config)
    answered = {"loop requests": 0}

    def limit(request: dict[str, Any]) -> str | None:
        if iteration_of(loop_prompt(request)) is None:
            return None
        answered["loop requests"] += 1
        return LIMIT_MESSAGE if answered["loop requests"] <= LIMITED_RUNS * REQUESTS_PER_RUN \
            else None

    def script(request: dict[str, Any], prompt: str):
        if is_exit_prompt(prompt):
            return [text(status_block(status="COMPLETE", exit_signal=True, next_step="none"))]
        if assistant_turns(request) == 0:
            return [bash("printf 'hello\\n' > greeting.txt", "Write the greeting")]
        if tool_results(request):
            return [text(status_block(task="check:greeting", status="COMPLETE", files=1,
                                      next_step="confirm exit"))]
        return None

    scripted_model.limit = limit
    recorder = Recorder(script)
    run = run_loop(claude_runner, env, recorder)
    print(f"429 answers: {scripted_model.limited}; {run.seconds:.1f}s")

    assert run.returncode == 0, run
    assert run.result["status"] == "done", run
    assert not claude_runner.model.errors, run
    # Each limited claude run got 429 on its first request and on both retries the loop allows
    # it (CLAUDE_CODE_MAX_RETRIES=2), then gave up; the loop waited at least its floor (5 s,
    # then 10 s: a limit in a row doubles it) and ran the same iteration again.
    assert scripted_model.limited == REQUESTS_PER_RUN * LIMITED_RUNS, run
    assert run.seconds >= 15, run
    # A limited attempt is not an iteration: the work after the limits was still iteration 1.
    assert [iteration_of(p) for p in recorder.prompts] == [1, 2], recorder.prompts
    records = iteration_records(claude_runner.project, run.run_id)
    assert len(records) == 2, records  # the work, then the confirmation
    assert records[0]["progress"]["progress"] is True and records[0]["breaker"] == "CLOSED"
    assert records[-1]["actionable"] is False
    shown = summary(env, claude_runner.project, run.run_id)
    assert shown["breaker_trips"] == 0, shown
    assert shown["confirmed_done"] == ["check:greeting"], shown
    assert shown["claimed_not_confirmed"] == [], shown
    assert "waiting" in run.stderr, run


def test_three_restarts_share_one_calls_per_hour_window(
        claude_runner: ClaudeRunner, claude_bin: Path) -> None:
    """`clavain loop --rate 2` three times in one project: the first run makes its two calls,
    the next two runs (new run ids) find the project's window full and wait; interrupted, they
    made no call. Two fresh claude sessions in all, not six."""
    env = _project(claude_runner, claude_bin)

    def script(request: dict[str, Any], prompt: str):
        number = iteration_of(prompt)
        if assistant_turns(request) == 0:
            return [bash(f"echo 'step {number}' >> progress.txt", f"Step {number}")]
        if tool_results(request):
            return [text(status_block(files=1, next_step="next step"))]
        return None

    recorder = Recorder(script)
    first = run_loop(claude_runner, env, recorder, "--rate", "2", "--max-iterations", "2")
    assert first.returncode == 4, first
    assert len(recorder.prompts) == 2, first
    for _ in range(2):
        code, err = loop_until_it_waits(["--rate", "2", "--max-iterations", "2"],
                                        cwd=claude_runner.project, env=env)
        assert code == 130, err
    assert len(recorder.prompts) == 2, recorder.prompts
    lines = (claude_runner.project / "progress.txt").read_text().splitlines()
    assert lines == ["step 1", "step 2"], lines
