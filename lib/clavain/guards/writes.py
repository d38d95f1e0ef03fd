"""Which words of a simple command name what it may write (its redirections aside): the one
answer the state-folder and settings checks ask, so that reading the state goes through and
only a write whose target lands there is refused.

A read writes nothing (`cat`, `sed` without `-i`, `python -m json.tool IN`), or only what an
option names (`sort -o FILE`, `uniq IN OUT`, `find -fprint FILE`, `json.tool IN OUT`). A copy
or an archive writes its destination (`cp -r SRC DEST`, `tar -czf OUT SRC`, `zip OUT SRC`,
`rsync SRC DEST`), its sources too when it removes them (`mv`, `--remove-files`, `zip -m`,
`rsync --remove-source-files`). Inline code (`python -c`, `node -e`) writes when its text says
so (`open(…, 'w')`, `write_text`, `unlink`, `sqlite3.connect`…): its string literals, and its
folder. Any other command may write every path it is given. Stdlib only, no regex.
"""

from __future__ import annotations

from clavain.guards.commands import _is_test, is_read, option_values, read_outputs

COPIES = {"cp", "install", "ln", "scp", "rsync"}  # the last argument is written
INTERPRETERS = {"python", "pypy", "node", "nodejs", "ruby", "php", "perl", "deno", "bun"}
CODE_OPTIONS = {"-c", "-e", "-p", "-r", "--eval", "--print"}
# What inline code calls to change a file: then its literals are where it writes.
# `sqlite3`/`connect(`: sqlite creates and writes the file it opens.
CODE_WRITES = ("write", "unlink", "os.remove", "rename", "os.replace", "rmtree", "mkdir",
               "rmdir", "sqlite3", "connect(", "shutil", "copyfile", "cpsync", "rmsync",
               "fs.rm", "truncate", "symlink", "link(", "link_to", "chmod", ".touch(",
               "appendfile", "fileutils", "file.delete", "o_wronly", "o_rdwr", "o_creat",
               "o_trunc", "o_append")
# What runs other code: it may write anything its literals name, but naming a program it runs
# (the plugin's own `bin/clavain`) is no write to it.
CODE_RUNS = ("subprocess", "os.system", "popen", "spawn", "os.exec", "exec(", "eval(",
             "__import__", "importlib", "child_process", "execsync", "system(")
# Writes to the terminal, not to a file.
CODE_PRINTS = ("stdout.write", "stderr.write", "process.stdout", "process.stderr")
OPEN_MODES = "wax+"


def written_words(words: list[str], patterns: list = ()) -> list[str]:
    """The words of `words` (a simple command, wrappers stripped) that may name a file it
    writes, creates or removes ([] for a read or a test run)."""
    if not words:
        return []
    name = words[0]
    code = code_of(words)
    if code is not None:
        return code_writes(code)
    if name in ("json.tool", "json_tool"):
        return _positional(words)[1:2]
    if name in ("sed", "gsed"):
        return _sed(words)
    if name in ("awk", "gawk", "mawk", "nawk"):
        return _awk(words)
    if name == "find":  # what it changes is what it finds (`find_rule`, by where it lands)
        return read_outputs(words) + (find_targets(words) if find_changes(words) else [])
    if is_read(words) or (patterns is not None and _is_test(words, list(patterns))):
        return read_outputs(words)
    args = _positional(words)
    if name in COPIES:
        if "--remove-source-files" in words:
            return args
        return args[-1:] + option_values(words, ("-t", "--target-directory"))
    if name in ("tar", "bsdtar", "gtar"):
        return _tar(words, args)
    if name == "zip":
        return args if _short(words, "m") or "--move" in words else args[:1]
    if name == "dd":
        return [w[3:] for w in words if w.startswith("of=")]
    if name == "tee":
        return args
    return [w.split("=", 1)[1] if w[:1] == "-" else w for w in words[1:]
            if w not in ("{}", "--", "-") and (w[:1] != "-" or "=" in w)]


def is_interpreter(name: str) -> bool:
    """`python3.12`, `pypy3`, `node`, … (not `phpunit` or `nodemon`)."""
    return name.rstrip("0123456789.") in INTERPRETERS


def _positional(words: list[str]) -> list[str]:
    return [w for w in words[1:] if not w.startswith("-") or w == "-"]


def _short(words: list[str], letter: str) -> bool:
    return any(w[:1] == "-" and w[1:2] != "-" and letter in w[1:] for w in words[1:])


def find_changes(words: list[str]) -> bool:
    """A `find` that changes what it finds: `-delete`, or an `-exec` (`-execdir`, `-ok`) of a
    command that is no read (a shell string counts: it may do anything)."""
    from clavain.guards.wrappers import _strip, find_exec

    return "-delete" in words or any(not run or not is_read(run)
                                     for run in (_strip(r)[0] for r in find_exec(words)))


def _sed(words: list[str]) -> list[str]:
    """`sed -i` writes its files; without it, only a `w FILE` command in its script writes."""
    scripts = option_values(words, ("-e", "--expression"))
    files = _positional(words)
    if not scripts and "-f" not in words and not any(w.startswith("--file") for w in words):
        scripts, files = files[:1], files[1:]
    in_place = any(w.startswith("--in-place") or (w[:1] == "-" and w[1:2] != "-" and "i" in w)
                   for w in words[1:])
    written = list(files) if in_place else []
    for script in scripts:  # `w FILE`, `s/a/b/w FILE`: the rest of the command is a file
        for command in script.replace(";", "\n").splitlines():
            command = command.strip()
            for at, char in enumerate(command):
                if char in "wW" and command[at + 1:at + 2] == " " and (
                        at == 0 or command[at - 1] in "/ 0123456789$}gpIiMme"):
                    written.append(command[at + 2:].strip())
                    break
    return written


def _awk(words: list[str]) -> list[str]:
    """awk reads, unless its program redirects or runs something (`print > FILE`,
    `system(…)`) or edits in place (`-i inplace`)."""
    program = next((w for w in words[1:] if not w.startswith("-")), "")
    if "inplace" in words or any(mark in program for mark in (">", "system", "|")):
        return [w for w in words[1:] if not w.startswith("-")] + literals(program)
    return []


def _tar(words: list[str], args: list[str]) -> list[str]:
    """tar writes its archive when it creates one (`-c`, `-r`, `-u`), its sources too with
    `--remove-files`; extracting is judged member by member (`archives.tar_members`)."""
    first = words[1] if len(words) > 1 else ""
    letters = first if first and first[0] != "-" else "".join(
        w[1:] for w in words[1:] if w[:1] == "-" and w[1:2] != "-")
    if "--remove-files" in words:
        return args
    archive = option_values(words, ("-f", "--file"))
    if not archive:  # `-czf OUT`: the value follows the cluster that holds `f`
        for index, word in enumerate(words[1:-1], 1):
            if ((word[:1] == "-" and word[1:2] != "-") or index == 1) and "f" in word:
                archive = [words[index + 1]]
                break
    creating = any(c in letters for c in "cru") or any(
        w in ("--create", "--append", "--update", "--concatenate") for w in words)
    if creating:
        return archive
    if any(c in letters for c in "xt") or any(w in ("--extract", "--get", "--list")
                                               for w in words):
        return []
    return args


def literals(code: str) -> list[str]:
    """The quoted strings of a piece of code (a path it names is one of them)."""
    found = []
    index = 0
    while index < len(code):
        quote = code[index]
        if quote in "'\"`":
            end = code.find(quote, index + 1)
            if end < 0:
                break
            found.append(code[index + 1:end])
            index = end + 1
        else:
            index += 1
    return found


def code_writes(code: str) -> list[str]:
    """Where inline code writes, if its text says it writes at all: its string literals and
    its own folder (`.`); [] for code that only reads."""
    low = code.lower()
    for printing in CODE_PRINTS:
        low = low.replace(printing, "")
    if any(mark in low for mark in CODE_WRITES + CODE_RUNS) or _opens_to_write(code):
        return [*literals(code), "."]
    return []


def only_runs(code: str) -> bool:
    """Inline code that runs other code but writes no file itself (`code_writes`)."""
    low = code.lower()
    for printing in CODE_PRINTS:
        low = low.replace(printing, "")
    return not any(mark in low for mark in CODE_WRITES) and not _opens_to_write(code)


def code_of(words: list[str]) -> str | None:
    """The inline code of a simple command (`python -c CODE`), else None."""
    if len(words) > 2 and is_interpreter(words[0]) and \
            words[1] in CODE_OPTIONS | {"-pe", "-ne"}:
        return words[2]
    return None


def _opens_to_write(code: str) -> bool:
    """An `open(…)` (`fs.openSync(…)`, perl's `open(F, ">x")`) whose mode writes."""
    low = code.lower()
    at = low.find("open")
    while at >= 0:
        call = low[at:at + 300]
        inside = call[call.find("(") + 1:] if "(" in call[:12] else ""
        inside = inside[:inside.find(")")] if ")" in inside else inside
        if "mode=" in inside.replace(" ", "") or ">" in inside or any(
                s and len(s) <= 4 and all(c in "rwabxt+u" for c in s) and
                any(c in OPEN_MODES for c in s) for s in literals(inside)):
            return True
        at = low.find("open", at + 4)
    return False


def inline_code(part: str) -> list[str]:
    """The code an interpreter in `part` runs from its command line (`python -c CODE`, `node
    -e CODE`), read from the part's own words: the word reader takes code that names Clavain
    for the launcher's (`python -c 'from clavain.cli import main…'`)."""
    if "-c" not in part and "-e" not in part and "-r" not in part:
        return []
    from clavain.guards.shell_words import tokens
    from clavain.guards.wrappers import base_name

    words = tokens(part)[0]
    return [words[at + 2] for at, word in enumerate(words[:-2])
            if is_interpreter(base_name(word)) and words[at + 1] in CODE_OPTIONS]


def find_targets(words: list[str]) -> list[str]:
    """What a removing `find` may reach: its start paths and the values of its name tests,
    but not those that leave a path out (`-path ./.clavain -prune`, `! -name …`)."""
    index = 1
    while index < len(words) and words[index][:1] not in ("-", "(", "!", ")"):
        index += 1
    targets = words[1:index]
    for at in range(index, len(words) - 1):
        if words[at] in ("-name", "-iname", "-path", "-ipath", "-wholename") and \
                words[at - 1] not in ("!", "-not") and words[at + 2:at + 3] != ["-prune"]:
            targets.append(words[at + 1])
    return targets
