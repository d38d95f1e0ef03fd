"""Hook dispatcher: `python -m clavain.hooks <Event>` reads the host's JSON on stdin and calls
`clavain.hooks.<event>.handle(payload)`, which returns the JSON to print (or None).

This is the hot path: stdlib only, one handler module imported per call. Nothing may reach
the host: bad stdin, an unknown event or any exception becomes one line in
`.clavain/logs/hooks.log` and exit 0 with nothing printed.
"""

from __future__ import annotations

import os
import sys
import time

from clavain import fastjson

# What stdin may hold: Claude Code sends paths, not transcripts, so a payload is a few KB; a
# prompt pasted whole stays far below this. Past it the call is logged and ignored.
STDIN_MAX_BYTES = 4 << 20
# How long stdin may take to end: the host writes the payload at once and closes it, and it
# does not apply the hook's timeout while the hook still reads (anthropics/claude-code#87289),
# so reading must end on its own.
STDIN_SECONDS = 5.0

# The events hooks/hooks.json registers; anything else is logged and ignored.
EVENTS = ("SessionStart", "UserPromptSubmit", "PreCompact", "Stop", "SubagentStart",
          "SubagentStop", "PreToolUse", "PostToolUseFailure", "StopFailure")
# The events whose handlers never import pathlib (tests hold them to it): every tool call's
# hook and the prompt's; and Stop after a plain turn (a loop or a sprint's handoff imports
# `subprocess`, and `re` with it, anyway). The others get pathlib from `lean_import`, without
# the `re` it drags in.
WITHOUT_PATHLIB = ("PreToolUse", "PostToolUseFailure", "UserPromptSubmit", "Stop")
# The event that may run for minutes (a loop's checks: threads and subprocesses, up to 600 s):
# there a file or a process caught in a reference cycle must still be let go before the end.
KEEPS_CYCLE_COLLECTOR = ("Stop",)


def module_name(event: str) -> str:
    """`SubagentStop` → `subagent_stop` (no `re`: it costs ~3 ms to import)."""
    return "".join(f"_{c.lower()}" if c.isupper() and i else c.lower()
                   for i, c in enumerate(event))


def _trace(event: str, started: float) -> None:
    """With CLAVAIN_HOOK_TRACE=<file>: one JSON line per hook run (which python, how long)."""
    target = os.environ.get("CLAVAIN_HOOK_TRACE")
    if not target:
        return
    record = {"event": event, "python": sys.executable, "pid": os.getpid(),
              "ms": round((time.perf_counter() - started) * 1000, 3)}
    with open(target, "a", encoding="utf-8") as handle:
        handle.write(fastjson.dumps(record) + "\n")


def read_payload(raw: bytes) -> dict[str, object]:
    """The host's JSON object from stdin bytes, by the one decoding rule (a BOM is dropped;
    bad UTF-8, bad or absurdly nested JSON raise BadText)."""
    from clavain.textio import decode, load_json

    text = decode(raw, "stdin", lenient=False)
    payload = load_json(text, "stdin") if text.strip() else None
    if not isinstance(payload, dict):
        raise ValueError(f"stdin is not a JSON object ({type(payload).__name__})")
    return payload


class StdinRefused(Exception):
    """stdin over STDIN_MAX_BYTES, or not ended within STDIN_SECONDS."""


def read_stdin(*, max_bytes: int = STDIN_MAX_BYTES, seconds: float = STDIN_SECONDS) -> bytes:
    """stdin up to its end, bounded in size and in time (StdinRefused past either): a hook
    must never read for ever."""
    try:
        fd = sys.stdin.fileno()
    except (AttributeError, ValueError, OSError):  # a stream in memory (tests): cannot block
        raw = sys.stdin.buffer.read(max_bytes + 1)
        if len(raw) > max_bytes:
            raise StdinRefused(f"stdin is over {max_bytes} bytes; ignored") from None
        return raw
    import select  # a small C module: cheaper than a thread or signal's enum

    chunks: list[bytes] = []
    size = 0
    deadline = time.monotonic() + seconds
    while True:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            raise StdinRefused(f"stdin did not end within {seconds:g} s; ignored")
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            return b"".join(chunks)
        size += len(chunk)
        if size > max_bytes:
            raise StdinRefused(f"stdin is over {max_bytes} bytes; ignored")
        chunks.append(chunk)


def _lean_imports(event: str) -> None:
    """What the event's handler imports, imported here without what it never uses."""
    if event in WITHOUT_PATHLIB:
        return
    from clavain import lean_import

    lean_import.import_pathlib()


def dispatch(event: str, payload: dict[str, object]) -> str | None:
    """The text to print for one hook call, or None. Raises on anything unexpected."""
    if event not in EVENTS:
        raise LookupError(f"unknown hook event {event!r}")
    _lean_imports(event)
    name = f"clavain.hooks.{module_name(event)}"
    __import__(name)  # not importlib.import_module: importlib costs a module on every call
    handler = sys.modules[name]
    output = handler.handle(payload)
    return fastjson.dumps(output) if output else None


def run(event: str, raw: bytes) -> tuple[str | None, bool]:
    """One hook call from its stdin bytes: (the text to print or None, whether it went without
    a failure). A failure is one line in hooks.log."""
    started = time.perf_counter()
    payload = None
    text = None
    ok = True
    try:
        payload = read_payload(raw)
        text = dispatch(event, payload)
    # BaseException: a handler's SystemExit or a KeyboardInterrupt must not reach the host
    # either (its exit code would become the hook's).
    except BaseException as exc:
        from clavain.hook_log import log_failure

        ok = False
        log_failure(event, f"{type(exc).__name__}: {exc}", payload)
    try:  # noqa: SIM105 - contextlib is one more import on every tool call
        _trace(event, started)
    except Exception:  # a trace that cannot be written must not become the hook's failure
        pass
    return text, ok


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    event = args[0] if args else ""
    try:
        raw = read_stdin()
    except StdinRefused as exc:
        from clavain.hook_log import log_failure  # only once something failed

        log_failure(event, str(exc))
        return 0
    except BaseException as exc:
        from clavain.hook_log import log_failure

        log_failure(event, f"stdin unreadable: {type(exc).__name__}: {exc}")
        return 0
    text, _ = run(event, raw)
    if text:
        try:
            sys.stdout.write(text)
            sys.stdout.flush()
        except BaseException as exc:
            from clavain.hook_log import log_failure

            log_failure(event, f"stdout unwritable: {type(exc).__name__}: {exc}")
    return 0


def main_and_exit() -> None:
    """`main`, then the process ends at once (bin/clavain-hook). Tearing down the interpreter
    (every module's objects freed one by one) costs about 2 ms a call and does nothing a hook
    needs: every file it wrote is closed, the database connection too (its WAL checkpointed),
    and what is buffered for the host is flushed here. For the same reason the cycle collector
    is off (but for KEEPS_CYCLE_COLLECTOR): its full collections walk every object (up to 1.4 ms
    of a hook) and free nothing a process that lives a few milliseconds needs back; what has no
    cycle is freed as it goes, as ever."""
    if (sys.argv[1:2] or [""])[0] not in KEEPS_CYCLE_COLLECTOR:
        import gc  # built in: free

        gc.disable()
    code = main()
    for stream in (sys.stdout, sys.stderr):
        try:  # noqa: SIM105 - contextlib is one more import on every tool call
            stream.flush()
        except BaseException:  # the host closed the pipe: nothing more can reach it
            pass
    os._exit(code)
