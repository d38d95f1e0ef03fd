"""How a message names the next thing to type: inside Claude Code (its Bash tool and hooks run
with CLAUDECODE=1) the person types slash commands, so a hint names `/clavain:sprint`; in a
terminal it names the CLI command that does the same."""

from __future__ import annotations

import os


def in_claude_code() -> bool:
    return os.environ.get("CLAUDECODE") == "1"


def start_sprint() -> str:
    return ("/clavain:sprint DESCRIPTION" if in_claude_code()
            else "`clavain sprint start DESCRIPTION`")


def resume_sprint() -> str:
    return "/clavain:sprint --resume" if in_claude_code() else "`clavain sprint resume`"
