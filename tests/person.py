"""A person at a terminal, for tests: a command run with a pseudo-terminal as its controlling
terminal, in a session of its own — what `clavain.authority` takes for a person, as it would a
real one. Outside a terminal (CI, pytest's own captured output) nothing else can be a person:
there is no variable or file that says so.

Tests run from inside Claude Code cannot make one (the host is among their ancestors, which is
what an agent's command looks like): they are skipped there with the reason.
"""

from __future__ import annotations

import fcntl
import os
import subprocess
import termios
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def skip_inside_claude_code() -> None:
    from clavain.authority import host_ancestor

    host = host_ancestor(os.getpid())
    if host is not None:
        pytest.skip(f"these tests run inside Claude Code ({host}): a person's terminal cannot "
                    "be made below it")


def run_as_person(argv: list[str], *, cwd: Path, env: dict[str, str], input: str | None = None,
                  timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """Run `argv` with a new pty as its controlling terminal; stdout and stderr captured."""
    skip_inside_claude_code()
    master, slave = os.openpty()

    def take_the_terminal() -> None:
        os.setsid()
        fcntl.ioctl(slave, termios.TIOCSCTTY, 0)

    clean = {k: v for k, v in env.items()
             if k not in ("CLAUDECODE", "CLAUDE_CODE_SESSION_ID", "CLAUDE_CODE_ENTRYPOINT")}
    try:
        proc = subprocess.Popen(argv, cwd=cwd, env=clean, text=True,
                                stdin=subprocess.PIPE if input is not None else slave,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                preexec_fn=take_the_terminal, pass_fds=(slave,))
        out, err = proc.communicate(input=input, timeout=timeout)
    finally:
        os.close(slave)
        os.close(master)
    return subprocess.CompletedProcess(argv, proc.returncode, out, err)


def run_below_host(argv: list[str], *, cwd: Path, env: dict[str, str], tmp: Path,
                   input: str | None = None, timeout: float = 120
                   ) -> subprocess.CompletedProcess[str]:
    """Run `argv` the way Claude Code runs a slash command's `!` line: as the child of a
    process named `claude` (a stand-in whose only job is to be that ancestor), started after
    the UserPromptSubmit hook recorded what was typed. It must be the outermost `claude`:
    below a real Claude Code it would be a nested host, which `clavain.authority` never takes
    to carry what a person typed — so tests run inside Claude Code skip here."""
    from clavain.authority import host_ancestor

    real = host_ancestor(os.getpid())
    if real is not None:
        pytest.skip(f"these tests run inside Claude Code ({real}): a stand-in host below it is "
                    "a nested one, which speaks for no person")
    host = tmp / "host-bin" / "claude"
    if not host.exists():
        host.parent.mkdir(parents=True, exist_ok=True)
        # The host takes a moment between its hook and the `!` line (a process start is read
        # to 10 ms): the command begins after what the hook recorded, as it does there.
        host.write_text('#!/bin/bash\nsleep 0.05\n"$@"\n')
        host.chmod(0o755)
    return subprocess.run([str(host), *argv], cwd=cwd, env=env, input=input, text=True,
                          capture_output=True, timeout=timeout)
