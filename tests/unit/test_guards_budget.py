"""The PreToolUse decision on a real SQLite file: counting, denial (never counted), the 80 %
warning once, loop guards, runs kept apart, parallel processes losing no count, and a property
test against a naive model of the counters."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clavain.guards import budget, failures, policy
from clavain.guards.commands import compile_patterns
from clavain.store import db

PATTERNS = compile_patterns([])
LIB = Path(__file__).resolve().parents[2] / "lib"


@pytest.fixture
def conn(tmp_path: Path):
    connection = db.connect(tmp_path / "state.sqlite")
    yield connection
    connection.close()


def _limits(**overrides) -> dict:
    limits, _ = policy.resolve(overrides.pop("settings", {}), {})
    return {**limits, **overrides}


CONFIG = "/p/.clavain/config.json"


def _call(conn, tool: str, tool_input: dict, *, run: str = "session:s1", limits=None,
          now: float | None = None, problems=(), tool_use_id: str | None = None) -> dict:
    call = budget.describe(tool, tool_input, PATTERNS, CONFIG)
    return budget.check(conn, run_key=run, session_id=run, call=call,
                        limits=limits or _limits(), problems=list(problems), now=now,
                        tool_use_id=tool_use_id)


def _bash(conn, command: str, **kwargs) -> dict:
    return _call(conn, "Bash", {"command": command}, **kwargs)


def _run(conn, run: str = "session:s1"):
    return conn.execute("SELECT * FROM budget_runs WHERE run_key = ?", (run,)).fetchone()


def test_commands_are_counted_and_denied_at_the_limit_without_counting(conn) -> None:
    limits = _limits(maxCommands=3)
    decisions = [_bash(conn, f"ls {i}", limits=limits)["decision"] for i in range(5)]
    assert decisions == ["allow", "allow", "warn", "deny", "deny"]
    assert _run(conn)["commands"] == 3
    denied = _bash(conn, "ls 9", limits=limits)
    assert "Bash commands 3 of 3 used" in denied["reason"]
    assert "do not retry" in denied["reason"] and "partial success" in denied["reason"]
    rows = conn.execute("SELECT decision, count(*) FROM budget_calls GROUP BY decision")
    assert dict(rows.fetchall()) == {"allow": 2, "warn": 1, "deny": 3}


def test_the_80_percent_warning_comes_once_per_budget(conn) -> None:
    limits = _limits(maxCommands=10)
    reasons = [_bash(conn, f"ls {i}", limits=limits)["reason"] for i in range(10)]
    warned = [i for i, reason in enumerate(reasons) if reason]
    assert warned == [7]  # the 8th command reaches 80 %
    assert "Bash commands 8 of 10 used (80 %)" in reasons[7]


def test_test_runs_count_each_test_part_and_web_requests_are_their_own(conn) -> None:
    limits = _limits(maxTestRuns=3, maxWebRequests=1)
    assert _bash(conn, "pytest && npm test", limits=limits)["decision"] == "allow"
    assert _run(conn)["test_runs"] == 2 and _run(conn)["commands"] == 1
    assert _bash(conn, "pytest -x && go test ./...", limits=limits)["decision"] == "deny"
    assert _bash(conn, "pytest -k one", limits=limits)["decision"] == "warn"  # 3 of 3: 80 %
    assert _call(conn, "WebFetch", {"url": "https://x"}, limits=limits)["decision"] == "warn"
    denied = _call(conn, "WebSearch", {"query": "q"}, limits=limits)
    assert denied["decision"] == "deny" and "web requests 1 of 1" in denied["reason"]


def test_spent_tokens_or_dollars_deny_every_counted_tool(conn) -> None:
    _bash(conn, "ls")
    conn.execute("UPDATE budget_runs SET cost_usd = 12.5")
    for tool, data in (("Bash", {"command": "ls"}), ("Edit", {"file_path": "a", "old_string": "x",
                                                              "new_string": "y"}),
                       ("Agent", {"subagent_type": "clavain:reviewer"})):
        result = _call(conn, tool, data, limits=_limits(maxCostUsd=12.0))
        assert result["decision"] == "deny" and "Dollars $12.50 of $12.00" in result["reason"]


def test_the_same_patch_a_third_time_is_denied_and_a_revert_is_flagged(conn) -> None:
    forth = {"file_path": "/p/app.py", "old_string": "a = 1", "new_string": "a = 2"}
    back = {"file_path": "/p/app.py", "old_string": "a = 2", "new_string": "a = 1"}
    assert _call(conn, "Edit", forth)["decision"] == "allow"
    flagged = _call(conn, "Edit", back)
    assert flagged["decision"] == "warn" and "ping-pong" in flagged["reason"]
    assert _call(conn, "Edit", forth)["decision"] == "warn"  # undoes the revert: flagged
    assert _call(conn, "Edit", back)["decision"] == "warn"
    third = _call(conn, "Edit", forth)
    assert third["decision"] == "deny" and "already applied 2 times" in third["reason"]
    # Another file with the same text is another patch.
    assert _call(conn, "Edit", {**forth, "file_path": "/p/other.py"})["decision"] == "allow"


def test_a_red_test_rerun_with_no_change_is_denied_in_yolo_and_flagged_in_strict(conn) -> None:
    for profile, expected in (("yolo", "deny"), ("strict", "warn")):
        run = f"session:{profile}"
        limits = _limits(settings={"profile": profile})
        call = budget.describe("Bash", {"command": "pytest -q"}, PATTERNS)
        assert _bash(conn, "pytest -q", run=run, limits=limits,
                     tool_use_id=f"t1{profile}")["decision"] == "allow"
        failures.record_failure(conn, run_key=run, call=call, tool_use_id=f"t1{profile}")
        for same in ("pytest -q", "pytest  -q", "cd . && pytest -q"):  # the same command
            again = _bash(conn, same, run=run, limits=limits)
            assert again["decision"] == expected and "failed and nothing has changed" in \
                again["reason"]
        # A change (an edit) makes the re-run worth it.
        _call(conn, "Edit", {"file_path": "a.py", "old_string": profile, "new_string": "z"},
              run=run, limits=limits)
        assert _bash(conn, "pytest -q", run=run, limits=limits)["decision"] == "allow"


def test_a_red_test_keeps_the_change_count_it_ran_at(conn) -> None:
    """The failure hook is async: an edit counted before it lands must still count as a
    change since the red run."""
    limits = _limits(settings={"profile": "yolo"})
    assert _bash(conn, "pytest", limits=limits, tool_use_id="t-red")["decision"] == "allow"
    _call(conn, "Edit", {"file_path": "a.py", "old_string": "x", "new_string": "y"},
          limits=limits)
    call = budget.describe("Bash", {"command": "pytest"}, PATTERNS)
    failures.record_failure(conn, run_key="session:s1", call=call, tool_use_id="t-red")
    assert _bash(conn, "pytest", limits=limits)["decision"] == "allow"


def test_a_failed_edit_is_not_a_patch_applied(conn) -> None:
    patch = {"file_path": "/p/app.py", "old_string": "a = 1", "new_string": "a = 2"}
    for attempt in range(3):
        assert _call(conn, "Edit", patch, tool_use_id=f"e{attempt}")["decision"] == "allow"
        failures.record_failure(conn, run_key="session:s1", tool_use_id=f"e{attempt}",
                              call=budget.describe("Edit", patch, PATTERNS))
    assert _call(conn, "Edit", patch)["decision"] == "allow"  # none of the three applied


def test_an_identical_command_warns_then_is_denied_unless_something_changed(conn) -> None:
    now = 1_795_000_000.0
    decisions = [_bash(conn, "curl -s localhost:8000/health", now=now)["decision"]
                 for _ in range(5)]
    assert decisions == ["allow", "allow", "warn", "warn", "deny"]
    # Something else that changes files in between resets the streak...
    _bash(conn, "touch x", now=now)
    assert _bash(conn, "curl -s localhost:8000/health", now=now)["decision"] == "allow"
    # ...and so does time.
    later = now + 30 * 60
    assert _bash(conn, "curl -s localhost:8000/health", now=later)["decision"] == "allow"


def test_reads_and_clavains_own_commands_are_never_denied_for_repeating(conn) -> None:
    """Parallel reviewers each run the same `git diff`; the execute loop runs `clavain graph
    next` again and again."""
    reads = [_bash(conn, "git diff abc..HEAD")["decision"] for _ in range(8)]
    assert reads == ["allow", "allow", "warn", "allow", "allow", "allow", "allow", "allow"]
    loop = [_bash(conn, "clavain graph next --claim --json")["decision"] for _ in range(8)]
    assert loop == ["allow"] * 8


def test_the_agent_cannot_lift_its_own_budget(conn) -> None:
    for tool, data in (("Bash", {"command": "clavain budget reset"}),
                       ("Bash", {"command": "cd /p && clavain budget reset --run session:s1"}),
                       ("Bash", {"command": "echo '{}' > .clavain/config.json"}),
                       ("Edit", {"file_path": CONFIG, "old_string": "true",
                                 "new_string": "false"}),
                       ("Write", {"file_path": CONFIG, "content": "{}"})):
        denied = _call(conn, tool, data)
        assert denied["decision"] == "deny" and "a person's decision" in denied["reason"], data
    assert _bash(conn, "cat .clavain/config.json")["decision"] == "allow"
    assert _bash(conn, "clavain budget status")["decision"] == "allow"
    assert _call(conn, "Write", {"file_path": "/p/.clavain/scratch/handoff.md",
                                 "content": "x"})["decision"] == "allow"


def test_a_parallel_runner_may_edit_its_worktree_but_not_climb_out_of_it(conn) -> None:
    tree = "/p/.clavain/worktrees/task-a"
    assert _call(conn, "Edit", {"file_path": f"{tree}/src/app.py", "old_string": "a",
                                "new_string": "b"})["decision"] == "allow"
    assert _bash(conn, f"cd {tree} && echo x > src/app.py")["decision"] == "allow"
    for sneaky in (f"{tree}/../../state.sqlite", "/p/.clavain/scratch/../checkpoint.json",
                   "/p/.clavain/worktrees/../runs/x"):
        denied = _call(conn, "Write", {"file_path": sneaky, "content": "{}"})
        assert denied["decision"] == "deny", sneaky


def test_runs_and_sessions_never_see_each_others_counts(conn) -> None:
    limits = _limits(maxCommands=2)
    _bash(conn, "ls 1", run="session:a", limits=limits)
    _bash(conn, "ls 2", run="session:a", limits=limits)
    assert _bash(conn, "ls 3", run="session:a", limits=limits)["decision"] == "deny"
    assert _bash(conn, "ls 3", run="session:b", limits=limits)["decision"] == "allow"
    assert _run(conn, "session:b")["commands"] == 1


def test_settings_problems_are_warned_once(conn) -> None:
    first = _bash(conn, "ls", problems=["budget profile 'x' is not one of strict"])
    assert first["decision"] == "warn" and "budget profile 'x'" in first["reason"]
    assert _bash(conn, "ls 2", problems=["budget profile 'x' is not one of strict"])[
        "decision"] == "allow"


def test_other_tools_and_odd_inputs_are_harmless(conn) -> None:
    assert budget.describe("Read", {"file_path": "x"}, PATTERNS)["kind"] == "other"
    for tool_input in (None, [], {"command": 7}, {"edits": "x"}, {"file_path": ["a"]}):
        for tool in ("Bash", "Edit", "MultiEdit", "Write", "NotebookEdit", "WebFetch"):
            assert _call(conn, tool, tool_input)["decision"] in ("allow", "warn", "deny")


_WORKER = """
import sys
sys.path.insert(0, {lib!r})
from clavain.guards import budget, policy
from clavain.guards.commands import compile_patterns
from clavain.store import db
conn = db.connect({path!r})
limits, _ = policy.resolve({{"maxCommands": 1000}}, {{}})
for i in range({n}):
    call = budget.describe("Bash", {{"command": "ls " + str(i) + sys.argv[1]}},
                           compile_patterns([]))
    budget.check(conn, run_key="sprint:x", session_id=sys.argv[1], call=call, limits=limits,
                 problems=[])
"""


def test_parallel_hook_processes_lose_no_count(tmp_path: Path) -> None:
    path = tmp_path / "state.sqlite"
    db.connect(path).close()
    script = _WORKER.format(lib=str(LIB), path=str(path), n=25)
    workers = [subprocess.Popen([sys.executable, "-c", script, f"w{i}"]) for i in range(8)]
    assert [w.wait(timeout=120) for w in workers] == [0] * 8
    conn = db.connect(path)
    assert conn.execute("SELECT commands FROM budget_runs").fetchone()[0] == 200
    assert conn.execute("SELECT count(*) FROM budget_calls").fetchone()[0] == 200


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["Bash", "WebFetch", "Edit", "Read"]),
                          st.integers(0, 3), st.booleans()), max_size=30),
       st.integers(0, 6), st.integers(0, 3), st.integers(0, 3))
def test_counters_against_a_naive_model(tmp_path_factory, calls, max_commands, max_tests,
                                        max_web) -> None:
    """Whatever the sequence: a call is denied exactly when the naive counters say its budget
    is spent, and the stored counters equal the naive ones (denied calls never counted)."""
    conn = db.connect(tmp_path_factory.mktemp("prop") / "state.sqlite")
    limits = _limits(maxCommands=max_commands, maxTestRuns=max_tests, maxWebRequests=max_web,
                     maxPatchRepeats=1000)
    used = {"commands": 0, "test_runs": 0, "web_requests": 0}
    for index, (tool, variant, is_test) in enumerate(calls):
        if tool == "Bash":
            command = f"pytest -k t{index}" if is_test else f"echo {index}"
            result = _bash(conn, command, limits=limits)
            spent = used["commands"] >= max_commands or (is_test and used["test_runs"] + 1 >
                                                        max_tests)
            assert (result["decision"] == "deny") == spent
            if not spent:
                used["commands"] += 1
                used["test_runs"] += is_test
        elif tool == "WebFetch":
            result = _call(conn, tool, {"url": f"https://x/{index}"}, limits=limits)
            spent = used["web_requests"] >= max_web
            assert (result["decision"] == "deny") == spent
            used["web_requests"] += not spent
        else:
            data = {"file_path": f"f{variant}", "old_string": str(index), "new_string": "n"}
            assert _call(conn, tool, data, limits=limits)["decision"] != "deny"
    row = _run(conn)
    assert ({key: row[key] for key in used} if row else
            {key: 0 for key in used}) == used
    conn.close()


def test_a_denial_says_exhausted_only_when_it_is_and_how_a_person_raises_the_limit(conn) -> None:
    limits = _limits(maxTestRuns=3)
    assert _bash(conn, "pytest && npm test", limits=limits)["decision"] == "allow"  # 2 of 3
    partial = _bash(conn, "pytest -x && go test ./...", limits=limits)
    assert partial["decision"] == "deny" and "exhausted" not in partial["reason"]
    assert "runs 2 tests" in partial["reason"] and "only 1 of 3 test runs are left" in \
        partial["reason"] and "run at most 1 at once" in partial["reason"]
    assert "`budgets.maxTestRuns` in .clavain/config.json" in partial["reason"]
    assert "CLAVAIN_BUDGET_MAX_TEST_RUNS" in partial["reason"]
    assert _bash(conn, "pytest -k one", limits=limits)["decision"] == "warn"  # 3 of 3
    spent = _bash(conn, "pytest -k two", limits=limits)
    assert spent["reason"].startswith("Clavain budget exhausted: test runs 3 of 3 used")
    assert "do not retry" in spent["reason"] and "CLAVAIN_BUDGET_MAX_TEST_RUNS" in spent["reason"]


@pytest.mark.parametrize(("key", "tool", "data", "variable"), [
    ("maxCommands", "Bash", {"command": "ls"}, "CLAVAIN_BUDGET_MAX_COMMANDS"),
    ("maxWebRequests", "WebFetch", {"url": "https://x"}, "CLAVAIN_BUDGET_MAX_WEB_REQUESTS"),
    ("maxTokens", "Agent", {"subagent_type": "x"}, "CLAVAIN_BUDGET_MAX_TOKENS"),
    ("maxCostUsd", "Bash", {"command": "ls"}, "CLAVAIN_BUDGET_MAX_COST_USD"),
])
def test_a_budget_set_to_zero_is_not_called_exhausted(conn, key, tool, data, variable) -> None:
    denied = _call(conn, tool, data, limits=_limits(**{key: 0.0 if key == "maxCostUsd" else 0}))
    assert denied["decision"] == "deny" and "exhausted" not in denied["reason"]
    assert "are set to 0" in denied["reason"] and "do not retry" in denied["reason"]
    assert f"`budgets.{key}`" in denied["reason"] and variable in denied["reason"]


def test_every_budget_denial_names_its_key_and_variable(conn) -> None:
    _bash(conn, "ls")
    conn.execute("UPDATE budget_runs SET tokens = 500, cost_usd = 1.0")
    tokens = _bash(conn, "ls 2", limits=_limits(maxTokens=500))["reason"]
    assert tokens.startswith("Clavain budget exhausted: Tokens 500 of 500 used")
    assert "`budgets.maxTokens`" in tokens and "CLAVAIN_BUDGET_MAX_TOKENS" in tokens
    dollars = _bash(conn, "ls 3", limits=_limits(maxCostUsd=0.5))["reason"]
    assert "Dollars $1.00 of $0.50 used" in dollars and "CLAVAIN_BUDGET_MAX_COST_USD" in dollars


LIFTING = [
    "bin/clavain budget reset", "/opt/plugins/clavain/bin/clavain budget reset",
    "./bin/clavain budget reset --run session:s1", "env clavain budget reset",
    "env -u CLAVAIN_PROFILE clavain budget reset", "/usr/bin/env clavain budget reset",
    "VAR=1 clavain budget reset", "python -m clavain budget reset",
    "python3 -B -m clavain budget reset --json", "PYTHONPATH=lib python -m clavain budget reset",
    "uv run clavain budget reset", "command clavain budget reset", "sudo clavain budget reset",
    "timeout 5 nice -n 1 clavain budget reset", "bash -lc 'clavain budget reset'",
    "sh -c \"bin/clavain budget reset\"", "echo $(clavain budget reset)",
    "echo `clavain budget reset`", "eval 'clavain budget reset'", "bash bin/clavain budget reset",
    "echo 'clavain budget reset' | sh", "bash <<'EOF'\nclavain budget reset\nEOF",
    "\"clavain\" budget reset", "cl''avain budget reset", "cd /p && clavain budget reset",
    "python -c 'from clavain.cli import main; main()' budget reset",
    # the database or the config removed, moved, replaced or truncated
    "rm .clavain/state.sqlite", "rm -f .clavain/state.sqlite-wal .clavain/state.sqlite-shm",
    "rm -rf .clavain", "rm -rf ./.clavain/", "unlink .clavain/state.sqlite",
    "shred -u .clavain/state.sqlite", "mv .clavain/state.sqlite /tmp/",
    "mv /tmp/mine.json .clavain/config.json", "cp /dev/null .clavain/state.sqlite",
    "cp other.json .clavain/config.json", "install -m 644 x.json .clavain/config.json",
    "ln -sf /tmp/c.json .clavain/config.json", "rsync -a backup/.clavain/ .clavain",
    "truncate -s 0 .clavain/state.sqlite", ": > .clavain/state.sqlite",
    "> .clavain/config.json", "echo '{}' >| .clavain/config.json",
    "dd if=/dev/zero of=.clavain/state.sqlite count=1", "tee .clavain/config.json < mine.json",
    "sed -i 's/5/500/' .clavain/config.json", "find .clavain -name 'state*' -delete",
    "find . -path '*/.clavain/*' -exec rm {} +", "cd .clavain && rm state.sqlite",
    "bash -c 'rm .clavain/state.sqlite'", "sudo rm -f /p/.clavain/state.sqlite",
    "git clean -fdx", "git checkout -- .clavain/config.json",
]
NOT_LIFTING = [
    "clavain budget status", "bin/clavain budget status --json", "echo clavain budget reset",
    "grep -rn 'clavain budget reset' docs", "cat .clavain/config.json", "ls -la .clavain",
    "git diff .clavain/config.json", "rm -rf .clavain/scratch/old.md", "rm config.json",
    "pip install clavain", "clavain graph reset n1", "man clavain",
]


@pytest.mark.parametrize("command", LIFTING)
def test_no_disguise_lifts_the_budget(conn, command: str) -> None:
    assert budget.describe("Bash", {"command": command}, PATTERNS, CONFIG)["lifts_budget"], \
        command
    assert _bash(conn, command)["decision"] == "deny"


@pytest.mark.parametrize("command", NOT_LIFTING)
def test_looking_at_the_budget_is_not_lifting_it(conn, command: str) -> None:
    call = budget.describe("Bash", {"command": command}, PATTERNS, CONFIG)
    assert not call["lifts_budget"], command
    assert _bash(conn, command)["decision"] == "allow"
