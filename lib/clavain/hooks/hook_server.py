"""The resident hook server's loop and protocol (`resident` finds, starts and stops it).

Protocol: `bin/clavain-hook` is the client, in bash (`/dev/tcp`: so TCP on 127.0.0.1, not a
Unix socket), one round trip. It sends NUL-terminated fields: the token, the event, its
working folder, `NAME=value` for HOME, the CLAUDE_* variables hooks read and every CLAVAIN_*
one, a `--` field, then the hook's stdin and a final NUL (JSON text holds no NUL). A wrong
token gets no answer; a right one gets the server key, a newline, `ok`, a newline and the
hook's stdout, then the close. The client prints only an answer that starts with the key, so
nothing but this server can speak for Clavain (a process squatting on a dead server's port
gets no say; where /proc exists the client does not even connect unless the address's pid is
a hook server). A call runs only once its request is complete: the token must come within
0.5 s of the connection and the request within 2 s, so a client that dies mid-send counts
nothing and nobody can hold the server for long. The client falls back to the spawned Python
hook only when it could not connect; after that a lost answer fails open (running the call
again could count it twice).

Calls run one at a time, each as the spawned hook would run it (`clavain.hooks.run`) with the
client's variables and folder; a call whose database stays locked for 0.5 s is handed to a
spawned hook (which may wait the usual 30 s), so the other sessions' calls are not held. The
server exits after CLAVAIN_HOOKD_IDLE_SECONDS (default 1800) without a call, after 12 hours,
on SIGTERM, when its address file is removed or replaced, or when its plugin folder is gone —
after the call it is running and those already waiting (5 s at most); nothing a call does can
end it.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time

from clavain.hooks import resident

LOG_NAME = "hookd.log"
DEFAULT_IDLE_SECONDS = 1800.0
MAX_LIFETIME_SECONDS = 12 * 3600.0
# How often an idle server looks at its address file and plugin folder.
TICK_SECONDS = 1.0
# A replaced server holds the lock until its next tick; its successor waits that long.
LOCK_WAIT_SECONDS = 10.0
# The client writes its token first thing after connecting, its whole request at once: a
# connection that does not is dropped this soon (anyone can connect; nobody may hold the
# server).
TOKEN_SECONDS = 0.5
REQUEST_SECONDS = 2.0
# Exiting, the calls already waiting are served for at most this long.
DRAIN_SECONDS = 5.0
MAX_REQUEST_BYTES = 64 << 20
# The CLAUDE_* variables hooks read; no other (a session's may hold credentials).
FORWARDED_NAMES = ("HOME", "CLAUDE_PROJECT_DIR", "CLAUDE_PLUGIN_ROOT", "CLAUDE_PLUGIN_DATA",
                   "CLAUDE_CONFIG_DIR")
# A call that finds its database locked longer than this is handed to a spawned hook, which
# may wait the usual 30 s: the server moves on to the next call.
BUSY_TIMEOUT_MS = 500
# Refused connections (wrong token, too slow) are logged at most this often.
REFUSED_LOG_SECONDS = 60.0
# Imported before the first call, so no call pays for them.
WARM_MODULES = ("clavain.hooks.pre_tool_use", "clavain.hooks.post_tool_use_failure",
                "clavain.guards.gate", "clavain.guards.budget", "clavain.guards.commands",
                "clavain.guards.policy", "clavain.guards.usage", "clavain.store.db",
                "clavain.locate", "clavain.textio", "clavain.clock", "clavain.fsutil",
                "clavain.paths", "subprocess")


def forwarded(name: str) -> bool:
    """A variable the client sends and a call sees as its own."""
    return name in FORWARDED_NAMES or name.startswith("CLAVAIN_")


def parse_request(buffer: bytes) -> tuple[str, str, dict[str, str], bytes] | None:
    """(event, cwd, env, stdin) once `buffer` (what follows the token) holds a whole request,
    else None."""
    if not buffer.endswith(b"\0"):
        return None
    parts = buffer.split(b"\0")
    try:
        marker = parts.index(b"--", 2)
    except ValueError:
        return None
    if len(parts) < marker + 3:
        return None
    text = [part.decode("utf-8", "surrogateescape") for part in parts[:marker]]
    env = {}
    for entry in text[2:]:
        name, sep, value = entry.partition("=")
        if sep and forwarded(name):
            env[name] = value
    # Everything between the marker and the final NUL: stdin with a stray NUL stays whole.
    return text[0], text[1], env, b"\0".join(parts[marker + 1:-1])


def run_call(event: str, cwd: str, env: dict[str, str], stdin: bytes,
             server_cwd: str) -> tuple[bytes, bool]:
    """One hook call as the spawned hook would run it, with the client's variables and working
    folder for its duration: (its output, whether it ran without failing). A call whose
    database stayed locked is handed to a spawned hook (nothing of it was committed) and
    answered with nothing: the tool runs, the call is counted there."""
    import sqlite3

    from clavain import hooks

    saved = {name: value for name, value in os.environ.items() if forwarded(name)}
    for name in saved:
        del os.environ[name]
    os.environ.update(env)
    try:
        try:
            os.chdir(cwd)
        except OSError:  # never the last call's folder
            os.chdir("/")
        if event not in hooks.RESIDENT_EVENTS:
            hooks.log_failure(event, "resident hook server: not a tool-call event; nothing ran")
            return b"", True
        try:
            text, ok = hooks.run(event, stdin, handover=(sqlite3.OperationalError,))
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) and "busy" not in str(exc):
                hooks.log_failure(event, f"OperationalError: {exc}")
                return b"", False
            _hand_over(event, stdin)
            return b"", False
    finally:
        for name in [name for name in os.environ if forwarded(name)]:
            del os.environ[name]
        os.environ.update(saved)
        try:
            os.chdir(server_cwd)
        except OSError:
            os.chdir("/")
    return (text or "").encode("utf-8"), ok


def _hand_over(event: str, stdin: bytes) -> None:
    """Run the call in a detached spawned hook (this call's variables and folder are current):
    it waits for the lock as long as any spawned hook would, and counts the call."""
    import tempfile

    from clavain import detached

    with tempfile.TemporaryFile() as payload:
        payload.write(stdin)
        payload.seek(0)
        detached.start("clavain.hooks", [event], cwd=os.getcwd(), stdin=payload,
                       env={**os.environ, "CLAVAIN_RESIDENT_HOOKS": "0"})


class Refused(Exception):
    """A connection without the token or too slow to send it or its request: closed
    unanswered, nothing ran."""


def serve_connection(conn, token: bytes, server_key: bytes, server_cwd: str) -> bool | None:
    """Check the token, read the request, run it, answer with the server key first. Whether
    the call ran without failing; None when the client left before its request was complete."""
    import hmac

    accepted = time.monotonic()
    buffer = bytearray()
    body_start = None  # where the request follows the token, once the token is checked
    while True:
        limit = REQUEST_SECONDS if body_start is not None else TOKEN_SECONDS
        remaining = accepted + limit - time.monotonic()
        if remaining <= 0:
            raise Refused(f"no {'whole request' if body_start else 'token'} within {limit} s")
        conn.settimeout(remaining)
        try:
            chunk = conn.recv(1 << 16)
        except TimeoutError:
            continue  # the deadline above says which
        if not chunk:
            return None
        buffer += chunk
        if len(buffer) > MAX_REQUEST_BYTES:
            raise ValueError(f"request over {MAX_REQUEST_BYTES} bytes")
        if body_start is None:
            end = buffer.find(b"\0")
            if end < 0:
                if len(buffer) > 256:
                    raise Refused("a wrong token")
                continue
            if not hmac.compare_digest(bytes(buffer[:end]), token):
                raise Refused("a wrong token")
            body_start = end + 1
        if chunk.endswith(b"\0"):  # only then can the request be whole
            request = parse_request(bytes(buffer[body_start:]))
            if request is not None:
                break
    event, cwd, env, stdin = request
    output, ok = run_call(event, cwd, env, stdin, server_cwd)
    conn.sendall(server_key + b"\nok\n" + output)
    return ok


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

    handle = os.open(os.path.join(data, resident.LOCK_NAME), os.O_RDWR | os.O_CREAT, 0o600)
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


def _still_ours(data: str, line: str) -> bool:
    try:
        with open(os.path.join(data, resident.ADDRESS_NAME), encoding="utf-8",
                  errors="surrogateescape") as handle:
            # One character more than ours: a longer file is not ours either.
            return handle.read(len(line) + 1) == line
    except OSError:
        return False


class Server:
    """One server's listening socket, secrets and clocks."""

    def __init__(self, data: str, root: str):
        import secrets
        import socket

        self.data, self.root = data, root
        self.listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(128)
        self.port = self.listener.getsockname()[1]
        self.token, self.server_key = secrets.token_hex(16), secrets.token_hex(16)
        self.line = (f"{self.port} {self.token} {self.server_key} {os.getpid()} "
                     f"{resident.code_stamp()} {root}\n")
        self.server_cwd = os.getcwd()
        self.born = self.last_call = time.monotonic()
        self.idle_limit = _idle_limit()
        self.refused, self.refused_logged = 0, 0.0
        self.stopping = False

    def serve_one(self, conn) -> None:
        """One connection; whatever goes wrong is logged, never raised. Only a call that ran
        counts as activity for the idle clock."""
        from clavain.hooks import connections

        try:
            with conn:
                ran = serve_connection(conn, self.token.encode("ascii"),
                                       self.server_key.encode("ascii"), self.server_cwd)
            if ran is False:  # start the next call with fresh connections
                connections.forget_all()
            if ran is not None:
                self.last_call = time.monotonic()
        except Refused as why:
            self.refused += 1
            now = time.monotonic()
            if now - self.refused_logged >= REFUSED_LOG_SECONDS:
                _log(self.data, f"{self.refused} connection(s) refused, the last: {why}")
                self.refused, self.refused_logged = 0, now
        except Exception as exc:  # one bad call never ends the server
            _log(self.data, f"call failed: {type(exc).__name__}: {exc}")

    def reason_to_exit(self) -> str | None:
        now = time.monotonic()
        if self.stopping:
            return "SIGTERM"
        if now - self.last_call > self.idle_limit:
            return f"idle for {self.idle_limit:.0f} s"
        if now - self.born > MAX_LIFETIME_SECONDS:
            return "12 hours old"
        if not _still_ours(self.data, self.line):
            return "address file removed or replaced"
        if not os.path.isdir(os.path.join(self.root, "lib", "clavain")):
            return f"{self.root} is gone"
        return None

    def run(self) -> str:
        """Serve until there is a reason to exit (checked at least every second, busy or
        not); the reason."""
        self.listener.settimeout(TICK_SECONDS)
        checked = time.monotonic()
        while True:
            try:
                conn, _ = self.listener.accept()
            except TimeoutError:
                conn = None
            except OSError as exc:  # out of descriptors, an aborted connection: go on
                _log(self.data, f"accept failed: {exc}")
                time.sleep(0.1)
                conn = None
            if conn is not None:
                self.serve_one(conn)
            if conn is None or time.monotonic() - checked >= TICK_SECONDS:
                checked = time.monotonic()
                why = self.reason_to_exit()
                if why:
                    return why

    def close(self) -> None:
        """Withdraw the address (new calls go to the spawned hook), serve the calls already
        waiting (for 5 s at most), close."""
        if _still_ours(self.data, self.line):
            with contextlib.suppress(OSError):  # `stop` may have removed it meanwhile
                os.unlink(os.path.join(self.data, resident.ADDRESS_NAME))
        self.listener.setblocking(False)
        deadline = time.monotonic() + DRAIN_SECONDS
        while time.monotonic() < deadline:
            try:
                conn, _ = self.listener.accept()
            except OSError:  # BlockingIOError: nobody waiting
                break
            self.serve_one(conn)
        self.listener.close()


def serve(data: str, root: str) -> int:
    """Serve until idle, stopped, replaced or orphaned. 0 when it served; 1 when another server
    kept the lock."""
    import importlib
    import signal

    lock = _take_lock(data)
    if lock is None:
        _log(data, f"not serving {root}: another server holds {resident.LOCK_NAME}")
        return 1
    from clavain import hooks
    from clavain.hooks import connections

    hooks.served_by = "resident"
    connections.keep_open(busy_timeout_ms=BUSY_TIMEOUT_MS)
    for name in WARM_MODULES:
        importlib.import_module(name)
    server = Server(data, root)

    def terminate(signum, frame):  # finish the call at hand and those waiting, then exit
        server.stopping = True

    signal.signal(signal.SIGTERM, terminate)
    from pathlib import Path

    from clavain.fsutil import write_atomic

    # Readable by this user only: the token and the key are what keep others out.
    write_atomic(Path(data) / resident.ADDRESS_NAME,
                 server.line.encode("utf-8", "surrogateescape"), mode=0o600)
    _log(data, f"serving {root} on 127.0.0.1:{server.port}")
    why = "failed"
    try:
        why = server.run()
    finally:
        server.close()
        connections.forget_all()
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
