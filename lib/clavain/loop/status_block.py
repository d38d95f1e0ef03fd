"""Read the status block a fresh-context loop iteration ends its reply with. Stdlib only.

    ---CLAVAIN_STATUS---
    TASK_COMPLETED: <item id, or none>
    STATUS: COMPLETE | IN_PROGRESS | BLOCKED
    FILES_MODIFIED: <count>
    TESTS_STATUS: PASSING | FAILING | NOT_RUN
    EXIT_SIGNAL: true | false
    NEXT_RECOMMENDATION: <one line>
    ---END_CLAVAIN_STATUS---

The loop decides whether to stop on EXIT_SIGNAL, so this parser is forgiving about presentation
and strict about content, like the verdict header parser (clavain.verdicts.parser):

- Presentation: CRLF, blank lines, block quotes, bullets, bold/italic/backtick keys and values,
  key case and `Tests Status` spacing, quoted values, a code fence around or inside the block.
- Only the LAST complete block counts: agents echo the template or a fenced example first. A BEGIN
  marker with no END after it means the reply was cut off: an error, never the block before it.
  A second BEGIN before any END starts the block afresh (the first was an abandoned echo).
- Only lines between the markers are read: prose that mentions `EXIT_SIGNAL: true` is ignored,
  and so are unknown keys and non-key lines inside a block.
- Content: STATUS and EXIT_SIGNAL are required; every value must be in its enum (enum words may
  use spaces or hyphens: `in progress`); EXIT_SIGNAL is `true`/`false` only (no yes/no);
  FILES_MODIFIED is a whole number, optionally followed by `file(s)` (`3 files`), and an
  approximation (`~3`), a negative or a word is refused; a key given twice is an error. Every
  problem is listed in one StatusBlockError; nothing is guessed.
"""

from __future__ import annotations

import re
from typing import Any

from clavain.errors import ClavainError
from clavain.markdown_keys import key_line, snake_upper

BEGIN = "---CLAVAIN_STATUS---"
END = "---END_CLAVAIN_STATUS---"
STATUSES = ("COMPLETE", "IN_PROGRESS", "BLOCKED")
TESTS_STATUSES = ("PASSING", "FAILING", "NOT_RUN")
EXIT_SIGNALS = ("true", "false")
KEYS = ("TASK_COMPLETED", "STATUS", "FILES_MODIFIED", "TESTS_STATUS", "EXIT_SIGNAL",
        "NEXT_RECOMMENDATION")
NO_TASK = frozenset({"none", "n/a", "-", "—"})

_FENCE = re.compile(r"\s*(?:```|~~~)")
_MARKER_DECORATION = "*_` \t"
_EMPHASIS = "*_`"
_MAX_WRAPPERS = 4
_QUOTE_PAIRS = {'"': '"', "'": "'", "“": "”", "‘": "’"}
_FILE_COUNT = re.compile(r"(?P<count>\d{1,9})(?:\s+files?)?", re.IGNORECASE)


class StatusBlockError(ClavainError):
    """The status block is missing, cut off or wrong; `problems` lists each thing to fix."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("CLAVAIN_STATUS: " + "; ".join(problems))
        self.problems = problems


def template(task_hint: str = "<item id>") -> str:
    """The block for a prompt, with every enum spelled out. Echoed back unfilled it fails to
    parse (`COMPLETE | IN_PROGRESS | BLOCKED` is no status), so a lazy echo never stops the loop."""
    return "\n".join([
        BEGIN,
        f"TASK_COMPLETED: {task_hint} | none",
        f"STATUS: {' | '.join(STATUSES)}",
        "FILES_MODIFIED: <count>",
        f"TESTS_STATUS: {' | '.join(TESTS_STATUSES)}",
        f"EXIT_SIGNAL: {' | '.join(EXIT_SIGNALS)}",
        "NEXT_RECOMMENDATION: <one line>",
        END,
    ])


def _marker(line: str) -> str | None:
    """BEGIN or END when the whole line is that marker (quoted or emphasised); a marker named
    inside a sentence is prose."""
    text = line.strip(_MARKER_DECORATION + ">").upper()
    return text if text in (BEGIN, END) else None


def _last_block(text: str) -> list[str]:
    """The lines of the last complete block. Raises when there is none, or when a BEGIN after
    it never ends (a truncated reply must not fall back on an earlier echo)."""
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    last: list[str] | None = None
    current: list[str] | None = None
    for line in lines:
        marker = _marker(line)
        if marker == BEGIN:
            current = []
        elif marker == END:
            if current is not None:
                last, current = current, None
        elif current is not None:
            current.append(line)
    if current is not None:
        raise StatusBlockError([f"the last {BEGIN} block has no {END} (the reply was cut off)"])
    if last is None:
        raise StatusBlockError([f"no {BEGIN} block"])
    return last


def _unwrap(value: str) -> str:
    """Peel emphasis (`**x**`, `` `x` ``) and quotes (`"x"`) that wrap the whole value. A wrapper
    also found inside is left alone: `` `a` or `b` `` is not one backticked word. A few layers at
    most (`"**x**"`), so a pathological line costs linear time, not quadratic."""
    value = value.strip()
    for _ in range(_MAX_WRAPPERS):
        if len(value) < 2:
            break
        first = value[0]
        if first in _EMPHASIS:
            run = min(len(value) - len(value.lstrip(first)), len(value) - len(value.rstrip(first)))
            inner = value[run:-run].strip() if run else ""
            if not inner or first * run in inner:
                break
        elif first in _QUOTE_PAIRS and value[-1] == _QUOTE_PAIRS[first]:
            inner = value[1:-1].strip()
            if first in inner or _QUOTE_PAIRS[first] in inner:
                break
        else:
            break
        value = inner
    return value


def _key_line(line: str) -> tuple[str, str] | None:
    """(KEY, value) for a `KEY: value` line, the key upper-cased with spaces and hyphens as
    underscores; None for any other line."""
    found = key_line(line)
    if found is None:
        return None
    match, key, value = found
    value = value.strip()
    opened = match["open"] if not match["close"] else ""
    if opened:  # `**KEY:** value` or a wholly bold `**KEY: value**`: drop the key's closer
        closer = len(value) - len(value.lstrip(_EMPHASIS))
        if closer:
            value = value[min(closer, len(opened)):]
        elif value.endswith(opened):
            value = value[: -len(opened)]
    return key, _unwrap(value)


def _fields(lines: list[str]) -> tuple[dict[str, str], list[str]]:
    """The known keys of a block, and a problem for each key given twice."""
    fields: dict[str, str] = {}
    problems: list[str] = []
    for line in lines:
        if _FENCE.match(line):
            continue
        parsed = _key_line(line)
        if parsed is None or parsed[0] not in KEYS:
            continue
        key, value = parsed
        if key in fields:
            problems.append(f"{key} is given twice")
        fields[key] = value
    return fields, problems


def _enum_word(value: str) -> str:
    """`In progress`, `in-progress`, `COMPLETE.` → `IN_PROGRESS`, `COMPLETE`."""
    return snake_upper(value.rstrip(".!").strip())


def _enum(fields: dict[str, str], key: str, allowed: tuple[str, ...],
          problems: list[str]) -> str:
    """The member of `allowed` that `fields[key]` names, in its canonical spelling."""
    word = _enum_word(fields[key])
    for choice in allowed:
        if word == choice.upper():
            return choice
    problems.append(f"{key} {fields[key]!r} is not one of {' | '.join(allowed)}")
    return ""


def _files_modified(value: str, problems: list[str]) -> int:
    match = _FILE_COUNT.fullmatch(value)
    if match:
        return int(match["count"])
    problems.append(f"FILES_MODIFIED {value!r} is not a whole number of files (0 or more, "
                    "e.g. `3` or `3 files`; no `~`, no words)")
    return 0


def parse(text: str) -> dict[str, Any]:
    """The last status block in `text`: task_completed, status, files_modified (int),
    tests_status, exit_signal (bool), next_recommendation.

    Raises StatusBlockError listing every problem (never a partial or guessed result).
    """
    fields, problems = _fields(_last_block(text or ""))
    for key, allowed in (("STATUS", STATUSES), ("EXIT_SIGNAL", EXIT_SIGNALS)):
        if not fields.get(key):
            problems.append(f"missing {key}: ({' | '.join(allowed)})")
    status = _enum(fields, "STATUS", STATUSES, problems) if fields.get("STATUS") else ""
    exit_signal = (_enum(fields, "EXIT_SIGNAL", EXIT_SIGNALS, problems)
                   if fields.get("EXIT_SIGNAL") else "")
    tests_status = (_enum(fields, "TESTS_STATUS", TESTS_STATUSES, problems)
                    if fields.get("TESTS_STATUS") else "NOT_RUN")
    files = (_files_modified(fields["FILES_MODIFIED"], problems)
             if fields.get("FILES_MODIFIED") else 0)
    if problems:
        raise StatusBlockError(problems)
    task = fields.get("TASK_COMPLETED", "")
    return {
        "task_completed": "" if task.lower() in NO_TASK else task,
        "status": status,
        "files_modified": files,
        "tests_status": tests_status,
        "exit_signal": exit_signal == "true",
        "next_recommendation": fields.get("NEXT_RECOMMENDATION", ""),
    }
