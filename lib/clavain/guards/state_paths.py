"""Whether a path or a Bash command reaches Clavain's state folder (`.clavain/`) beyond the
agents' own folders: the one answer the PreToolUse hook's "state changes only through the CLI"
deny asks, for the edit tools' paths and for Bash commands read as words.

A name is matched after quotes and escapes are resolved, case-insensitively (a case-insensitive
file system opens `.CLAVAIN/` too), as any path part: `.clavain` itself, a glob or brace pattern
that could match it (`.cla*`, `.clav?in`, `.cla{v,}ain`), or the start of the name left for a
variable to finish (`d=.clav; cd ${d}ain`). A command that only reads may name it (`sed -n`,
`cp -r .clavain/verdicts /tmp/x`); one that writes into it, or `cd`s into it and writes, does
not: what a command writes is `writes.written_words`'s answer. This is the spelling check;
where a write lands on disk (a link, `..`, a hard link, a patch's files) is
`command_landing`'s, and the hook asks both.
Stdlib only; `fnmatch` (which imports `re`) only for a word with a pattern in it.
"""

from __future__ import annotations

import os

STATE_NAME = ".clavain"
# The state folder's parts an agent works in: the handoff note, a parallel runner's worktree.
AGENT_FOLDERS = (".clavain/scratch", ".clavain/worktrees/")
SEPARATORS = "/=:,"


def _parts(word: str) -> list[str]:
    if "\\" in word:  # `$'\x2e…'`: ANSI-C escapes the word reader leaves as they are
        try:  # noqa: SIM105 - contextlib is one more import on every tool call
            word = word.lstrip("$").encode("utf-8", "replace").decode("unicode_escape")
        except (UnicodeDecodeError, ValueError):
            pass
    while "{" in word and "}" in word.split("{", 1)[1]:  # a brace list may spell the name
        head, rest = word.split("{", 1)
        word = head + "*" + rest.split("}", 1)[1]
    for mark in SEPARATORS[1:]:
        word = word.replace(mark, "/")
    return [part for part in word.replace("\\", "/").lower().split("/") if part]


def _part_names_state(part: str) -> bool:
    if part == STATE_NAME:
        return True
    if _fragment(part):  # a variable may finish the name
        return True
    # Without `dotglob` a pattern reaches a dot-file only if it starts with the dot itself.
    if part.startswith(".") and any(mark in part for mark in "*?["):
        import fnmatch

        return fnmatch.fnmatchcase(STATE_NAME, part)
    return False


def _fragment(part: str) -> bool:
    return 5 <= len(part) < len(STATE_NAME) and STATE_NAME.startswith(part)


def names_state(word: str) -> bool:
    """Whether a path (or a word that may be one) reaches the state folder outside the agents'
    folders. A `..` after an agents' folder may climb back out, and a link planted there may
    lead elsewhere in the state folder: both count."""
    if not any(_part_names_state(part) for part in _parts(word)):
        return False
    return not _in_agent_folder(word)


def _in_agent_folder(word: str) -> bool:
    path = word.replace("\\", "/")
    for folder in AGENT_FOLDERS:
        at = path.find(folder)
        if at < 0:
            continue
        rest = path[at + len(folder):]
        if ".." in rest:
            return False
        if _real_path_leaves(path, at):
            return False
        return rest == "" or rest.startswith("/") or folder.endswith("/")
    return False


def _real_path_leaves(path: str, at: int) -> bool:
    """A link planted in an agents' folder (`.clavain/scratch/up -> ..`) turns a write there
    into one beside the checkpoint: the path is resolved on disk."""
    real = os.path.realpath(path).replace("\\", "/")
    return "/.clavain" in real and not any("/" + folder in real + "/" for folder in AGENT_FOLDERS)


def writes_state(command: str, patterns: list = ()) -> bool:
    """Whether a Bash command may change the state folder, by the spelling of what it writes
    (module docstring; where a write lands is `command_landing`'s)."""
    low = command.lower()
    if "clav" not in low and "$'" not in command and not any(m in command for m in "*?[{"):
        return False  # the common call: nothing that could name the folder
    from clavain.guards.commands import may_change_files
    from clavain.guards.wrappers import read_parts
    from clavain.guards.writes import code_writes, inline_code, written_words

    spaced = _unquoted(command)
    for mark in " ;()[]\n\t|&<>":
        spaced = spaced.replace(mark, "/")
    parts = _parts(spaced)
    if "$'" not in command and not any(_part_names_state(part) for part in parts):
        return False
    inside = False  # after a `cd` into the state folder, every write lands there
    agents = False  # after a `cd` into an agents' folder, a `..` climbs back into it
    for part, found in read_parts(command):
        # Code the reader does not split into words (`python -c '…'`, `node -e`) may still
        # name the folder in its text: such a part that changes anything counts.
        hidden = _text_names_state(part) and not any(
            names_state(w) for words, writes in found for w in words[1:] + writes)
        if hidden and (any(written_words(words, patterns) for words, _ in found) or
                       any(code_writes(code) for code in inline_code(part))):
            return True
        for words, writes in found:
            if any(names_state(target) for target in writes):
                return True
            if not words:
                continue
            first = os.path.basename(words[0])
            if first == "ln" and any(_part_names_state(part) for w in words[1:]
                                     for part in _parts(w)):
                # A link anywhere in the folder (even an agents' one: `ln -s .. .clavain/
                # scratch/up`) lets a later write there land beside the checkpoint.
                return True
            if first in ("cd", "pushd"):
                inside = inside or any(names_state(w) for w in words[1:])
                agents = agents or any(STATE_NAME in _parts(w) for w in words[1:])
                continue
            # A read names what it reads; only what a command writes counts (`writes`).
            targets = written_words(words, patterns)
            if (inside and (targets or writes)) or any(names_state(w) for w in targets):
                return True
            # `ln -s ../typed t` from an agents' folder: any word climbing out counts.
            if agents and (targets or writes) and any(".." in w for w in words[1:] + writes):
                return True
    # What the words do not show: a variable assembled from a piece of the name.
    return (("$" in command or "`" in command) and any(_fragment(part) for part in parts)
            and may_change_files(command, []))


def _text_names_state(text: str) -> bool:
    for mark in "()[];,'\"":
        text = text.replace(mark, " ")
    return any(names_state(token) for token in text.split() if "clav" in token.lower())


def _unquoted(command: str) -> str:
    return command.replace('"', "").replace("'", "").replace("\\", "")


# Claude Code's own settings in a project: its hooks (Clavain's among them), permissions and
# sandbox. An agent that edits them can turn the hooks or the sandbox off.
HOST_FOLDER = ".claude"
HOST_SETTINGS = ("settings.json", "settings.local.json")


def _matches(name: str, part: str) -> bool:
    if part == name:
        return True
    if name.startswith(".") and not part.startswith("."):
        return False
    if any(mark in part for mark in "*?["):
        import fnmatch

        return fnmatch.fnmatchcase(name, part)
    return False


def names_host_settings(word: str, *, inside: bool = False) -> bool:
    """Whether a path is Claude Code's project settings (`.claude/settings[.local].json`,
    any spelling or pattern of it); `inside`: the path is relative to a `.claude` folder."""
    parts = _parts(word)
    if inside and parts and any(_matches(name, parts[0]) for name in HOST_SETTINGS):
        return True
    return any(_matches(HOST_FOLDER, parts[i]) and any(_matches(name, parts[i + 1])
                                                       for name in HOST_SETTINGS)
               for i in range(len(parts) - 1))


def writes_host_settings(command: str, patterns: list = ()) -> bool:
    """Whether a Bash command may change Claude Code's project settings, by their spelling."""
    low = command.lower()
    if "settings" not in low and not any(m in command for m in "*?[{"):
        return False  # the common call
    from clavain.guards.wrappers import read_parts
    from clavain.guards.writes import written_words

    inside = False
    for _, found in read_parts(command):
        for words, writes in found:
            if any(names_host_settings(t, inside=inside) for t in writes):
                return True
            if not words:
                continue
            if os.path.basename(words[0]) in ("cd", "pushd"):
                inside = inside or any(_matches(HOST_FOLDER, _last_part(w)) for w in words[1:])
                continue
            if any(names_host_settings(w, inside=inside)
                   for w in written_words(words, patterns)):
                return True
    return False


def _last_part(word: str) -> str:
    """The folder a `cd` word ends in, `.` and `..` taken as the shell does (`.claude/.`)."""
    kept: list[str] = []
    for part in _parts(word):
        if part == "..":
            kept = kept[:-1]
        elif part != ".":
            kept.append(part)
    return kept[-1] if kept else ""
