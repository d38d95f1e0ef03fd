"""Find and parse the verdict header an agent ends its answer with. Stdlib only (SubagentStop).

A header is a run of `KEY: value` lines (TYPE, STATUS, MODEL, TOKENS_SPENT, FILES_CHANGED,
FINDINGS_COUNT, SUMMARY, DETAIL_PATH). Models dress it up, so a line may carry bullets, block
quotes, bold/italic/backticks, odd spacing or key case, and sit inside a code fence. Keys must
still match exactly once the dressing is gone: `TESTS_STATUS:` is never `STATUS:`.

The LAST block that carries a STATUS (or TYPE) wins, so an agent quoting the format earlier in
its answer, or a stray `Summary:` line in prose, does not confuse it. Anything missing or outside
the enums raises `VerdictParseError` with every problem listed; nothing is guessed.
"""

from __future__ import annotations

import re
from typing import Any

VERDICT_STATUSES = ("CLEAN", "NEEDS_ATTENTION", "BLOCKED", "ERROR")
IMPLEMENTATION_STATUSES = ("COMPLETE", "PARTIAL", "FAILED")
STATUSES_BY_TYPE = {"verdict": VERDICT_STATUSES, "implementation": IMPLEMENTATION_STATUSES}
HEADER_KEYS = ("TYPE", "STATUS", "MODEL", "TOKENS_SPENT", "FILES_CHANGED", "FINDINGS_COUNT",
               "SUMMARY", "DETAIL_PATH")
REQUIRED_KEYS = ("TYPE", "STATUS", "SUMMARY")
SUMMARY_MAX_CHARS = 300

# `> - **Status**: value`, `1. _TYPE_ : value`, `` `SUMMARY:` value `` …: optional quote marks,
# an optional bullet, emphasis around the key, the colon inside or outside the emphasis.
_LINE = re.compile(
    r"^\s*(?:>\s*)*(?:(?:[-*+•]|\d{1,2}[.)])\s+)?[*_`]*\s*"
    r"(?P<key>[A-Za-z][A-Za-z _-]{1,20}?)\s*[*_`]*\s*:\s*(?P<value>.*?)\s*$"
)
_EXTRA_KEY = re.compile(r"^[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+$")
_FENCE = re.compile(r"^\s*(?:```|~~~)")
_BULLET_ITEM = re.compile(r"^\s*(?:>\s*)*(?:[-*+•]|\d{1,3}[.)])\s+(?P<item>.+?)\s*$")
_EMPHASIS = "*_`"
_EMPTY_VALUES = {"", "-", "—", "none", "n/a", "na", "null", "nil", "[]", "()", "(none)"}
_NUMBER = re.compile(r"(\d+(?:\.\d+)?)\s*([kKmM]\b)?")


class VerdictParseError(ValueError):
    """The header is missing or wrong; `problems` lists each thing to fix."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("; ".join(problems))
        self.problems = problems


def _strip_emphasis(value: str) -> str:
    value = value.strip()
    while len(value) >= 2 and value[0] == value[-1] and value[0] in _EMPHASIS:
        value = value[1:-1].strip()
    return value.strip(_EMPHASIS + " \t")


def _header_line(line: str) -> tuple[str, str] | None:
    """(KEY, value) when `line` is a header line; ("", "") for an extra UPPER_SNAKE key such as
    `TESTS_STATUS:`, which never counts but may sit inside a header; else None."""
    match = _LINE.match(line)
    if not match:
        return None
    key = re.sub(r"[\s-]+", "_", match["key"].strip()).upper()
    if key not in HEADER_KEYS:
        return ("", "") if _EXTRA_KEY.match(match["key"]) else None
    return key, _strip_emphasis(match["value"])


def _blocks(text: str) -> list[list[tuple[str, str, list[str]]]]:
    """Runs of header lines as (KEY, value, bullet items below it). Blank lines, code fences and
    extra UPPER_SNAKE keys do not end a run; any other line does, and so does a key repeated
    within the run."""
    blocks: list[list[tuple[str, str, list[str]]]] = []
    current: list[tuple[str, str, list[str]]] = []
    for line in text.replace("\r\n", "\n").replace("\r", "\n").split("\n"):
        if not line.strip() or _FENCE.match(line):
            continue
        parsed = _header_line(line)
        if parsed == ("", ""):
            continue
        if parsed is not None:
            if any(key == parsed[0] for key, _, _ in current):
                blocks.append(current)
                current = []
            current.append((parsed[0], parsed[1], []))
            continue
        bullet = _BULLET_ITEM.match(line)
        # A FILES_CHANGED with an empty value may list its files as bullets on the next lines.
        if bullet and current and current[-1][0] == "FILES_CHANGED" and not current[-1][1]:
            current[-1][2].append(bullet["item"])
            continue
        if current:
            blocks.append(current)
            current = []
    if current:
        blocks.append(current)
    return blocks


def _pick_block(text: str) -> list[tuple[str, str, list[str]]] | None:
    blocks = _blocks(text)
    for block in reversed(blocks):
        if any(key in ("STATUS", "TYPE") for key, _, _ in block):
            return block
    return blocks[-1] if blocks else None


def _number(value: str) -> int | None:
    """`1200`, `~1,200`, `1.2k`, `1200 (estimated)` → int; no digits → None."""
    cleaned = value.replace(",", "").replace("_", "").replace("\u202f", "").replace(" ", " ")
    match = _NUMBER.search(cleaned)
    if not match:
        return None
    number = float(match[1])
    scale = {"k": 1_000, "m": 1_000_000}.get((match[2] or "").lower(), 1)
    return round(number * scale)


def _file_list(value: str, items: list[str]) -> list[str]:
    raw = value.strip()
    if raw.startswith("[") and raw.endswith("]"):
        raw = raw[1:-1]
    if raw.strip().lower() in _EMPTY_VALUES:
        raw = ""
    parts = [*(p for p in re.split(r"[,;]", raw)), *items] if raw else list(items)
    files = []
    for part in parts:
        name = _strip_emphasis(part).strip("'\"").strip()
        if name and name.lower() not in _EMPTY_VALUES and name not in files:
            files.append(name)
    return files


def _enum_word(value: str) -> str:
    """`Needs attention`, `needs-attention`, `**CLEAN**` → `NEEDS_ATTENTION`, `CLEAN`."""
    return re.sub(r"[\s-]+", "_", _strip_emphasis(value).rstrip(".!").strip()).upper()


def parse_header(text: str) -> dict[str, Any]:
    """The last verdict header in `text` as typed fields:
    type, status, model, tokens_spent, files_changed, findings_count, summary, detail_path.

    Raises VerdictParseError listing every problem (never a partial or guessed result).
    """
    block = _pick_block(text or "")
    if block is None:
        raise VerdictParseError(["no verdict header (expected TYPE:, STATUS:, SUMMARY: lines)"])
    values = {key: value for key, value, _ in block}
    items = next((extra for key, _, extra in block if key == "FILES_CHANGED"), [])
    problems = [f"missing {key}:" for key in REQUIRED_KEYS if not values.get(key)]

    kind = values.get("TYPE", "").strip().lower().strip(_EMPHASIS)
    if values.get("TYPE") and kind not in STATUSES_BY_TYPE:
        problems.append(f"TYPE {values['TYPE']!r} is not verdict or implementation")
    status = _enum_word(values.get("STATUS", ""))
    if values.get("STATUS"):
        allowed = STATUSES_BY_TYPE.get(kind, VERDICT_STATUSES + IMPLEMENTATION_STATUSES)
        if status not in allowed:
            label = f"a {kind} STATUS" if kind in STATUSES_BY_TYPE else "a STATUS"
            problems.append(f"STATUS {values['STATUS']!r} is not {label} "
                            f"({' | '.join(allowed)})")

    findings: int | None = 0
    if values.get("FINDINGS_COUNT", "").lower() not in _EMPTY_VALUES:
        findings = _number(values["FINDINGS_COUNT"])
        if findings is None:
            problems.append(f"FINDINGS_COUNT {values['FINDINGS_COUNT']!r} is not a number")
    if problems:
        raise VerdictParseError(problems)

    summary = " ".join(values["SUMMARY"].split())
    if len(summary) > SUMMARY_MAX_CHARS:
        summary = summary[: SUMMARY_MAX_CHARS - 1].rstrip() + "…"
    detail = values.get("DETAIL_PATH", "").strip("'\"")
    model = values.get("MODEL", "")
    return {
        "type": kind,
        "status": status,
        "model": model if model.lower() not in _EMPTY_VALUES else None,
        "tokens_spent": _number(values.get("TOKENS_SPENT", "")),
        "files_changed": _file_list(values.get("FILES_CHANGED", ""), items),
        "findings_count": findings,
        "summary": summary,
        "detail_path": detail if detail.lower() not in _EMPTY_VALUES else None,
    }
