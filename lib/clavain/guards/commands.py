"""What a Bash command is, for the budgets: its parts (split on `&&`, `||`, `;`, `|`, `&` and
newlines, quotes and escapes respected), which parts run tests, and whether it may change files.

Stdlib only, and no regex for the built-in rules: PreToolUse runs on every tool call, and
compiling a page of patterns cost more (~15 ms) than the rest of the hook. A part is read as
words: wrappers (`timeout 60`, `env X=1`, `uv run`, …) are skipped, then the first words are
looked up. Extra patterns (`budgets.testPatterns`) are regexes, compiled only when set.
"""

from __future__ import annotations

import zlib

# Test runners by their first word, or by their first two words.
TEST_WORDS = {"pytest", "py.test", "jest", "vitest", "mocha", "ava", "tox", "nox", "rspec",
              "phpunit", "ctest"}
TEST_PAIRS = {("go", "test"), ("cargo", "test"), ("cargo", "nextest"), ("make", "test"),
              ("make", "check"), ("rake", "test"), ("rake", "spec"), ("dotnet", "test"),
              ("swift", "test"), ("mix", "test"), ("deno", "test"), ("zig", "test")}
PACKAGE_MANAGERS = {"npm", "pnpm", "yarn", "bun"}
NPX_RUNNERS = {"jest", "vitest", "mocha", "ava", "playwright", "cypress"}
BUILD_TOOLS = {"mvn", "./mvnw", "mvnw", "gradle", "./gradlew", "gradlew"}
BUILD_TEST_GOALS = {"test", "verify", "check"}
# Words that run the command after them (with how many arguments of their own).
WRAPPERS = {"env": 0, "time": 0, "nice": 0, "nohup": 0, "command": 0, "exec": 0,
            "xvfb-run": 0, "sudo": 0, "timeout": 1, "gtimeout": 1}
# `uv run …`, `bundle exec …`: what follows is the command.
RUNNER_PAIRS = {*((runner, "run") for runner in ("uv", "poetry", "pipenv", "hatch", "pdm", "rye")),
                ("bundle", "exec")}
# First words of parts that only read.
READS = {"cat", "less", "head", "tail", "ls", "ll", "tree", "pwd", "echo", "printf", "grep",
         "egrep", "rg", "ag", "find", "fd", "wc", "which", "type", "stat", "file", "du", "df",
         "diff", "cmp", "sort", "uniq", "cut", "jq", "date", "whoami", "true", "false",
         "clavain", "cd", "pushd", "popd", "test", "["}
GIT_READS = {"status", "diff", "log", "show", "branch", "rev-parse", "ls-files", "blame",
             "remote"}


def split_parts(command: str) -> list[str]:
    """The simple commands of a compound one, stripped; separators inside quotes, after a
    backslash or inside `$(…)` do not split."""
    parts, current = [], []
    quote = None
    depth = 0
    index = 0
    while index < len(command):
        char = command[index]
        if quote:
            current.append(char)
            if char == "\\" and quote == '"' and index + 1 < len(command):
                current.append(command[index + 1])
                index += 1
            elif char == quote:
                quote = None
        elif char == "\\" and index + 1 < len(command):
            current.append(command[index:index + 2])
            index += 1
        elif char in "'\"":
            quote = char
            current.append(char)
        elif char == "$" and command[index + 1:index + 2] == "(":
            depth += 1
            current.append("$(")
            index += 1
        elif char == ")" and depth:
            depth -= 1
            current.append(char)
        elif char == "&" and (command[index - 1:index] == ">" or
                              command[index + 1:index + 2] == ">"):
            current.append(char)  # a redirection (`2>&1`, `&>`), not a separator
        elif depth == 0 and char in ";|&\n":
            parts.append("".join(current))
            current = []
            if command[index + 1:index + 2] == char and char in "|&":
                index += 1  # `&&` / `||`
        else:
            current.append(char)
        index += 1
    parts.append("".join(current))
    return [part.strip() for part in parts if part.strip()]


def _words(part: str) -> list[str]:
    """The part's words after its wrappers, assignments and subshell parentheses."""
    words = part.lstrip("( ").split()
    index = 0
    while index < len(words):
        word = words[index]
        if "=" in word and word.split("=", 1)[0].isidentifier():
            index += 1
        elif word in WRAPPERS:
            index += 1
            while index < len(words) and words[index].startswith("-"):
                index += 1
            index += WRAPPERS[word]
        elif (word, words[index + 1] if index + 1 < len(words) else "") in RUNNER_PAIRS:
            index += 2
        else:
            break
    return words[index:]


def _runs_tests(words: list[str]) -> bool:
    if not words:
        return False
    first, second = words[0], words[1] if len(words) > 1 else ""
    if first.startswith("python") and second == "-m" and len(words) > 2:
        return words[2] in ("pytest", "unittest")
    if first in TEST_WORDS or (first, second) in TEST_PAIRS:
        return True
    if first in PACKAGE_MANAGERS:
        script = words[2] if second == "run" and len(words) > 2 else second
        return script in ("test", "t") or script.startswith("test:")
    if first == "npx":
        return second in NPX_RUNNERS
    if first in BUILD_TOOLS:
        return any(word in BUILD_TEST_GOALS for word in words[1:])
    return False


def compile_patterns(extra: list[str]) -> list:
    """Compiled `budgets.testPatterns` (a bad regex is skipped); none: no `re` import."""
    if not extra:
        return []
    import re

    compiled = []
    for pattern in extra:
        try:
            compiled.append(re.compile(pattern))
        except re.error:
            continue
    return compiled


def _is_test(part: str, patterns: list) -> bool:
    words = _words(part)
    return _runs_tests(words) or any(p.match(" ".join(words)) for p in patterns)


def find_test_runs(command: str, patterns: list) -> list[str]:
    """The parts of `command` that run tests."""
    return [part for part in split_parts(command) if _is_test(part, patterns)]


def may_change_files(command: str, patterns: list) -> bool:
    """False only when every part is a test run or a plain read (a redirect writes)."""
    for part in split_parts(command):
        cleaned = part.replace("2>&1", "").replace(">/dev/null", "").replace("> /dev/null", "")
        if ">" in cleaned:
            return True
        words = _words(part)
        reads = bool(words) and (words[0] in READS or (
            words[0] == "git" and len(words) > 1 and words[1] in GIT_READS))
        if not (reads or _is_test(part, patterns)):
            return True
    return False


def fingerprint(*texts: str) -> str:
    """A stable 64-bit hash of `texts` (whitespace at the ends of lines ignored): two CRC-32s
    with different seeds. `zlib`, not `hashlib`: hashlib loads OpenSSL (~4 ms a call)."""
    data = b"\0".join("\n".join(line.rstrip() for line in text.strip().splitlines())
                      .encode("utf-8", "replace") for text in texts)
    return f"{zlib.crc32(data):08x}{zlib.crc32(data, 0x9E3779B9):08x}"
