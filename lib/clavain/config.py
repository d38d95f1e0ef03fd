"""User configuration: `.clavain/config.json` merged over built-in defaults.

Stdlib only so hooks may read it. Keys are camelCase, as in the JSON file. The file is checked
against the JSON Schema generated from `clavain.models.config` (shipped beside this module) by a
small stdlib checker that knows the schema's few keywords, so a valid file costs no jsonschema
import; only when it finds a problem is jsonschema loaded, to name the JSON path and what is
allowed there in one line.
"""

from __future__ import annotations

import copy
import json
import math
import os
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

SCHEMA_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "config.schema.json")


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
    """Defaults, overlaid with the user's file when it exists. A broken file is an error naming
    what is wrong, not silently ignored: the user asked for settings we would otherwise drop."""
    try:
        with open(path, "rb") as handle:
            raw = handle.read()
    except FileNotFoundError:
        return copy.deepcopy(DEFAULTS)
    except OSError as exc:
        raise ClavainError(f"{path}: unreadable ({exc.strerror or exc})") from None
    from clavain.textio import BadText, decode, load_json

    try:
        user = load_json(decode(raw, str(path)), str(path))
    except BadText as exc:
        raise ClavainError(f"{exc}; fix or remove the file") from None
    schema = _schema()
    if not _valid(user, schema, schema):
        raise ClavainError(explain(path, user, schema))
    return _merge(DEFAULTS, user)


def get(config: dict[str, Any], dotted: str, default: Any = None) -> Any:
    """`get(cfg, "defaults.verifyRunner")`."""
    node: Any = config
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return default
        node = node[part]
    return node


# ---------------------------------------------------------------- checking against the schema

_schema_cache: dict[str, Any] = {}


def _schema() -> dict[str, Any]:
    if not _schema_cache:
        with open(SCHEMA_PATH, encoding="utf-8") as handle:
            _schema_cache.update(json.load(handle))
    return _schema_cache


_TYPES = {
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: (isinstance(v, (int, float)) and not isinstance(v, bool)
                         and math.isfinite(v)),
}


_KNOWN_KEYWORDS = frozenset({
    "$ref", "anyOf", "type", "minimum", "maximum", "exclusiveMinimum", "minLength", "items",
    "properties", "additionalProperties", "required", "default", "description", "title",
    "$defs", "$schema", "$id"})


def _valid(value: Any, schema: dict[str, Any], root: dict[str, Any]) -> bool:
    """Whether `value` satisfies `schema`, for the keywords pydantic emits for the config model
    (a test checks this agrees with jsonschema). An unknown keyword fails closed."""
    if "$ref" in schema:
        schema = root["$defs"][schema["$ref"].rsplit("/", 1)[-1]]
    if "anyOf" in schema:
        return any(_valid(value, option, root) for option in schema["anyOf"])
    kind = schema.get("type")
    if kind is not None and not _TYPES[kind](value):
        return False
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if "minimum" in schema and value < schema["minimum"]:
            return False
        if "maximum" in schema and value > schema["maximum"]:
            return False
        if "exclusiveMinimum" in schema and value <= schema["exclusiveMinimum"]:
            return False
    if isinstance(value, str) and len(value) < schema.get("minLength", 0):
        return False
    if isinstance(value, list) and "items" in schema:
        return all(_valid(item, schema["items"], root) for item in value)
    if isinstance(value, dict):
        if any(key not in value for key in schema.get("required", ())):
            return False
        properties = schema.get("properties", {})
        extra = schema.get("additionalProperties", True)
        for key, item in value.items():
            if key in properties:
                if not _valid(item, properties[key], root):
                    return False
            elif extra is False or (isinstance(extra, dict) and not _valid(item, extra, root)):
                return False
    return set(schema) <= _KNOWN_KEYWORDS


def explain(path: Path, user: Any, schema: dict[str, Any]) -> str:
    """One line naming the JSON path of the first problem and what is allowed there."""
    try:
        import jsonschema
    except ModuleNotFoundError:  # a hook before the plugin venv exists
        return (f"{path}: does not match the configuration schema "
                "(schemas/config.schema.json); `clavain doctor` names the problem")
    error = jsonschema.exceptions.best_match(jsonschema.Draft202012Validator(schema)
                                            .iter_errors(user))
    if error is None:  # jsonschema takes NaN and Infinity as numbers; Clavain does not
        where = _non_finite(user)
        return (f"{path}: {where}: not a finite number" if where
                else f"{path}: does not match schemas/config.schema.json")
    where = ".".join(str(part) for part in error.absolute_path) or "(top level)"
    allowed = _allowed(error)
    return f"{path}: {where}: {error.message}" + (f" ({allowed})" if allowed else "")


def _allowed(error: Any) -> str:
    """What the schema allows at the error's place, in words."""
    rule = error.schema if isinstance(error.schema, dict) else {}
    if error.validator == "additionalProperties":
        return "allowed keys: " + ", ".join(sorted(rule.get("properties", {})))
    if error.validator == "required":
        return "required keys: " + ", ".join(rule.get("required", []))
    parts = []
    if "type" in rule:
        parts.append(f"type {rule['type']}")
    for keyword, words in (("minimum", ">="), ("exclusiveMinimum", ">"), ("maximum", "<=")):
        if keyword in rule:
            parts.append(f"{words} {rule[keyword]}")
    return "allowed: " + " ".join(parts) if parts else ""


def _non_finite(value: Any, where: str = "") -> str | None:
    """The dotted path of the first NaN or infinity in `value`, if any."""
    if isinstance(value, float) and not math.isfinite(value):
        return where or "(top level)"
    items = value.items() if isinstance(value, dict) else (
        enumerate(value) if isinstance(value, list) else ())
    for key, item in items:
        found = _non_finite(item, f"{where}.{key}" if where else str(key))
        if found:
            return found
    return None
