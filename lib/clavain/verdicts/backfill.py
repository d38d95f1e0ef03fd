"""Tokens measured later: when SubagentStop finds no readable transcript (the host had not
written it yet), the verdict is filed at once, with its lens and the tokens the agent reported,
and a `<agent>--<dispatch>.pending` marker names the transcript. Whoever reads the verdicts next
(`clavain verdicts`, the sprint's summary and gates) measures what is there by then and rewrites
the verdict with `tokens_source: measured`. A marker whose transcript never appears is dropped
after MAX_AGE_SECONDS. Stdlib only.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from pathlib import Path

from clavain.fsutil import read_regular, write_json_atomic
from clavain.verdicts import files

SUFFIX = ".pending"
MAX_AGE_SECONDS = 86400.0
MARKER_MAX_BYTES = 64 * 1024


def mark(folder: Path, agent: str, dispatch: str, transcript: str, *, inside: Path) -> None:
    write_json_atomic(files.verdict_path(folder, agent, dispatch, SUFFIX),
                      {"transcript": transcript, "since": time.time()}, inside=inside)


def backfill(folder: Path, *, inside: Path, now: float | None = None) -> int:
    """Measure every pending verdict whose transcript is readable now; returns how many."""
    from clavain.verdicts.transcript import transcript_usage

    now = time.time() if now is None else now
    done = 0
    try:
        markers = sorted(p for p in folder.iterdir() if p.suffix == SUFFIX)
    except OSError:
        return 0
    for marker in markers:
        raw = read_regular(marker, MARKER_MAX_BYTES)
        try:
            pending = json.loads(raw) if raw else None
        except ValueError:
            pending = None
        transcript = pending.get("transcript") if isinstance(pending, dict) else None
        since = pending.get("since", 0) if isinstance(pending, dict) else 0
        usage = None
        if isinstance(transcript, str) and read_regular(transcript, 1,
                                                        follow_symlinks=True) is not None:
            with contextlib.suppress(OSError):
                usage = transcript_usage(Path(transcript))
        if usage is not None and usage.messages:
            if _rewrite(folder, marker, usage, inside):
                done += 1
        elif isinstance(since, (int, float)) and now - since <= MAX_AGE_SECONDS:
            continue  # not yet: try again on the next read
        with contextlib.suppress(OSError):
            os.unlink(marker)
    return done


def _rewrite(folder: Path, marker: Path, usage: object, inside: Path) -> bool:
    dispatch = files.split_name(marker.stem)[1]
    raw = read_regular(marker.with_suffix(".json"), 1 << 20)
    try:
        verdict = json.loads(raw) if raw else None
    except ValueError:
        verdict = None
    if not isinstance(verdict, dict) or files.validate(verdict):
        return False
    verdict["tokens_spent"] = usage.total  # type: ignore[attr-defined]
    verdict["tokens_source"] = "measured"
    if not verdict.get("model") and usage.main_model:  # type: ignore[attr-defined]
        verdict["model"] = usage.main_model[: files.MAX_MODEL_CHARS]  # type: ignore[attr-defined]
    files.write(folder, verdict, dispatch, inside=inside)
    return True
