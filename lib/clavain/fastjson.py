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


def dumps(value: object, *, indent: int | None = None, ensure_ascii: bool = True) -> str:
    """What `json.dumps(value, indent=indent, ensure_ascii=ensure_ascii)` writes, with its
    other defaults (`, ` and `: ` between items when not indented, `,` at a line's end when
    indented)."""
    if _json is None:
        import json

        return json.dumps(value, indent=indent, ensure_ascii=ensure_ascii)
    quote = _json.encode_basestring_ascii if ensure_ascii else _json.encode_basestring
    parts: list[str] = []
    try:
        _encode(value, parts, 0, quote, None if indent is None else " " * indent)
    except _TooDeep:  # rare: `json` decides, so how deep is too deep is its answer
        import json

        return json.dumps(value, indent=indent, ensure_ascii=ensure_ascii)
    return "".join(parts)


class _TooDeep(Exception):
    """Nested deeper than this encoder goes on the stack (`json` itself may go further)."""


def _encode(value: object, parts: list[str], depth: int, quote, indent: str | None) -> None:
    if depth > 500:
        raise _TooDeep
    if isinstance(value, str):
        parts.append(quote(value))
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
    elif isinstance(value, (dict, list, tuple)):
        is_dict = isinstance(value, dict)
        if not value:
            parts.append("{}" if is_dict else "[]")
            return
        inner = None if indent is None else "\n" + indent * (depth + 1)
        parts.append("{" if is_dict else "[")
        for index, item in enumerate(value.items() if is_dict else value):
            if inner is not None:
                parts.append("," + inner if index else inner)
            elif index:
                parts.append(", ")
            if is_dict:
                parts.append(quote(_key(item[0])))
                parts.append(": ")
                item = item[1]
            _encode(item, parts, depth + 1, quote, indent)
        if inner is not None:
            parts.append("\n" + indent * depth)
        parts.append("}" if is_dict else "]")
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
