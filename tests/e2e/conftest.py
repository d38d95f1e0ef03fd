"""End-to-end harness: the pinned real `claude` binary against a scripted model on 127.0.0.1.

Fixtures
--------
``claude_bin`` (session) -> Path
    The binary, found by ``clavain.claude_bin.find_claude`` (``CLAVAIN_CLAUDE_BIN``, else
    ``~/.cache/clavain/claude-code-<pinned>/node_modules/.bin/claude``, else PATH). Missing: the
    test is skipped with the reason, except with ``CI=true`` where it fails.

``scripted_model`` -> tests.e2e.scripted_model.ScriptedModel
    A started server (stopped when the test ends). ``runner.run`` sets its ``script``.

``claude_runner`` -> ClaudeRunner
    Owns one fresh ``home`` (``tmp_path/home``) and one ``project`` (``tmp_path/project``, a git
    repo with one commit, the cwd of every run). Several runs in one test share both, so a
    second session sees what the first installed.

    ``run(prompt, script, *, allowed_tools=("Bash", "Read"), plugin_dir=REPO, extra_args=(),
    env=None, timeout=180, output_format="json") -> ClaudeRun``
        Runs ``claude -p PROMPT --output-format json --allowedTools ... [--plugin-dir DIR]``.
        ``plugin_dir=None`` leaves ``--plugin-dir`` out (an installed plugin). ``env`` overrides
        the default environment; a value of ``None`` removes a variable. The default env is
        built from scratch (nothing of the developer's session leaks in): ``PATH`` (passed
        through), ``HOME``, ``ANTHROPIC_BASE_URL``, ``ANTHROPIC_API_KEY=sk-test``,
        ``CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1``, ``CLAVAIN_PYTHON=sys.executable`` (no venv
        bootstrap; unset it with ``env={"CLAVAIN_PYTHON": None}``), ``LANG``, ``TMPDIR``, and the
        machine's ``PIP_*``, proxy and CA-bundle variables.
        On timeout the whole process group is killed and the test fails with the output so far.

    ``cli(*args, env=None, timeout=120) -> subprocess.CompletedProcess``
        Any other ``claude`` subcommand (``plugin marketplace add``, ``plugin install``,
        ``plugin validate``) with the same HOME and env.

    ``env(overrides=None) -> dict``  the environment a run would get.

ClaudeRun (the result)
    ``returncode``, ``stdout``, ``stderr``, ``output`` (the parsed JSON result dict, or None when
    stdout was not JSON), ``result_text`` (``output["result"]``), ``requests`` (bodies of every
    ``/v1/messages`` request made during this run, in order), ``handled`` (those the script
    answered), ``recorded`` (every HTTP request of this run, any path), ``home``, ``project``,
    ``argv``, ``env``; ``tool_result(tool_use_id)`` the text the model got back for one of its
    tool calls; ``check()`` asserts a clean exit and no script errors, then returns self.

Writing a script
----------------
A script is ``(request: dict) -> list[block] | None``; build blocks with ``text()``,
``tool_use()`` (or ``bash()``, ``agent()``), and inspect the request with ``system_text``,
``user_texts``, ``last_user_text``, ``context_text`` (also the ``role: "system"`` messages,
where SessionStart context lands), ``tool_results``, ``assistant_turns``, ``is_subagent``,
``is_side_query``.
Return ``None`` for anything not yours: it gets a short harmless text reply. Example::

    def script(req):
        if assistant_turns(req) == 0:
            return [bash("clavain --version")]
        return [text("done")]

    run = claude_runner.run("check the version", script).check()
    assert "clavain 0.1.0" in tool_results(run.requests[-1])[0].content

Subagents (observed): an Agent tool call in ``-p`` mode launches the subagent in the background.
The subagent's requests offer only its own tools, carry the agent's markdown body in ``system``
(match it with ``is_subagent(req, "a phrase of the body")``) and the Agent ``prompt`` as the
last text of the first user message. Meanwhile the main conversation gets the async-launch tool
results and must answer (any text); each subagent's final text then reaches it inside a
``<task-notification>`` user turn (``all_text(req)`` sees it), and the run ends when the main
conversation answers that turn without a tool call. Example with two reviewers::

    def script(req):
        for name in ("alpha", "beta"):
            if is_subagent(req, f"reviewer {name}"):
                return [text(f"VERDICT: pass\\n{name} done")]
        if assistant_turns(req) == 0:
            return [agent("clavain:alpha", "review"), agent("clavain:beta", "review")]
        done = all_text(req)
        return [text("both in" if "alpha done" in done and "beta done" in done else "waiting")]

Observed with 2.1.330: a ``-p`` run makes no side queries (with or without
``CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC``) and never calls ``count_tokens``; every request
is the main conversation (or a subagent), streamed, on ``/v1/messages?beta=true``. SessionStart
``additionalContext`` arrives as a ``role: "system"`` message after the first user message
("SessionStart hook additional context: ...").
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.scripted_model import Recorded, Script, ScriptedModel, tool_results

REPO = Path(__file__).resolve().parents[2]
DEFAULT_TIMEOUT = 180.0
_PASSTHROUGH_PREFIXES = ("PIP_",)
_PASSTHROUGH = ("HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "no_proxy",
                "SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE")

if str(REPO / "lib") not in sys.path:
    sys.path.insert(0, str(REPO / "lib"))


def find_binary() -> Path | None:
    from clavain.claude_bin import find_claude

    return find_claude()


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


def require_claude() -> Path:
    """The binary, or skip (fail under CI=true) with a clear reason."""
    binary = find_binary()
    if binary is not None:
        return binary
    reason = ("the real claude binary was not found (set CLAVAIN_CLAUDE_BIN, or install "
              "@anthropic-ai/claude-code@2.1.330 into ~/.cache/clavain/claude-code-2.1.330 with "
              "npm); the e2e tier needs it")
    if in_ci():
        pytest.fail(f"CI=true: {reason}", pytrace=False)
    pytest.skip(reason)


def require_sandbox() -> None:
    """Claude Code's sandbox can run here, or skip (fail under CI=true) with the reason."""
    from clavain.confine import host_problem

    problem = host_problem()
    if problem is None:
        return
    reason = f"Claude Code's sandbox cannot run on this machine: {problem}"
    if in_ci():
        pytest.fail(f"CI=true: {reason} (.ci/run installs bubblewrap and socat)", pytrace=False)
    pytest.skip(reason)


@pytest.fixture(scope="session")
def claude_bin() -> Path:
    return require_claude()


@pytest.fixture
def scripted_model() -> Iterator[ScriptedModel]:
    model = ScriptedModel().start()
    try:
        yield model
    finally:
        model.stop()
    assert not model.live_threads(), f"scripted model threads still running: {model.live_threads()}"


@dataclass
class ClaudeRun:
    returncode: int
    stdout: str
    stderr: str
    output: dict[str, Any] | None
    recorded: list[Recorded]
    home: Path
    project: Path
    argv: list[str]
    env: dict[str, str]
    script_errors: list[str] = field(default_factory=list)

    @property
    def requests(self) -> list[dict[str, Any]]:
        """Bodies of the /v1/messages requests of this run, in arrival order."""
        return [r.body for r in self.recorded if r.is_messages and isinstance(r.body, dict)]

    @property
    def handled(self) -> list[dict[str, Any]]:
        """The /v1/messages requests the script answered (not defaulted)."""
        return [r.body for r in self.recorded if r.is_messages and r.handled]

    @property
    def result_text(self) -> str:
        return str((self.output or {}).get("result", ""))

    def tool_result(self, tool_use_id: str) -> str:
        """The text the model got back for its tool call `tool_use_id` (fails if never sent)."""
        for request in self.requests:
            for result in tool_results(request):
                if result.tool_use_id == tool_use_id:
                    return result.content
        raise AssertionError(f"no tool_result for {tool_use_id} reached the model\n{self}")

    def check(self) -> ClaudeRun:
        """Assert exit 0, a non-error JSON result and no exception in the script."""
        assert not self.script_errors, f"script raised: {self.script_errors}\n{self}"
        assert self.returncode == 0, f"claude exited {self.returncode}\n{self}"
        assert self.output is not None, f"stdout is not JSON\n{self}"
        assert not self.output.get("is_error"), f"claude reported an error\n{self}"
        return self

    def __str__(self) -> str:
        return (f"argv: {self.argv}\nreturncode: {self.returncode}\n"
                f"stdout: {self.stdout[-4000:]}\nstderr: {self.stderr[-4000:]}\n"
                f"requests: {len(self.requests)} (/v1/messages), script errors: "
                f"{self.script_errors}")


class ClaudeRunner:
    """Runs the real binary with a fresh HOME and project against the scripted model."""

    def __init__(self, binary: Path, model: ScriptedModel, root: Path):
        self.binary = binary
        self.model = model
        self.root = root
        self.home = root / "home"
        self.project = root / "project"
        self.home.mkdir(parents=True, exist_ok=True)
        self.project.mkdir(parents=True, exist_ok=True)
        _git_init(self.project, self.home)

    def env(self, overrides: Mapping[str, str | None] | None = None) -> dict[str, str]:
        env = {
            "PATH": os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin"),
            "HOME": str(self.home),
            "LANG": os.environ.get("LANG", "C.UTF-8"),
            "TMPDIR": os.environ.get("TMPDIR", "/tmp"),
            "ANTHROPIC_BASE_URL": self.model.base_url,
            "ANTHROPIC_API_KEY": "sk-test",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "CLAVAIN_PYTHON": sys.executable,
        }
        # Machine settings a real user has too (how pip reaches an index, proxies, CA bundles).
        env.update({name: value for name, value in os.environ.items()
                    if name.startswith(_PASSTHROUGH_PREFIXES) or name in _PASSTHROUGH})
        if any(name.lower().endswith("_proxy") for name in env):
            env["NO_PROXY"] = env["no_proxy"] = ",".join(
                filter(None, [env.get("NO_PROXY"), "127.0.0.1,localhost"]))
        for name, value in (overrides or {}).items():
            if value is None:
                env.pop(name, None)
            else:
                env[name] = value
        return env

    def run(self, prompt: str, script: Script | None, *,
            allowed_tools: Sequence[str] = ("Bash", "Read"),
            plugin_dir: Path | str | None = REPO, extra_args: Sequence[str] = (),
            env: Mapping[str, str | None] | None = None, timeout: float = DEFAULT_TIMEOUT,
            output_format: str = "json") -> ClaudeRun:
        argv = [str(self.binary), "-p", prompt, "--output-format", output_format]
        if allowed_tools:
            argv += ["--allowedTools", " ".join(allowed_tools)]
        if plugin_dir is not None:
            argv += ["--plugin-dir", str(plugin_dir)]
        argv += list(extra_args)
        self.model.script = script
        first = len(self.model.requests)
        errors_before = len(self.model.errors)
        full_env = self.env(env)
        code, out, err = _run_group(argv, full_env, self.project, timeout)
        try:
            output = json.loads(out) if output_format == "json" else None
        except ValueError:
            output = None
        if not isinstance(output, dict):
            output = None
        return ClaudeRun(code, out, err, output, list(self.model.requests[first:]), self.home,
                         self.project, argv, full_env, list(self.model.errors[errors_before:]))

    def cli(self, *args: str, env: Mapping[str, str | None] | None = None,
            timeout: float = 120.0) -> subprocess.CompletedProcess[str]:
        argv = [str(self.binary), *args]
        code, out, err = _run_group(argv, self.env(env), self.project, timeout)
        return subprocess.CompletedProcess(argv, code, out, err)


def _git_init(project: Path, home: Path) -> None:
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home),
           "GIT_AUTHOR_NAME": "e2e", "GIT_AUTHOR_EMAIL": "e2e@example.invalid",
           "GIT_COMMITTER_NAME": "e2e", "GIT_COMMITTER_EMAIL": "e2e@example.invalid"}
    if (project / ".git").exists():
        return
    (project / "README.md").write_text("# e2e project\n", encoding="utf-8")
    for argv in (["git", "init", "-q", "-b", "main"], ["git", "add", "README.md"],
                 ["git", "commit", "-q", "-m", "initial"]):
        subprocess.run(argv, cwd=project, env=env, check=True, capture_output=True)


def _run_group(argv: list[str], env: dict[str, str], cwd: Path,
               timeout: float) -> tuple[int, str, str]:
    """Run argv in its own process group; on timeout kill the group and fail the test."""
    process = subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               start_new_session=True)
    try:
        out, err = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        out, err = process.communicate()
        pytest.fail(f"timed out after {timeout:.0f}s: {argv}\nstdout: {out[-3000:]}\n"
                    f"stderr: {err[-3000:]}", pytrace=False)
    return process.returncode, out, err


@pytest.fixture
def claude_runner(claude_bin: Path, scripted_model: ScriptedModel, tmp_path: Path):
    return ClaudeRunner(claude_bin, scripted_model, tmp_path)
