"""What plan lint finds and how a plan with findings is judged: the one shape every rule
module returns (`lint`, `ownership_check`, `verify_check`) and every front door prints."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from clavain.errors import ClavainError

ERROR = "error"
WARNING = "warning"


@dataclass(frozen=True)
class Finding:
    severity: str  # ERROR refuses the plan; WARNING prints and the plan is recorded
    code: str  # snake_case name of the rule, e.g. "verify_always_passes"
    task: str | None  # the task it names; None for the plan as a whole
    message: str  # one line, starting with the task id when there is one

    def line(self) -> str:
        return f"{self.severity}: {self.message}"

    def to_json(self) -> dict[str, Any]:
        return {"severity": self.severity, "code": self.code, "task": self.task,
                "message": self.message}


class PlanRefused(ClavainError):
    """A plan with error findings and no person's acceptance: one line per finding."""

    def __init__(self, findings: list[Finding]) -> None:
        self.findings = findings
        errors = [f for f in findings if f.severity == ERROR]
        super().__init__(
            f"the plan has {len(errors)} error(s) and was not recorded:\n"
            + "\n".join(f.line() for f in findings))


def judge(findings: list[Finding], *, accepted_by: dict[str, Any] | None) -> list[Finding]:
    if any(f.severity == ERROR for f in findings) and accepted_by is None:
        raise PlanRefused(findings)
    return findings
