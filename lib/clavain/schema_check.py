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


# A file only Clavain writes (one line): past this many problems it was not written as this
# file; a person's config file has every problem listed.
SHOWN_PROBLEMS = 10


def explain(where: str, user: Any, schema: dict[str, Any], name: str, *,
            one_line: bool = False) -> str:
    """Every problem of `user` against `schema`, in words: its JSON path, the value as written
    (JSON, not Python) and what is expected there. One problem is one line; several are a
    count and one indented line each, so a person fixes the file once (`one_line`: joined by
    `; `, for a file only Clavain writes)."""
    try:
        import jsonschema
    except ModuleNotFoundError:  # a hook before the plugin venv exists
        return (f"{where}: does not match schemas/{name}; `clavain doctor` names the problem")
    validator = jsonschema.Draft202012Validator(schema)
    problems = list(dict.fromkeys(
        line for error in validator.iter_errors(user) for line in _in_words(error, schema)))
    path = _non_finite(user)  # jsonschema takes NaN and Infinity as numbers; Clavain does not
    if path:
        problems.append(f"{path}: not a finite number")
    problems.sort(key=lambda line: line.split(": ", 1)[0])
    if not problems:
        return f"{where}: does not match schemas/{name}"
    if len(problems) == 1:
        return f"{where}: {problems[0]}"
    if one_line:
        shown = problems[:SHOWN_PROBLEMS]
        if len(problems) > len(shown):
            shown.append(f"… and {len(problems) - len(shown)} more")
        return f"{where}: {len(problems)} problems: " + "; ".join(shown)
    return f"{where}: {len(problems)} problems:\n" + "\n".join(f"  {p}" for p in problems)


def _path(error: Any) -> str:
    """`supervisor.claude.allowedTools[0]`: keys dotted, list places in brackets."""
    text = ""
    for part in error.absolute_path:
        text += f"[{part}]" if isinstance(part, int) else f".{part}" if text else str(part)
    return text or "(top level)"


def _as_written(value: Any) -> str:
    import json

    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= 60 else text[:57] + "..."


def _in_words(error: Any, root: dict[str, Any]) -> list[str]:
    """One error as lines `path: value as written (expected …)`; an `anyOf` whose value is an
    object (a section that may also be null) speaks for the section's own problems."""
    rule = error.schema if isinstance(error.schema, dict) else {}
    where, value = _path(error), error.instance
    if error.validator == "additionalProperties" and isinstance(value, dict):
        allowed = sorted(rule.get("properties", {}))
        return [f"{where + '.' if error.absolute_path else ''}{key}: not a known key "
                f"({_closest(key, allowed)})" for key in value if key not in allowed]
    if error.validator == "required":
        missing = [key for key in rule.get("required", []) if key not in (value or {})]
        keys = ", ".join(_as_written(key) for key in missing)
        return [f"{where}: the key{'s' if len(missing) > 1 else ''} {keys} "
                f"{'are' if len(missing) > 1 else 'is'} missing"]
    if error.validator == "anyOf" and isinstance(value, dict):
        inner = [sub for sub in error.context if sub.validator != "type"]
        if inner:
            return [line for sub in inner for line in _in_words(sub, root)]
    field = rule
    if error.validator != "anyOf":
        field = _field_rule(error, root) or rule
    return [f"{where}: {_as_written(value)} (expected {_expected(field, root)})"]


def _field_rule(error: Any, root: dict[str, Any]) -> dict[str, Any] | None:
    """The whole rule of the field an error is in (its `anyOf` options, bounds and type), so
    the words say everything the field takes, not the one keyword that failed."""
    parent = error.parent
    if parent is not None and parent.validator == "anyOf" and isinstance(parent.schema, dict):
        return parent.schema
    return None


# Patterns in the committed schemas, in words (a person never reads a regular expression).
PATTERN_WORDS = {
    "^postgres(ql)?://": "a URL starting postgres:// or postgresql:// "
                         "(postgresql://user@host:port/db)",
}


def _expected(rule: dict[str, Any], root: dict[str, Any]) -> str:
    if "$ref" in rule:
        rule = root.get("$defs", {}).get(rule["$ref"].rsplit("/", 1)[-1], {})
    if "anyOf" in rule:
        return " or ".join(dict.fromkeys(_expected(option, root) for option in rule["anyOf"]))
    if "enum" in rule:
        return "one of " + ", ".join(_as_written(option) for option in rule["enum"])
    if "const" in rule:
        return _as_written(rule["const"])
    kind = rule.get("type")
    if "pattern" in rule:
        return _pattern_words(rule["pattern"])
    words = {"integer": "a whole number", "number": "a number", "boolean": "true or false",
             "string": "text", "null": "null", "array": "a list", "object": "an object"}
    text = words.get(kind, "a value") if isinstance(kind, str) else "a value"
    low = rule.get("minimum", rule.get("exclusiveMinimum"))
    high = rule.get("maximum")
    if low is not None and high is not None:
        text += f" from {_number(low)} to {_number(high)}"
    elif "exclusiveMinimum" in rule:
        text += f" above {_number(rule['exclusiveMinimum'])}"
    elif low is not None:
        text += f" of at least {_number(low)}"
    elif high is not None:
        text += f" of at most {_number(high)}"
    if kind == "string" and rule.get("minLength"):
        text = "non-empty text" if rule["minLength"] == 1 else text
    if kind == "array" and "items" in rule:
        text += f" of {_plural(_expected(rule['items'], root))}"
    return text


def _plural(words: str) -> str:
    """`a whole number` → `whole numbers`, `an object` → `objects`, `text` → `texts`."""
    head, _, rest = words.partition(" or ")
    for article in ("a ", "an "):
        if head.startswith(article):
            head = head[len(article):]
            break
    first, space, tail = head.partition(" ")
    if tail.split(" ", 1)[0] in ("number", "numbers"):
        first, tail = f"{first} numbers", tail.split(" ", 1)[1] if " " in tail else ""
        head = f"{first} {tail}".strip()
    else:
        head = f"{first}s{space}{tail}"
    return head + (f" or {rest}" if rest else "")


def _pattern_words(pattern: str) -> str:
    import re  # only once a file is wrong

    if pattern in PATTERN_WORDS:
        return PATTERN_WORDS[pattern]
    found = re.match(r"^\^\[A-Za-z0-9\]\[A-Za-z0-9([._:-]+)\]\{0,(\d+)\}\$$", pattern)
    if found:  # the ids of nodes, checks and graphs
        return (f"an id: a letter or digit, then up to {found.group(2)} letters, digits or "
                f"{' '.join(found.group(1))}")
    return f"text matching {pattern}"


def _number(value: float) -> str:
    return f"{value:,}" if isinstance(value, int) else f"{value:g}"


def _closest(key: str, allowed: list[str]) -> str:
    import difflib

    close = difflib.get_close_matches(key, allowed, n=1, cutoff=0.6)
    if close:
        return f"did you mean {close[0]}?"
    return "allowed keys: " + ", ".join(allowed)


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
