"""JSON for the per-tool-call hook path without the `json` package: `json` imports `re`, and on
this path `re` alone costs more than the whole budget check. The C accelerator `_json` (what
`json` itself uses) parses and escapes; this module only wires it up. Same results as
`json.loads` / `json.dumps` for what hooks read and write; on bad input it defers to `json`
itself, so errors read exactly as everywhere else (the error path may pay for the import).
"""

from __future__ import annotations

try:
    import _json
except ImportError:  # an interpreter without the accelerator: the package does it all
    _json = None

_WHITESPACE = " \t\n\r"
_CONSTANTS = {"NaN": float("nan"), "Infinity": float("inf"), "-Infinity": float("-inf")}


class _Context:
    """The attributes `_json.make_scanner` reads (those of `json.JSONDecoder()`)."""

    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int
    parse_constant = staticmethod(_CONSTANTS.__getitem__)


_scan = _json.make_scanner(_Context()) if _json is not None else None


def loads(text: str) -> object:
    if _scan is not None:
        start = len(text) - len(text.lstrip(_WHITESPACE))
        try:
            value, end = _scan(text, start)
        except (StopIteration, SystemError):
            # SystemError: `_json` raises its JSONDecodeError only once `json.decoder` is
            # imported; until then a syntax error surfaces as this. The parser below says it.
            value, end = None, -1
        if end >= 0 and not text[end:].strip(_WHITESPACE):
            return value
    import json  # bad JSON (or no accelerator): the standard error, from the standard parser

    return json.loads(text)


def dumps(value: object) -> str:
    """Compact-separated like `json.dumps(value)` with its defaults (ASCII-only output)."""
    if _json is None:
        import json

        return json.dumps(value)
    parts: list[str] = []
    _encode(value, parts, 0)
    return "".join(parts)


def _encode(value: object, parts: list[str], depth: int) -> None:
    if depth > 500:
        raise RecursionError("value nested too deeply for JSON")
    if isinstance(value, str):
        parts.append(_json.encode_basestring_ascii(value))
    elif value is None:
        parts.append("null")
    elif value is True:
        parts.append("true")
    elif value is False:
        parts.append("false")
    elif isinstance(value, int):
        parts.append(int.__repr__(value))
    elif isinstance(value, float):
        parts.append(_float(value))
    elif isinstance(value, dict):
        parts.append("{")
        for index, (key, item) in enumerate(value.items()):
            parts.append(", " if index else "")
            parts.append(_json.encode_basestring_ascii(_key(key)))
            parts.append(": ")
            _encode(item, parts, depth + 1)
        parts.append("}")
    elif isinstance(value, (list, tuple)):
        parts.append("[")
        for index, item in enumerate(value):
            parts.append(", " if index else "")
            _encode(item, parts, depth + 1)
        parts.append("]")
    else:
        raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


def _key(key: object) -> str:
    """A dict key as `json.dumps` writes it."""
    if isinstance(key, str):
        return key
    if key is True or key is False or key is None:
        return {True: "true", False: "false", None: "null"}[key]
    if isinstance(key, int):
        return int.__repr__(key)
    if isinstance(key, float):
        return _float(key)
    raise TypeError(f"keys must be str, int, float, bool or None, not {type(key).__name__}")


def _float(value: float) -> str:
    if value != value:
        return "NaN"
    if value in (float("inf"), float("-inf")):
        return "Infinity" if value > 0 else "-Infinity"
    return float.__repr__(value)
