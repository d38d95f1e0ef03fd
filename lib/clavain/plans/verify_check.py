"""What plan lint reads in a task's verify commands: whether one can never fail (a no-op, an
`echo`, an `exit 0`, a `|| true` tail) and which programs it runs that cannot be found.

"Can never fail" is decided on the command's shape, not by running it: the command is cut into
and-or lists (`;`, `&`, newlines) and pipelines (`&&`, `||`), and the statuses each can end
with are followed left to right (`a && b` runs `b` only after a success, `a || b` only after a
failure, a pipeline ends with its last command's status, `!` inverts it, an `exit 0` that runs
ends the whole command with success). Only commands that cannot fail (`true`, `:`, `echo`,
`printf`, nothing) or cannot succeed (`false`) are known; every other command may do either,
so `echo ok > out.txt && pytest` can fail and `pytest -q || true` cannot. A command we cannot
read with confidence (a heredoc) is never called always-passing.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Callable
from pathlib import Path

from clavain.guards import shell_words

OK, FAIL, EXITED_OK, EXITED_FAIL = "ok", "fail", "exited_ok", "exited_fail"
ALWAYS_OK = frozenset({"true", ":", "echo", "printf"})
ALWAYS_FAIL = frozenset({"false"})
# Builtins and keywords: never looked up as programs (their arguments are not programs either).
BUILTINS = frozenset({
    "cd", "test", "[", "[[", "]]", "export", "set", "unset", "source", ".", "eval", "read",
    "shift", "return", "exit", "true", "false", ":", "echo", "printf", "pwd", "alias", "type",
    "hash", "ulimit", "umask", "wait", "trap", "local", "declare", "typeset", "let", "getopts",
    "pushd", "popd", "builtin", "break", "continue", "times", "readonly", "shopt", "jobs",
    "fg", "bg", "kill", "fi", "done", "esac", "}", "{", "((", "))", "for", "case", "select",
    "function", "in",
})
# A keyword or wrapper before the command it runs: skipped, the next word is the program.
PREFIXES = frozenset({"!", "if", "then", "else", "elif", "do", "while", "until", "time",
                      "exec", "command", "nohup", "env"})
# Every status other than "may pass or fail" comes from one of these (or an empty command).
_KNOWN_OUTCOME = ("true", ":", "echo", "printf", "exit", "false", "=")
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\[[^]]*\])?\+?=")
# Skipping these before the program: a part opening a loop or a case names no program.
_OPENS_BLOCK = frozenset({"for", "case", "select", "function"})


# ---------------------------------------------------------------- always passes

def always_passes(command: str) -> bool:
    """Whether `command` exits 0 whatever the project holds (module docstring)."""
    if not any(word in command for word in _KNOWN_OUTCOME):
        return not command.strip()  # no command whose status we know: only nothing passes
    lists = _and_or_lists(command)
    if lists is None:
        return False
    states = {OK}
    for pipelines in lists:
        if states <= {EXITED_OK, EXITED_FAIL}:
            break
        running = {OK} if states - {EXITED_OK, EXITED_FAIL} else set()
        finished = states & {EXITED_OK, EXITED_FAIL}
        for index, (operator, text) in enumerate(pipelines):
            if index == 0:
                runs_from = set(running)
                running = set()
            else:
                wanted = OK if operator == "&&" else FAIL
                runs_from = running & {wanted}
                running -= runs_from
            if runs_from:
                outcome = _pipeline_outcomes(text)
                finished |= outcome & {EXITED_OK, EXITED_FAIL}
                running |= outcome - {EXITED_OK, EXITED_FAIL}
        states = running | finished
    return not states & {FAIL, EXITED_FAIL}


def _pipeline_outcomes(text: str) -> set[str]:
    """The statuses one pipeline may end with (its last command's, inverted by a `!`)."""
    stages = _split_top(text, {"|"})
    if stages is None:
        return {OK, FAIL}
    words = stages[0][1].split()
    negated = bool(words) and words[0] == "!"
    last = stages[-1][1].strip()
    if negated and len(stages) == 1:
        last = last[1:].strip()
    outcome = _command_outcomes(last)
    if negated:
        swap = {OK: FAIL, FAIL: OK}
        outcome = {swap.get(state, state) for state in outcome}
    return outcome


def _command_outcomes(text: str) -> set[str]:
    if text.startswith("(") and text.endswith(")"):
        return {OK} if always_passes(text[1:-1]) else {OK, FAIL}
    if text.startswith("{") and text.endswith("}"):
        inner = text[1:-1].strip().rstrip(";")
        return {OK} if always_passes(inner) else {OK, FAIL}
    words, _, nested, _ = shell_words.tokens(text)
    while words and _ASSIGNMENT.match(words[0]):
        words = words[1:]
    if not words:
        return {OK} if not nested else {OK, FAIL}  # `VAR=$(cmd)` has cmd's status
    if words[0] == "exit":
        if len(words) == 1:
            return {OK, FAIL}  # the previous command's status
        return {EXITED_OK} if words[1] == "0" else {EXITED_FAIL}
    if words[0] in ALWAYS_OK:
        return {OK}
    if words[0] in ALWAYS_FAIL:
        return {FAIL}
    return {OK, FAIL}


def _and_or_lists(command: str) -> list[list[tuple[str, str]]] | None:
    """The command as lists (cut at `;`, `&`, newlines) of (operator before, pipeline text);
    None when it holds a heredoc (its body is not commands to cut)."""
    if re.search(r"<<(?!<)", command):
        return None
    lists = _split_top(command, {";", "&", "\n"})
    if lists is None:
        return None
    result = []
    for _, text in lists:
        pipelines = _split_top(text, {"&&", "||"})
        if pipelines is None:
            return None
        result.append([(op, part.strip()) for op, part in pipelines])
    if not result:
        return [[("", "")]]  # an empty command: nothing ran, status 0
    return result


def _split_top(text: str, operators: set[str]) -> list[tuple[str, str]] | None:
    """`text` cut at `operators` outside quotes, escapes, comments, `$(…)`, `(…)`, `{…}` and
    backticks: (operator before the piece, the piece); empty pieces dropped. `;` `&` `\\n`
    never cut inside `&&`, `|` never inside `||`, and `&` not in a redirection (`2>&1`).
    None when a quote or bracket is left open."""
    pieces: list[tuple[str, str]] = []
    start, index, depth, operator = 0, 0, 0, ""
    quote = ""
    length = len(text)
    while index < length:
        char = text[index]
        if quote:
            if char == "\\" and quote == '"':
                index += 2
                continue
            if char == quote:
                quote = ""
            index += 1
            continue
        if char == "\\":
            index += 2
            continue
        if char in "'\"`":
            quote = char
        elif char == "#" and (index == 0 or text[index - 1] in " \t\n;&|("):
            end = text.find("\n", index)
            text = text[:index] + (text[end:] if end >= 0 else "")
            length = len(text)
            continue
        elif char in "({":
            if char == "(" or (index + 1 < length and text[index + 1] in " \t\n"):
                depth += 1
        elif (char == ")" or (char == "}" and text[index - 1:index] in (" ", "\t", ";", "\n"))) \
                and depth:
            depth -= 1
        elif depth == 0:
            pair = text[index:index + 2]
            found = ""
            if pair in ("&&", "||"):
                found = pair if pair in operators else ""
                if not found:
                    index += 2
                    continue
            elif char in operators and (
                    char in ";\n" or
                    (char == "&" and text[index - 1:index] != ">" and
                     text[index + 1:index + 2] != ">") or
                    (char == "|" and text[index - 1:index] != ">")):
                found = char  # `2>&1`, `&>` and `>|` are redirections, not operators
            if found:
                piece = text[start:index].strip()
                if piece:
                    pieces.append((operator, piece))
                operator = found
                index += len(found)
                start = index
                continue
        index += 1
    if quote or depth:
        return None
    piece = text[start:].strip()
    if piece:
        pieces.append((operator, piece))
    return pieces


# ---------------------------------------------------------------- programs

def programs(command: str) -> list[str]:
    """The programs `command` runs (the first word of each simple command after assignments,
    keywords and wrappers; builtins left out), as written. A word holding an expansion (`$X`,
    a backtick, `~`) is left out: what it names is known only when it runs."""
    found: list[str] = []
    moved = False  # after a `cd`, a relative path is relative to somewhere we do not know
    for part in shell_words.split_parts(command):
        words, _, _, _ = shell_words.tokens(part)
        moved = moved or any(word in ("cd", "pushd") for word in words[:3])
        program = _program(words)
        if program and program not in found and not (moved and "/" in program and
                                                     not program.startswith("/")):
            found.append(program)
    return found


def _program(words: list[str]) -> str | None:
    index = 0
    while index < len(words):
        word = words[index]
        if _ASSIGNMENT.match(word) or word in PREFIXES:
            index += 1
            if word in ("env", "exec", "command"):  # their options come before the program
                while index < len(words) and words[index].startswith("-"):
                    index += 1
            continue
        if word in _OPENS_BLOCK or word in BUILTINS:
            return None
        if not word or any(mark in word for mark in "$`") or word.startswith("~"):
            return None
        return word
    return None


class ProgramFinder:
    """Whether a program exists: a path (a word with `/`) relative to the project, else on
    PATH, in the project's venv (`.venv/bin`, `venv/bin`) or as a file in the repository.
    Answers are cached: 40,000 tasks run the same few programs."""

    def __init__(self, project: Path, created: Callable[[str], bool]) -> None:
        self.project = project
        self.created = created  # whether a task's ownership will create this path
        self._cache: dict[str, bool] = {}

    def exists(self, program: str) -> bool:
        if program not in self._cache:
            self._cache[program] = self._look(program)
        return self._cache[program]

    def _look(self, program: str) -> bool:
        if "/" in program:
            path = Path(program) if os.path.isabs(program) else self.project / program
            return path.exists() or (not os.path.isabs(program) and self.created(program))
        if shutil.which(program):
            return True
        for venv in (".venv", "venv"):
            if (self.project / venv / "bin" / program).is_file():
                return True
        return (self.project / program).is_file() or self.created(program)
