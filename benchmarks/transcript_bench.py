"""Throughput of `clavain.transcript.transcript_usage` on a synthetic transcript.

    .venv/bin/python benchmarks/transcript_bench.py [--mb 100] [--runs 5]

Writes a transcript shaped like Claude Code's (a tool-result user line, then one assistant line
per content block, each repeating the usage) to a temp folder, measures it `--runs` times and
prints MB/s (median). Target: >= 100 MB/s. Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lib"))

from clavain.verdicts.transcript import transcript_usage


def _words(rng: random.Random, size: int) -> str:
    vocabulary = ["def", "return", "self", "path", "value", "usage", "the", "file", "test",
                  "import", "json", "line", "{", "}", "(", ")", "=", "\n", "    "]
    return " ".join(rng.choice(vocabulary) for _ in range(size // 4))


def write_transcript(path: Path, megabytes: int, seed: int = 7) -> tuple[int, int]:
    """(bytes written, assistant lines) for a transcript of about `megabytes` MB."""
    rng = random.Random(seed)
    target = megabytes * 1_000_000
    written = lines = turn = 0
    with open(path, "w", encoding="utf-8") as out:
        while written < target:
            turn += 1
            user = {"parentUuid": f"u{turn}", "isSidechain": False, "type": "user",
                    "message": {"role": "user", "content": [{
                        "type": "tool_result", "tool_use_id": f"toolu_{turn}",
                        "content": _words(rng, rng.randint(500, 12_000))}]},
                    "uuid": f"u{turn}x", "timestamp": "2026-01-31T12:00:00Z"}
            text = json.dumps(user) + "\n"
            usage = {"input_tokens": rng.randint(1, 50), "output_tokens": rng.randint(10, 900),
                     "cache_creation_input_tokens": rng.randint(0, 3000),
                     "cache_read_input_tokens": rng.randint(1000, 90_000),
                     "cache_creation": {"ephemeral_5m_input_tokens": 0,
                                        "ephemeral_1h_input_tokens": 0},
                     "server_tool_use": {"web_search_requests": 0, "web_fetch_requests": 0}}
            blocks = [{"type": "thinking", "thinking": _words(rng, rng.randint(100, 1500))},
                      {"type": "text", "text": _words(rng, rng.randint(50, 800))},
                      {"type": "tool_use", "id": f"toolu_{turn + 1}", "name": "Edit",
                       "input": {"file_path": "lib/a.py",
                                 "old_string": _words(rng, rng.randint(50, 1500)),
                                 "new_string": _words(rng, rng.randint(50, 1500))}}]
            for block in blocks[: rng.randint(1, 3)]:
                text += json.dumps({
                    "parentUuid": f"u{turn}x", "isSidechain": False, "type": "assistant",
                    "requestId": f"req_{turn}", "uuid": f"a{turn}", "message": {
                        "id": f"msg_{turn}", "model": "claude-sonnet-4-5", "type": "message",
                        "role": "assistant", "content": [block], "usage": usage},
                    "timestamp": "2026-01-31T12:00:01Z"}) + "\n"
                lines += 1
            out.write(text)
            written += len(text.encode("utf-8"))
    return written, lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=100)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "session.jsonl"
        size, assistant_lines = write_transcript(path, args.mb)
        rates = []
        for _ in range(args.runs):
            started = time.perf_counter()
            usage = transcript_usage(path)
            rates.append(size / 1e6 / (time.perf_counter() - started))
        print(f"transcript: {size / 1e6:.1f} MB, {assistant_lines:,} assistant lines, "
              f"{usage.messages:,} distinct responses, {usage.total:,} tokens")
        print(f"throughput: median {statistics.median(rates):.0f} MB/s "
              f"(runs: {', '.join(f'{r:.0f}' for r in rates)}; target >= 100 MB/s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
