"""User configuration: `.clavain/config.json` merged over built-in defaults.

Stdlib only so hooks may read it. Keys are camelCase, as in the JSON file. The file is checked
against the JSON Schema generated from `clavain.models.config` (`schema_check`: no jsonschema
import unless the file is wrong, and then one line naming the JSON path and what is allowed).
"""

from __future__ import annotations

from clavain.errors import ClavainError

TYPE_CHECKING = False
if TYPE_CHECKING:  # SessionStart reads the config: no `typing` or `pathlib` import here
    from pathlib import Path
    from typing import Any

DEFAULTS: dict[str, Any] = {
    "defaults": {
        "verifyRunner": "shellVerify",
        "maxAttempts": 3,
        "retryBackoffSeconds": 30,
        "retryBackoffMaxSeconds": 900,
        "lockLeaseSeconds": 3600,
        "maxCrashes": 5,
        "autoResetFailedMax": 0,
        "verifyTimeoutSeconds": 600,
        "kvInlineMaxBytes": 2048,
        "kvArtifactThresholdBytes": 16384,
        "maxEscalations": 2,
        "snapshotMaxLagSeconds": 1.0,
    },
    "runners": {},
    "session": {"contextMaxTokens": 500},
    "budgets": {"enabled": True, "profile": "strict", "scope": None, "maxCommands": None,
                "maxTestRuns": None, "maxWebRequests": None, "maxTokens": None,
                "maxCostUsd": None, "maxPatchRepeats": 2, "testPatterns": [],
                "perAgentMaxTokens": None, "perAgentMaxCalls": None, "agentTokens": 300000,
                "agentCostUsd": 1.0, "windowShareMax": None},
    "supervisor": {
        "packetMode": "thin", "workers": 1, "shellTimeoutSeconds": 1800,
        "maxRateLimitWaitSeconds": 3600, "waitOnLimit": True,
        "roles": {
            "planner": {"runner": "claude", "model": "opus"},
            "escalation": {"runner": "claude", "model": "opus"},
            "executor": {"runner": "claude", "model": None},
            "verifier": {"runner": "shellVerify", "model": None},
            "integrator": {"runner": "shell", "model": None},
            "final-verifier": {"runner": "shellVerify", "model": None},
            "microcall": {"runner": "claude", "model": "haiku"},
            "researcher": {"runner": "claude", "model": "haiku"},
        },
        "claude": {"maxTurns": 30,
                   "allowedTools": ["Bash", "Edit", "Read", "Write", "Glob", "Grep"],
                   "timeoutSeconds": 1800, "extraArgs": [], "apiRetries": 2},
        "projection": {"tokensPerCall": 40000, "costPerCallUsd": 0.2,
                       "shareMaxMultiple": 4},
    },
    "checks": [],
    "loop": {"maxIterations": 100, "callsPerHour": 100, "automation": "auto",
             "breaker": {"noProgress": 3, "sameError": 5, "permissionDenials": 2,
                         "cooldownSeconds": 1800}},
    "store": {"url": None, "outageWaitSeconds": 120},
    "plans": {"requireVerify": False, "maxTasks": 200},
}

def _copied(value: Any) -> Any:
    """A deep copy of a JSON value (dicts, lists, scalars): what `copy.deepcopy` gives for one,
    without importing `copy` (and `weakref`) on SessionStart."""
    if isinstance(value, dict):
        return {key: _copied(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_copied(item) for item in value]
    return value


def _merge(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    merged = _copied(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = _merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def merged(user: dict[str, Any]) -> dict[str, Any]:
    """The defaults overlaid with `user` (what `load` returns for a file holding `user`)."""
    return _merge(DEFAULTS, user)


def load(path: Path) -> dict[str, Any]:
    """Defaults, overlaid with the user's file when it exists. A broken file is an error naming
    what is wrong, not silently ignored: the user asked for settings we would otherwise drop.
    Read without blocking: a FIFO, a device or a symlink there is that error too."""
    from clavain.fsutil import UnsafePathError, read_state_file

    try:
        raw = read_state_file(path)
    except UnsafePathError as exc:
        raise ClavainError(str(exc)) from None
    except OSError as exc:
        raise ClavainError(f"{path}: unreadable ({exc.strerror or exc})") from None
    if raw is None:
        return _copied(DEFAULTS)
    from clavain.textio import BadText, decode, load_json

    try:
        user = load_json(decode(raw, str(path)), str(path))
    except BadText as exc:
        raise ClavainError(f"{exc}; fix or remove the file") from None
    from clavain.schema_check import check

    problem = check(user, "config.schema.json", str(path))
    if problem:
        raise ClavainError(problem)
    return _merge(DEFAULTS, user)


def get(config: dict[str, Any], dotted: str, default: Any = None) -> Any:
    """`get(cfg, "defaults.verifyRunner")`."""
    node: Any = config
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return default
        node = node[part]
    return node
