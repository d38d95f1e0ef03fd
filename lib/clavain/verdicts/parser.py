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

Every step is linear in the message (1 MB of prose parses in about 0.1 s, 1 MB of nothing but
header-like lines in about 0.35 s): a header line's key sits in its first few dozen characters,
so only that prefix is read. No `re` (SubagentStop
parses every reviewer's answer: `re` cost it about a fifth of its time); each rule below names
the pattern it keeps, and `tests/unit/test_readers_without_re.py` holds the two side by side.
"""

from __future__ import annotations

from clavain.markdown_keys import (
    bullet_end,
    is_word_char,
    key_line,
    skip_quotes,
    skip_space,
    snake_upper,
)

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

_EMPHASIS = "*_`"
_EMPTY_VALUES = {"", "-", "—", "none", "n/a", "na", "null", "nil", "[]", "()", "(none)"}
_UPPER_SNAKE = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")
_MINUS_SIGNS = "-\u2212"
_SCALES = {"k": 1_000, "m": 1_000_000}
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


def _extra_key(key: str) -> bool:
    """An UPPER_SNAKE key of two words or more: `TESTS_STATUS`, `EXIT_2`."""
    words = key.split("_")
    return len(words) > 1 and key[:1].isalpha() and \
        all(word and all(char in _UPPER_SNAKE for char in word) for word in words)


def _is_fence(line: str) -> bool:
    """A code fence: ``` or ~~~ after any indentation."""
    return line.lstrip().startswith(("```", "~~~"))


def _bullet_item(line: str) -> str | None:
    """What follows a list bullet (quoted or not; 1 to 3 digits for a numbered one) and the
    whitespace after it on a stripped line, else None."""
    end = bullet_end(line, skip_quotes(line), 3)
    if end is None or end >= len(line) or not line[end].isspace():
        return None
    return line[skip_space(line, end):] or None


def _header_line(line: str) -> tuple[str, str] | None:
    """(KEY, value) when `line` is a header line; ("", "") for an extra UPPER_SNAKE key such as
    `TESTS_STATUS:`, which never counts but may sit inside a header; else None."""
    found = key_line(line)
    if found is None:
        return None
    match, key, value = found
    if key not in HEADER_KEYS:
        return ("", "") if _extra_key(match["key"]) else None
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
        if _is_fence(line):  # a header lies wholly inside a fence or wholly outside it
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
        bullet = (_bullet_item(line.strip())
                  if current and current[-1][0] == "FILES_CHANGED" and not current[-1][1]
                  else None)
        if bullet:
            current[-1][2].append(bullet.strip())
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
    found = _first_number(cleaned)
    if found is None:
        return None
    minus, whole, fraction, scale = found
    whole, fraction = whole.lstrip("0"), fraction[:_MAX_DIGITS]
    sign = -1 if minus else 1
    if len(whole) > _MAX_DIGITS:
        return sign * 10**_MAX_DIGITS
    multiplier = _SCALES.get(scale.lower(), 1)
    denominator = 10 ** len(fraction)
    quotient, remainder = divmod(int(whole + fraction or "0") * multiplier, denominator)
    return sign * (quotient + (2 * remainder >= denominator))


def _digits_end(text: str, at: int) -> int:
    while at < len(text) and text[at].isdecimal():
        at += 1
    return at


def _first_number(text: str) -> tuple[bool, str, str, str] | None:
    """(minus, whole digits, fraction digits, scale letter) of the first number in `text`: an
    optional minus, digits, optionally `.` and digits, then optionally (after whitespace) a
    `k` or `m` that ends a word. A minus sign counts only where it starts a word: `P1-2` holds
    the number 1, `-2` is negative."""
    for at, char in enumerate(text):
        minus = char in _MINUS_SIGNS and at + 1 < len(text) and text[at + 1].isdecimal() \
            and not (at and is_word_char(text[at - 1]))
        if minus or char.isdecimal():
            break
    else:
        return None
    start = at + 1 if minus else at
    end = _digits_end(text, start)
    whole, fraction = text[start:end], ""
    if end + 1 < len(text) and text[end] == "." and text[end + 1].isdecimal():
        fraction_end = _digits_end(text, end + 1)
        fraction, end = text[end + 1:fraction_end], fraction_end
    end = skip_space(text, end)
    scale = ""
    if end < len(text) and text[end] in "kKmM" and \
            (end + 1 == len(text) or not is_word_char(text[end + 1])):
        scale = text[end]
    return minus, whole, fraction, scale


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
    parts = [*raw.replace(";", ",").split(","), *items] if raw else list(items)
    files: dict[str, None] = {}  # ordered and de-duplicated in linear time
    for part in parts:
        name = _strip_emphasis(part).strip("'\"").strip()
        if name and name.lower() not in _EMPTY_VALUES:
            files.setdefault(name)
    return list(files)


def _enum_word(value: str) -> str:
    """`Needs attention`, `needs-attention`, `**CLEAN**` → `NEEDS_ATTENTION`, `CLEAN`."""
    return snake_upper(_strip_emphasis(value).rstrip(".!").strip())


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
