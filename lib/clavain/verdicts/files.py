"""Verdict files in `.clavain/verdicts/`: `<agent>.json` (the verdict) + `<agent>.md` (detail).

Stdlib only: the SubagentStop hook writes them, and `clavain verdicts summary` must work before
the plugin venv exists. `validate` mirrors the pydantic model in `clavain.models.verdict` (the
source of `schemas/verdict.schema.json`); tests check that the two agree.

A sprint reads `render_summary` (one short line per verdict, detail paths only where attention
is needed), never the agents' raw answers.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any

from clavain.clock import utc_stamp
from clavain.fsutil import write_atomic, write_json_atomic
from clavain.verdicts.parser import (
    IMPLEMENTATION_STATUSES,
    STATUSES_BY_TYPE,
    SUMMARY_MAX_CHARS,
    VERDICT_STATUSES,
)

PLUGIN_PREFIX = "clavain:"
ALL_STATUSES = VERDICT_STATUSES + IMPLEMENTATION_STATUSES
OK_STATUSES = ("CLEAN", "COMPLETE")
# Everything that is not a clean result sends the sprint to the detail file (PARTIAL too: an
# unfinished implementation needs a look as much as a FAILED one).
ATTENTION_STATUSES = tuple(s for s in ALL_STATUSES if s not in OK_STATUSES)
TOKENS_SOURCES = ("measured", "reported")
FIELDS = ("type", "status", "model", "tokens_spent", "tokens_source", "files_changed",
          "findings_count", "summary", "detail_path", "agent", "session_id", "timestamp")
REQUIRED_FIELDS = ("type", "status", "summary", "agent", "timestamp")
DEFAULTS: dict[str, Any] = {"model": None, "tokens_spent": None, "tokens_source": "reported",
                            "files_changed": [], "findings_count": 0, "detail_path": None,
                            "session_id": None}
TIMESTAMP_PATTERN = r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$"
MAX_NAME_CHARS = 100
MAX_AGENT_CHARS = 200
MAX_MODEL_CHARS = 100
MAX_PATH_CHARS = 1000
COMPACT_SUMMARY_CHARS = 60

_UNSAFE_NAME_CHARS = re.compile(r"[^A-Za-z0-9._-]+")


def safe_agent_name(agent: str) -> str:
    """A file name for `agent` that cannot leave the verdicts folder.

    `clavain:fd-quality` → `clavain-fd-quality`; separators, `..` and other characters are
    neutralised; NUL or nothing usable left → ValueError; over-long names are cut and made
    unique with a hash of the original.
    """
    if not isinstance(agent, str) or "\x00" in agent:
        raise ValueError("agent name must be text without NUL characters")
    name = _UNSAFE_NAME_CHARS.sub("-", agent.strip())
    name = re.sub(r"\.{2,}", ".", name)
    name = re.sub(r"-{2,}", "-", name).strip(".-")
    if not name:
        raise ValueError(f"agent name {agent!r} has no usable characters")
    if len(name) > MAX_NAME_CHARS:
        digest = hashlib.sha256(agent.encode("utf-8", "surrogatepass")).hexdigest()[:10]
        name = name[: MAX_NAME_CHARS - 11].rstrip(".-") + "-" + digest
    return name


def display_name(agent: str) -> str:
    """`clavain:fd-quality` → `fd-quality` (this plugin's prefix is noise in a summary)."""
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
    _check_text(problems, verdict, "session_id", MAX_AGENT_CHARS, nullable=True)
    stamp = verdict.get("timestamp")
    if "timestamp" in verdict and not (isinstance(stamp, str)
                                       and re.fullmatch(TIMESTAMP_PATTERN, stamp)):
        problems.append("timestamp: must be an ISO 8601 time like 2026-01-31T12:00:00Z")
    return problems


def build(fields: dict[str, Any], *, agent: str, session_id: str | None = None,
          tokens_source: str = "reported", timestamp: str | None = None) -> dict[str, Any]:
    """A complete verdict (every field, in schema order) from parsed header fields.
    Raises ValueError when the result would not validate."""
    verdict = {**DEFAULTS, **fields, "agent": agent, "session_id": session_id,
               "tokens_source": tokens_source, "timestamp": timestamp or utc_stamp()}
    verdict = {key: verdict.get(key) for key in FIELDS}
    problems = validate(verdict)
    if problems:
        raise ValueError("; ".join(problems))
    return verdict


def error_verdict(agent: str, summary: str, *, session_id: str | None = None) -> dict[str, Any]:
    """What is recorded when an agent that owes a header sent none (or a broken one)."""
    one_line = " ".join(summary.split())
    if len(one_line) > SUMMARY_MAX_CHARS:
        one_line = one_line[: SUMMARY_MAX_CHARS - 1] + "…"
    return build({"type": "verdict", "status": "ERROR", "summary": one_line},
                 agent=agent, session_id=session_id)


def verdict_path(folder: Path, agent: str, suffix: str = ".json") -> Path:
    path = folder / f"{safe_agent_name(agent)}{suffix}"
    if path.parent != folder:  # defence in depth: safe_agent_name never yields a separator
        raise ValueError(f"agent name {agent!r} escapes {folder}")
    return path


def write(folder: Path, verdict: dict[str, Any]) -> Path:
    """Validate and atomically write `<agent>.json`; returns its path."""
    problems = validate(verdict)
    if problems:
        raise ValueError("; ".join(problems))
    path = verdict_path(folder, verdict["agent"])
    write_json_atomic(path, {key: verdict.get(key, DEFAULTS.get(key)) for key in FIELDS})
    return path


def write_detail(folder: Path, agent: str, text: str) -> Path:
    path = verdict_path(folder, agent, ".md")
    write_atomic(path, text if text.endswith("\n") else text + "\n")
    return path


def _candidates(folder: Path, agent: str) -> list[Path]:
    """`fd-quality` also finds `clavain-fd-quality.json`, so people can type the short name."""
    paths = [verdict_path(folder, agent)]
    if not agent.startswith(PLUGIN_PREFIX):
        paths.append(verdict_path(folder, PLUGIN_PREFIX + agent))
    return paths


def read(folder: Path, agent: str) -> dict[str, Any]:
    """The verdict of `agent`. LookupError when there is none, ValueError when it is invalid."""
    for path in _candidates(folder, agent):
        if path.is_file():
            return _load(path)
    raise LookupError(f"no verdict for {agent!r} in {folder}")


def _load(path: Path) -> dict[str, Any]:
    try:
        verdict = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
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
            if path.is_file() and path.suffix in (".json", ".md"):
                path.unlink()
                removed += 1
    return removed


def parse_all(folder: Path) -> list[dict[str, Any]]:
    """Every verdict, ordered by agent. A broken file becomes an ERROR row naming it, so it
    cannot be silently skipped."""
    verdicts = []
    if folder.is_dir():
        for path in sorted(folder.glob("*.json")):
            try:
                verdicts.append(_load(path))
            except ValueError as exc:
                # A legal file name can be longer than an agent name may be.
                verdicts.append(error_verdict(path.stem[:MAX_AGENT_CHARS],
                                              f"unreadable verdict file: {exc}")
                                | {"detail_path": str(path)})
    return sorted(verdicts, key=lambda v: v["agent"])


def count_by_status(verdicts: list[dict[str, Any]]) -> str:
    """`3 CLEAN, 1 NEEDS_ATTENTION` (statuses in their canonical order; `no verdicts`)."""
    counts = {status: 0 for status in ALL_STATUSES}
    for verdict in verdicts:
        counts[verdict["status"]] += 1
    parts = [f"{n} {status}" for status, n in counts.items() if n]
    return ", ".join(parts) if parts else "no verdicts"


def get_attention(verdicts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The verdicts a sprint must look into, with their detail paths."""
    return [{"agent": v["agent"], "status": v["status"], "summary": v["summary"],
             "detail_path": v["detail_path"], "findings_count": v["findings_count"]}
            for v in verdicts if v["status"] in ATTENTION_STATUSES]


def total_tokens(verdicts: list[dict[str, Any]]) -> int:
    return sum(v["tokens_spent"] or 0 for v in verdicts)


def summary_rows(verdicts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows for the people's table: STATUS, AGENT, TOKENS, SUMMARY."""
    return [{"status": v["status"], "agent": v["agent"], "tokens": v["tokens_spent"],
             "summary": v["summary"]} for v in verdicts]


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def render_summary(verdicts: list[dict[str, Any]]) -> str:
    """The sprint-facing summary: a count line, then one short line per verdict; only verdicts
    needing attention carry their detail path."""
    if not verdicts:
        return "Verdicts: none yet."
    tokens = total_tokens(verdicts)
    lines = [f"Verdicts: {count_by_status(verdicts)}" + (f"; {tokens:,} tokens" if tokens else "")]
    # What needs a look comes first, so a reader can stop at the first CLEAN line.
    ordered = sorted(verdicts, key=lambda v: v["status"] not in ATTENTION_STATUSES)
    for verdict in ordered:
        line = (f"{verdict['status']} {_clip(display_name(verdict['agent']), 32)}: "
                f"{_clip(verdict['summary'], COMPACT_SUMMARY_CHARS)}")
        if verdict["status"] in ATTENTION_STATUSES and verdict["detail_path"]:
            line += f" → {verdict['detail_path']}"
        lines.append(line)
    return "\n".join(lines)
