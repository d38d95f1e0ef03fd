"""Start one of Clavain's entry points in a detached Python process: its own session, no pipes
(it outlives the caller and never holds the host's output open), `-I -S` and no cwd entry on
sys.path (neither a session's PYTHONPATH nor a project's json.py can reach it). Used by the
PreToolUse hook for the usage measurement.
Stdlib; `subprocess` is imported only to start one.
"""

from __future__ import annotations

import os
import sys

LIB_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def start(module: str, args: list[str], *, cwd: str, stdin=None,
          env: dict[str, str] | None = None) -> None:
    """Run `module.main(args)` detached, with `stdin` (a file; default: nothing)."""
    import subprocess

    code = ("import sys; sys.path = [sys.argv[1]] + [p for p in sys.path if p]\n"
            f"from {module} import main; sys.exit(main(sys.argv[2:]))")
    subprocess.Popen([sys.executable, "-I", "-S", "-c", code, LIB_DIR, *args],
                     stdin=subprocess.DEVNULL if stdin is None else stdin,
                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                     start_new_session=True, close_fds=True, cwd=cwd, env=env)
