"""Where a Bash command's writes land (`landing.judge`), read as words: each redirection target
and each word a changing command may write (`writes.written_words`), resolved against the
folder the command's own `cd`/`pushd`/`popd` chain leaves it in (`cd .claude/.` counts), and a
link an earlier `ln -s` of the same command makes.

Commands whose words do not name what they change are read for it: a removal or a move of the
state folder or of a folder holding it (`mv`, `rm -r`, `rmdir`, `rsync --delete`); git taking
it away (`git stash -u/-a`, `git clean -x`); `find` running a changing `-exec` or `-delete` on
what could be a state file; `patch`, `git apply`, `tar -x` and `unzip` (their input read:
`archives`); a hard link to a state file (`ln` without `-s`). What the words cannot show (a
folder named by `$(…)`, a path built at run time) is hard mode's. Stdlib only; no path is
resolved unless a command may write one.
"""

from __future__ import annotations

import os

from clavain.guards import landing
from clavain.guards.landing import HOLDS, STATE
from clavain.guards.writes import (
    code_of,
    code_writes,
    inline_code,
    is_interpreter,
    only_runs,
    written_words,
)

NULL_SINKS = {"/dev/null", "/dev/stdout", "/dev/stderr", "/dev/tty"}
REMOVERS = {"rm", "rmdir", "unlink", "mv", "trash", "trash-put", "srm", "shred", "gio"}
GIT_VALUES = {"-C", "-c", "--git-dir", "--work-tree", "--namespace", "--exec-path"}


class _Walk:
    """One command's walk: its folder (real, None once a `cd` cannot be read) and links."""

    def __init__(self, cwd: str, project: str, root: str) -> None:
        self.spelled, self.cwd, self.resolved = cwd, None, False
        self.project, self.root = project, root
        self.stack: list[str | None] = []
        self.links: list[tuple[str, str]] = []
        self.fed: list[str] = []  # the files a `cat` before this part printed
        self._places: dict | None = None

    @property
    def places(self) -> dict:
        if self._places is None:
            self._places = landing.places(self.project, self.root)
        return self._places

    def folder(self) -> str | None:
        if not self.resolved:
            self.cwd, self.resolved = landing.real(self.spelled), True
        return self.cwd

    def land(self, word: str) -> str | None:
        if "$" in word or "`" in word or not word:
            return None  # assembled at run time: hard mode's
        if any(mark in word for mark in "*?["):  # a glob: the folder its fixed part names
            head = word[:min(word.find(m) for m in "*?[" if m in word)]
            word = (head.rsplit("/", 1)[0] or "/") if "/" in head else "."
        return self.aliased(landing.land(word, self.folder()))

    def aliased(self, landed: str | None) -> str | None:
        """`landed` through the links this command made before (they are not on disk yet)."""
        for made, target in self.links:
            if landed and landing.under(landed, made):
                landed = target + landed[len(made):]
        return landed

    def judge(self, word: str, *, removing: bool = False, follow: bool = True) -> str | None:
        if word in NULL_SINKS:
            return None
        name = os.path.basename(word)
        if (removing or not follow) and name not in ("", ".", ".."):
            # `rm st`, `mv st x`: the link itself goes, not the folder it points to.
            folder = self.land(os.path.dirname(word) or ".")
            landed = os.path.join(folder, name) if folder else None
        else:
            landed = self.land(word)
        verdict = landing.judge(landed, self.places, removing=removing)
        if verdict == HOLDS:
            return STATE
        if verdict is None and landed and landing.same_inode_as_state(landed,
                                                                      self.places["root"]):
            return STATE
        return verdict

    def note_link(self, words: list[str]) -> None:
        """`ln -s TARGET NAME`: later words through NAME land where TARGET does."""
        args = [w for w in words[1:] if not w.startswith("-")]
        if len(args) < 2 or any(m in args[-2] for m in "$`"):
            return
        made = self.land(args[-1])
        if made and os.path.isdir(made):  # `ln -s T DIR/`: the link is made inside DIR
            made = os.path.join(made, os.path.basename(args[-2].rstrip("/")))
        target = landing.land(args[-2], os.path.dirname(made)) if made else None
        if made and target:
            self.links.append((made, target))

    def cd(self, words: list[str]) -> None:
        name = words[0]
        if name == "popd":
            self.cwd = self.stack.pop() if self.stack else None
            self.resolved = True
            return
        args = [w for w in words[1:] if not w.startswith("-") or w == "-"] or ["~"]
        if name == "pushd":
            self.stack.append(self.folder())
        target = args[0]
        # `cd -`, `cd "$(…)"`: a folder the words do not name; relative paths are then unknown.
        if target == "-" or "$" in target or "`" in target:
            self.cwd = None
        elif "-P" in words[1:] or ".." not in target.split("/"):
            self.cwd = self.land(target)
        else:  # the shell's `cd` takes `..` as written (`L/..` is here, wherever `L` leads)
            folder = self.folder()
            typed = os.path.join(folder, os.path.expanduser(target)) if folder else None
            self.cwd = self.land(os.path.normpath(typed)) if typed else None
        self.resolved = True


def lands(command: str, cwd: str, project: str, root: str, patterns: list) -> str | None:
    """Where the first write of `command` that no agent may make lands: landing.STATE,
    SETTINGS or PLUGIN; None when none does (or none can be read)."""
    from clavain.guards.wrappers import read_parts

    walk = _Walk(cwd, project, root)
    for part, found in read_parts(command):
        for code in inline_code(part):  # code naming Clavain is read as the launcher's
            verdict = _code_lands(walk, code)
            if verdict:
                return verdict
        for words, writes in found:
            for target in writes:
                verdict = walk.judge(target)
                if verdict:
                    return verdict
            if not words:
                continue
            if words[0] in ("cd", "pushd", "popd"):
                walk.cd(words)
                continue
            verdict = _special(walk, words, part, command)
            if verdict:
                return verdict
            code = code_of(words)
            if code is None and is_interpreter(words[0]) and words[1:2] in ([], ["-"]):
                code = _stdin_text(part, command, walk)  # `python3 <<EOF`, `node < x.js`
            if code is not None:
                verdict = _code_lands(walk, code)
                if verdict:
                    return verdict
                continue
            follow = words[0] not in REMOVERS  # `rm LINK` removes the link alone
            for target in written_words(words, patterns):
                verdict = walk.judge(target, follow=follow)
                if verdict:
                    return verdict
            if words[0] == "ln":
                walk.note_link(words)
        # `cat FILE | patch`: what the next part may read on stdin (a `&&` too: read more).
        walk.fed = [w for w in found[0][0][1:] if not w.startswith("-")] \
            if found and found[0][0][:1] == ["cat"] else []
    return None


def _code_lands(walk: _Walk, code: str) -> str | None:
    """Where inline code writes (`writes.code_writes`); code that only runs programs does not
    write the plugin by naming its `bin/clavain`."""
    runs = only_runs(code)
    for target in code_writes(code):
        verdict = walk.judge(target)
        if verdict and not (runs and verdict == landing.PLUGIN):
            return verdict
    return None


def _special(walk: _Walk, words: list[str], part: str, command: str) -> str | None:
    name = words[0]
    args = [w for w in words[1:] if not w.startswith("-")]
    if name in REMOVERS or (name == "rsync" and any(w.startswith("--del") for w in words)):
        removed = args[-1:] if name == "rsync" else args
        return _first(walk.judge(w, removing=True) for w in removed)
    if name == "rsync" and "--remove-source-files" in words:
        return _first(walk.judge(w, removing=True) for w in args[:-1])
    if name == "ln" and not any(w in ("-s", "--symbolic") or (
            w[:1] == "-" and w[1:2] != "-" and "s" in w) for w in words[1:]):
        sources = args[:-1] if len(args) > 1 else args
        return next((STATE for w in sources if landing.judge(walk.land(w), walk.places)
                     == STATE), None)
    if name == "git":
        return _git(walk, words, part, command)
    if name == "find":
        from clavain.guards.find_rule import reaches_state

        return STATE if reaches_state(walk, words) else None
    if name == "patch":
        from clavain.guards import archives

        plan = archives.patch_plan(words)
        return _patched(walk, plan["input"], plan["dir"], plan["strip"], part, command) or \
            _first(map(walk.judge, plan["writes"]))
    if name in ("tar", "bsdtar", "gtar"):
        return _extracted(walk, words, part)
    if name == "unzip":
        return _unzipped(walk, words)
    return None


def _first(verdicts) -> str | None:
    return next((verdict for verdict in verdicts if verdict), None)


def _git(walk: _Walk, words: list[str], part: str, command: str) -> str | None:
    from clavain.guards.wrappers import skip_options

    at, _ = skip_options(words, 1, GIT_VALUES)
    sub, rest = (words[at] if at < len(words) else ""), words[at + 1:]
    short = "".join(w[1:] for w in rest if w[:1] == "-" and w[1:2] != "-")
    if sub == "stash" and (rest[:1] in ([], ["push"], ["save"]) or rest[0].startswith("-")) \
            and ({"--include-untracked", "--all"} & set(rest) or "u" in short or "a" in short):
        return STATE  # untracked files go into the stash: the state folder with them
    if sub == "clean" and ("x" in short or "X" in short):
        return STATE
    if sub == "apply":
        from clavain.guards import archives

        plan = archives.apply_plan(words)
        if plan is None:
            return None
        for source in plan["inputs"] or [None]:
            verdict = _patched(walk, source, plan["dir"], plan["strip"], part, command,
                               also=walk.project)
            if verdict:
                return verdict
    return None


def _stdin_text(part: str, command: str, walk: _Walk) -> str | None:
    """What a command reads on stdin when the words show it: a `< FILE` or a heredoc."""
    from clavain.guards import archives

    at = part.find("<")
    while at >= 0 and part[at + 1:at + 2] in ("<", "("):
        at = part.find("<", at + 3)
    if at >= 0:
        from clavain.guards.shell_words import tokens

        words = tokens(part[at + 1:])[0]
        landed = walk.land(words[0]) if words else None
        raw = archives.open_bounded(landed, archives.PATCH_MAX_BYTES) if landed else None
        return raw.decode("utf-8", "replace") if raw is not None else None
    if "<<" in part:
        from clavain.guards.shell_words import split

        return next((body for text, body in split(command) if text == part), None)
    landed = walk.land(walk.fed[0]) if walk.fed else None
    raw = archives.open_bounded(landed, archives.PATCH_MAX_BYTES) if landed else None
    return raw.decode("utf-8", "replace") if raw is not None else None


# Where a command reads a patch or an archive from its standard input.
STDIN_NAMES = (None, "-", "/dev/stdin", "/dev/fd/0", "/proc/self/fd/0")


def _patched(walk: _Walk, source: str | None, directory: str | None, strip: int | None,
             part: str, command: str, also: str | None = None) -> str | None:
    """The first place a patch's files land that no agent may write."""
    from clavain.guards import archives

    if source in STDIN_NAMES:
        text = _stdin_text(part, command, walk)
    else:
        landed = walk.land(source)
        raw = archives.open_bounded(landed, archives.PATCH_MAX_BYTES) if landed else None
        text = raw.decode("utf-8", "replace") if raw is not None else None
    if not text:
        return None
    bases = [walk.land(directory) if directory else walk.folder()]
    if also:
        bases.append(landing.real(also))
    for name in archives.patch_names(text):
        levels = [strip] if strip is not None else range(name.count("/") + 1)
        for level in levels:
            path = archives.stripped(name, level)
            for base in bases:
                if path is None or base is None:
                    continue
                verdict = landing.judge(landing.land(path, base), walk.places)
                if verdict:
                    return STATE if verdict == HOLDS else verdict
    return None


def _extracted(walk: _Walk, words: list[str], part: str) -> str | None:
    from clavain.guards import archives

    plan = archives.tar_plan(words)
    if plan is None:
        return None
    archive = plan["archive"]
    if archive in STDIN_NAMES:
        at = part.find("<")
        from clavain.guards.shell_words import tokens

        follows = tokens(part[at + 1:])[0] if at >= 0 and part[at + 1:at + 2] != "<" else []
        archive = follows[0] if follows else (walk.fed[0] if walk.fed else None)
    landed = walk.land(archive) if archive else None
    members = archives.tar_members(landed) if landed else None
    if not members:
        return None
    base = walk.land(plan["dir"]) if plan["dir"] else walk.folder()
    if base is None:
        return None
    for name, link, hard in members:
        name = archives.stripped(name.lstrip("/"), plan["strip"])
        if name is None:
            continue
        dest = walk.aliased(landing.land(name, base))
        verdict = landing.judge(dest, walk.places)
        if not verdict and link is not None and dest is not None:
            start = base if hard else os.path.dirname(dest)
            target = walk.aliased(landing.land(link.lstrip("/") if hard else link, start))
            verdict = landing.judge(target, walk.places)
            if not hard and target:  # a later member may be written through this link
                walk.links.append((dest, target))
        if verdict:
            return STATE if verdict == HOLDS else verdict
    return None


def _unzipped(walk: _Walk, words: list[str]) -> str | None:
    from clavain.guards import archives

    args = [w for w in words[1:] if not w.startswith("-")]
    directory = words[words.index("-d") + 1] if "-d" in words[:-1] else None
    if directory in args:
        args.remove(directory)
    landed = walk.land(args[0]) if args else None
    members = archives.zip_members(landed) if landed else None
    base = walk.land(directory) if directory else walk.folder()
    for name in members or []:
        verdict = landing.judge(landing.land(name.lstrip("/"), base), walk.places) \
            if base else None
        if verdict:
            return STATE if verdict == HOLDS else verdict
    return None
