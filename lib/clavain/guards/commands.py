"""What a Bash command is, for the budgets: its parts (split on `&&`, `||`, `;`, `|`, `&` and
newlines; quotes, escapes, `$(…)`, comments and heredoc bodies respected), the simple commands
each part runs, which of them run tests, whether the command may change files, and whether it
would lift the budgets themselves.

One reading of words for everything (`simple_commands`): a part is split into words the way
the shell does it (quotes and escapes removed, redirections set apart), and the wrappers in
front of the command are stripped by one table (WRAPPERS, RUNNERS, the interpreters, the
package executors), recursing into what a wrapper runs as a string (`bash -lc '…'`, `eval`,
`env -S`, `watch`, a heredoc or `echo …` fed to a shell) and into substitutions (`$(…)`,
backticks, `<(…)`). The first word is taken by its base name (`.venv/bin/pytest` is `pytest`,
`bin/clavain` is `clavain`), `python -m X` is `X`.

Stdlib only, and no regex for the built-in rules: PreToolUse runs on every tool call, and
compiling a page of patterns cost more (~15 ms) than the rest of the hook. Extra patterns
(`budgets.testPatterns`) are regexes, compiled only when set.
"""

from __future__ import annotations

from clavain.guards.wrappers import (
    GLOBAL_VALUES,
    RUNNERS,
    base_name,
    find_exec,
    is_test_script,
    read_parts,
    skip_options,
)

# Test runners by their first word, or by their first two words (options in between skipped).
TEST_WORDS = {"pytest", "py.test", "unittest", "jest", "vitest", "mocha", "ava", "tox", "nox",
              "rspec", "phpunit", "pest", "ctest", "trial", "ward", "nose2"}
TEST_PAIRS = {("go", "test"), ("cargo", "test"), ("cargo", "t"), ("cargo", "nextest"),
              ("cargo", "tarpaulin"), ("cargo", "llvm-cov"), ("rake", "test"), ("rake", "spec"),
              ("rails", "test"), ("dotnet", "test"), ("swift", "test"), ("mix", "test"),
              ("deno", "test"), ("zig", "test"), ("hatch", "test"), ("rye", "test"),
              ("pdm", "test"), ("manage.py", "test"), ("artisan", "test"),
              ("playwright", "test"), ("cypress", "run"), ("meson", "test"),
              ("bazel", "test"), ("bazelisk", "test"), ("pants", "test"), ("sbt", "test"),
              ("lein", "test"), ("flutter", "test"), ("dart", "test"), ("stack", "test"),
              ("cabal", "test"), ("gleam", "test")}
PACKAGE_MANAGERS = {"npm", "pnpm", "yarn", "bun"}
JS_RUNNERS = {"jest", "vitest", "mocha", "ava", "playwright", "cypress"}
BUILD_TOOLS = {"mvn", "mvnw", "gradle", "gradlew", "make", "gmake", "just", "task", "ninja"}
BUILD_VALUES = {"-C", "-f", "--file", "--directory", "-I", "-o", "-W", "-p", "-pl",
                "--projects", "-P", "-s", "--settings", "-b", "--build-file"}
BUILD_TEST_GOALS = {"test", "tests", "verify", "check"}

# First words of commands that only read.
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
NULL_SINKS = {"/dev/null", "/dev/stdout", "/dev/stderr", "/dev/tty"}
# Clavain's budget state: removing, moving, replacing or truncating it lifts the budgets.
PROTECTED = (".clavain/state.sqlite", ".clavain/config.json")
REMOVERS = {"rm", "unlink", "shred", "truncate", "mv", "srm", "trash", "trash-put", "rmdir",
            "tee"}
COPIERS = {"cp", "install", "ln", "rsync", "scp"}  # their last argument is written


def _runs_tests(words: list[str]) -> bool:
    if not words or "--version" in words or "--help" in words:
        return False
    first = words[0]
    index, _ = skip_options(words, 1, GLOBAL_VALUES)
    second = words[index] if index < len(words) else ""
    if first in TEST_WORDS or (first, second) in TEST_PAIRS:
        return True
    if first == "node":
        return "--test" in words
    if first in PACKAGE_MANAGERS:
        if second == "workspace":  # `yarn workspace web test`
            index += 2
            second = words[index] if index < len(words) else ""
        script = words[index + 1] if second in ("run", "run-script") and \
            index + 1 < len(words) else second
        return is_test_script(script) or script in JS_RUNNERS
    if first in RUNNERS and second == "run":  # a project script kept by _strip
        return len(words) > index + 1 and is_test_script(words[index + 1])
    if first in BUILD_TOOLS:
        index = 1
        while index < len(words):
            word = words[index]
            if word in BUILD_VALUES:
                index += 2
                continue
            if not word.startswith("-") and word.split(":")[-1] in BUILD_TEST_GOALS:
                return True
            index += 1
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


def _is_test(words: list[str], patterns: list) -> bool:
    return _runs_tests(words) or (bool(patterns) and bool(words) and
                                  any(p.match(" ".join(words)) for p in patterns))


def find_test_runs(command: str, patterns: list) -> list[str]:
    """The parts of `command` that run tests (behind any wrapper, or inside a substitution or
    a shell string)."""
    return [part for part, found in read_parts(command)
            if any(p.match(part) for p in patterns) or
            any(_is_test(words, patterns) for words, _ in found)]


def may_change_files(command: str, patterns: list) -> bool:
    """False only when every simple command is a test run or a plain read, and nothing is
    redirected to a file."""
    for part, found in read_parts(command):
        whole = any(p.match(part) for p in patterns)
        for words, writes in found:
            if any(path not in NULL_SINKS for path in writes):
                return True
            if not (whole or is_read(words) or _is_test(words, patterns)):
                return True
    return False


def is_read(words: list[str]) -> bool:
    """A command that only looks: a read command, a read-only git or clavain subcommand, a
    version or help query, or a bare keyword (`done`, `fi`)."""
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
    if words[0] == "find":  # what `-exec` runs is a command of its own
        return not any(w in ("-delete", "-fprint", "-fls") for w in words)
    return True


# What `find` runs on what it finds (a shell string run there is not read as a command).
FIND_RUNS = {"-delete", "-exec", "-execdir", "-ok", "-okdir"}
# Words in front of a path that say where a read command writes (`sort -o FILE`, `find -fprint`).
READ_OUTPUTS = ("-o", "--output", "-fprint", "-fprint0", "-fprintf", "-fls")


def option_values(words: list[str], names: tuple[str, ...]) -> list[str]:
    """The values of the options `names` (`-o FILE`, `--output=FILE`)."""
    values = [words[i + 1] for i, w in enumerate(words[:-1]) if w in names]
    return values + [w.split("=", 1)[1] for w in words
                     if any(w.startswith(n + "=") for n in names if n.startswith("--"))]


def read_outputs(words: list[str]) -> list[str]:
    """What a read command writes all the same: `sort -o FILE`, `uniq IN OUT`, `find …
    -fprint FILE`, `git diff --output=FILE`, `tree -o FILE`."""
    # `find … -o …` is an "or", not an output.
    outputs = option_values(words, READ_OUTPUTS[2:] if words[:1] == ["find"] else READ_OUTPUTS)
    outputs += [w[2:] for w in words[1:] if w.startswith("-o") and len(w) > 2
                and words[0] in ("sort", "tree")]
    if words[:1] == ["uniq"]:
        outputs += [w for w in words[1:] if not w.startswith("-") or w == "-"][1:2]
    return outputs


def reads_that_write(command: str) -> bool:
    """Whether a command `may_change_files` calls a read writes a file all the same: what an
    option names (`sort -o FILE`), or what `find` runs on what it finds. With that, False for
    the common call, which then costs no look at the disk."""
    return any(read_outputs(words) or (words[0] == "find" and bool(FIND_RUNS & set(words)))
               for _, found in read_parts(command) for words, _ in found if words)


def lifts_budget(command: str) -> bool:
    """Whether `command` would lift the budgets: `clavain budget reset` behind any wrapper, or
    removing, moving, replacing or truncating `.clavain/state.sqlite*` or
    `.clavain/config.json` (or the whole `.clavain/` folder)."""
    near = ".clavain" in command
    for _, found in read_parts(command):
        for words, writes in found:
            if words[:1] == ["clavain"] and \
                    [w for w in words[1:] if not w.startswith("-")][:2] == ["budget", "reset"]:
                return True
            if any(_protected(path, near) for path in writes) or _overwrites(words, near):
                return True
    return False


# Words of a `clavain` command that make it a person's decision (`clavain.authority` decides in
# the CLI too: this deny comes first and changes nothing).
PERSON_OPTIONS = ("--waive", "--skip-to", "--reset-circuit", "--reset-rate", "--from-prompt",
                  "--accept-lint")
PERSON_PAIRS = (("budget", "reset"), ("loop", "session-start"), ("loop", "cancel"))
# How a runner's packets name the CLI: the launcher the supervisor puts in its environment.
CLAVAIN_VARIABLES = ("$CLAVAIN_BIN", "${CLAVAIN_BIN}")
# The command groups with a person-only action somewhere below them: a word of theirs that
# cannot be read might be it (under `kv`, `graph`, … none can).
PERSON_GROUPS = ("sprint", "budget", "loop")


def person_only(command: str) -> str | None:
    """Why `command` asks for what only a person may do, read as words (quotes, escapes and
    wrappers resolved), or None. A `clavain` command whose words cannot be read statically
    (`$x`, `$(…)`, backticks, `$'…'`, a command name that is a variable, `eval` or `xargs`
    around it) counts too when it could reach such an action: it is refused rather than
    guessed at."""
    if "clavain" not in command.lower() and "$" not in command and "`" not in command:
        return None  # the common call: nothing to read
    from clavain.guards.shell_words import MAX_CHARS

    if len(command) > MAX_CHARS and "clav" in command[MAX_CHARS:].lower():
        return "a command too long to read whole (over 64 KB) that names Clavain"
    for _, found in read_parts(command):
        for words, _writes in found:
            if not words:
                continue
            first = "clavain" if words[0] in CLAVAIN_VARIABLES else words[0]
            asked = _asks_person(words[1:])
            if first[:1] in ("$", "`"):
                if asked or "clavain" in command.lower():
                    return f"its command name `{first}` is not written out"
                continue
            if first != "clavain":
                continue
            if asked:
                return asked
            hidden = [w for w in words[1:] if "$" in w or "`" in w]
            group = words[1] if len(words) > 1 else ""
            if hidden and (group in hidden or group in PERSON_GROUPS):
                return f"its words are not written out (`{hidden[0][:40]}`)"
    if "clavain" in command:
        return _built_at_run_time(command)
    return None


def _built_at_run_time(command: str) -> str | None:
    """A `clavain` command that `xargs` or `eval` assembles, or interpreter code (`python -c`,
    a heredoc or a pipe into it) that names the library's person-only functions. A file that
    merely names them (`cat …/lifecycle.py`, `pytest -k lifecycle`) is not refused. Read from
    each part's own text: the word reader unwraps `xargs` and `python -c` on purpose."""
    for part, _found in read_parts(command):
        tokens = [t.strip("\"'").rsplit("/", 1)[-1] for t in part.split()]
        for at, token in enumerate(tokens):
            rest = tokens[at + 1:]
            if token in ("xargs", "eval") and (any("clavain" in t for t in rest)
                                               or set(rest) & SHELLS):
                return "`xargs` or `eval` builds its words"
        interpreter = bool(tokens) and (tokens[0].startswith(("python", "pypy"))
                                        or "CLAVAIN_PYTHON" in tokens[0])
        code = "-c" in tokens or len(tokens) == 1 or "<<" in part
        if interpreter and code and any(name in command for name in LIBRARY_PERSON_CALLS):
            return "calling Clavain's library for what only a person may do"
    return None


# What `xargs` or `eval` could hand a `clavain` command line to.
SHELLS = {"sh", "bash", "zsh", "dash", "ksh", "env", "eval", "python", "python3", "perl"}


# Library names a program (`python -c '…'`) would call to do a person's part without the CLI.
LIBRARY_PERSON_CALLS = ("lifecycle", "typed_request", "project_reset", "report.reset",
                        "controls.circuit", "decided_by", "LIBRARY_CALLER", "person_decisions",
                        "session_loop.start", "controls.rate")


def _asks_person(arguments: list[str]) -> str | None:
    """The person-only part of a `clavain` command's arguments, as said to the agent."""
    named = [w.split("=", 1)[0] for w in arguments]
    for option in PERSON_OPTIONS:
        if option in named:
            return f"`clavain … {option}`"
    plain = [w for w in arguments if not w.startswith("-")]
    for pair in PERSON_PAIRS:
        if tuple(plain[:2]) == pair:
            return f"`clavain {' '.join(pair)}`"
    return None


def _protected(word: str, near: bool) -> bool:
    path = word.replace("\\", "/")
    if any(name in path for name in PROTECTED):
        return True
    base = path.rstrip("/").rsplit("/", 1)[-1]
    if base.startswith("state.sqlite") or base == ".clavain" or (near and base == "config.json"):
        return True
    return "/.clavain/" in "/" + path and any(c in path for c in "*?[{")  # a glob inside it


def _overwrites(words: list[str], near: bool) -> bool:
    """Whether a command removes, moves, replaces or truncates a protected path."""
    if not words:
        return False
    name, args = words[0], [w for w in words[1:] if not w.startswith("-")]
    if name == "find" and (not is_read(words) or any(
            run and base_name(run[0]) in REMOVERS for run in find_exec(words))):
        from clavain.guards.writes import find_targets

        targets = find_targets(words)
    elif name in REMOVERS:
        targets = args
    elif name in COPIERS:
        targets = args[-1:] + [words[i + 1] for i, w in enumerate(words[:-1])
                               if w in ("-t", "--target-directory")] + \
            [w.split("=", 1)[1] for w in words if w.startswith("--target-directory=")]
    elif name == "dd":
        targets = [w[3:] for w in words if w.startswith("of=")]
    elif name in ("sed", "perl"):
        in_place = any(w.startswith("--in-place") or (w[:1] == "-" and w[1:2] != "-" and
                                                      "i" in w[1:]) for w in words[1:])
        targets = args if in_place else []
    elif name == "git" and args[:1] in (["rm"], ["mv"], ["checkout"], ["restore"]):
        targets = args[1:]
    elif name == "git" and args[:1] == ["clean"]:  # `-x`: ignored files, `.clavain/` among them
        return any(w[:1] == "-" and w[1:2] != "-" and ("x" in w or "X" in w) for w in words)
    else:
        return False
    return any(_protected(target, near) for target in targets)


def normalized(command: str, patterns: list) -> str:
    """The command as words, without `cd` and wrappers: what the loop guards compare
    (`pytest  -q`, `cd . && pytest -q` and `bash -c 'pytest -q'` are the same command)."""
    lines = []
    for _, found in read_parts(command):
        for words, writes in found:
            if words[:1] in (["cd"], ["pushd"], ["popd"]) or not (words or writes):
                continue
            lines.append(" ".join([*words, *(">" + path for path in writes)]))
    return "\n".join(lines)


def fingerprint(*texts: str) -> str:
    """A stable 64-bit BLAKE2 hash of `texts` (whitespace at the ends of lines ignored).
    `_blake2` directly: `hashlib` loads OpenSSL (~4 ms a call)."""
    from _blake2 import blake2b

    data = b"\0".join("\n".join(line.rstrip() for line in text.strip().splitlines())
                      .encode("utf-8", "replace") for text in texts)
    return blake2b(data, digest_size=8).hexdigest()
