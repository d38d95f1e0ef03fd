"""Hook dispatcher: `python -m clavain.hooks <Event>` reads the host's JSON on stdin and calls
`clavain.hooks.<event>.handle(payload)`, which returns the JSON to print (or None).

This is the hot path: stdlib only, one handler module imported per call. Nothing may reach
the host: bad stdin, an unknown event or any exception becomes one line in
`.clavain/logs/hooks.log` and exit 0 with nothing printed.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import sys
import time

# The events hooks/hooks.json registers; anything else is logged and ignored.
EVENTS = ("SessionStart", "SubagentStop")


def module_name(event: str) -> str:
    """`SubagentStop` → `subagent_stop` (no `re`: it costs ~3 ms to import)."""
    return "".join(f"_{c.lower()}" if c.isupper() and i else c.lower()
                   for i, c in enumerate(event))


def log_failure(event: str, problem: str, payload: object = None) -> None:
    """Append one line to the project's hooks.log; never raises."""
    try:
        from clavain.clock import utc_stamp
        from clavain.paths import StatePaths

        cwd = payload.get("cwd") if isinstance(payload, dict) else None
        log = StatePaths.discover(cwd).hooks_log
        log.parent.mkdir(parents=True, exist_ok=True)
        line = f"{utc_stamp()} {event or '-'} {problem}".replace("\n", " | ")[:2000]
        with open(log, "a", encoding="utf-8") as handle:
            handle.write(line + "\n")
    except Exception:  # logging must not become the failure
        pass


def _trace(event: str, started: float) -> None:
    """With CLAVAIN_HOOK_TRACE=<file>: one JSON line per hook run (which python, how long)."""
    target = os.environ.get("CLAVAIN_HOOK_TRACE")
    if not target:
        return
    record = {"event": event, "python": sys.executable, "pid": os.getpid(),
              "ms": round((time.perf_counter() - started) * 1000, 3)}
    with open(target, "a", encoding="utf-8") as handle:
        handle.write(json.dumps(record) + "\n")


def dispatch(event: str, raw: str) -> str | None:
    """The text to print for one hook call, or None. Raises on anything unexpected."""
    if event not in EVENTS:
        raise LookupError(f"unknown hook event {event!r}")
    payload = json.loads(raw) if raw.strip() else None
    if not isinstance(payload, dict):
        raise ValueError(f"stdin is not a JSON object ({type(payload).__name__})")
    handler = importlib.import_module(f"clavain.hooks.{module_name(event)}")
    output = handler.handle(payload)
    return json.dumps(output) if output else None


def main(argv: list[str] | None = None) -> int:
    started = time.perf_counter()
    args = sys.argv[1:] if argv is None else argv
    event = args[0] if args else ""
    raw = ""
    try:
        raw = sys.stdin.read()
        text = dispatch(event, raw)
        if text:
            sys.stdout.write(text)
            sys.stdout.flush()
    except BaseException as exc:
        payload = None
        with contextlib.suppress(Exception):
            payload = json.loads(raw)
        log_failure(event, f"{type(exc).__name__}: {exc}", payload)
    with contextlib.suppress(Exception):
        _trace(event, started)
    return 0
