"""Who asks: a person, or an agent session. The one answer every front door asks before an
action only a person may take — passing a gate (`--waive`), skipping steps (`--skip-to`), a
complexity below the classifier's, resetting a budget or a breaker.

It rests only on what an agent cannot change from its Bash tool with one command:
- **Process ancestry.** Claude Code runs every Bash command as a descendant of its own process
  (`claude`); a command whose ancestors include one is an agent's, whatever its environment
  says. Read from `/proc` on Linux, from `ps` elsewhere, all the way up: the agent can start a
  program of its own named `claude` (a copy of bash) below the real one, so the host is the
  OUTERMOST such ancestor, and a chain with more than one speaks for no typed request.
- **A controlling terminal.** A person at a terminal has one; a Bash tool command runs in a
  session of its own without one, and a command detached from it (`setsid … &`, `nohup … &`)
  has none either.
- **What the person typed.** Inside Claude Code a person speaks through a slash command: the
  UserPromptSubmit hook (run by the host before the model sees the prompt) records the typed
  text, and the command's `!` line takes it (`typed_request`); the PreToolUse hook refuses an
  agent's own `--from-prompt` and any write to where the record lives. A record is good once,
  for the turn that typed it (`sprint.typed_once`): its one-time value must match the row the
  hook kept, and every tool call voids the session's records first — so a record the agent
  wrote by means the hook cannot read is void by the call that would take it, and one it
  writes and takes in a single call is younger than that command (checked here).
An environment variable alone (`CLAUDECODE`, which `env -u` removes) never makes a person; its
presence still marks an agent. Anything that cannot be told is an agent: a person-only action
then gets one line saying what the person types instead.

What this cannot see: an agent that starts a program outside its session with a terminal of
its own (a detached `tmux`, `script` under `setsid`) or writes Clavain's files by other means.
That needs Claude Code's sandbox (docs/ARCHITECTURE.md, "Who may do what").
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass, field
from typing import Any, NamedTuple

# Claude Code's process, by the name of what it runs: the native binary, or the npm package.
HOST_NAMES = ("claude", "claude.exe")
HOST_PACKAGE = "@anthropic-ai/claude-code"
HOST_VARIABLES = ("CLAUDECODE", "CLAUDE_CODE_SESSION_ID", "CLAUDE_CODE_ENTRYPOINT")
# A real chain is a dozen processes deep; past this the top (where the real host is) is not
# seen, and what cannot be told is an agent's.
MAX_ANCESTORS = 4096


class HostChain(NamedTuple):
    """Claude Code among a command's ancestors: the outermost host as "name (pid N)", when the
    process it started for this command began (epoch seconds), and how many processes of the
    chain look like a host (more than one: one of them is not the real host)."""

    host: str
    started: float
    hosts: int


@dataclass(frozen=True)
class Asker:
    """The answer: `person` or `agent`, how it was told (`via`), and the provenance a
    person-only decision records."""

    by: str
    via: str
    detail: str = ""
    provenance: dict[str, Any] = field(default_factory=dict)

    @property
    def is_person(self) -> bool:
        return self.by == "person"


def who_asks(*, typed: dict[str, Any] | None = None) -> Asker:
    """A person or an agent (module docstring). `typed`: the record of what a person typed in
    Claude Code, taken by a `--from-prompt` command ({"session_id", "prompt"}): it speaks for
    the person (the command runs below the host, as the agent's would; what keeps the agent
    from writing such a record or running `--from-prompt` itself is the PreToolUse hook, and
    `typed_request.take_record` has already checked it is the turn's, taken once). Here: it
    was written before the process the host started for this command began."""
    from clavain.clock import now_iso

    at = now_iso()
    try:
        chain = host_chain()
    except Exception as exc:  # cannot be told: an agent
        return Asker("agent", "unknown", f"process ancestry unreadable ({exc})")
    if chain is not None:
        recorded = typed.get("recorded_at") if typed is not None else None
        if typed is not None and chain.hosts > 1:
            # The agent started a `claude` of its own below the real one: its child began
            # after any record the agent wrote. A person types only into the outermost host.
            return Asker("agent", "nested_host", f"{chain.hosts} processes in its ancestry "
                         f"look like Claude Code (the outermost: {chain.host}); a person "
                         "cannot type into a session nested in another, so the record of what "
                         "was typed speaks for no one")
        # The host runs a slash command's `!` line after its UserPromptSubmit hook recorded
        # what was typed: a record written by the very command that takes it is a forgery.
        if isinstance(recorded, (int, float)) and recorded < chain.started:
            return Asker("person", "slash_command", "typed in Claude Code",
                         {"by": "person", "via": "slash_command",
                          "session_id": typed.get("session_id"),
                          "prompt": str(typed.get("prompt") or "")[:300], "at": at})
        if typed is not None:
            return Asker("agent", "claude_code", "the record of what was typed was written "
                         "by this command itself, not by the host's hook")
        return Asker("agent", "claude_code", f"a Claude Code process ({chain.host}) runs it")
    marked = [name for name in HOST_VARIABLES if os.environ.get(name)]
    if marked:
        return Asker("agent", "environment", f"{marked[0]} is set")
    terminal = controlling_terminal()
    if terminal is None:
        return Asker("agent", "no_terminal", "no terminal: not a person at a keyboard")
    return Asker("person", "terminal", f"typed at {terminal}",
                 {"by": "person", "via": "terminal", "terminal": terminal,
                  "user": _user(), "at": at})


def require_person(action: str, *, in_claude_code: str, in_terminal: str,
                   typed: dict[str, Any] | None = None) -> dict[str, Any]:
    """The provenance of a person's decision to take `action`, or ClavainError naming what the
    person types: `in_claude_code` (a slash command) or `in_terminal` (a CLI command)."""
    asker = who_asks(typed=typed)
    if asker.is_person:
        return asker.provenance
    raise refusal(action, in_claude_code=in_claude_code, in_terminal=in_terminal,
                  detail=asker.detail)


def refusal(action: str, *, in_claude_code: str | None, in_terminal: str,
            detail: str | None = None) -> Exception:
    """The one wording of a person-only action refused to an agent, naming what the person
    types instead (`in_claude_code` None: there is no slash command for it)."""
    from clavain.errors import ClavainError

    why = f" ({detail})" if detail else ""
    where = f"types `{in_claude_code}` in Claude Code, or " if in_claude_code else ""
    return ClavainError(f"{action} is a person's decision, not an agent's{why}: the user "
                        f"{where}runs `{in_terminal}` in a terminal")


def controlling_terminal() -> str | None:
    """The controlling terminal's name, or None when the process has none."""
    try:
        fd = os.open("/dev/tty", os.O_RDONLY | getattr(os, "O_NOCTTY", 0))
    except OSError:
        return None
    os.close(fd)
    for standard in (0, 1, 2):  # its own name, when a standard stream is on it
        with contextlib.suppress(OSError):
            if os.isatty(standard):
                return os.ttyname(standard)
    return "/dev/tty"


def host_ancestor(pid: int | None = None) -> str | None:
    """The outermost ancestor of `pid` (default: this process) that is Claude Code, as "name
    (pid N)", or None."""
    chain = host_chain(pid)
    return chain.host if chain else None


def host_chain(pid: int | None = None) -> HostChain | None:
    """Claude Code among the ancestors of `pid` (`HostChain`: the outermost one), or None when
    it is not one of them. Raises LookupError when the ancestry cannot be read to its top."""
    found = _host_and_child(pid)
    return HostChain(found[0], started_at(found[1]), found[2]) if found else None


def _host_and_child(pid: int | None = None) -> tuple[str, int, int] | None:
    """(the outermost Claude Code ancestor of `pid` (default: this process) as "name (pid N)",
    the pid of the process it started on the way down, how many ancestors look like Claude
    Code), or None. The whole chain is read, up to PID 1 (which counts: Claude Code may be a
    container's first process); LookupError when it is deeper than MAX_ANCESTORS."""
    current = os.getppid() if pid is None else pid
    below = os.getpid() if pid is None else pid
    outermost: tuple[str, int] | None = None
    hosts = 0
    for _ in range(MAX_ANCESTORS):
        if current < 1:
            break
        parent, names = _process(current)
        if any(_is_host(name) for name in names):
            outermost, hosts = (f"{names[0]} (pid {current})", below), hosts + 1
        if parent == current or current == 1:
            break
        below, current = current, parent
    else:
        raise LookupError(f"process ancestry deeper than {MAX_ANCESTORS}: whether Claude Code "
                          "runs it cannot be told")
    return (*outermost, hosts) if outermost else None


def host_environment() -> dict[str, str]:
    """The environment a command's settings are read from: inside Claude Code, the one the
    outermost host gave the process it started for the command, read back from `/proc` (so
    `X= clavain …`, `env -u X`, `env -i` or a `claude` of the agent's own change nothing the host
    set: a session id, a budget variable, a headless run's id); elsewhere, or where it cannot be
    read (macOS), this process's own. Never raises."""
    try:
        found = _host_and_child()
        if found is None:
            return dict(os.environ)
        with open(f"/proc/{found[1]}/environ", "rb") as handle:
            given = handle.read()
    except Exception:  # no /proc, another user's process: this process's own is what is known
        return dict(os.environ)
    entries = (entry.decode("utf-8", "replace").partition("=") for entry in given.split(b"\0"))
    return {name: value for name, _, value in entries if name}


def session_id() -> str | None:
    """The Claude Code session this command runs in (`host_environment`), or None."""
    return host_environment().get("CLAUDE_CODE_SESSION_ID") or None


def started_at(pid: int) -> float:
    """When process `pid` started, in epoch seconds, never after it did (the kernel counts
    10 ms steps from boot; the boot's own moment is read to the microsecond). 0 where it cannot
    be told: a record compared with it is then never before it."""
    import time

    from clavain.processes import proc_stat

    stat = proc_stat(pid)
    if stat is None:
        return 0.0
    try:
        booted = time.time() - time.clock_gettime(time.CLOCK_BOOTTIME)
        return booted + stat.start_ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, AttributeError):
        return 0.0


def _is_host(name: str) -> bool:
    base = name.replace("\\", "/").rsplit("/", 1)[-1]
    return base in HOST_NAMES or HOST_PACKAGE in name


def _process(pid: int) -> tuple[int, list[str]]:
    """(parent pid, the names it goes by: comm, exe, argv[0], argv[1])."""
    if os.path.isdir("/proc/self"):
        from clavain.processes import proc_stat

        stat = proc_stat(pid)
        if stat is None:  # gone on the way up, or not ours to read: the caller cannot tell
            raise ProcessLookupError(f"/proc/{pid}/stat cannot be read")
        parent, names = stat.ppid, [stat.comm]
        with contextlib.suppress(OSError):  # another user's process: its name is enough
            names.append(os.readlink(f"/proc/{pid}/exe"))
        with contextlib.suppress(OSError), open(f"/proc/{pid}/cmdline", "rb") as handle:
            names += [arg.decode("utf-8", "replace")
                      for arg in handle.read().split(b"\0")[:2] if arg]
        return parent, names
    import subprocess

    done = subprocess.run(["ps", "-o", "ppid=", "-o", "comm=", "-p", str(pid)],
                          capture_output=True, text=True, timeout=5, check=True)
    ppid, _, comm = done.stdout.strip().partition(" ")
    args = subprocess.run(["ps", "-o", "args=", "-p", str(pid)], capture_output=True,
                          text=True, timeout=5, check=False).stdout.strip()
    return int(ppid), [comm.strip(), *args.split()[:2]]  # an npm install runs as `node cli.js`


def _user() -> str:
    try:
        import pwd

        return pwd.getpwuid(os.getuid()).pw_name
    except (ImportError, KeyError):
        return os.environ.get("USER", "")


def library_caller() -> dict[str, Any] | None:
    """What a direct caller of the library speaks for, when its caller names nobody: a program
    of the person's (its tests, a script they run) — but never one Claude Code runs, which
    would let an agent's `python -c` do what its `clavain` command may not."""
    try:
        if host_chain() is not None or any(os.environ.get(n) for n in HOST_VARIABLES):
            return None
    except Exception:
        return None
    return {"by": "person", "via": "library"}


def describe(provenance: dict[str, Any] | None) -> str:
    """Who decided, in a few words, for a summary or a report."""
    if not provenance:
        return "who decided was not recorded"
    if provenance.get("via") == "library":
        return "a program calling Clavain's library"
    if provenance.get("via") == "slash_command":
        return (f"a person in Claude Code session {provenance.get('session_id')} "
                f"({provenance.get('prompt', '')[:80]!r}) at {provenance.get('at')}")
    return (f"a person at {provenance.get('terminal')} ({provenance.get('user')}) at "
            f"{provenance.get('at')}")
