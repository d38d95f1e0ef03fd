"""Verdict files in `.clavain/verdicts/`, one pair per dispatch of an agent:
`<agent>--<dispatch>.json` (the verdict) + `<agent>--<dispatch>.md` (the agent's whole answer).

The dispatch is the host's `agent_id` (made file-safe), or a generated unique id when the host
sent none; two runs of the same agent never share a pair, so a NEEDS_ATTENTION cannot vanish
under a later CLEAN. Old single-pair files (`<agent>.json`, no dispatch) are still read.
The `.md` is written before the `.json` that names it: a crash in between leaves an orphan
`.md`, never a verdict beside another run's answer.

Stdlib only: the SubagentStop hook writes them, and `clavain verdicts summary` must work before
the plugin venv exists. `validate` mirrors the pydantic model in `clavain.models.verdict` (the
source of `schemas/verdict.schema.json`); tests check that the two agree. Every function takes
the verdicts folder as a parameter (a sprint may archive one folder and start another).
`clavain.verdicts.summary` turns what `parse_all` reads into what a sprint reads.
"""

from __future__ import annotations

import os

from clavain.clock import now_iso, stamp_parts
from clavain.fsutil import names_ending, write_atomic, write_json_atomic
from clavain.textio import scrub
from clavain.verdicts.names import DISPATCH_SEPARATOR, split_name
from clavain.verdicts.parser import (
    IMPLEMENTATION_STATUSES,
    STATUSES_BY_TYPE,
    SUMMARY_MAX_CHARS,
    VERDICT_STATUSES,
)

TYPE_CHECKING = False
if TYPE_CHECKING:  # SubagentStop imports this module: no `typing`, `pathlib` or `datetime`
    from datetime import datetime
    from pathlib import Path
    from typing import Any

PLUGIN_PREFIX = "clavain:"
ALL_STATUSES = VERDICT_STATUSES + IMPLEMENTATION_STATUSES
OK_STATUSES = ("CLEAN", "COMPLETE")
# Everything that is not a clean result sends the sprint to the detail file (PARTIAL too: an
# unfinished implementation needs a look as much as a FAILED one).
ATTENTION_STATUSES = tuple(s for s in ALL_STATUSES if s not in OK_STATUSES)
TOKENS_SOURCES = ("measured", "reported")
FIELDS = ("type", "status", "model", "tokens_spent", "tokens_source", "files_changed",
          "findings_count", "summary", "detail_path", "agent", "agent_id", "session_id",
          "sprint_id", "timestamp")
REQUIRED_FIELDS = ("type", "status", "summary", "agent", "timestamp")
DEFAULTS: dict[str, Any] = {"model": None, "tokens_spent": None, "tokens_source": "reported",
                            "files_changed": [], "findings_count": 0, "detail_path": None,
                            "agent_id": None, "session_id": None, "sprint_id": None}
TIMESTAMP_PATTERN = r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$"
MAX_NAME_CHARS = 100
MAX_AGENT_CHARS = 200
MAX_MODEL_CHARS = 100
MAX_PATH_CHARS = 1000
# Every file a verdicts folder holds: verdicts, answers, resolutions (`resolutions`), tokens
# still to measure (`backfill`). Archiving and cleaning move or remove exactly these.
FOLDER_SUFFIXES = (".json", ".md", ".resolved", ".pending")
# What `parse_all` and `read` add to each verdict: the dispatch its file name carries (None for
# an old single-pair file). Not a verdict field.
DISPATCH = "dispatch"

_STAMP_PUNCTUATION = str.maketrans("", "", "-:.")
# No `re` here (SubagentStop writes every verdict through this module): the rules below are
# the patterns they replaced, which `tests/unit/test_readers_without_re.py` holds beside them.
_SAFE_NAME_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-")


def _runs_as_one(text: str, char: str) -> str:
    """Every run of `char` in `text` as one `char`."""
    doubled = char * 2
    while doubled in text:
        text = text.replace(doubled, char)
    return text


def _safe_name(text: object, what: str) -> str:
    if not isinstance(text, str) or "\x00" in text:
        raise ValueError(f"{what} must be text without NUL characters")
    kept: list[str] = []
    for char in text.strip():  # each run of other characters becomes one `-`
        if char in _SAFE_NAME_CHARS:
            kept.append(char)
        elif not kept or kept[-1] != "\x00":
            kept.append("\x00")
    name = "".join(kept).replace("\x00", "-")
    name = _runs_as_one(_runs_as_one(name, "."), "-").strip(".-")
    if not name:
        raise ValueError(f"{what} {text!r} has no usable characters")
    if len(name) > MAX_NAME_CHARS:
        import hashlib  # only for an over-long name: OpenSSL's module costs ~2 ms

        digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:10]
        name = name[: MAX_NAME_CHARS - 11].rstrip(".-") + "-" + digest
    return name


def safe_agent_name(agent: str) -> str:
    """A file name part for `agent` that cannot leave the verdicts folder.

    `clavain:reviewer/safety` → `clavain-reviewer-safety`; separators, `..` and other characters are
    neutralised; NUL or nothing usable left → ValueError; over-long names are cut and made
    unique with a hash of the original.
    """
    return _safe_name(agent, "agent name")


def safe_dispatch(dispatch: str) -> str:
    """The file name part for a dispatch id (the same rule as agent names)."""
    return _safe_name(dispatch, "dispatch id")


def new_dispatch_id() -> str:
    """A unique dispatch id when the host sent no agent_id: UTC time to the millisecond (sorts
    as text) and random hex (`20261121T203000123Z-9f2c1a0b`)."""
    return now_iso().translate(_STAMP_PUNCTUATION) + "-" + os.urandom(4).hex()


def display_name(agent: str) -> str:
    """`clavain:reviewer/safety` → `reviewer/safety` (this plugin's prefix is noise in a
    summary)."""
    return agent[len(PLUGIN_PREFIX):] if agent.startswith(PLUGIN_PREFIX) else agent


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _check_text(problems: list[str], verdict: dict[str, Any], field: str, max_chars: int,
                *, nullable: bool) -> None:
    value = verdict.get(field)
    if value is None and nullable:
        return
    if not isinstance(value, str) or not value or len(value) > max_chars:
        problems.append(f"{field}: must be text of 1-{max_chars} characters"
                        + (" or null" if nullable else ""))


def validate(verdict: Any) -> list[str]:
    """Every way `verdict` breaks the verdict schema (empty list when it is valid)."""
    from clavain import fastjson  # `json` imports `re`: SubagentStop validates every verdict

    try:  # a `\ud800` escape in a file decodes to a lone surrogate no reader can print
        fastjson.dumps(verdict, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return ["text holds a lone surrogate (not valid Unicode)"]
    except (TypeError, ValueError, RecursionError):
        pass  # reported field by field below
    if not isinstance(verdict, dict):
        return ["verdict must be a JSON object"]
    problems = [f"{key}: unknown field" for key in verdict if key not in FIELDS]
    problems += [f"{key}: required" for key in REQUIRED_FIELDS if key not in verdict]
    kind, status = verdict.get("type"), verdict.get("status")
    if "type" in verdict and kind not in STATUSES_BY_TYPE:
        problems.append("type: must be verdict or implementation")
    if "status" in verdict:
        allowed = STATUSES_BY_TYPE.get(kind, ALL_STATUSES) if isinstance(kind, str) \
            else ALL_STATUSES
        if status not in allowed:
            problems.append(f"status: must be one of {', '.join(allowed)}")
    _check_text(problems, verdict, "model", MAX_MODEL_CHARS, nullable=True)
    tokens = verdict.get("tokens_spent")
    if tokens is not None and not (_is_int(tokens) and tokens >= 0):
        problems.append("tokens_spent: must be a whole number >= 0 or null")
    if verdict.get("tokens_source", "reported") not in TOKENS_SOURCES:
        problems.append("tokens_source: must be measured or reported")
    files = verdict.get("files_changed", [])
    if not isinstance(files, list) or not all(isinstance(f, str) and f for f in files):
        problems.append("files_changed: must be a list of non-empty paths")
    findings = verdict.get("findings_count", 0)
    if not (_is_int(findings) and findings >= 0):
        problems.append("findings_count: must be a whole number >= 0")
    if "summary" in verdict:
        summary = verdict["summary"]
        if not isinstance(summary, str) or not summary or len(summary) > SUMMARY_MAX_CHARS \
                or "\n" in summary or "\r" in summary:
            problems.append(f"summary: must be one line of 1-{SUMMARY_MAX_CHARS} characters")
    _check_text(problems, verdict, "detail_path", MAX_PATH_CHARS, nullable=True)
    if "agent" in verdict:
        _check_text(problems, verdict, "agent", MAX_AGENT_CHARS, nullable=False)
    _check_text(problems, verdict, "agent_id", MAX_AGENT_CHARS, nullable=True)
    _check_text(problems, verdict, "session_id", MAX_AGENT_CHARS, nullable=True)
    _check_text(problems, verdict, "sprint_id", MAX_AGENT_CHARS, nullable=True)
    stamp = verdict.get("timestamp")
    if "timestamp" in verdict and not (isinstance(stamp, str)
                                       and stamp_parts(stamp) is not None):
        problems.append("timestamp: must be an ISO 8601 time like 2026-01-31T12:00:00Z")
    return problems


def build(fields: dict[str, Any], *, agent: str, agent_id: str | None = None,
          session_id: str | None = None, tokens_source: str = "reported",
          timestamp: str | None = None) -> dict[str, Any]:
    """A complete verdict (every field, in schema order) from parsed header fields.
    Raises ValueError when the result would not validate."""
    verdict = {**DEFAULTS, **fields, "agent": agent, "agent_id": agent_id,
               "session_id": session_id, "tokens_source": tokens_source,
               "timestamp": timestamp or now_iso()}
    verdict = {key: verdict.get(key) for key in FIELDS}
    problems = validate(verdict)
    if problems:
        raise ValueError("; ".join(problems))
    return verdict


def error_verdict(agent: str, summary: str, *, agent_id: str | None = None,
                  session_id: str | None = None) -> dict[str, Any]:
    """What is recorded when an agent that owes a header sent none (or a broken one)."""
    one_line = " ".join(scrub(summary).split()) or "error"
    if len(one_line) > SUMMARY_MAX_CHARS:
        one_line = one_line[: SUMMARY_MAX_CHARS - 1] + "…"
    return build({"type": "verdict", "status": "ERROR", "summary": one_line},
                 agent=agent, agent_id=agent_id, session_id=session_id)


def apply_usage(verdict: dict[str, Any], usage: Any) -> None:
    """The tokens a transcript measures replace the reported ones (and name a missing model)."""
    verdict["tokens_spent"] = usage.total
    verdict["tokens_source"] = "measured"
    if not verdict.get("model") and usage.main_model:
        verdict["model"] = usage.main_model[:MAX_MODEL_CHARS]


def verdict_path(folder: Path, agent: str, dispatch: str | None,
                 suffix: str = ".json") -> Path:
    """`<folder>/<agent>--<dispatch><suffix>`; dispatch None names an old single-pair file."""
    name = safe_agent_name(agent)
    if dispatch is not None:
        name += DISPATCH_SEPARATOR + safe_dispatch(dispatch)
    path = folder / f"{name}{suffix}"
    if path.parent != folder:  # defence in depth: safe names never hold a separator
        raise ValueError(f"agent name {agent!r} escapes {folder}")
    return path


def dispatch_for(folder: Path, agent: str, agent_id: object) -> str:
    """This dispatch's id: the host's agent_id made file-safe (the same agent_id again, e.g. a
    repeated SubagentStop, is the same dispatch and replaces its pair), or a generated id when
    there is none, or when another agent_id that sanitises alike already owns that pair."""
    if isinstance(agent_id, str):
        try:
            dispatch = safe_dispatch(agent_id)
        except ValueError:
            return new_dispatch_id()
        path = verdict_path(folder, agent, dispatch)
        if not os.path.lexists(path):
            return dispatch
        try:
            if _load(path).get("agent_id") == agent_id:
                return dispatch
        except ValueError:
            pass
    return new_dispatch_id()


def write(folder: Path, verdict: dict[str, Any], dispatch: str | None = None, *,
          inside: Path | None = None) -> Path:
    """Validate and atomically write `<agent>--<dispatch>.json`; returns its path. Without a
    dispatch, `dispatch_for` picks one. Every folder below `inside` (default: the folder's
    parent, the state folder) must be real: a planted symlink is never written through."""
    problems = validate(verdict)
    if problems:
        raise ValueError("; ".join(problems))
    if dispatch is None:
        dispatch = dispatch_for(folder, verdict["agent"], verdict.get("agent_id"))
    path = verdict_path(folder, verdict["agent"], dispatch)
    write_json_atomic(path, {key: verdict.get(key, DEFAULTS.get(key)) for key in FIELDS},
                      inside=folder.parent if inside is None else inside)
    return path


def write_detail(folder: Path, agent: str, dispatch: str, text: str, *,
                 inside: Path | None = None) -> Path:
    """The agent's whole answer, `<agent>--<dispatch>.md`; write it before the verdict."""
    path = verdict_path(folder, agent, dispatch, ".md")
    text = scrub(text)
    write_atomic(path, text if text.endswith("\n") else text + "\n",
                 inside=folder.parent if inside is None else inside)
    return path


def _agent_files(folder: Path, agent: str) -> list[Path]:
    """Every verdict file of `agent`, old single-pair ones included. `reviewer/safety` also
    finds `clavain-reviewer-safety--*.json`, so people can type the short name."""
    names = {safe_agent_name(agent)}
    if not agent.startswith(PLUGIN_PREFIX):
        names.add(safe_agent_name(PLUGIN_PREFIX + agent))
    if not folder.is_dir():
        return []
    return [folder / name for name in names_ending(folder, ".json")
            if split_name(name[:-len(".json")])[0] in names]


def read(folder: Path, agent: str, dispatch: str | None = None) -> dict[str, Any]:
    """The latest verdict of `agent`, or the one of `dispatch`, with its `dispatch`.
    LookupError when there is none; ValueError when one of the files it had to read is
    invalid (a broken file is never skipped in favour of an older answer)."""
    paths = _agent_files(folder, agent)
    if dispatch is not None:
        wanted = safe_dispatch(dispatch)
        paths = [path for path in paths if split_name(path.stem)[1] == wanted]
    if not paths:
        which = f" dispatch {dispatch!r}" if dispatch is not None else ""
        raise LookupError(f"no verdict for {agent!r}{which} in {folder}")
    return max((_record(path) for path in paths), key=order_key)


def _record(path: Path) -> dict[str, Any]:
    return _load(path) | {DISPATCH: split_name(path.stem)[1]}


def order_key(verdict: dict[str, Any]) -> tuple[datetime, str, str]:
    """When a verdict was recorded, for "latest": its timestamp as a moment (offsets applied,
    any number of fraction digits; an unreadable one sorts first), then the dispatch."""
    from datetime import datetime, timedelta, timezone

    parts = stamp_parts(str(verdict.get("timestamp")))
    moment = datetime.min.replace(tzinfo=timezone.utc)
    fraction = ""
    if parts:
        year, month, day, hour, minute, second = (int(part) for part in parts[:6])
        sign = -1 if parts[7] == "-" else 1
        offset = timedelta(hours=int(parts[8] or 0), minutes=int(parts[9] or 0)) * sign
        try:
            moment = datetime(year, month, day, hour, minute, second, tzinfo=timezone.utc) \
                - offset
            fraction = (parts[6] or "").ljust(12, "0")[:12]
        except (ValueError, OverflowError):
            pass
    return moment, fraction, verdict.get(DISPATCH) or ""


def _load(path: Path) -> dict[str, Any]:
    from clavain import fastjson  # bad JSON raises `json`'s own error, in its words
    from clavain.fsutil import read_state_file

    try:  # never blocks on a FIFO planted among the verdicts
        verdict = fastjson.loads((read_state_file(path) or b"").decode("utf-8"))
    except (OSError, ValueError) as exc:  # UnicodeDecodeError and JSONDecodeError among them
        raise ValueError(f"{path.name}: not readable JSON ({exc})") from exc
    problems = validate(verdict)
    if problems:
        raise ValueError(f"{path.name}: " + "; ".join(problems))
    return {**DEFAULTS, **verdict}


def clean(folder: Path) -> int:
    """Remove every verdict and detail file (a sprint starts fresh); returns how many.
    ValueError when `folder` is a symlink: a committed `.clavain/verdicts -> ..` must not make
    this delete the project's own .md and .json files."""
    if folder.is_symlink():
        raise ValueError(f"{folder} is a symlink; refusing to delete the .json and .md files "
                         "it points at (make it a real folder)")
    removed = 0
    if folder.is_dir():
        for path in folder.iterdir():
            if path.is_file() and path.suffix in FOLDER_SUFFIXES:
                path.unlink()
                removed += 1
    return removed


def parse_all(folder: Path) -> list[dict[str, Any]]:
    """Every verdict of every dispatch, each with its `dispatch`, ordered by agent and then
    oldest first. A broken file becomes an ERROR row naming it, so it cannot be silently
    skipped."""
    verdicts = []
    if folder.is_dir():
        for path in [folder / name for name in names_ending(folder, ".json")]:
            try:
                verdicts.append(_record(path))
            except ValueError as exc:
                agent, dispatch = split_name(path.stem)
                # A legal file name can be longer than an agent name may be.
                verdicts.append(error_verdict(agent[:MAX_AGENT_CHARS],
                                              f"unreadable verdict file: {exc}")
                                | {"detail_path": str(path), DISPATCH: dispatch})
    return sorted(verdicts, key=lambda v: (v["agent"], order_key(v)))
