"""Workgraph boundary models: a node spec (`graph import`, `graph add`, a runner's `addNodes`) and
the result a runner returns in `<result>…</result>`.

Their JSON Schemas are committed in `schemas/` (`python -m clavain.models.node` regenerates them;
a test fails when they drift).
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from clavain.models.schema_text import schema_text

NODE_TYPES = ("plan", "epic", "task", "verify", "integrate", "final_verify")
# Letters, digits and `._:-`; no leading `_` so no node can collide with the KV run namespace.
NODE_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$"

NodeType = Literal["plan", "epic", "task", "verify", "integrate", "final_verify"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class NodeInput(_Strict):
    """A reference to another node's KV entry, rendered into this node's packet."""

    nodeId: str = Field(description="node holding the value ('__run__' for the run namespace)")
    key: str = Field(min_length=1, description="KV key, e.g. out.summary")
    as_: str | None = Field(default=None, alias="as",
                            description="name the packet shows the value under")


class RetryPolicy(_Strict):
    maxAttempts: int = Field(ge=1, le=100, description="failed attempts before the node fails")


class NodeOrigin(_Strict):
    """Where an imported node came from (`clavain graph import --from`): a re-import finds the
    node by it and updates it rather than adding a second one."""

    format: str = Field(min_length=1, max_length=40,
                        description="the source's format, e.g. github, markdown, beads")
    source_id: str = Field(min_length=1, max_length=500,
                           description="the item's id at its source (issue number, bead id)")
    status: str | None = Field(default=None, max_length=100,
                               description="its status at the source (closed/done: imported "
                                           "as done)")
    priority: str | int | None = Field(default=None, description="its priority at the source")
    url: str | None = Field(default=None, max_length=2000, description="where it lives")
    unresolved: list[str] = Field(default_factory=list,
                                  description="references the source had that the import could "
                                              "not turn into dependencies")


class NodeSpec(_Strict):
    """One node to add to the workgraph."""

    id: str = Field(pattern=NODE_ID_PATTERN, description="unique node id, e.g. task-login-form")
    type: NodeType = Field(description="role of the node; decides its runner and selection order")
    title: str = Field(default="", max_length=500, description="one line for people")
    dependsOn: list[str] = Field(default_factory=list,
                                 description="ids that must be done before this node runs")
    parent: str | None = Field(default=None,
                               description="parent node id (set to the adding node for addNodes)")
    runner: str | None = Field(default=None, description="runner name from config; default by type")
    inputs: list[NodeInput] = Field(default_factory=list, description="KV refs for the packet")
    ownership: list[str] = Field(default_factory=list, description="globs of files this node owns")
    acceptance: list[str] = Field(default_factory=list, description="acceptance criteria")
    verify: list[str] = Field(default_factory=list, description="shell commands that verify it")
    commands: list[str] = Field(default_factory=list,
                                description="shell commands that do the work (the shell runner "
                                            "runs them, no LLM)")
    retryPolicy: RetryPolicy | None = Field(default=None,
                                            description="default: defaults.maxAttempts")
    origin: NodeOrigin | None = Field(default=None,
                                      description="set by an import: the item it came from")


class NodeBatch(_Strict):
    """The file `clavain graph import` reads."""

    nodes: list[NodeSpec] = Field(description="nodes to add in one transaction")


class NextStep(_Strict):
    addNodes: list[NodeSpec] = Field(default_factory=list,
                                     description="new nodes; their parent is the current node")


class RunnerResult(_Strict):
    """What a runner prints inside `<result>…</result>` when it finishes a node."""

    version: Literal[1] | None = Field(default=None,
                                       description="optional format version: 1 (the only one)")
    status: Literal["success", "checkpoint", "fail"] = Field(
        description="success → done; checkpoint → needs a human answer; fail → retry or fail")
    summary: str = Field(default="", max_length=20_000, description="1–3 sentences")
    errors: list[str] = Field(default_factory=list, description="failure details, first is key")
    question: str | None = Field(default=None, description="the question for a checkpoint")
    next: NextStep | None = Field(default=None, description="follow-up work")

    @model_validator(mode="after")
    def _checkpoint_asks_something(self) -> RunnerResult:
        if self.status == "checkpoint" and not (self.question or self.summary):
            raise ValueError("a checkpoint needs a question (or at least a summary)")
        return self


SCHEMAS: dict[str, type[BaseModel]] = {
    "node.schema.json": NodeBatch,
    "result.schema.json": RunnerResult,
}


def json_schemas() -> dict[str, str]:
    """File name → schema text, exactly as committed under `schemas/`."""
    return {name: schema_text(model, name, by_alias=True) for name, model in SCHEMAS.items()}


def write_schemas(folder: Path) -> list[Path]:
    from clavain.fsutil import write_atomic

    written = []
    for name, text in json_schemas().items():
        write_atomic(folder / name, text)
        written.append(folder / name)
    return written


if __name__ == "__main__":
    for path in write_schemas(Path(__file__).resolve().parents[3] / "schemas"):
        print(path)
