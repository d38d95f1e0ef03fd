"""The short version of `benchmarks/chaos.py` (kill -9 rounds, server restarts, a holder that never
comes back, a damaged page, a NUL result): every figure that must be 0 is 0, on SQLite and on
PostgreSQL (which CI always has; elsewhere its half is skipped with the reason)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


def test_the_short_chaos_table_is_all_zeros() -> None:
    from tests.pgserver import missing_reason

    backends = ["sqlite"]
    if missing_reason() is None:
        backends.append("postgresql")
    elif os.environ.get("CI"):
        pytest.fail(f"the PostgreSQL half of the chaos rounds cannot run in CI: "
                    f"{missing_reason()}")
    done = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "chaos.py"), "--short", "--json",
         "--backend", "both" if len(backends) == 2 else "sqlite"],
        capture_output=True, text=True, timeout=900, cwd=REPO)
    report = json.loads(done.stdout)
    assert sorted(report["results"]) == sorted(backends), done.stderr
    assert report["failing"] == {name: [] for name in backends}, report["results"]
    assert done.returncode == 0, done.stderr
    for figures in report["results"].values():
        assert figures["kill_rounds"] + figures["restarts"] >= 1  # the rounds really ran
