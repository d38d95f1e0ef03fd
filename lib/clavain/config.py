"""User configuration: `.clavain/config.json` merged over built-in defaults.

Stdlib only so hooks may read it. Keys are camelCase, as in the JSON file.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from clavain.errors import ClavainError

DEFAULTS: dict[str, Any] = {
    "defaults": {
        "verifyRunner": "shellVerify",
        "maxAttempts": 3,
        "retryBackoffSeconds": 30,
        "retryBackoffMaxSeconds": 900,
        "lockLeaseSeconds": 3600,
        "autoResetFailedMax": 0,
        "verifyTimeoutSeconds": 600,
        "kvInlineMaxBytes": 2048,
        "kvArtifactThresholdBytes": 16384,
        "maxEscalations": 2,
        "snapshotMaxLagSeconds": 1.0,
    },
    "runners": {},
}


def _merge(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    merged = copy.deepcopy(base)
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
    """Defaults, overlaid with the user's file when it exists. A broken file is an error, not
    silently ignored: the user asked for settings we would otherwise drop."""
    if not path.exists():
        return copy.deepcopy(DEFAULTS)
    try:
        user = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ClavainError(f"{path}: not valid JSON ({exc}); fix or remove the file") from exc
    if not isinstance(user, dict):
        raise ClavainError(f"{path}: the top level must be a JSON object")
    return _merge(DEFAULTS, user)


def get(config: dict[str, Any], dotted: str, default: Any = None) -> Any:
    """`get(cfg, "defaults.verifyRunner")`."""
    node: Any = config
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return default
        node = node[part]
    return node
