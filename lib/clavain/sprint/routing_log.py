"""Routing in the open: each sprint start's routing decision — the classifier's score, its
reasons and the cues that matched, the score used and whose it was — kept in the checkpoint
(`routing_decision`) and, since the checkpoint is archived with its sprint, one line per start
in `.clavain/logs/routing.jsonl`, which `clavain report --routing` reads across sprints: how
often the classifier's score was used, which way and how far people and agents moved it, and
the cues behind the misses.

The log is append-only JSON lines, one `write` each (O_APPEND). A crash mid-write leaves at most
a torn last line: the next append starts on a new line, and the reader skips (and counts) any
line that is not a whole record, never failing on one.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pathlib import Path

    from clavain.paths import StatePaths

LOG_NAME = "routing.jsonl"
# The reader keeps the last this many bytes: years of starts at well under 1 KB a line.
MAX_READ_BYTES = 16 << 20
DESCRIPTION_CHARS = 200
DECIDERS = ("classifier", "person", "agent")
SCORES = (1, 2, 3, 4, 5)
TOP_CUES = 10


def log_path(state: StatePaths) -> Path:
    return state.logs / LOG_NAME


def decision(classified: dict[str, Any], override: int | None,
             person: bool) -> dict[str, Any]:
    """The routing decision of a start: `classified` is `complexity.explain`'s result,
    `override` the `--complexity` given (None: none), `person` whether a person gave it."""
    from clavain.sprint.complexity import LABELS

    score = int(classified["score"])
    used = override if override is not None else score
    steps = used - score
    return {
        "classifier_score": score, "classifier_label": LABELS[score],
        "classifier_reasons": list(classified["reasons"]),
        "cues": {family: list(hits) for family, hits in classified.get("cues", {}).items()},
        "score": used,
        "decided_by": "classifier" if override is None else "person" if person else "agent",
        "direction": None if override is None else
        "raised" if steps > 0 else "lowered" if steps < 0 else "same",
        "steps": steps,
    }


def append(state: StatePaths, sprint_id: str, at: str, description: str,
           routing: dict[str, Any]) -> None:
    """One line for a sprint start. After a torn last line (a crash mid-write) the record
    starts on a line of its own, so only the torn one is lost."""
    import json

    from clavain.fsutil import open_inside, read_regular

    path = log_path(state)
    text = description if len(description) <= DESCRIPTION_CHARS else \
        description[:DESCRIPTION_CHARS - 1].rstrip() + "…"
    line = json.dumps({"sprint_id": sprint_id, "at": at, "description": text, **routing},
                      ensure_ascii=False, separators=(",", ":")) + "\n"
    last = read_regular(path, 1, from_end=True)
    raw = (b"\n" if last and last != b"\n" else b"") + line.encode("utf-8")
    with open_inside(state.root, path, "ab") as handle:
        handle.write(raw)
        handle.flush()
        os.fsync(handle.fileno())


def read(state: StatePaths) -> tuple[list[dict[str, Any]], int]:
    """The recorded starts, oldest first, and how many lines were skipped (torn or not a
    record). A missing log is no starts."""
    import json

    from clavain.fsutil import read_regular

    raw = read_regular(log_path(state), MAX_READ_BYTES, from_end=True)
    if not raw:
        return [], 0
    lines = raw.decode("utf-8", errors="replace").split("\n")
    if len(raw) == MAX_READ_BYTES:
        lines = lines[1:]  # the first may be cut by the limit: not a record, not a problem
    records, skipped = [], 0
    for line in lines:
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError:
            skipped += 1
            continue
        if _whole(record):
            records.append(record)
        else:
            skipped += 1
    return records, skipped


def _whole(record: Any) -> bool:
    return isinstance(record, dict) and record.get("classifier_score") in SCORES and \
        record.get("score") in SCORES and record.get("decided_by") in DECIDERS and \
        isinstance(record.get("cues", {}), dict)


def report(state: StatePaths) -> dict[str, Any]:
    """What the recorded starts say of the classifier: how many, agreement (the score used was
    the classifier's), the overrides by who and which way, classifier x used, and the most
    common cues among the starts whose score was moved, per direction."""
    from collections import Counter

    records, skipped = read(state)
    agreed = sum(1 for r in records if r["score"] == r["classifier_score"])
    moves = Counter((r["decided_by"], _way(r["score"] - r["classifier_score"]),
                     r["score"] - r["classifier_score"])
                    for r in records if r["score"] != r["classifier_score"])
    cells = Counter((r["classifier_score"], r["score"]) for r in records)
    cues: dict[str, Counter[tuple[str, str]]] = {"raised": Counter(), "lowered": Counter()}
    for r in records:
        if r["score"] != r["classifier_score"]:
            cues[_way(r["score"] - r["classifier_score"])].update(
                (str(family), str(hit)) for family, hits in r.get("cues", {}).items()
                if isinstance(hits, list) for hit in dict.fromkeys(map(str, hits)))
    return {
        "log": str(log_path(state)), "starts": len(records), "skipped_lines": skipped,
        "agreed": agreed, "agreement": round(agreed / len(records), 3) if records else None,
        "decided_by": {who: sum(1 for r in records if r["decided_by"] == who)
                       for who in DECIDERS},
        "raised": sum(1 for r in records if r["score"] > r["classifier_score"]),
        "lowered": sum(1 for r in records if r["score"] < r["classifier_score"]),
        "overrides": [{"decided_by": who, "direction": way, "steps": steps, "starts": count}
                      for (who, way, steps), count in sorted(moves.items())],
        "confusion": [{"classifier": c, "used": u, "starts": count}
                      for (c, u), count in sorted(cells.items())],
        "miss_cues": {way: [{"family": family, "cue": hit, "starts": count}
                            for (family, hit), count in found.most_common(TOP_CUES)]
                      for way, found in cues.items()},
    }


def _way(steps: int) -> str:
    return "raised" if steps > 0 else "lowered"


def render(found: dict[str, Any]) -> str:
    """The report as text for people: a line when nothing is recorded yet, else tables."""
    from clavain.sprint.complexity import LABELS
    from clavain.tables import render_table

    if not found["starts"]:
        skipped = (f" ({found['skipped_lines']} unreadable line(s) skipped)"
                   if found["skipped_lines"] else "")
        return (f"No sprint start recorded yet in {found['log']}{skipped}: each `clavain "
                "sprint start` records its routing there.\n")
    out = [f"Routing of {found['starts']} sprint start(s) ({found['log']})"]
    if found["skipped_lines"]:
        out.append(f"{found['skipped_lines']} unreadable line(s) skipped (a torn write)")
    out.append(f"Agreement: {found['agreed']} of {found['starts']} "
               f"({found['agreement']:.0%}) used the classifier's score; raised "
               f"{found['raised']}, lowered {found['lowered']}")
    if found["overrides"]:
        out += ["", "Scores moved from the classifier's:", render_table(
            [{**row, "steps": f"{row['steps']:+d}"} for row in found["overrides"]],
            ["decided_by", "direction", "steps", "starts"])]
    grid = {(cell["classifier"], cell["used"]): cell["starts"] for cell in found["confusion"]}
    out += ["", "Classifier (rows) x used (columns):", render_table(
        [{"classifier": f"{score} {LABELS[score]}",
          **{str(used): grid.get((score, used), "") for used in SCORES}}
         for score in SCORES if any((score, used) in grid for used in SCORES)],
        ["classifier", *map(str, SCORES)])]
    for way in ("raised", "lowered"):
        if found["miss_cues"][way]:
            out += ["", f"Cues behind the starts {way} from the classifier's score:",
                    render_table(found["miss_cues"][way], ["family", "cue", "starts"])]
    return "\n".join(out) + "\n"
