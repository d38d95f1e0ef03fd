"""What a Bash command is, for the budgets: its parts (split on `&&`, `||`, `;`, `|`, `&` and
newlines, quotes and escapes respected), which parts run tests, and whether it may change files.

Stdlib only and no `shlex` (PreToolUse runs on every tool call); `re` is already loaded by
`pathlib` on that path.
"""

from __future__ import annotations

import hashlib
import re

# A test runner at the start of a part (after wrappers such as `timeout 60`, `env X=1`,
# `uv run`). Extra patterns come from `budgets.testPatterns`.
TEST_PATTERNS = (
    r"(python[0-9.]*\s+-m\s+)?(pytest|py\.test)\b",
    r"python[0-9.]*\s+-m\s+unittest\b",
    r"(npm|pnpm|yarn|bun)\s+(run\s+)?(test|t)(\b|:)",
    r"npx\s+(jest|vitest|mocha|ava|playwright\s+test|cypress\s+run)\b",
    r"(jest|vitest|mocha|ava)\b",
    r"go\s+test\b",
    r"cargo\s+(test|nextest)\b",
    r"(mvn|\./mvnw|mvnw)\b.*\b(test|verify)\b",
    r"(gradle|\./gradlew|gradlew)\b.*\b(test|check)\b",
    r"make\s+(test|check)\b",
    r"(tox|nox)\b",
    r"(rspec|phpunit|ctest)\b",
    r"rake\s+(test|spec)\b",
    r"(dotnet|swift|mix|deno|zig)\s+test\b",
)
# Wrappers that run the command after them.
_WRAPPERS = re.compile(
    r"^(?:(?:[A-Za-z_][A-Za-z0-9_]*=\S*\s+)|(?:env|time|nice|nohup|command|exec|xvfb-run)\s+|"
    r"(?:timeout|gtimeout)\s+(?:-\S+\s+)*\S+\s+|(?:uv|poetry|pipenv|hatch|pdm|rye)\s+run\s+|"
    r"bundle\s+exec\s+|sudo\s+)+")
# Parts that only read: they change no file.
_READS = re.compile(
    r"(cat|less|head|tail|ls|ll|tree|pwd|echo|printf|grep|egrep|rg|ag|find|fd|wc|which|type|"
    r"stat|file|du|df|diff|cmp|sort|uniq|cut|jq|date|env|whoami|true|false|clavain|cd|pushd|popd|"
    r"git\s+(status|diff|log|show|branch|rev-parse|ls-files|blame|remote))\b")


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


def _bare(part: str) -> str:
    """A part without its leading wrappers, subshell parentheses and `cd x` prefix."""
    part = part.lstrip("( ").strip()
    match = _WRAPPERS.match(part)
    return part[match.end():] if match else part


def compile_patterns(extra: list[str]) -> list[re.Pattern[str]]:
    """The built-in test patterns and the valid extra ones (a bad regex is skipped)."""
    compiled = [re.compile(pattern) for pattern in TEST_PATTERNS]
    for pattern in extra:
        try:
            compiled.append(re.compile(pattern))
        except re.error:
            continue
    return compiled


def test_parts(command: str, patterns: list[re.Pattern[str]]) -> list[str]:
    """The parts of `command` that run tests."""
    return [part for part in split_parts(command)
            if any(p.match(_bare(part)) for p in patterns)]


def may_change_files(command: str, patterns: list[re.Pattern[str]]) -> bool:
    """False only when every part is a test run or a plain read (a redirect writes)."""
    for part in split_parts(command):
        bare = _bare(part)
        if ">" in bare.replace("2>&1", "").replace(">/dev/null", "").replace("> /dev/null", ""):
            return True
        if not (_READS.match(bare) or any(p.match(bare) for p in patterns)):
            return True
    return False


def fingerprint(*texts: str) -> str:
    """A short stable hash of `texts` (whitespace at the ends of lines ignored)."""
    digest = hashlib.sha256()
    for text in texts:
        normalized = "\n".join(line.rstrip() for line in text.strip().splitlines())
        digest.update(normalized.encode("utf-8", "replace") + b"\0")
    return digest.hexdigest()[:16]
