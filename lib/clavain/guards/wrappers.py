"""The one reading of a command's words (`simple_commands`): the wrappers in front of a command are
stripped by one table (WRAPPERS, RUNNERS, the interpreters, the package executors), recursing
into what a wrapper runs as a string (`bash -lc '…'`, `eval`, `env -S`, `watch`, a heredoc or
`echo …` fed to a shell) and into substitutions (`$(…)`, backticks, `<(…)`). The first word is
taken by its base name (`.venv/bin/pytest` is `pytest`, `bin/clavain` is `clavain`), and
`python -m X` is `X`. Stdlib only, no regex."""

from __future__ import annotations

from clavain.guards.shell_words import split, tokens

# Options before a subcommand that take a value (`go -C dir test`, `npm --prefix web test`).
GLOBAL_VALUES = {"-C", "-Z", "--color", "--config", "--prefix", "--dir", "--filter", "-F", "-w",
                 "--workspace", "--cwd", "--directory", "--project", "-p"}
TEST_SCRIPTS = {"test", "tests", "t", "tst"}  # `npm t`, `hatch run test`, `pdm run tests`
KEYWORDS = {"then", "do", "else", "elif", "if", "while", "until", "!", "{", "}", "fi", "done"}
MAX_DEPTH = 6  # nested `bash -c "$(…)"` levels read


# Wrappers: words that run the command after them. name: (options that take a value, how many
# positional words before the command, options whose value is a shell command string).
WRAPPERS: dict[str, tuple[set[str], int, set[str]]] = {
    "command": (set(), 0, set()),  # `command -v X` only looks X up (see _strip)
    "builtin": (set(), 0, set()),
    "exec": ({"-a"}, 0, set()),
    "env": ({"-u", "--unset", "-C", "--chdir", "-P"}, 0, {"-S", "--split-string"}),
    "nice": ({"-n", "--adjustment"}, 0, set()),
    "ionice": ({"-c", "-n", "--class", "--classdata"}, 0, set()),
    "timeout": ({"-s", "-k", "--signal", "--kill-after"}, 1, set()),
    "gtimeout": ({"-s", "-k", "--signal", "--kill-after"}, 1, set()),
    "time": ({"-f", "-o", "--format", "--output"}, 0, set()),
    "stdbuf": ({"-i", "-o", "-e", "--input", "--output", "--error"}, 0, set()),
    "nohup": (set(), 0, set()),
    "setsid": (set(), 0, set()),
    "chronic": (set(), 0, set()),
    "unbuffer": (set(), 0, set()),
    "coproc": (set(), 0, set()),
    "noglob": (set(), 0, set()),
    "nocorrect": (set(), 0, set()),
    "fakeroot": (set(), 0, set()),
    "taskset": (set(), 1, set()),
    "caffeinate": ({"-t", "-w"}, 0, set()),
    "flock": ({"-w", "--wait", "--timeout", "-E", "--conflict-exit-code"}, 1,
              {"-c", "--command"}),
    "sudo": ({"-u", "-g", "-C", "-D", "-h", "-p", "-r", "-t", "-U", "-T", "-R", "--user",
              "--group", "--chdir", "--prompt"}, 0, set()),
    "doas": ({"-u", "-C"}, 0, set()),
    "su": ({"-s", "--shell", "-g", "--group"}, 0, {"-c", "--command"}),
    "xargs": ({"-I", "-L", "-n", "-P", "-s", "-d", "-E", "-a", "--arg-file", "--delimiter",
               "--max-args", "--max-procs", "--max-lines", "--max-chars", "--eof"}, 0, set()),
    "xvfb-run": ({"-n", "-s", "-e", "-f", "-p", "-w", "--server-num", "--server-args",
                  "--error-file", "--auth-file", "--wait"}, 0, set()),
    "nix-shell": ({"-p", "--packages", "-I", "-A", "--attr"}, 0, {"--run", "--command"}),
}
# Words whose arguments, joined, are a shell command string.
EVALUATORS = {"eval": set(), "watch": {"-n", "--interval", "-d", "--differences"}}
SHELLS = {"sh", "bash", "zsh", "dash", "ksh", "mksh", "ash", "fish"}
SHELL_VALUES = {"-o", "+o", "-O", "+O", "--rcfile", "--init-file"}
# Interpreters running a script (`python bin/clavain`, `node node_modules/.bin/jest`) or code.
INTERPRETER_VALUES = {"python": {"-W", "-X", "--check-hash-based-pycs"},
                      "node": {"-r", "--require", "--import", "--loader", "-C", "--conditions"},
                      "ruby": {"-I", "-r", "-C", "-E"}, "php": {"-d", "-c"}}
INTERPRETER_CODE = {"python": {"-c"}, "node": {"-e", "-p", "--eval", "--print"},
                    "ruby": {"-e"}, "php": {"-r"}}
# Package executors: the next word is a package (`npx --yes jest@29`), after their options.
UV_VALUES = {"--with", "--with-editable", "--with-requirements", "--python", "-p", "--package",
             "--extra", "--group", "--only-group", "--no-group", "--env-file", "--index",
             "--index-url", "--extra-index-url", "--default-index", "-i", "--find-links", "-f",
             "--from", "--directory", "--project", "--cache-dir", "--config-file", "--color",
             "--python-preference", "--exclude-newer", "--refresh-package",
             "--reinstall-package", "--upgrade-package", "-P", "--link-mode", "--resolution",
             "--prerelease", "--keyring-provider", "--config-setting", "-C", "--constraints",
             "--overrides"}
EXECUTORS: dict[str, tuple[set[str], set[str]]] = {
    "npx": ({"-p", "--package", "--cache", "--userconfig", "--node-options"}, {"-c", "--call"}),
    "pnpx": ({"-p", "--package"}, {"-c"}), "bunx": ({"-p", "--package"}, set()),
    "uvx": (UV_VALUES, set()),
}
# Runners: `TOOL SUB … COMMAND` (options before and after SUB skipped). kind: "run" (a command,
# or `-m MODULE`), "package" (like npx), "script" (a command, or a project script: a test
# script name stays `TOOL run test` for the classifier), "after--" (the command follows `--`).
RUNNERS: dict[str, tuple[tuple[tuple[str, ...], str], ...]] = {
    "uv": ((("run",), "run"), (("tool", "run"), "package")),
    "poetry": ((("run",), "run"),), "pipenv": ((("run",), "script"),),
    "hatch": ((("run",), "script"), (("env", "run"), "script")),
    "pdm": ((("run",), "script"),), "rye": ((("run",), "script"),),
    "pixi": ((("run",), "script"), (("exec",), "run")),
    "conda": ((("run",), "run"),), "mamba": ((("run",), "run"),),
    "micromamba": ((("run",), "run"),),
    "pipx": ((("run",), "package"),), "bundle": ((("exec",), "run"),),
    "pnpm": ((("exec",), "run"), (("dlx",), "package")),
    "yarn": ((("exec",), "run"), (("dlx",), "package")),
    "npm": ((("exec",), "package"), (("x",), "package")),
    "bun": ((("x",), "package"),),
    "mise": ((("exec",), "after--"), (("x",), "after--")),
    "asdf": ((("exec",), "run"),), "direnv": ((("exec",), "dir"),),
    "coverage": ((("run",), "run"),),
}
RUNNER_VALUES = {"uv": UV_VALUES, "poetry": {"-C", "--directory", "-P", "--project"},
                 "hatch": {"-e", "--env", "-p", "--project", "--data-dir", "--cache-dir",
                           "--config"},
                 "pdm": {"-p", "--project", "--venv"}, "rye": {"--pyproject"},
                 "pixi": {"-e", "--environment", "--manifest-path"},
                 "conda": {"-n", "--name", "-p", "--prefix", "--cwd"},
                 "mamba": {"-n", "--name", "-p", "--prefix", "--cwd"},
                 "micromamba": {"-n", "--name", "-p", "--prefix", "--cwd"},
                 "pipx": {"--spec", "--python", "--pip-args", "--index-url", "--backend"},
                 "pnpm": {"-C", "--dir", "--filter", "-F", "--package"},
                 "yarn": {"-p", "--package", "--cwd"},
                 "npm": {"-p", "--package", "-w", "--workspace", "--prefix"},
                 "coverage": {"--rcfile", "--source", "--omit", "--include", "--data-file",
                              "--concurrency", "--context"}}
RUNNER_STRINGS = {"npm": {"-c", "--call"}}


def base_name(word: str) -> str:
    return word.rsplit("/", 1)[-1] if "/" in word[:-1] else word


def _assignment(word: str) -> bool:
    return "=" in word and word.split("=", 1)[0].isidentifier()


def _interpreter(name: str) -> str:
    """"python" for `python3.12`, `pypy3`; "node", "ruby", "php"; else ""."""
    stem = name.rstrip("0123456789.")
    if stem in ("python", "pypy"):
        return "python"
    return stem if stem in ("node", "ruby", "php") else ""


def _unversion(package: str) -> str:
    """`jest@29` is `jest`, `@scope/cli@1` is `@scope/cli`."""
    at = package.rfind("@")
    return package[:at] if at > 0 else package


def skip_options(words: list[str], index: int, values: set[str],
             strings: set[str] = frozenset()) -> tuple[int, str | None]:
    """(index of the first word after the options at `index` and a `--`, the value of an
    option in `strings`: a shell command string the wrapper runs)."""
    while index < len(words):
        word = words[index]
        if word == "--":
            return index + 1, None
        if len(word) < 2 or word[0] not in "-+":
            return index, None
        name, _, attached = word.partition("=")
        if name in strings:
            if attached or "=" in word:
                return len(words), attached
            return len(words), words[index + 1] if index + 1 < len(words) else ""
        index += 2 if word in values else 1
    return index, None


SCRIPT_VALUES = {"-t", "--timing", "-I", "--log-in", "-O", "--log-out", "-B", "--log-io",
                 "-T", "--log-timing", "-E", "--echo", "-m", "--logging-format"}


def _script_command(words: list[str], index: int) -> str | None:
    """The command string of `script`'s `-c`/`--command` (also in a cluster: `-qec`), or None
    when it runs none (an interactive shell)."""
    while index < len(words) and words[index][:1] == "-" and words[index] != "--":
        option = words[index]
        if option.startswith("--command="):
            return option.split("=", 1)[1]
        if option == "--command" or (option[:2] != "--" and "c" in option[1:]):
            return words[index + 1] if index + 1 < len(words) else ""
        index += 2 if option in SCRIPT_VALUES else 1
    return None


def _strip(words: list[str]) -> tuple[list[str], list[str], bool]:
    """(the command the words run, wrappers and assignments stripped, its first word by base
    name; the shell command strings they run; whether a shell reads commands from stdin)."""
    strings: list[str] = []
    index = 0
    while index < len(words):
        word = words[index]
        name = base_name(word)
        if word in KEYWORDS or _assignment(word):
            index += 1
            continue
        if name == "command":
            after, _ = skip_options(words, index + 1, set())
            if any(w in ("-v", "-V") for w in words[index + 1:after]):
                break  # a lookup, not a run
            index = after
        elif name in WRAPPERS:
            values, positional, takes_string = WRAPPERS[name]
            after, string = skip_options(words, index + 1, values, takes_string)
            if string is not None:
                strings.append(" ".join([string, *words[after:]]))
                return [], strings, False
            if name == "su":  # `su [USER] -c STRING`; `su USER` alone: a login shell
                for flag in ("-c", "--command"):
                    if flag in words[after:-1]:
                        strings.append(words[words.index(flag, after) + 1])
                return [], strings, False
            index = after + positional
        elif name in EVALUATORS:
            after, _ = skip_options(words, index + 1, EVALUATORS[name])
            strings.append(" ".join(words[after:]))
            return [], strings, False
        elif name == "script" and _script_command(words, index + 1) is not None:
            # util-linux `script -qec CMD FILE`: CMD runs under a terminal of its own.
            strings.append(_script_command(words, index + 1) or "")
            return [], strings, False
        elif name in SHELLS:
            after = index + 1
            while after < len(words) and words[after][:1] in ("-", "+") and \
                    words[after] not in ("-", "--"):
                option = words[after]
                if option[:2] != "--" and "c" in option[1:]:  # `-c`, `-lc`, `-ec`
                    strings.append(words[after + 1] if after + 1 < len(words) else "")
                    return [], strings, False
                if option == "-s":
                    return [name], strings, True
                after += 2 if option in SHELL_VALUES else 1
            after += words[after:after + 1] == ["--"]
            if after >= len(words):
                return [name], strings, True
            words, index = [base_name(words[after]), *words[after + 1:]], 0  # a script
            continue
        elif _interpreter(name):
            kind = _interpreter(name)
            after = index + 1
            module = None
            while after < len(words) and words[after][:1] == "-" and words[after] != "-":
                option = words[after]
                if kind == "python" and option[:2] != "--" and "m" in option[1:]:
                    rest = option[option.index("m", 1) + 1:]
                    module, after = (rest, after + 1) if rest else \
                        (words[after + 1] if after + 1 < len(words) else "", after + 2)
                    break
                if option in INTERPRETER_CODE[kind] or \
                        (kind == "python" and option[:2] != "--" and "c" in option[1:]):
                    code = words[after + 1] if after + 1 < len(words) else ""
                    if "clavain" in code:  # the launcher's own `-c 'from clavain.cli import main…'`
                        return ["clavain", *words[after + 2:]], strings, False
                    return [name, *words[after:]], strings, False
                if option == "--test":
                    return [name, *words[after:]], strings, False  # `node --test`
                after += 2 if option in INTERPRETER_VALUES[kind] else 1
            if module is not None:
                words, index = [module, *words[after:]], 0
                continue
            if after >= len(words) or words[after] == "-":
                break
            script = base_name(words[after])
            if kind == "node":
                for suffix in (".js", ".cjs", ".mjs"):
                    script = script.removesuffix(suffix)
            words, index = [script, *words[after + 1:]], 0
            continue
        elif name in EXECUTORS:
            values, takes_string = EXECUTORS[name]
            after, string = skip_options(words, index + 1, values, takes_string)
            if string is not None:
                strings.append(string)
                return [], strings, False
            if after >= len(words):
                break
            words, index = [_unversion(words[after]), *words[after + 1:]], 0
            continue
        elif name in RUNNERS:
            runner = _runner(name, words, index)
            if runner is None:
                break
            kind, after = runner
            values = RUNNER_VALUES.get(name, set())
            if kind == "after--":
                after = words.index("--", after) + 1 if "--" in words[after:] else after
            elif kind == "dir":
                after += 1
            else:
                after, string = skip_options(words, after, values, RUNNER_STRINGS.get(name, set()))
                if string is not None:
                    strings.append(string)
                    return [], strings, False
            if after >= len(words):
                break
            target = words[after]
            if kind == "run" and target in ("-m", "--module", "-s", "--script"):
                after, target = after + 1, words[after + 1] if after + 1 < len(words) else ""
            if kind == "script" and is_test_script(target):
                return [name, "run", target, *words[after + 1:]], strings, False
            words = [_unversion(target) if kind == "package" else target, *words[after + 1:]]
            index = 0
            continue
        else:
            break
    command = words[index:]
    if command:
        command[0] = base_name(command[0])
    return command, strings, False


def _runner(name: str, words: list[str], index: int) -> tuple[str, int] | None:
    """(kind, index after the subcommand) of `uv run`, `uv --directory x run`, … else None."""
    start, _ = skip_options(words, index + 1, RUNNER_VALUES.get(name, set()) | GLOBAL_VALUES)
    for sub, kind in RUNNERS[name]:
        if tuple(words[start:start + len(sub)]) == sub:
            return kind, start + len(sub)
    return None


def is_test_script(name: str) -> bool:
    """A package or project script that runs tests: `test`, `tests`, `test:unit`, `unit:test`."""
    return name in TEST_SCRIPTS or name.startswith(("test:", "test-", "test_", "tests:")) or \
        name.endswith((":test", ":tests"))


Command = tuple[list[str], list[str]]  # (words, paths its redirections write)
_LAST: list = [None, None]  # the last command read: describe() asks four questions of one


def read_parts(command: str, depth: int = 0) -> list[tuple[str, list[Command]]]:
    """(part, its simple commands: its own, then those it runs inside) for each part."""
    if depth == 0 and _LAST[0] == command:
        return _LAST[1]
    parts: list[tuple[str, list[Command]]] = []
    fed = ""  # what the previous part writes to a pipe: a heredoc, `echo`'s words
    for part, body in split(command):
        words, writes, nested, here = tokens(part)
        own, strings, reads_stdin = _strip(words)
        if reads_stdin and (here or body or fed):
            strings += here or [body or fed]
            own = []  # the shell runs what it reads, and that is read below
        found: list[Command] = [(own, writes)]
        found += [(_strip(inner)[0], []) for inner in find_exec(own)]
        if depth < MAX_DEPTH:
            for text in strings + nested:
                if text.strip():
                    found += [c for _, inner in read_parts(text, depth + 1) for c in inner]
        parts.append((part, found))
        said = [w for w, _ in found if w[:1] in (["echo"], ["printf"])][:1]
        fed = body or " ".join(_echoed(said[0][1:])).replace("\\n", "\n") if said else body
    if depth == 0:
        _LAST[:] = [command, parts]
    return parts


def _echoed(arguments: list[str]) -> list[str]:
    """The words `echo` (or `printf`) writes: its own leading options (`-n`, `-e`) left out,
    every later word kept, dashes and all (`echo clavain … --from-prompt | sh`)."""
    index = 0
    while index < len(arguments) and arguments[index][:1] == "-" and arguments[index] != "-":
        index += 1
    return arguments[index:]


# A command `find -exec` runs is read up to this many words: real ones are short, and a nested
# `find -exec find -exec …` must not cost quadratic time on the hook's path.
EXEC_WORDS = 64


def find_exec(words: list[str]) -> list[list[str]]:
    """The commands `find … -exec CMD {} ;` runs, each read once (linear in the words)."""
    if words[:1] != ["find"]:
        return []
    runs = []
    index = 1
    while index < len(words):
        if words[index] in ("-exec", "-execdir", "-ok", "-okdir"):
            end = index + 1
            while end < len(words) and words[end] not in (";", "+"):
                end += 1
            runs.append(words[index + 1:min(end, index + 1 + EXEC_WORDS)])
            index = end
        index += 1
    return runs


def simple_commands(command: str) -> list[list[str]]:
    """Every simple command `command` runs, as words, wrappers stripped: the one reading of a
    command that the test counter, the change check and the budget-lifting check share."""
    return [list(words) for _, found in read_parts(command) for words, _ in found]
