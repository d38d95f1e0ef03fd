"""The resident hook server's loop and protocol (`resident` finds, starts and stops it).

Protocol: `bin/clavain-hook` is the client, in bash (`/dev/tcp`: so TCP on 127.0.0.1, not a
Unix socket). It sends NUL-terminated fields: the token, the event, its working folder,
`NAME=value` for HOME and every CLAUDE_* / CLAVAIN_* variable, a `--` field, then the hook's
stdin and a final NUL (JSON text holds no NUL). The server answers `ok` + newline + the hook's
stdout and closes. A request runs only once it is complete, so a client that dies mid-send
counts nothing; the client falls back to the spawned Python hook only when it could not
connect (a lost answer fails open: running the call again could count it twice).

Calls run one at a time, each as the spawned hook would run it (`clavain.hooks.run`) with the
client's variables and folder. The server exits after CLAVAIN_HOOKD_IDLE_SECONDS (default 1800)
without a call, after 12 hours, when its address file is removed or replaced, or when its
plugin folder is gone; nothing a request does can end it.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time

from clavain.hooks import resident

LOCK_NAME = "hookd.lock"
LOG_NAME = "hookd.log"
DEFAULT_IDLE_SECONDS = 1800.0
MAX_LIFETIME_SECONDS = 12 * 3600.0
# How often an idle server looks at its address file and plugin folder.
TICK_SECONDS = 1.0
# A replaced server holds the lock until its next tick; its successor waits that long.
LOCK_WAIT_SECONDS = 10.0
REQUEST_TIMEOUT_SECONDS = 5.0
MAX_REQUEST_BYTES = 64 << 20
FORWARDED_PREFIXES = ("CLAUDE_", "CLAVAIN_")
# Imported before the first call, so no call pays for them.
WARM_MODULES = ("clavain.hooks.pre_tool_use", "clavain.hooks.post_tool_use_failure",
                "clavain.guards.gate", "clavain.guards.budget", "clavain.guards.commands",
                "clavain.guards.policy", "clavain.guards.usage", "clavain.store.db",
                "clavain.locate", "clavain.textio", "clavain.clock", "clavain.fsutil",
                "clavain.paths", "subprocess")


def forwarded(name: str) -> bool:
    """A variable the client sends and a call sees as its own."""
    return name == "HOME" or name.startswith(FORWARDED_PREFIXES)


def parse_request(buffer: bytes) -> tuple[str, str, str, dict[str, str], bytes] | None:
    """(token, event, cwd, env, stdin) once `buffer` holds a whole request, else None."""
    if not buffer.endswith(b"\0"):
        return None
    parts = buffer.split(b"\0")
    try:
        marker = parts.index(b"--", 3)
    except ValueError:
        return None
    if len(parts) < marker + 3:
        return None
    text = [part.decode("utf-8", "surrogateescape") for part in parts[:marker]]
    env = {}
    for entry in text[3:]:
        name, sep, value = entry.partition("=")
        if sep and forwarded(name):
            env[name] = value
    # Everything between the marker and the final NUL: stdin with a stray NUL stays whole.
    return text[0], text[1], text[2], env, b"\0".join(parts[marker + 1:-1])


def run_call(event: str, cwd: str, env: dict[str, str], stdin: bytes, home: str) -> bytes:
    """One hook call as the spawned hook would run it: the client's variables and working folder
    for its duration, then the server's own again."""
    from clavain import hooks

    saved = {name: value for name, value in os.environ.items() if forwarded(name)}
    for name in saved:
        del os.environ[name]
    os.environ.update(env)
    try:
        with contextlib.suppress(OSError):
            os.chdir(cwd)
        if event in hooks.RESIDENT_EVENTS:
            text = hooks.run(event, stdin)
        else:
            text = None
            hooks.log_failure(event, "resident hook server: not a tool-call event; nothing ran")
    finally:
        for name in [name for name in os.environ if forwarded(name)]:
            del os.environ[name]
        os.environ.update(saved)
        with contextlib.suppress(OSError):
            os.chdir(home)
    return (text or "").encode("utf-8")


def serve_connection(conn, token: str, home: str) -> None:
    """Read one request, run it, answer; a wrong token or an unfinished request gets no
    answer."""
    import hmac

    conn.settimeout(REQUEST_TIMEOUT_SECONDS)
    buffer = bytearray()
    request = None
    while request is None:
        chunk = conn.recv(1 << 16)
        if not chunk:
            return  # the client left before its request ended: nothing ran
        buffer += chunk
        if len(buffer) > MAX_REQUEST_BYTES:
            raise ValueError(f"request over {MAX_REQUEST_BYTES} bytes")
        if chunk.endswith(b"\0"):  # only then can the request be whole
            request = parse_request(bytes(buffer))
    sent_token, event, cwd, env, stdin = request
    if not hmac.compare_digest(sent_token.encode("utf-8", "surrogateescape"),
                               token.encode("ascii")):
        raise PermissionError("a request with a wrong token")
    conn.sendall(b"ok\n" + run_call(event, cwd, env, stdin, home))


def _idle_limit() -> float:
    try:
        return max(1.0, float(os.environ.get("CLAVAIN_HOOKD_IDLE_SECONDS",
                                             DEFAULT_IDLE_SECONDS)))
    except ValueError:
        return DEFAULT_IDLE_SECONDS


def _log(data: str, message: str) -> None:
    try:
        with open(os.path.join(data, LOG_NAME), "a", encoding="utf-8") as handle:
            handle.write(f"{time.strftime('%Y-%m-%dT%H:%M:%S')} {os.getpid()} {message}\n")
    except OSError:
        pass


def _take_lock(data: str) -> int | None:
    """The data folder's server lock, waiting out a replaced server; None if another keeps it."""
    import fcntl

    handle = os.open(os.path.join(data, LOCK_NAME), os.O_RDWR | os.O_CREAT, 0o600)
    deadline = time.monotonic() + LOCK_WAIT_SECONDS
    while True:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return handle
        except BlockingIOError:
            if time.monotonic() > deadline:
                os.close(handle)
                return None
            time.sleep(0.05)


def _publish(data: str, line: str) -> None:
    """Write the address file atomically, readable by this user only."""
    path = os.path.join(data, resident.ADDRESS_NAME)
    temporary = f"{path}.{os.getpid()}.tmp"
    handle = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.write(handle, line.encode("utf-8", "surrogateescape"))
    finally:
        os.close(handle)
    os.replace(temporary, path)


def _still_ours(data: str, line: str) -> bool:
    try:
        with open(os.path.join(data, resident.ADDRESS_NAME), encoding="utf-8",
                  errors="surrogateescape") as handle:
            return handle.read(len(line) + 1) == line
    except OSError:
        return False


def serve(data: str, root: str) -> int:
    """Serve until idle, replaced or orphaned. 0 when it served; 1 when another server runs."""
    import importlib
    import secrets
    import signal
    import socket

    lock = _take_lock(data)
    if lock is None:
        return 1
    from clavain import hooks

    hooks.served_by = "resident"
    for name in WARM_MODULES:
        importlib.import_module(name)
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(128)
    listener.settimeout(TICK_SECONDS)
    token = secrets.token_hex(16)
    line = (f"{listener.getsockname()[1]} {token} {os.getpid()} {resident.code_stamp()} "
            f"{root}\n")
    home = os.getcwd()

    stopping = []

    def terminate(signum, frame):
        stopping.append(signum)
        raise SystemExit(0)  # a call it interrupts fails open: hooks.run logs it

    signal.signal(signal.SIGTERM, terminate)
    _publish(data, line)
    _log(data, f"serving {root} on 127.0.0.1:{listener.getsockname()[1]}")
    born = last_call = time.monotonic()
    idle_limit = _idle_limit()
    lib = os.path.join(root, "lib", "clavain")
    why = "stopped"
    try:
        while True:
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                now = time.monotonic()
                if now - last_call > idle_limit:
                    why = f"idle for {idle_limit:.0f} s"
                elif now - born > MAX_LIFETIME_SECONDS:
                    why = "12 hours old"
                elif not _still_ours(data, line):
                    why = "address file removed or replaced"
                elif not os.path.isdir(lib):
                    why = f"{lib} is gone"
                else:
                    continue
                break
            last_call = time.monotonic()
            try:
                with conn:
                    serve_connection(conn, token, home)
            except Exception as exc:  # one bad call never ends the server
                _log(data, f"call failed: {type(exc).__name__}: {exc}")
            if stopping:
                why = "SIGTERM"
                break
    finally:
        if _still_ours(data, line):
            os.unlink(os.path.join(data, resident.ADDRESS_NAME))
        listener.close()
        _log(data, f"exiting: {why}")
        os.close(lock)
    return 0


def main(argv: list[str]) -> int:
    """`DATA ROOT`: the detached server `resident.spawn` starts."""
    data, root = argv
    try:
        return serve(data, root)
    except Exception as exc:
        _log(data, f"server failed: {type(exc).__name__}: {exc}")
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
