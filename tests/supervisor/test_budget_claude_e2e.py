"""The real claude 2.1.330 as a supervised runner against a scripted model on 127.0.0.1: it is
given its budget share as `--max-budget-usd` and a `--session-id`, stops at the share with
`error_max_budget_usd` (the node goes back unspent, what it spent counted), and writes its
transcript where `run_reserve.transcript_path` says."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from clavain.claude_bin import find_claude
from clavain.supervisor.run_budget import run_key
from clavain.supervisor.run_reserve import ledger_of, transcript_path
from tests.e2e.scripted_model import ScriptedModel, bash
from tests.supervisor import kit

pytestmark = [pytest.mark.slow, pytest.mark.e2e]


def test_real_claude_stops_at_its_share_and_its_transcript_is_where_we_look(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    binary = find_claude()
    if binary is None:
        pytest.skip("the real claude binary was not found (CLAVAIN_CLAUDE_BIN)")
    model = ScriptedModel().start()
    model.script = lambda _request: [bash("true")]  # works for ever: only the budget stops it
    home = tmp_path / "home"
    home.mkdir()
    try:
        for name, value in {"HOME": str(home), "ANTHROPIC_BASE_URL": model.base_url,
                            "ANTHROPIC_API_KEY": "sk-test", "CLAVAIN_CLAUDE_BIN": str(binary),
                            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1"}.items():
            monkeypatch.setenv(name, value)
        state = kit.make_project(tmp_path / "p.x", {
            "budgets": {"maxCostUsd": 0.02},
            "supervisor": {"projection": {"costPerCallUsd": 0.01, "tokensPerCall": 1000}}})
        kit.add(state, kit.cost_tasks(1), scaffold=False)
        events: list[dict] = []
        report = kit.run(state, events, runner="claude")
    finally:
        model.stop()
    attempt = next(state.runs.glob("*/task-000/attempt-*"))
    out = json.loads((attempt / "stdout.log").read_text())
    if isinstance(out, list):  # --verbose: every message, the report last
        out = next(m for m in reversed(out) if m.get("type") == "result")
    assert out["subtype"] == "error_max_budget_usd", out
    assert out["errors"] == ["Reached maximum budget ($0.02)"]  # its share, all that was left
    finished = next(e for e in events if e["event"] == "finished")
    assert finished["outcome"] == "budget_share"
    assert kit.node(state, "task-000")["attempts"] == 0  # given back unspent
    # Its spend is counted — the host checks after each response, so one response may pass
    # the share (here the first alone costs more than $0.02).
    spent = ledger_of(state, run_key(report["run_id"]))
    assert spent["cost_usd"] == pytest.approx(out["total_cost_usd"])
    assert report["status"] == "budget"
    expected = transcript_path({"HOME": str(home)}, state.project, out["session_id"])
    assert expected.is_file(), sorted(str(p) for p in (home / ".claude").rglob("*.jsonl"))
    assert "-p-x" in expected.parent.name  # '.' became '-', as '/' did
