"""`.clavain/config.json`: the source of `schemas/config.schema.json` and of the copy the package
ships (`clavain/schemas/`, read by `clavain.config` without pydantic). Regenerate both with
`python -m clavain.models.config`; a test fails when they drift from this model or from
`clavain.config.DEFAULTS`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field

from clavain.config import DEFAULTS
from clavain.guards.policy import LIMIT_MAX
from clavain.models.schema_text import schema_text

REPO_SCHEMA = Path(__file__).resolve().parents[3] / "schemas" / "config.schema.json"
PACKAGED_SCHEMA = Path(__file__).resolve().parents[1] / "schemas" / "config.schema.json"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Defaults(_Strict):
    """Workgraph defaults."""

    verifyRunner: str = Field("shellVerify", min_length=1,
                              description="runner of verify nodes that name none")
    maxAttempts: int = Field(3, ge=1, le=100, description="failed attempts before a node fails")
    retryBackoffSeconds: float = Field(30, ge=0, description="wait after the first failure "
                                                             "(doubles each time)")
    retryBackoffMaxSeconds: float = Field(900, ge=0, description="longest retry wait")
    lockLeaseSeconds: float = Field(3600, gt=0, description="a claim not renewed for this long "
                                                            "is given back (recorded with the "
                                                            "claim: every machine judges it "
                                                            "by the claimer's lease)")
    maxCrashes: int = Field(5, ge=1, le=1000, description="times a node may be given back "
                                                          "because its holder died (no "
                                                          "attempt spent) before it fails")
    autoResetFailedMax: int = Field(0, ge=0, description="times the deadlock breaker may reopen "
                                                         "one failed blocker (0: never)")
    verifyTimeoutSeconds: float = Field(600, gt=0, description="per verify command")
    kvInlineMaxBytes: int = Field(2048, ge=0, description="KV values up to this size are "
                                                          "inlined in packets")
    kvArtifactThresholdBytes: int = Field(16384, ge=0, description="larger KV values go to "
                                                                   ".clavain/artifacts/")
    maxEscalations: int = Field(2, ge=0, description="times one failed node is handed to an "
                                                     "escalation before it is reported as "
                                                     "blocking")
    snapshotMaxLagSeconds: float = Field(1.0, ge=0, description="how far workgraph.json may lag "
                                                                "the database (0: rewritten "
                                                                "after every change)")


class Runner(_Strict):
    """A runner a node may name (`runner`), besides the built-ins shellVerify, shell and
    claude: a command that reads the node's packet on stdin and prints `<result>{…}</result>`."""

    command: list[str] | str = Field(description="argv (or one shell line) that runs a node")
    timeoutSeconds: float | None = Field(None, gt=0, description="limit for one run")


class Route(_Strict):
    """Which runner (and, for claude, which model) does one role's nodes."""

    runner: str = Field(min_length=1, description="shellVerify, shell, claude or a configured "
                                                   "runner")
    model: str | None = Field(None, description="claude --model (null: the CLI's default)")


def _default_route(role: str) -> Any:
    return lambda: Route(**DEFAULTS["supervisor"]["roles"][role])


class Routes(_Strict):
    """Role → runner and model. A node's own `runner` wins over its role's."""

    planner: Route = Field(default_factory=_default_route("planner"))
    escalation: Route = Field(default_factory=_default_route("escalation"))
    executor: Route = Field(default_factory=_default_route("executor"))
    verifier: Route = Field(default_factory=_default_route("verifier"))
    integrator: Route = Field(default_factory=_default_route("integrator"))
    final_verifier: Route = Field(default_factory=_default_route("final-verifier"),
                                  alias="final-verifier")
    microcall: Route = Field(default_factory=_default_route("microcall"))
    researcher: Route = Field(default_factory=_default_route("researcher"))


class ClaudeRunner(_Strict):
    """How the built-in `claude` runner calls `claude -p`."""

    maxTurns: int = Field(30, ge=1, le=1000, description="--max-turns")
    allowedTools: list[str] = Field(
        default_factory=lambda: ["Bash", "Edit", "Read", "Write", "Glob", "Grep"],
        description="--allowedTools")
    timeoutSeconds: float = Field(1800, gt=0, description="one runner call")
    extraArgs: list[str] = Field(default_factory=list, description="appended to the argv")
    apiRetries: int = Field(2, ge=0, le=20, description="CLAUDE_CODE_MAX_RETRIES of a runner: "
                            "claude's own retries of an API error before it reports it (a "
                            "rate limit then makes the supervisor wait for its reset)")


class Projection(_Strict):
    """`clavain run --dry-run` figures when the project has no measured history yet."""

    tokensPerCall: int = Field(40000, ge=0, description="tokens of one LLM runner call")
    costPerCallUsd: float = Field(0.2, ge=0, description="dollars of one LLM runner call")
    shareMaxMultiple: float = Field(4, ge=1, le=1000, description="the most one runner of "
                                    "`clavain run` may be given (its reservation and "
                                    "--max-budget-usd), in projections of its call")


class Supervisor(_Strict):
    """The headless supervisor (`clavain run`)."""

    packetMode: Literal["full", "thin"] = Field(
        "thin", description="thin: executors get their node, not the plan context")
    workers: int = Field(1, ge=1, le=32, description="nodes run at once (--workers)")
    shellTimeoutSeconds: float = Field(1800, gt=0, description="shell and configured runners")
    maxRateLimitWaitSeconds: float = Field(3600, ge=0, description="longest wait for a rate "
                                                                    "limit's reset")
    waitOnLimit: bool = Field(True, strict=True, description="past budgets.windowShareMax, "
                              "`clavain run` and `clavain loop` wait for the window's reset "
                              "with a countdown (false: they end, saying when they would "
                              "resume; --wait-on-limit / --no-wait-on-limit)")
    roles: Routes = Field(default_factory=Routes)
    claude: ClaudeRunner = Field(default_factory=ClaudeRunner)
    projection: Projection = Field(default_factory=Projection)


class Check(_Strict):
    """A project check the loop runs each iteration; a failing one is work to do."""

    id: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,63}$", description="short name")
    cmd: str = Field(min_length=1, description="shell command; exit 0 means it passes")
    priority: Literal["high", "medium", "low"] = Field("medium", description="shown to the "
                                                                               "agent")
    description: str = Field("", max_length=500, description="what a failure means")
    timeout: float = Field(120, gt=0, description="seconds before it counts as failing")


class Breaker(_Strict):
    """When the loop's circuit breaker opens (consecutive iterations)."""

    noProgress: int = Field(3, ge=1, le=100, description="iterations with no progress")
    sameError: int = Field(5, ge=1, le=100, description="iterations with the same error")
    permissionDenials: int = Field(2, ge=1, le=100, description="iterations with a permission "
                                                                "denial")
    cooldownSeconds: float = Field(1800, ge=0, description=(
        "kept for older configs: an open breaker stays open until a person closes it "
        "(--reset-circuit)"))


class Loop(_Strict):
    """The fresh-context loop (`clavain loop`, `/clavain:loop`)."""

    maxIterations: int = Field(100, ge=1, le=100000, description="iterations per run")
    callsPerHour: int = Field(100, ge=1, le=100000, description="runner calls per hour")
    automation: Literal["auto", "ask", "plan"] = Field("auto", description="what the agent may "
                                                                           "do unasked")
    breaker: Breaker = Field(default_factory=Breaker)


class Session(_Strict):
    """What Clavain adds to a session's context."""

    contextMaxTokens: int = Field(500, ge=0, le=2000, description="cap on what SessionStart "
                                  "injects (estimated high; whole sections dropped to fit)")


def _json_number(value: object) -> object:
    """A budget figure is a JSON number: never text nor true/false (which pydantic would
    otherwise turn into one), as `clavain.guards.policy` reads it."""
    if isinstance(value, (str, bool)):
        raise ValueError("a number, not text nor true/false")
    return value


# A whole number (3 or 3.0, as JSON Schema counts integers) / any finite number, 0..LIMIT_MAX.
_Count = Annotated[int, Field(ge=0, le=LIMIT_MAX), BeforeValidator(_json_number)]
_Dollars = Annotated[float, Field(ge=0, le=LIMIT_MAX, allow_inf_nan=False),
                     BeforeValidator(_json_number)]
_Percent = Annotated[float, Field(ge=0, le=100, allow_inf_nan=False),
                     BeforeValidator(_json_number)]


class Budgets(_Strict):
    """Budgets and loop guards enforced in PreToolUse (`clavain.guards`). A limit left null
    takes the profile × scope default (README, "Budgets"). Read without pydantic by
    `clavain.guards.policy.resolve`, which accepts exactly what this model accepts."""

    enabled: bool = Field(True, strict=True, description="false: count nothing, deny nothing")
    profile: Literal["strict", "yolo", "smoke"] = Field("strict", description="how strict")
    scope: Literal["tiny", "medium", "large"] | None = Field(
        None, description="the job's size; an active sprint's complexity sets it")
    maxCommands: _Count | None = Field(None, description="Bash calls per run")
    maxTestRuns: _Count | None = Field(None, description="test commands per run")
    maxWebRequests: _Count | None = Field(None, description="WebFetch/WebSearch per run")
    maxTokens: _Count | None = Field(None, description="tokens per run (measured)")
    maxCostUsd: _Dollars | None = Field(None, description="dollars per run (measured)")
    maxPatchRepeats: _Count = Field(2, description="times one patch may be applied")
    testPatterns: list[Annotated[str, Field(strict=True)]] = Field(
        default_factory=list, description="extra regexes for test commands")
    perAgentMaxTokens: _Count | None = Field(None, description="tokens one subagent may use "
                                             "(its tool calls are denied past it; null: no cap "
                                             "but the session's)")
    perAgentMaxCalls: _Count | None = Field(None, description="tool calls one subagent may "
                                            "make (null: no cap but the session's)")
    agentTokens: _Count | None = Field(300000, description="tokens one new subagent is "
                                       "projected to use where this project has measured "
                                       "none with its model")
    agentCostUsd: _Dollars | None = Field(1.0, description="dollars one new subagent is "
                                          "projected to cost where this project has measured "
                                          "none with its model")
    windowShareMax: _Percent | None = Field(None, description="percent of the subscription's "
                                            "5-hour and weekly windows past which no new "
                                            "fan-out starts and `clavain run`/`loop` stop "
                                            "dispatching (null: off)")


class Store(_Strict):
    """Where the workgraph lives (budgets and session state stay in the project's SQLite)."""

    url: str | None = Field(None, pattern=r"^postgres(ql)?://", description="a PostgreSQL URL "
                            "shared by a team (postgresql://user@host:port/db); null: the "
                            "project's .clavain/state.sqlite. CLAVAIN_DB overrides it")
    outageWaitSeconds: float = Field(120, ge=0, description="how long `clavain run` waits "
                                     "for a workgraph server that is restarting or cannot "
                                     "be reached (at start and mid-run) before it stops "
                                     "with the cause")


class Plans(_Strict):
    """Plan lint (`clavain plan lint`, and every front door that records a plan)."""

    requireVerify: bool = Field(False, description="a task with no verify command is an error "
                                "(a sprint's plan file already needs one per task)")
    maxTasks: int = Field(200, ge=1, description="more tasks than this in one plan is a "
                          "warning")


class Config(_Strict):
    """`.clavain/config.json`; every key is optional."""

    defaults: Defaults = Field(default_factory=Defaults)
    runners: dict[str, Runner] = Field(default_factory=dict,
                                       description="runners by name")
    session: Session = Field(default_factory=Session)
    budgets: Budgets = Field(default_factory=Budgets)
    supervisor: Supervisor = Field(default_factory=Supervisor)
    checks: list[Check] = Field(default_factory=list, description="checks the loop runs")
    loop: Loop = Field(default_factory=Loop)
    store: Store = Field(default_factory=Store)
    plans: Plans = Field(default_factory=Plans)


def render_schema() -> str:
    return schema_text(Config, "config.schema.json", by_alias=True)


def write_schemas() -> list[Path]:
    from clavain.fsutil import write_atomic

    text = render_schema()
    for path in (REPO_SCHEMA, PACKAGED_SCHEMA):
        write_atomic(path, text)
    return [REPO_SCHEMA, PACKAGED_SCHEMA]


if __name__ == "__main__":
    for written in write_schemas():
        print(written)
