"""Find and parse the verdict header an agent ends its answer with. Stdlib only (SubagentStop).

A header is a run of `KEY: value` lines (TYPE, STATUS, MODEL, TOKENS_SPENT, FILES_CHANGED,
FINDINGS_COUNT, SUMMARY, DETAIL_PATH). Models dress it up, so a line may carry bullets, block
quotes, bold/italic/backticks, odd spacing or key case, and sit inside a code fence. Keys must
still match exactly once the dressing is gone: `TESTS_STATUS:` is never `STATUS:`.

The LAST block that carries a STATUS (or TYPE) wins, so an agent quoting the format earlier in
its answer, or a stray `Summary:` line in prose, does not confuse it. A code fence ends a block
(an example cannot lend fields to the real header), and a lone `Status: …` prose line whose value
is no status at all never beats an earlier header. Anything missing or outside the enums raises
`VerdictParseError` with every problem listed (a broken last header is an error even when an
earlier one is complete: that one may be an example); nothing is guessed.

Every step is linear in the message (a 1 MB answer parses in milliseconds): a header line's key
sits in its first few dozen characters, so only that prefix goes through the regex.
"""

from __future__ import annotations

import re

from clavain.markdown_keys import key_line

TYPE_CHECKING = False
if TYPE_CHECKING:  # SubagentStop imports this: no `typing` import
    from typing import Any

VERDICT_STATUSES = ("CLEAN", "NEEDS_ATTENTION", "BLOCKED", "ERROR")
IMPLEMENTATION_STATUSES = ("COMPLETE", "PARTIAL", "FAILED")
STATUSES_BY_TYPE = {"verdict": VERDICT_STATUSES, "implementation": IMPLEMENTATION_STATUSES}
HEADER_KEYS = ("TYPE", "STATUS", "MODEL", "TOKENS_SPENT", "FILES_CHANGED", "FINDINGS_COUNT",
               "SUMMARY", "DETAIL_PATH")
REQUIRED_KEYS = ("TYPE", "STATUS", "SUMMARY")
SUMMARY_MAX_CHARS = 300

# `> - **Status**:`, `1. _TYPE_ :`, `` `SUMMARY:` `` …: a header line up to its first colon
# (optional quote marks, an optional bullet, emphasis around the key, the colon inside or outside
# the emphasis). Only that short prefix is matched, so run time does not grow with the line.
_EXTRA_KEY = re.compile(r"^[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+$")
_FENCE = re.compile(r"^\s*(?:```|~~~)")
_BULLET_ITEM = re.compile(r"^(?:>\s*)*(?:[-*+•]|\d{1,3}[.)])\s+(?P<item>.+)$")
_EMPHASIS = "*_`"
_EMPTY_VALUES = {"", "-", "—", "none", "n/a", "na", "null", "nil", "[]", "()", "(none)"}
# A minus sign counts only where it starts a word: `P1-2` holds the number 1, `-2` is negative.
_NUMBER = re.compile(r"(?:(?<!\w)(?P<minus>[-\u2212]))?(?P<whole>\d+)(?:\.(?P<fraction>\d+))?"
                     r"\s*(?P<scale>[kKmM]\b)?")
# More digits than any count can have: reported as this (out of every bound) rather than
# converted (int() refuses > 4,300 digits, float() overflows).
_MAX_DIGITS = 30
TOKENS_SPENT_MAX = 10**15
FINDINGS_COUNT_MAX = 10**6


class VerdictParseError(ValueError):
    """The header is missing or wrong; `problems` lists each thing to fix."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("; ".join(problems))
        self.problems = problems


def _strip_emphasis(value: str) -> str:
    value = value.strip()
    start, end = 0, len(value)  # peel matching pairs by index: slicing each time is quadratic
    while end - start >= 2 and value[start] == value[end - 1] and value[start] in _EMPHASIS:
        start, end = start + 1, end - 1
        while start < end and value[start].isspace():
            start += 1
        while end > start and value[end - 1].isspace():
            end -= 1
    return value[start:end].strip(_EMPHASIS + " \t")


def _header_line(line: str) -> tuple[str, str] | None:
    """(KEY, value) when `line` is a header line; ("", "") for an extra UPPER_SNAKE key such as
    `TESTS_STATUS:`, which never counts but may sit inside a header; else None."""
    found = key_line(line)
    if found is None:
        return None
    match, key, value = found
    if key not in HEADER_KEYS:
        return ("", "") if _EXTRA_KEY.match(match["key"]) else None
    return key, _strip_emphasis(value)


def _blocks(text: str) -> list[list[tuple[str, str, list[str]]]]:
    """Runs of header lines as (KEY, value, bullet items below it). Blank lines and extra
    UPPER_SNAKE keys do not end a run; any other line does (a code fence too), and so does a key
    repeated within the run."""
    blocks: list[list[tuple[str, str, list[str]]]] = []
    current: list[tuple[str, str, list[str]]] = []
    for line in text.replace("\r\n", "\n").replace("\r", "\n").split("\n"):
        if not line.strip():
            continue
        if _FENCE.match(line):  # a header lies wholly inside a fence or wholly outside it
            if current:
                blocks.append(current)
                current = []
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
        # A FILES_CHANGED with an empty value may list its files as bullets on the next lines.
        bullet = (_BULLET_ITEM.match(line.strip())
                  if current and current[-1][0] == "FILES_CHANGED" and not current[-1][1]
                  else None)
        if bullet:
            current[-1][2].append(bullet["item"].strip())
            continue
        if current:
            blocks.append(current)
            current = []
    if current:
        blocks.append(current)
    return blocks


Block = list[tuple[str, str, list[str]]]


def _prose_line(block: Block) -> bool:
    """A lone `Status: …`/`Type: …` line whose value is no status or type (`Status: the build
    is green`): prose, which never beats an earlier header."""
    if len(block) != 1:
        return False
    key, value, _ = block[0]
    if key == "STATUS":
        return _enum_word(value) not in VERDICT_STATUSES + IMPLEMENTATION_STATUSES
    return value.strip().lower().strip(_EMPHASIS) not in STATUSES_BY_TYPE


def _pick_block(text: str) -> tuple[Block | None, list[Block]]:
    """(the header to use, the header-like blocks before it)."""
    blocks = _blocks(text)
    headers = [block for block in blocks if any(key in ("STATUS", "TYPE") for key, _, _ in block)]
    for index in range(len(headers) - 1, -1, -1):
        if not _prose_line(headers[index]):
            return headers[index], headers[:index]
    if headers:
        return headers[-1], headers[:-1]
    return (blocks[-1] if blocks else None), []


def _number(value: str) -> int | None:
    """`1200`, `~1,200`, `1.5k`, `1200 (estimated)`, `-3` → int, exactly (integer arithmetic,
    a fraction rounded half up); no digits → None."""
    cleaned = value.replace(",", "").replace("_", "").replace("\u202f", "").replace("\u00a0", "")
    match = _NUMBER.search(cleaned)
    if not match:
        return None
    whole, fraction = match["whole"].lstrip("0"), (match["fraction"] or "")[:_MAX_DIGITS]
    sign = -1 if match["minus"] else 1
    if len(whole) > _MAX_DIGITS:
        return sign * 10**_MAX_DIGITS
    scale = {"k": 1_000, "m": 1_000_000}.get((match["scale"] or "").lower(), 1)
    denominator = 10 ** len(fraction)
    quotient, remainder = divmod(int(whole + fraction or "0") * scale, denominator)
    return sign * (quotient + (2 * remainder >= denominator))


def _tokens(value: str) -> int | None:
    """TOKENS_SPENT is optional and replaced by the measured count: a negative or absurd
    figure is dropped rather than failing the verdict."""
    tokens = _number(value)
    return tokens if tokens is not None and 0 <= tokens <= TOKENS_SPENT_MAX else None


def _file_list(value: str, items: list[str]) -> list[str]:
    raw = value.strip()
    if raw.startswith("[") and raw.endswith("]"):
        raw = raw[1:-1]
    if raw.strip().lower() in _EMPTY_VALUES:
        raw = ""
    parts = [*(p for p in re.split(r"[,;]", raw)), *items] if raw else list(items)
    files: dict[str, None] = {}  # ordered and de-duplicated in linear time
    for part in parts:
        name = _strip_emphasis(part).strip("'\"").strip()
        if name and name.lower() not in _EMPTY_VALUES:
            files.setdefault(name)
    return list(files)


def _enum_word(value: str) -> str:
    """`Needs attention`, `needs-attention`, `**CLEAN**` → `NEEDS_ATTENTION`, `CLEAN`."""
    return re.sub(r"[\s-]+", "_", _strip_emphasis(value).rstrip(".!").strip()).upper()


def parse_header(text: str) -> dict[str, Any]:
    """The last verdict header in `text` as typed fields:
    type, status, model, tokens_spent, files_changed, findings_count, summary, detail_path.

    Raises VerdictParseError listing every problem (never a partial or guessed result).
    """
    block, earlier = _pick_block(text or "")
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
        elif not 0 <= findings <= FINDINGS_COUNT_MAX:
            problems.append(f"FINDINGS_COUNT {values['FINDINGS_COUNT']!r} is out of range "
                            f"(0 to {FINDINGS_COUNT_MAX:,})")
    if problems and any(all(any(key == required and value for key, value, _ in other)
                            for required in REQUIRED_KEYS) for other in earlier):
        problems.append("only the last header counts (an earlier, complete one is ignored)")
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
        "tokens_spent": _tokens(values.get("TOKENS_SPENT", "")),
        "files_changed": _file_list(values.get("FILES_CHANGED", ""), items),
        "findings_count": findings,
        "summary": summary,
        "detail_path": detail if detail.lower() not in _EMPTY_VALUES else None,
    }
