"""When `clavain:executor` stops inside a session, record its `<result>` for the node its packet
named, so the execute loop does not depend on the model copying the line into a command.

The packet's first lines say `Clavain node: ID · run: RUN · graph: GRAPH`; the agent's
transcript starts with that prompt. The result goes through `clavain graph apply ID --run-id RUN
--graph GRAPH` as a subprocess (the node's own graph, whichever sprint is active now):
the hook stays stdlib-only (parsing a result needs pydantic), and the one check "may this
result be applied?" decides as for any other front door. Anything that does not fit — no
marker, no `<result>`, a refusal — leaves the node as it is and one note in hooks.log; the
executing-plans skill tells the model to apply it then.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path
from typing import Any

_MARKER = re.compile(rb"Clavain node: ([A-Za-z0-9][A-Za-z0-9._:-]{0,127}) \xc2\xb7 run: "
                     rb"([A-Za-z0-9][A-Za-z0-9._:-]{0,199})"
                     rb"(?: \xc2\xb7 graph: ([A-Za-z0-9][A-Za-z0-9._:-]{0,99}))?")
_HEAD_BYTES = 256 * 1024
APPLY_TIMEOUT_SECONDS = 60


def packet_target(transcript: object) -> tuple[str, str, str | None] | None:
    """(node id, run id, graph id) from the packet at the start of the agent's transcript (no
    graph in packets older than one graph per sprint)."""
    if not isinstance(transcript, str) or not os.path.isfile(transcript):
        return None
    with open(transcript, "rb") as handle:
        found = _MARKER.search(handle.read(_HEAD_BYTES))
    if not found:
        return None
    return found[1].decode(), found[2].decode(), found[3].decode() if found[3] else None


def apply(payload: dict[str, Any], message: str, project: Path, notes: list[str]) -> bool:
    """Record the executor's result; True when `graph apply` took it."""
    if "<result>" not in message:
        return False
    try:
        target = packet_target(payload.get("agent_transcript_path"))
    except OSError as exc:
        notes.append(f"executor result not recorded: transcript unreadable ({exc})")
        return False
    if target is None:
        return False  # dispatched without a Clavain packet: nothing to record
    node_id, run_id, graph_id = target
    from clavain.paths import plugin_root

    command = [str(plugin_root() / "bin" / "clavain"), "graph", "apply", node_id, "--run-id",
               run_id, "--result", "-", *(["--graph", graph_id] if graph_id else [])]
    env = {**os.environ, "CLAVAIN_PROJECT_DIR": str(project)}
    try:
        done = subprocess.run(command, input=message.encode("utf-8", "replace"), env=env,
                              cwd=project, capture_output=True, timeout=APPLY_TIMEOUT_SECONDS)
    except (OSError, subprocess.SubprocessError) as exc:
        notes.append(f"executor result for {node_id} not recorded: {exc}")
        return False
    if done.returncode != 0:
        why = done.stderr.decode("utf-8", "replace").strip().splitlines()[-1:] or ["?"]
        notes.append(f"executor result for {node_id} not recorded: {why[0]}")
        return False
    return True
