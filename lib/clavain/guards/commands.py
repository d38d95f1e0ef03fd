"""What a Bash command is, for the budgets: its parts (split on `&&`, `||`, `;`, `|`, `&` and
newlines; quotes, escapes, `$(…)`, comments and heredoc bodies respected), which parts run
tests, and whether it may change files.

Stdlib only, and no regex for the built-in rules: PreToolUse runs on every tool call, and
compiling a page of patterns cost more (~15 ms) than the rest of the hook. A part is read as
words: shell keywords (`then`, `do`, …), wrappers (`timeout 60`, `sudo -u x`, `env X=1`,
`uv run`, …) and subshell parentheses are skipped, the first word is taken by its base name
(`.venv/bin/pytest` is `pytest`), `sh -c '…'` is read inside. Extra patterns
(`budgets.testPatterns`) are regexes, compiled only when set.
"""

from __future__ import annotations

MAX_CHARS = 64 * 1024  # a longer command is judged by its start (a 2 MB heredoc took 2 s)

# Test runners by their first word, or by their first two words.
TEST_WORDS = {"pytest", "py.test", "jest", "vitest", "mocha", "ava", "tox", "nox", "rspec",
              "phpunit", "ctest"}
TEST_PAIRS = {("go", "test"), ("cargo", "test"), ("cargo", "nextest"), ("rake", "test"),
              ("rake", "spec"), ("dotnet", "test"), ("swift", "test"), ("mix", "test"),
              ("deno", "test"), ("zig", "test")}
PACKAGE_MANAGERS = {"npm", "pnpm", "yarn", "bun"}
JS_RUNNERS = {"jest", "vitest", "mocha", "ava", "playwright", "cypress"}
PACKAGE_EXECUTORS = {"npx", "bunx", "pnpx", "uvx", "pipx"}  # `npx jest`, `uvx pytest`
BUILD_TOOLS = {"mvn", "mvnw", "gradle", "gradlew", "make", "gmake", "just"}
BUILD_TEST_GOALS = {"test", "tests", "verify", "check"}
# Words that run the command after them, with the options that take a value.
WRAPPERS = {"env": set(), "time": set(), "nice": {"-n"}, "nohup": set(), "exec": set(),
            "xvfb-run": set(), "sudo": {"-u", "-g", "-C", "-D", "-h", "-p", "-r", "-t", "-U"},
            "timeout": {"-s", "-k", "--signal", "--kill-after"}, "gtimeout": {"-s", "-k"},
            "stdbuf": set(), "chronic": set()}
POSITIONAL = {"timeout": 1, "gtimeout": 1}  # `timeout 60 pytest`
KEYWORDS = {"then", "do", "else", "elif", "if", "while", "until", "!", "{", "}", "fi", "done"}
RUNNER_PAIRS = {*((runner, "run") for runner in ("uv", "poetry", "pipenv", "hatch", "pdm", "rye")),
                ("bundle", "exec"), ("pnpm", "exec"), ("yarn", "exec"), ("npm", "exec")}
SHELLS = {"sh", "bash", "zsh", "dash"}
# First words of parts that only read.
READS = {"cat", "less", "head", "tail", "ls", "ll", "tree", "pwd", "echo", "printf", "grep",
         "egrep", "rg", "ag", "find", "fd", "wc", "which", "type", "stat", "file", "du", "df",
         "diff", "cmp", "sort", "uniq", "cut", "jq", "date", "whoami", "true", "false",
         "cd", "pushd", "popd", "test", "[", "command", "sleep", "git", "clavain", "for",
         "case", "esac", "select", "in"}
GIT_READS = {"status", "diff", "log", "show", "branch", "rev-parse", "ls-files", "blame",
             "remote"}
# `clavain` commands that only look (the rest change Clavain's state, which counts).
CLAVAIN_READS = {"status", "doctor", "report", "tokens", "--version", "--help", "-h"}
CLAVAIN_READ_PAIRS = {("graph", "show"), ("graph", "list"), ("graph", "deadlock"),
                      ("graph", "export"), ("graph", "packet"), ("verdicts", "summary"),
                      ("verdicts", "ls"), ("verdicts", "attention"), ("verdicts", "show"),
                      ("sprint", "status"), ("sprint", "summary"), ("sprint", "resume"),
                      ("budget", "status"), ("kv", "get"), ("kv", "ls")}


def split_parts(command: str) -> list[str]:
    """The simple commands of a compound one, stripped; separators inside quotes, after a
    backslash or inside `$(…)` do not split; comments and heredoc bodies are dropped."""
    command = command[:MAX_CHARS]
    parts, current = [], []
    quote = None
    depth = 0
    heredocs: list[str] = []
    index = 0
    length = len(command)
    while index < length:
        char = command[index]
        if quote:
            current.append(char)
            if char == "\\" and quote == '"' and index + 1 < length:
                current.append(command[index + 1])
                index += 1
            elif char == quote:
                quote = None
        elif char == "\\" and index + 1 < length:
            current.append(command[index:index + 2])
            index += 1
        elif char in "'\"":
            quote = char
            current.append(char)
        elif char == "#" and (not current or current[-1] in " \t"):
            end = command.find("\n", index)
            index = length if end < 0 else end  # a comment: on to the newline
            continue
        elif char == "<" and command[index + 1:index + 2] == "<" and \
                command[index + 2:index + 3] != "<":
            index, delimiter = _heredoc_delimiter(command, index + 2)
            if delimiter:
                heredocs.append(delimiter)
            current.append("<<")
            continue
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
            if char == "\n" and heredocs:
                index = _skip_heredocs(command, index + 1, heredocs)
                heredocs = []
                continue
            if command[index + 1:index + 2] == char and char in "|&":
                index += 1  # `&&` / `||`
        else:
            current.append(char)
        index += 1
    parts.append("".join(current))
    return [part.strip() for part in parts if part.strip()]


def _heredoc_delimiter(command: str, index: int) -> tuple[int, str]:
    """(index after the delimiter word, the delimiter) of a `<<WORD`, `<<-'WORD'`, `<< "W"`."""
    if command[index:index + 1] == "-":
        index += 1
    while command[index:index + 1] in (" ", "\t"):
        index += 1
    start = index
    while index < len(command) and command[index] not in " \t\n;|&<>()":
        index += 1
    return index, command[start:index].strip("'\"\\")


def _skip_heredocs(command: str, index: int, delimiters: list[str]) -> int:
    """Past the bodies of the heredocs opened on the line that just ended."""
    for delimiter in delimiters:
        while index < len(command):
            end = command.find("\n", index)
            line = command[index:] if end < 0 else command[index:end]
            index = len(command) if end < 0 else end + 1
            if line.strip() == delimiter:
                break
    return index


def _unquote(word: str) -> str:
    return word[1:-1] if len(word) > 1 and word[0] == word[-1] and word[0] in "'\"" else word


def _words(part: str) -> list[str]:
    """The part's words after keywords, wrappers, assignments and subshell parentheses, the
    first taken by its base name."""
    words = part.replace("(", " ").replace(")", " ").split()
    index = 0
    while index < len(words):
        word = words[index]
        if word in KEYWORDS or ("=" in word and word.split("=", 1)[0].isidentifier()):
            index += 1
        elif word in WRAPPERS:
            takes_value = WRAPPERS[word]
            index += 1
            while index < len(words) and words[index].startswith("-"):
                index += 2 if words[index] in takes_value else 1
            index += POSITIONAL.get(word, 0)
        elif (word, words[index + 1] if index + 1 < len(words) else "") in RUNNER_PAIRS:
            index += 2
        else:
            break
    words = words[index:]
    if words:
        words[0] = words[0].rsplit("/", 1)[-1]
    return words


def _inner_commands(words: list[str]) -> list[str]:
    """The command string of `sh -c '…'` (else nothing)."""
    if len(words) >= 3 and words[0] in SHELLS and words[1] == "-c":
        return [_unquote(" ".join(words[2:]))]
    return []


def _runs_tests(words: list[str]) -> bool:
    if not words or "--version" in words or "--help" in words:
        return False
    first, second = words[0], words[1] if len(words) > 1 else ""
    if first.startswith("python") and second == "-m" and len(words) > 2:
        return words[2] in ("pytest", "unittest")
    if first in TEST_WORDS or (first, second) in TEST_PAIRS:
        return True
    if first in PACKAGE_MANAGERS:
        script = words[2] if second == "run" and len(words) > 2 else second
        return script in ("test", "t") or script.startswith("test:") or script in JS_RUNNERS
    if first in PACKAGE_EXECUTORS:
        return second in JS_RUNNERS or second in TEST_WORDS
    if first in BUILD_TOOLS:
        return any(word.split(":")[-1] in BUILD_TEST_GOALS for word in words[1:]
                   if not word.startswith("-"))
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


def _test_words(part: str, patterns: list) -> list[str] | None:
    """The normalised words of a part that runs tests (looking inside `sh -c`), else None."""
    words = _words(part)
    if _runs_tests(words) or any(p.match(part) or p.match(" ".join(words)) for p in patterns):
        return words
    for inner in _inner_commands(words):
        for inner_part in split_parts(inner):
            found = _test_words(inner_part, patterns)
            if found is not None:
                return found
    return None


def find_test_runs(command: str, patterns: list) -> list[str]:
    """The parts of `command` that run tests."""
    return [part for part in split_parts(command) if _test_words(part, patterns) is not None]


def may_change_files(command: str, patterns: list) -> bool:
    """False only when every part is a test run or a plain read (a redirect writes)."""
    for part in split_parts(command):
        cleaned = part.replace("2>&1", "").replace(">/dev/null", "").replace("> /dev/null", "")
        if ">" in cleaned:
            return True
        if not (is_read(_words(part)) or _test_words(part, patterns) is not None):
            return True
    return False


def is_read(words: list[str]) -> bool:
    """A part that only looks: a read command, a read-only git or clavain subcommand, a version
    or help query, or a bare keyword (`done`, `fi`)."""
    if not words or "--version" in words or "--help" in words:
        return True
    if words[0] not in READS:
        return False
    second = words[1] if len(words) > 1 else ""
    if words[0] == "git":
        return second in GIT_READS
    if words[0] == "clavain":
        third = words[2] if len(words) > 2 else ""
        return second in CLAVAIN_READS or (second, third) in CLAVAIN_READ_PAIRS
    return True


def normalized(command: str, patterns: list) -> str:
    """The command as words, without `cd` parts and wrappers: what the loop guards compare
    (`pytest  -q` and `cd . && pytest -q` are the same command)."""
    parts = []
    for part in split_parts(command):
        words = _test_words(part, patterns) or _words(part)
        if words and words[0] not in ("cd", "pushd", "popd"):
            parts.append(" ".join(words))
    return "\n".join(parts)


def fingerprint(*texts: str) -> str:
    """A stable 64-bit BLAKE2 hash of `texts` (whitespace at the ends of lines ignored).
    `_blake2` directly: `hashlib` loads OpenSSL (~4 ms a call)."""
    from _blake2 import blake2b

    data = b"\0".join("\n".join(line.rstrip() for line in text.strip().splitlines())
                      .encode("utf-8", "replace") for text in texts)
    return blake2b(data, digest_size=8).hexdigest()
