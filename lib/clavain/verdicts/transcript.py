"""Measured token usage from Claude Code transcripts (JSONL). Stdlib only (SubagentStop).

Claude Code writes one assistant line per content block and repeats the message's usage on each,
so a naive sum over-counts. Deduplicate like ccusage: one entry per (message.id, requestId); a
sidechain copy of a message (same message.id) counts once; on a collision the larger total wins
(earlier lines of a streamed message can carry a partial output count).

Files are streamed in binary chunks and only lines containing `"usage"` are cut out and decoded
as JSON: tool results (the bulk of a transcript) are skipped at memchr speed.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:  # `typing` and `pathlib` cost imports the hooks need not pay
    from collections.abc import Iterable, Iterator
    from pathlib import Path
    from typing import Any

USAGE_FIELDS = ("input_tokens", "output_tokens", "cache_creation_input_tokens",
                "cache_read_input_tokens")
_USAGE_MARKER = b'"usage"'


def _counts(usage: dict[str, Any]) -> tuple[int, ...]:
    """The four counts (anything but a positive int counts as 0: bools, strings, negatives)."""
    return tuple(value if type(value) is int and value > 0 else 0
                 for value in map(usage.get, USAGE_FIELDS))


class Usage:
    """Token counts of distinct API responses. A plain class rather than a dataclass:
    `dataclasses` drags in `inspect` (~6 ms), and SubagentStop and SessionStart import this."""

    __slots__ = ("cache_creation_input_tokens", "cache_read_input_tokens", "input_tokens",
                 "messages", "models", "output_tokens", "per_model", "usage_lines")

    def __init__(self, input_tokens: int = 0, output_tokens: int = 0,
                 cache_creation_input_tokens: int = 0, cache_read_input_tokens: int = 0,
                 messages: int = 0, usage_lines: int = 0, models: dict[str, int] | None = None,
                 per_model: dict[str, list[int]] | None = None) -> None:
        self.input_tokens = input_tokens
        self.output_tokens = output_tokens
        self.cache_creation_input_tokens = cache_creation_input_tokens
        self.cache_read_input_tokens = cache_read_input_tokens
        self.messages = messages
        self.usage_lines = usage_lines
        self.models: dict[str, int] = {} if models is None else models
        # model → [input, output, cache write 5 min, cache write 1 h, cache read]: what pricing
        # needs (the host reports the 1-hour share of cache writes in usage.cache_creation).
        self.per_model: dict[str, list[int]] = {} if per_model is None else per_model

    def __repr__(self) -> str:
        return "Usage(" + ", ".join(f"{name}={getattr(self, name)!r}" for name in (
            *USAGE_FIELDS, "messages", "usage_lines", "models", "per_model")) + ")"

    @property
    def total(self) -> int:
        return (self.input_tokens + self.output_tokens + self.cache_creation_input_tokens
                + self.cache_read_input_tokens)

    @property
    def main_model(self) -> str | None:
        """The model that answered most messages."""
        return max(self.models, key=self.models.__getitem__) if self.models else None

    def as_dict(self) -> dict[str, Any]:
        return {**{key: getattr(self, key) for key in USAGE_FIELDS}, "total": self.total,
                "messages": self.messages, "usage_lines": self.usage_lines,
                "models": dict(self.models)}


class _Deduper:
    """Collects usage entries across one or more files, keeping one per API response."""

    def __init__(self) -> None:
        # key → (counts, total, model, 1-hour cache writes)
        self.entries: dict[object, tuple[tuple[int, ...], int, str | None, int]] = {}
        self._by_message: dict[str, tuple[tuple[str, str | None], bool]] = {}
        self._anonymous = 0
        self.usage_lines = 0

    def add(self, record: dict[str, Any]) -> None:
        message = record.get("message")
        if record.get("type") != "assistant" or not isinstance(message, dict):
            return
        usage = message.get("usage")
        if not isinstance(usage, dict):
            return
        self.usage_lines += 1
        model = message.get("model")
        model = model if isinstance(model, str) else None
        counts = _counts(usage)
        total = sum(counts)
        split = usage.get("cache_creation")
        hour = split.get("ephemeral_1h_input_tokens") if isinstance(split, dict) else None
        write_1h = min(hour, counts[2]) if type(hour) is int and hour > 0 else 0
        message_id = message.get("id")
        if not isinstance(message_id, str):  # nothing to deduplicate on: a response of its own
            self._anonymous += 1
            self.entries[self._anonymous] = (counts, total, model, write_1h)
            return
        request_id = record.get("requestId")
        request_id = request_id if isinstance(request_id, str) else None
        key: tuple[str, str | None] = (message_id, request_id)
        sidechain = record.get("isSidechain") is True
        known = self._by_message.get(message_id)
        # A sidechain copy of a message already seen (or the original arriving after its copy)
        # is the same response even when its requestId differs or is missing. An exact
        # (message.id, requestId) match always goes to its own entry.
        if known is not None and known[0] != key and key not in self.entries and (
                sidechain or known[1] or None in (known[0][1], request_id)):
            key = known[0]
        previous = self.entries.get(key)
        if previous is None or total > previous[1]:
            self.entries[key] = (counts, total, model or (previous[2] if previous else None),
                                 write_1h)
        self._by_message.setdefault(message_id, (key, sidechain))

    def usage(self) -> Usage:
        result = Usage(usage_lines=self.usage_lines)
        sums = [0] * len(USAGE_FIELDS)
        for counts, _, model, write_1h in self.entries.values():
            result.messages += 1
            for index, count in enumerate(counts):
                sums[index] += count
            if model and model != "<synthetic>":
                result.models[model] = result.models.get(model, 0) + 1
            priced = result.per_model.setdefault(model or "unknown", [0, 0, 0, 0, 0])
            for index, count in enumerate((counts[0], counts[1], counts[2] - write_1h, write_1h,
                                           counts[3])):
                priced[index] += count
        for key, value in zip(USAGE_FIELDS, sums, strict=True):
            setattr(result, key, value)
        return result


def _usage_lines(path: Path, chunk_size: int = 1 << 22) -> Iterator[bytes]:
    """The lines of `path` that contain `"usage"`, found with bytes.find over big chunks so the
    other lines are never split out or looked at one by one."""
    pending: list[bytes] = []  # the unfinished last line, kept in pieces (lines can be huge)
    with open(path, "rb") as handle:
        while chunk := handle.read(chunk_size):
            end = chunk.rfind(b"\n")
            if end < 0:
                pending.append(chunk)
                continue
            block = b"".join([*pending, chunk[: end + 1]]) if pending else chunk[: end + 1]
            pending = [chunk[end + 1:]] if end + 1 < len(chunk) else []
            yield from marked_lines(block)
    last = b"".join(pending)
    if _USAGE_MARKER in last:
        yield last


def marked_lines(block: bytes) -> Iterator[bytes]:
    """The lines of `block` (whole lines, the last ending in a newline) that contain
    `"usage"`."""
    position = 0
    while (found := block.find(_USAGE_MARKER, position)) >= 0:
        start = block.rfind(b"\n", 0, found) + 1
        stop = block.index(b"\n", found)
        yield block[start:stop]
        position = stop + 1


def _feed(deduper: _Deduper, path: Path, since: str | None = None) -> None:
    feed_lines(deduper, _usage_lines(path), since)


def decoded_line(line: bytes) -> str:
    """A transcript line as `json.loads` decodes bytes: UTF-8, a BOM dropped, surrogates let
    through (UnicodeDecodeError, a ValueError, for anything else). Not the utf-8-sig codec: it
    costs an import."""
    return (line[3:] if line.startswith(b"\xef\xbb\xbf") else line).decode("utf-8",
                                                                            "surrogatepass")


def feed_lines(deduper: _Deduper, lines: Iterable[bytes], since: str | None = None) -> None:
    """Add the responses of transcript `lines` (those written at or after `since`)."""
    from clavain import fastjson  # `json` imports `re`: SubagentStop measures every reviewer

    for line in lines:
        try:
            record = fastjson.loads(decoded_line(line))
        except (ValueError, RecursionError):  # a torn last line; absurdly deep nesting
            continue
        if not isinstance(record, dict):
            continue
        stamp = record.get("timestamp")
        if since is not None and isinstance(stamp, str) and stamp < since:
            continue  # before the period asked for (both are UTC ISO-8601, `…Z`)
        deduper.add(record)


def usage_of_files(paths: Iterable[Path], since: str | None = None) -> Usage:
    """Deduplicated usage across `paths` together (copies in several files count once); with
    `since`, only responses written at or after it."""
    deduper = _Deduper()
    for path in paths:
        _feed(deduper, path, since)
    return deduper.usage()


def transcript_usage(path: Path) -> Usage:
    """Deduplicated usage of one transcript file."""
    return usage_of_files([path])


def holds_transcript(path: Path, max_bytes: int = 1 << 20) -> bool:
    """Whether `path` reads as a Claude Code transcript: within its first `max_bytes`, a line
    that is a JSON object with a text `type` and a session, record or leaf id
    (`TRANSCRIPT_KEYS`). A README, random bytes or a package.json do not, so their zeros are
    never shown as a measurement."""
    import json

    with open(path, "rb") as handle:
        head = handle.read(max_bytes)
    for line in head.splitlines():
        if not line.lstrip().startswith(b"{"):
            continue
        try:
            record = json.loads(line)
        except (ValueError, RecursionError):
            continue
        if isinstance(record, dict) and isinstance(record.get("type"), str) and \
                any(key in record for key in TRANSCRIPT_KEYS):
            return True
    return False


# Every record Claude Code writes carries a type and one of these (a summary its leaf).
TRANSCRIPT_KEYS = ("sessionId", "uuid", "leafUuid")


def subagent_files(transcript: Path) -> list[Path]:
    """`<session>.jsonl` → its subagents' `<session>/subagents/agent-*.jsonl`, and those of
    its Workflow runs' agents (`subagents/workflows/<run>/agent-*.jsonl`, as 2.1.330 writes
    them), sorted."""
    folder = transcript.with_suffix("") / "subagents"
    if not folder.is_dir():
        return []
    from clavain.fsutil import names_ending  # not a glob: it compiles a pattern with `re`

    runs = folder / "workflows"
    found = [*(folder / name for name in names_ending(folder, ".jsonl", "agent-")),
             *(runs / run / name for run in names_ending(runs, "")
               for name in names_ending(runs / run, ".jsonl", "agent-"))]
    return sorted(path for path in found if path.is_file())


def session_usage(transcript: Path, *, with_subagents: bool = True
                  ) -> tuple[Usage, list[tuple[Path, Usage]]]:
    """(total, per-file usage) of a main transcript and, optionally, its subagents' files."""
    files = [transcript, *(subagent_files(transcript) if with_subagents else [])]
    per_file = [(path, transcript_usage(path)) for path in files]
    return usage_of_files(files), per_file


def user_text(entry: object) -> str | None:
    """The text of a transcript line that is a user message: its string content, or its first
    text block that is not a `<…>` insert (a reminder, a command's output); None for anything
    else (assistant lines, tool results)."""
    message = entry.get("message") if isinstance(entry, dict) else None
    if not isinstance(message, dict) or message.get("role") != "user":
        return None
    content = message.get("content")
    if isinstance(content, str):
        return content
    for block in content if isinstance(content, list) else []:
        text = block.get("text") if isinstance(block, dict) else None
        if isinstance(text, str) and text.strip() and not text.lstrip().startswith("<"):
            return text
    return None


def first_user_text(path: object, max_bytes: int = 64 * 1024) -> str:
    """The text of the first user message in a transcript (a subagent's: its prompt), read from
    the file's first `max_bytes`; '' when there is none or the file cannot be read."""
    if not isinstance(path, str):
        return ""
    from clavain import fastjson  # `json` costs SessionStart an import (and `re`)
    from clavain.fsutil import read_regular

    raw = read_regular(path, max_bytes, follow_symlinks=True)  # a FIFO must not hang a hook
    if raw is None:
        return ""
    for line in raw.decode("utf-8", "replace").splitlines():
        try:
            entry = fastjson.loads(line)
        except (ValueError, RecursionError):
            continue
        message = entry.get("message") if isinstance(entry, dict) else None
        if isinstance(message, dict) and message.get("role") == "user":
            return user_text(entry) or ""
    return ""


# How far from its end a transcript is searched for an agent's final message.
FINAL_MESSAGE_TAIL_BYTES = 256 * 1024


def holds_final_message(path: Path, message: str) -> bool:
    """Whether the transcript already holds the agent's final message. The host can fire
    SubagentStop before it has flushed that line (seen on 2.1.330: a 3 KB file that later grew
    to 33 KB), and measuring then would miss the last turn's usage."""
    from clavain import fastjson

    needle = fastjson.dumps(message.strip()[-80:], ensure_ascii=False)[1:-1]
    try:
        with open(path, "rb") as handle:
            handle.seek(max(0, path.stat().st_size - FINAL_MESSAGE_TAIL_BYTES))
            tail = handle.read().decode("utf-8", errors="replace")
    except OSError:
        return False
    return needle in tail
