"""Checking a JSON document against one of Clavain's committed JSON Schemas without jsonschema
(stdlib only: hooks read the config and the sprint checkpoint). The checker knows the few
keywords pydantic emits for Clavain's models and fails closed on any other; a test keeps it in
agreement with jsonschema. Only when it refuses a document is jsonschema imported, to name the
JSON path of the problem and what is allowed there, in one line.
"""

from __future__ import annotations

import math
import os

TYPE_CHECKING = False
if TYPE_CHECKING:  # `typing` and `json` cost more than a hook's whole check of the checkpoint
    from typing import Any

SCHEMAS_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "schemas")

_loaded: dict[str, dict[str, Any]] = {}


def schema(name: str) -> dict[str, Any]:
    """A schema shipped in the package (`clavain/schemas/<name>`), read once per process."""
    if name not in _loaded:
        from clavain import fastjson

        with open(os.path.join(SCHEMAS_DIR, name), encoding="utf-8") as handle:
            _loaded[name] = fastjson.loads(handle.read())
    return _loaded[name]


def check(document: Any, name: str, where: str) -> str | None:
    """None when `document` matches schema `name`; else one line naming the problem."""
    rules = schema(name)
    return None if valid(document, rules, rules) else explain(where, document, rules, name)

_TYPES = {
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
    # JSON Schema 2020-12: 3.0 is an integer too.
    "integer": lambda v: (isinstance(v, int) and not isinstance(v, bool))
    or (isinstance(v, float) and v.is_integer()),
    # An int of any size is finite (`math.isfinite` would overflow on a 400-digit one).
    "number": lambda v: (isinstance(v, int) and not isinstance(v, bool))
    or (isinstance(v, float) and math.isfinite(v)),
}


_KNOWN_KEYWORDS = frozenset({
    "$ref", "anyOf", "type", "minimum", "maximum", "exclusiveMinimum", "minLength", "maxLength",
    "items", "minItems", "maxItems", "const", "enum", "properties", "additionalProperties",
    "pattern",
    "required", "default", "description", "title", "$defs", "$schema", "$id"})


def _same(value: Any, expected: Any) -> bool:
    """JSON equality: 1 and True are different values, 1 and 1.0 the same."""
    if isinstance(value, bool) or isinstance(expected, bool):
        return type(value) is type(expected) and value == expected
    return value == expected


def valid(value: Any, schema: dict[str, Any], root: dict[str, Any]) -> bool:
    """Whether `value` satisfies `schema`, for the keywords pydantic emits for Clavain's models
    (a test checks this agrees with jsonschema). An unknown keyword fails closed."""
    if "$ref" in schema:
        schema = root["$defs"][schema["$ref"].rsplit("/", 1)[-1]]
    if "anyOf" in schema:
        return any(valid(value, option, root) for option in schema["anyOf"])
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
    if "const" in schema and not _same(value, schema["const"]):
        return False
    if "enum" in schema and not any(_same(value, option) for option in schema["enum"]):
        return False
    if isinstance(value, str) and not (schema.get("minLength", 0) <= len(value)
                                       <= schema.get("maxLength", len(value))):
        return False
    if isinstance(value, str) and "pattern" in schema:
        import re  # only for the few strings with a pattern (ids), never on a hook's path

        if re.search(schema["pattern"], value) is None:
            return False
    if isinstance(value, list):
        if not schema.get("minItems", 0) <= len(value) <= schema.get("maxItems", len(value)):
            return False
        if "items" in schema and not all(valid(item, schema["items"], root) for item in value):
            return False
    if isinstance(value, dict):
        if any(key not in value for key in schema.get("required", ())):
            return False
        properties = schema.get("properties", {})
        extra = schema.get("additionalProperties", True)
        for key, item in value.items():
            if key in properties:
                if not valid(item, properties[key], root):
                    return False
            elif extra is False or (isinstance(extra, dict) and not valid(item, extra, root)):
                return False
    return set(schema) <= _KNOWN_KEYWORDS


def explain(where: str, user: Any, schema: dict[str, Any], name: str) -> str:
    """One line naming the JSON path of the first problem and what is allowed there."""
    try:
        import jsonschema
    except ModuleNotFoundError:  # a hook before the plugin venv exists
        return (f"{where}: does not match schemas/{name}; `clavain doctor` names the problem")
    error = jsonschema.exceptions.best_match(jsonschema.Draft202012Validator(schema)
                                            .iter_errors(user))
    if error is None:  # jsonschema takes NaN and Infinity as numbers; Clavain does not
        path = _non_finite(user)
        return (f"{where}: {path}: not a finite number" if path
                else f"{where}: does not match schemas/{name}")
    path = ".".join(str(part) for part in error.absolute_path) or "(top level)"
    allowed = _allowed(error)
    return f"{where}: {path}: {error.message}" + (f" ({allowed})" if allowed else "")


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
