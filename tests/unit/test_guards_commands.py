"""Which Bash commands run tests and which may change files: compound commands split with
quoting respected, wrappers seen through, look-alikes that are not tests."""

from __future__ import annotations

import pytest

from clavain.guards.commands import (
    compile_patterns,
    find_test_runs,
    fingerprint,
    may_change_files,
    split_parts,
)

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
