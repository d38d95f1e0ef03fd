"""The verdict an agent's header becomes: the source of `schemas/verdict.schema.json`.

The hook path cannot import pydantic, so `clavain.verdicts.files.validate` mirrors these rules
in the stdlib; tests check that files the hook writes validate here
and against the committed schema.
Regenerate the schema with `python -m clavain.models.verdict`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from clavain.models.schema_text import schema_text
from clavain.verdicts.files import (
    MAX_AGENT_CHARS,
    MAX_MODEL_CHARS,
    MAX_PATH_CHARS,
    TIMESTAMP_PATTERN,
)
from clavain.verdicts.parser import (
    IMPLEMENTATION_STATUSES,
    STATUSES_BY_TYPE,
    SUMMARY_MAX_CHARS,
    VERDICT_STATUSES,
)

SCHEMA_PATH = Path(__file__).resolve().parents[3] / "schemas" / "verdict.schema.json"

VerdictType = Literal["verdict", "implementation"]
Status = Literal["CLEAN", "NEEDS_ATTENTION", "BLOCKED", "ERROR", "COMPLETE", "PARTIAL", "FAILED"]

# JSON Schema cannot see the model validator below, so the type ↔ status pairing is spelled out
# for jsonschema users too.
_STATUS_MATCHES_TYPE = [
    {"if": {"properties": {"type": {"const": kind}}, "required": ["type"]},
     "then": {"properties": {"status": {"enum": list(statuses)}}}}
    for kind, statuses in STATUSES_BY_TYPE.items()
]


# Python's `$` (jsonschema) also matches before a final newline; this closes that gap.
_ONE_LINE: dict[str, Any] = {"not": {"pattern": r"[\r\n]"}}


class Verdict(BaseModel):
    """One dispatch's result, as written to `.clavain/verdicts/<agent>--<dispatch>.json`."""

    model_config = ConfigDict(
        extra="forbid", strict=True, title="Verdict",
        json_schema_extra={"allOf": _STATUS_MATCHES_TYPE},
    )

    type: VerdictType = Field(
        description="verdict (a review) or implementation (an agent that changed code)")
    status: Status = Field(
        description=f"verdict: {', '.join(VERDICT_STATUSES)}; "
                    f"implementation: {', '.join(IMPLEMENTATION_STATUSES)}")
    model: str | None = Field(
        default=None, min_length=1, max_length=MAX_MODEL_CHARS,
        description="model the agent ran on (from its header, else its transcript)")
    tokens_spent: int | None = Field(
        default=None, ge=0, description="tokens the agent used; null when unknown")
    tokens_source: Literal["measured", "reported"] = Field(
        default="reported",
        description="measured: deduplicated from the agent's transcript; reported: its header")
    files_changed: list[Annotated[str, Field(min_length=1)]] = Field(
        default_factory=list, description="paths the agent changed")
    findings_count: int = Field(default=0, ge=0, description="number of findings")
    summary: str = Field(
        min_length=1, max_length=SUMMARY_MAX_CHARS, description="one line",
        json_schema_extra=_ONE_LINE)
    detail_path: str | None = Field(
        default=None, min_length=1, max_length=MAX_PATH_CHARS,
        description="file with the full answer, relative to the project root")
    agent: str = Field(
        min_length=1, max_length=MAX_AGENT_CHARS,
        description="agent type, e.g. clavain:reviewer/safety")
    agent_id: str | None = Field(
        default=None, min_length=1, max_length=MAX_AGENT_CHARS,
        description="the host's id of this dispatch (SubagentStop agent_id); null when it "
                    "sent none (the file name then carries a generated dispatch id)")
    session_id: str | None = Field(
        default=None, min_length=1, max_length=MAX_AGENT_CHARS,
        description="Claude Code session that ran the agent")
    sprint_id: str | None = Field(
        default=None, min_length=1, max_length=MAX_AGENT_CHARS,
        description="the sprint active when the agent ran (its verdicts are archived with it)")
    timestamp: str = Field(
        pattern=TIMESTAMP_PATTERN,
        description="when the verdict was recorded (ISO 8601, UTC, milliseconds)",
        json_schema_extra=_ONE_LINE)

    @field_validator("summary")
    @classmethod
    def _one_line(cls, summary: str) -> str:
        if "\n" in summary or "\r" in summary:
            raise ValueError("summary must be one line")
        return summary

    @model_validator(mode="after")
    def _status_matches_type(self) -> Verdict:
        if self.status not in STATUSES_BY_TYPE[self.type]:
            raise ValueError(f"status {self.status} is not valid for type {self.type} "
                             f"({', '.join(STATUSES_BY_TYPE[self.type])})")
        return self


def render_schema() -> str:
    return schema_text(Verdict, "verdict.schema.json")


def write_schema(path: Path = SCHEMA_PATH) -> Path:
    from clavain.fsutil import write_atomic

    write_atomic(path, render_schema())
    return path


if __name__ == "__main__":
    print(write_schema())
