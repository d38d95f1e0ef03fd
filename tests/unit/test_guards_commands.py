"""Which Bash commands run tests and which may change files: compound commands split with
quoting respected, wrappers seen through, look-alikes that are not tests."""

from __future__ import annotations

import shlex

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clavain.guards.commands import (
    compile_patterns,
    find_test_runs,
    fingerprint,
    lifts_budget,
    may_change_files,
    normalized,
)
from clavain.guards.shell_words import split_parts
from clavain.guards.wrappers import MAX_DEPTH, simple_commands

PATTERNS = compile_patterns([])

CASES = [
    # command, test parts, may change files
    ("pytest -q", ["pytest -q"], False),
    ("python -m pytest tests/ -x", ["python -m pytest tests/ -x"], False),
    ("python3.11 -m unittest discover", ["python3.11 -m unittest discover"], False),
    ("npm test", ["npm test"], False),
    ("npm run test -- --watch=false", ["npm run test -- --watch=false"], False),
    ("pnpm test && yarn test:unit", ["pnpm test", "yarn test:unit"], False),
    ("cd web && npx vitest run", ["npx vitest run"], False),
    ("go test ./... | tee out.txt", ["go test ./..."], True),
    ("cargo test --all; cargo nextest run", ["cargo test --all", "cargo nextest run"], False),
    ("mvn -q test", ["mvn -q test"], False),
    ("./gradlew check", ["./gradlew check"], False),
    ("make test", ["make test"], False),
    ("tox -e py311", ["tox -e py311"], False),
    ("timeout 300 uv run pytest", ["timeout 300 uv run pytest"], False),
    ("FOO=1 BAR=2 jest --ci", ["FOO=1 BAR=2 jest --ci"], False),
    ("bundle exec rspec spec/a_spec.rb", ["bundle exec rspec spec/a_spec.rb"], False),
    ("(pytest -k slow)", ["(pytest -k slow)"], False),
    # not tests
    ("echo pytest", [], False),
    ("grep -rn 'npm test' docs", [], False),
    ('git commit -m "run npm test; go test"', [], True),
    ("pip install pytest", [], True),
    ("cat tests/test_app.py", [], False),
    ("ls > listing.txt", [], True),
    ("make lint", [], True),
    ("sed -i 's/a/b/' x.py && pytest", ["pytest"], True),
    ("echo 'a && pytest'", [], False),
    ("x=$(go test ./...); echo $x", ["x=$(go test ./...)"], False),
    ("pytest 2>&1 | head -50", ["pytest 2>&1"], False),
    # found by review: paths, subshells, shells, keywords, options with values
    (".venv/bin/python -m pytest -q", [".venv/bin/python -m pytest -q"], False),
    (".venv/bin/pytest", [".venv/bin/pytest"], False),
    ("(cd sub && pytest)", ["pytest)"], False),
    ("bash -c 'pytest -x'", ["bash -c 'pytest -x'"], False),
    ("for f in a b; do pytest $f; done", ["do pytest $f"], False),
    ("if true; then pytest; fi", ["then pytest"], False),
    ("sudo -u ci pytest", ["sudo -u ci pytest"], False),
    ("nice -n 5 pytest", ["nice -n 5 pytest"], False),
    ("make -j4 test", ["make -j4 test"], False),
    ("uvx pytest", ["uvx pytest"], False),
    ("pnpm exec jest", ["pnpm exec jest"], False),
    ("yarn jest --ci", ["yarn jest --ci"], False),
    ("bunx vitest run", ["bunx vitest run"], False),
    ("# it's slow\npytest -q", ["pytest -q"], False),
    ("cat > ci.sh <<EOF\nnpm test\nmake test\nEOF\nbash ci.sh", [], True),
    ("cat <<'EOF' | wc -l\npytest\nEOF", [], False),
    ("command -v pytest >/dev/null && pytest -q", ["pytest -q"], False),
    ("pytest --version", [], False),
    ("clavain graph next --claim --json", [], True),
    ("clavain verdicts summary", [], False),
]


@pytest.mark.parametrize(("command", "tests", "changes"), CASES)
def test_classification_table(command: str, tests: list[str], changes: bool) -> None:
    assert find_test_runs(command, PATTERNS) == tests
    assert may_change_files(command, PATTERNS) is changes


def test_split_respects_quotes_escapes_and_subshells() -> None:
    assert split_parts("a && b || c; d | e & f\ng") == ["a", "b", "c", "d", "e", "f", "g"]
    assert split_parts("echo 'x; y' \"p && q\" r\\;s") == ["echo 'x; y' \"p && q\" r\\;s"]
    assert split_parts('echo "a \\" ; b"') == ['echo "a \\" ; b"']
    assert split_parts("echo $(a; b) && c") == ["echo $(a; b)", "c"]
    assert split_parts("  ;; && ") == []
    assert split_parts("echo 'unclosed ; quote") == ["echo 'unclosed ; quote"]


def test_extra_patterns_and_a_bad_one() -> None:
    patterns = compile_patterns([r"\./run-tests\.sh\b", "([bad"])
    assert find_test_runs("./run-tests.sh unit", patterns) == ["./run-tests.sh unit"]
    assert find_test_runs("./run-tests.sh unit", PATTERNS) == []


def test_fingerprints_ignore_trailing_whitespace_only() -> None:
    assert fingerprint("a.py", "x = 1  \n", "y") == fingerprint("a.py", "x = 1\n", "y")
    assert fingerprint("a.py", "x", "y") != fingerprint("a.py", "y", "x")
    assert fingerprint("a.py", "x", "y") != fingerprint("b.py", "x", "y")


# Part 4: one reading of words for everything; no disguise slips past the counters.
DISGUISED_TESTS = [
    "command pytest", "builtin command pytest -q", "exec pytest", "env pytest",
    "env -u HOME pytest", "env -i PATH=/usr/bin pytest", "/usr/bin/env pytest -q",
    "VAR=1 pytest", "A=1 B='x y' pytest", "nice pytest", "nice -n 5 pytest", "nice -10 pytest",
    "ionice -c 3 -n 7 pytest", "ionice -c3 pytest", "timeout 60 pytest",
    "timeout -s KILL -k 5 60 pytest", "timeout --signal=TERM 1m pytest", "time pytest",
    "time -p pytest", "/usr/bin/time -f %e pytest", "stdbuf -oL pytest", "stdbuf -o L pytest",
    "nohup pytest", "setsid pytest", "chronic pytest", "xvfb-run -a pytest",
    "taskset -c 0,1 pytest", "sudo pytest", "sudo -u ci -E pytest", "doas -u ci pytest",
    "ls tests | xargs pytest", "xargs -n 1 -P 4 pytest < files", "flock /tmp/lock pytest",
    "bash -c 'pytest -x'", "bash -lc 'pytest -x'", "sh -c \"cd sub && pytest\"",
    "zsh -ec 'pytest'", "bash -o pipefail -c 'pytest | tee log'", "su ci -c 'pytest'",
    "echo $(pytest -q)", "x=$(pytest -q)", "echo `pytest -q`", 'echo "$(go test ./...)"',
    "diff <(pytest -q) expected.txt", "eval 'pytest -q'", "watch -n 5 pytest",
    "env -S 'pytest -q'", "bash -c 'bash -c \"pytest\"'", "p''ytest -q", "\\pytest",
    "\"pytest\" -q", "python -m pytest", "python3 -B -m pytest", "python3.12 -u -m pytest",
    "python -mpytest", "python -Bm pytest", "python -W error -X dev -m pytest",
    ".venv/bin/python -m pytest", "/usr/bin/python3 -m unittest", "python -m tox",
    "python manage.py test", "npx jest", "npx --yes jest", "npx -y jest@29 --ci",
    "npx -p jest jest", "npx -c 'jest --ci'", "pnpm exec jest", "pnpm dlx vitest run",
    "bunx vitest", "pnpx jest", "yarn dlx jest", "npm exec -- jest", "uvx pytest",
    "uvx --from pytest==8 pytest", "uv tool run pytest", "pipx run pytest", "uv run pytest",
    "uv run --with pytest-xdist pytest -n 4", "uv run -m pytest",
    "uv --directory sub run pytest", "poetry run pytest", "poetry -C sub run pytest",
    "pipenv run pytest", "pdm run pytest", "rye run pytest", "conda run -n env pytest",
    "hatch test", "hatch run pytest", "hatch run test", "hatch run test:run",
    "hatch -e py312 run pytest", "pdm run test", "rye test", "bundle exec rspec",
    "coverage run -m pytest", "direnv exec . pytest", "mise exec python@3.12 -- pytest",
    "cargo t", "cargo test", "cargo +nightly test", "cargo --locked nextest run", "go test ./...",
    "go -C sub test ./...", "npm test", "npm t", "npm run test", "npm run-script test",
    "npm --prefix web test", "npm -w pkg run test:unit", "yarn test", "yarn workspace web test",
    "pnpm --filter web test", "pnpm -r test", "bun test", "make test", "make -C sub test",
    "make -f ci.mk test", "just test", "tox", "tox -e py311", "nox -s tests", "node --test",
    "node node_modules/.bin/jest", "node node_modules/jest/bin/jest.js", "bin/rails test",
    "php artisan test", "vendor/bin/phpunit", "npx playwright test", "dotnet test",
    "bash <<'EOF'\npytest -q\nEOF", "cat <<EOF | sh\npytest\nEOF", "echo pytest | bash",
    "bash <<< 'pytest -q'", "find tests -name 'test_*.py' -exec pytest {} +",
    "sudo -E env X=1 nohup timeout 60 uv run python -m pytest",
    "if true; then exec env -i nice -n 1 pytest; fi",
]
MERE_MENTIONS = [
    "pip install pytest", "uv pip install pytest", "uv add --dev pytest", "cat pytest.ini",
    "grep pytest setup.cfg", "grep -rn 'npm test' docs", "rg 'cargo test'", "echo pytest",
    "echo 'bash -c pytest'", "ls tests", "vim tests/test_app.py", "which pytest",
    "command -v pytest", "type pytest", "pytest --version", "python -m pytest --help",
    "npm install jest", "npm run build", "npx playwright install", "cargo build",
    "go vet ./...", "make lint", "make -C test lint", "git commit -m 'npm test; go test'",
    "git log --grep=pytest", "man pytest", "python -c 'import pytest'", "pipx install tox",
    "sed -n 1p pytest.ini", "bash ci.sh", "echo 'pytest -q' > run.sh", "cat <<EOF\npytest\nEOF",
    "poetry add pytest", "hatch env create", "uvx ruff check", "npx eslint .",
]


@pytest.mark.parametrize("command", DISGUISED_TESTS)
def test_a_test_run_behind_any_wrapper_is_a_test_run(command: str) -> None:
    assert find_test_runs(command, PATTERNS), command


@pytest.mark.parametrize("command", MERE_MENTIONS)
def test_a_command_that_only_mentions_tests_is_not_one(command: str) -> None:
    assert find_test_runs(command, PATTERNS) == [], command


def test_simple_commands_strip_wrappers_the_same_way_for_everything() -> None:
    assert simple_commands("cd x && sudo -u ci env A=1 timeout 5 .venv/bin/pytest -q") == \
        [["cd", "x"], ["pytest", "-q"]]
    assert simple_commands("bash -lc 'pytest -x && echo ok'") == \
        [[], ["pytest", "-x"], ["echo", "ok"]]
    assert simple_commands("echo \"a b\" 'c' d\\ e 2>&1 >/dev/null") == \
        [["echo", "a b", "c", "d e"]]
    assert simple_commands("x=$(bin/clavain status)") == [[], ["clavain", "status"]]
    assert simple_commands("python -m clavain budget status") == [["clavain", "budget", "status"]]
    assert simple_commands("/opt/plugin/bin/clavain graph next") == [["clavain", "graph", "next"]]
    assert simple_commands("echo $((1 + 2))") == [["echo", "$((1 + 2))"]]
    # The same command behind a wrapper has the same fingerprint for the loop guards.
    assert normalized("bash -c 'pytest -q'", PATTERNS) == normalized("pytest  -q", PATTERNS) \
        == normalized("cd . && env X=1 pytest -q", PATTERNS)
    assert normalized("cat a > x", PATTERNS) != normalized("cat a > y", PATTERNS)


def test_changes_are_seen_through_wrappers_and_redirections() -> None:
    assert may_change_files("bash -c 'rm -rf build'", PATTERNS)
    assert may_change_files("echo $(touch x)", PATTERNS)
    assert may_change_files("find . -name '*.pyc' -delete", PATTERNS)
    assert may_change_files("find . -exec rm {} +", PATTERNS)
    assert may_change_files("exec > log 2>&1", PATTERNS)
    assert not may_change_files("bash -c 'ls && git status'", PATTERNS)
    assert not may_change_files("echo '->' 'a > b'", PATTERNS)
    assert not may_change_files("cat <<EOF | sh\npytest\nEOF", PATTERNS)
    assert not may_change_files("grep x y 2>/dev/null", PATTERNS)


def test_deep_or_broken_nesting_is_harmless() -> None:
    deep = "pytest"
    for _ in range(MAX_DEPTH + 4):
        deep = f"bash -c {shlex.quote(deep)}"
    find_test_runs(deep, PATTERNS)  # read to MAX_DEPTH, then given up: no RecursionError
    for broken in ("echo $(", "echo `", "bash -c", "python -m", "npx", "uv run", "env -S",
                   "echo '", 'echo "$(a', "a <(", "2>", "timeout", "sudo -u", ">&", "x=$(("):
        find_test_runs(broken, PATTERNS)
        may_change_files(broken, PATTERNS)
        lifts_budget(broken)


KNOWN_TESTS = ["pytest -q", "python -m pytest tests", "go test ./...", "cargo test", "cargo t",
               "npm test", "npm run test:unit", "yarn test", "npx jest --ci", "hatch test",
               "tox -e py", "nox", "make test", "bundle exec rspec", "dotnet test",
               "uv run pytest", "bun test", "node --test"]
# Each wraps a command string (shell-quoted where the wrapper takes a string; `$( … )` spaced,
# as `$((` opens arithmetic).
WRAPPER_TEMPLATES = [
    "command {}", "exec {}", "env {}", "env -u HOME {}", "env -i A=1 {}", "/usr/bin/env {}",
    "VAR=1 {}", "nice {}", "nice -n 10 {}", "ionice -c 3 -n 7 {}", "timeout 60 {}",
    "timeout -s KILL 5m {}", "time {}", "stdbuf -oL {}", "nohup {}", "sudo -u ci {}",
    "xargs {}", "xvfb-run -a {}", "bash -c {q}", "bash -lc {q}", "sh -c {q}", "zsh -c {q}",
    "echo $( {} )", "x=$( {} )", "eval {q}", "watch -n 5 {q}", "env -S {q}", "cd sub && {}",
    "({})", "if true; then {}; fi", "{} 2>&1 | tail -5", "echo {q} | bash",
    "uv run {}", "poetry run {}", "pipenv run {}", "pdm run {}", "conda run -n x {}",
    "npx -c {q}", "flock /tmp/l {}",
]


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(KNOWN_TESTS), st.lists(st.sampled_from(WRAPPER_TEMPLATES), max_size=4))
def test_any_known_test_command_in_any_wrappers_is_a_test_run(test: str,
                                                              wrappers: list[str]) -> None:
    command = test
    for template in wrappers:
        command = template.format(command, q=shlex.quote(command))
    assert find_test_runs(command, PATTERNS), command
    assert lifts_budget(command) is False


_ADVERSARIAL = r"""
import sys
sys.path.insert(0, sys.argv[1])
from clavain.guards import budget, commands
patterns = commands.compile_patterns([])
cases = ["find -exec " * 1000 + " ;\nrm -f .clavain/state.sqlite", "find -exec find -exec " * 2000,
         "find . " + "-exec " * 10900, "echo " + "$(" * 3000 + ")" * 3000, "\"'" * 20000,
         "cat <<A\n" * 5000, "eval eval " * 5000, "sh " * 20000, "a|" * 30000, "`" * 60000,
         "xargs " * 10000 + "rm .clavain/state.sqlite"]
print(",".join(str(budget.describe("Bash", {"command": c}, patterns)["lifts_budget"])
               for c in cases))
"""


def test_adversarial_commands_are_read_in_bounded_time() -> None:
    """Near the 64 KB cap, nested `find -exec`, substitutions, quotes, heredocs and wrapper
    chains are all read, well inside the host's 10 s hook timeout (the subprocess timeout is the
    hang guard; a quadratic reader took 24 s and 2.3 GB on one of these)."""
    import subprocess
    import sys
    from pathlib import Path

    lib = Path(__file__).resolve().parents[2] / "lib"
    done = subprocess.run([sys.executable, "-c", _ADVERSARIAL, str(lib)], capture_output=True,
                          text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    lifts = done.stdout.strip().split(",")
    assert lifts[0] == "True" and lifts[-1] == "True"
