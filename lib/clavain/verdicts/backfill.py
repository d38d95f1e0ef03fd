"""Tokens measured later: when SubagentStop finds no readable transcript (the host had not
written it yet), the verdict is filed at once, with its lens and the tokens the agent reported,
and a `<agent>--<dispatch>.pending` marker names the transcript. Whoever reads the verdicts next
(`clavain verdicts`, the sprint's summary and gates) measures what is there by then and rewrites
the verdict with `tokens_source: measured`. A marker whose transcript never appears is dropped
after MAX_AGE_SECONDS. Stdlib only.
"""

from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path

from clavain.fsutil import read_json_object, read_regular, write_json_atomic
from clavain.verdicts import files

SUFFIX = ".pending"
MAX_AGE_SECONDS = 86400.0
MARKER_MAX_BYTES = 64 * 1024


def mark(folder: Path, agent: str, dispatch: str, transcript: str, *, inside: Path) -> None:
    write_json_atomic(files.verdict_path(folder, agent, dispatch, SUFFIX),
                      {"transcript": transcript, "since": time.time()}, inside=inside)


def measure_pending(state: object) -> int:
    """`backfill` of a project's live verdicts folder, once per command that reads tokens (the
    sprint's summary, `done`, `clavain verdicts`); a read-only state folder keeps them as
    reported."""
    with contextlib.suppress(OSError, ValueError):
        return backfill(state.verdicts, inside=state.root)  # type: ignore[attr-defined]
    return 0


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
        pending = read_json_object(marker, MARKER_MAX_BYTES) or {}
        transcript, since = pending.get("transcript"), pending.get("since", 0)
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
    verdict = read_json_object(marker.with_suffix(".json"))
    if verdict is None or files.validate(verdict):
        return False
    files.apply_usage(verdict, usage)
    files.write(folder, verdict, dispatch, inside=inside)
    return True
