"""A printed error always exits non-zero (issue 38): a file that holds no transcript is an
error, not a row of zeros; wrong budget settings are errors beside the limits applied."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest


@pytest.mark.parametrize("content", [b"# A README\n\nSome text.\n", os.urandom(4096), b"",
                                     b'["a", "json", "list"]\n{"no_type": 1}\n',
                                     b'{"name": "pkg", "type": "module"}\n'])
def test_tokens_refuses_a_file_that_holds_no_transcript(run_cli, project: Path,
                                                        content: bytes) -> None:
    (project / "not-a-transcript.jsonl").write_bytes(content)
    result = run_cli("tokens", "--transcript", "not-a-transcript.jsonl")
    assert result.returncode == 2 and result.stdout == ""
    [line] = result.stderr.splitlines()
    assert "holds no Claude Code transcript" in line


def test_tokens_of_a_transcript_without_responses_yet_is_zeros(run_cli, project: Path) -> None:
    (project / "s.jsonl").write_text(json.dumps({"type": "user", "sessionId": "s", "uuid": "u",
                                                 "message": {"role": "user",
                                                             "content": "hi"}}) + "\n")
    result = run_cli("tokens", "--transcript", "s.jsonl", "--json")
    assert result.returncode == 0 and json.loads(result.stdout)["total"] == 0


def test_every_config_problem_is_named_at_once_by_each_command(run_cli, project: Path) -> None:
    (project / ".clavain").mkdir()
    (project / ".clavain" / "config.json").write_text(json.dumps({
        "budgets": {"maxTestRuns": True}, "store": {"url": "postgress://db"},
        "defaults": {"maxAttempts": -1}}))
    for args in (("status",), ("graph", "ls"), ("run", "--runner", "shell")):
        result = run_cli(*args)
        assert result.returncode != 0, args
        text = result.stderr
        assert "3 problems:" in text, (args, text)
        assert "budgets.maxTestRuns: true (expected a whole number" in text
        assert 'store.url: "postgress://db" (expected a URL starting postgres://' in text
        assert "defaults.maxAttempts: -1 (expected a whole number from 1 to 100)" in text
        assert "True" not in text and "^postgres" not in text
