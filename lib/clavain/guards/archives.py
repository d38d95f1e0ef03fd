"""What `patch`, `git apply`, `tar -x` and `unzip` would write, read from their input: the file
names in a patch (`---`/`+++`/`diff --git` lines) and an archive's members (and where its links
point). The words of such a command name none of what it writes, so the hook reads the file
itself, bounded (PATCH_MAX_BYTES, ARCHIVE_MAX_BYTES, MEMBERS_MAX) and without blocking (a FIFO
is never opened for reading). A patch or an archive that cannot be read is not judged here:
hard mode covers it. Imported only for such a command; stdlib only.
"""

from __future__ import annotations

import os

PATCH_MAX_BYTES = 4 << 20
ARCHIVE_MAX_BYTES = 256 << 20
MEMBERS_MAX = 20000
PATCH_VALUES = {"-i", "-d", "-p", "-o", "-r", "-B", "-Y", "-z", "-V", "-D", "-F", "-g",
                "--input", "--directory", "--strip", "--output", "--reject-file", "--prefix",
                "--basename-prefix", "--suffix", "--fuzz", "--get", "--ifdef",
                "--version-control", "--quoting-style"}
# `git apply` options that leave the working tree alone.
APPLY_NO_TREE = {"--cached", "--check", "--stat", "--numstat", "--summary", "--apply=false"}


def open_bounded(path: str, limit: int) -> bytes | None:
    """Up to `limit` bytes of a regular file (None: missing, not a regular file, too big)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except (OSError, ValueError):
        return None
    try:
        info = os.fstat(fd)
        if info.st_mode & 0o170000 != 0o100000 or info.st_size > limit:  # S_ISREG
            return None
        from clavain.fsutil import read_up_to

        return read_up_to(fd, limit)
    except OSError:
        return None
    finally:
        os.close(fd)


def patch_names(text: str) -> list[str]:
    """The file names a patch touches, as written in it (before any `-p` strip)."""
    names = []
    for line in text.splitlines():
        if line.startswith(("--- ", "+++ ", "*** ")):
            name = line[4:].split("\t", 1)[0].strip()
            if name:  # a context diff's hunk lines (`*** 1,4 ****`) land nowhere that matters
                names.append(name)
        elif line.startswith("diff --git "):
            rest = line[11:].split(" ")
            names += [rest[0], rest[-1]]
        elif line.startswith(("rename to ", "rename from ", "copy to ", "Index: ")):
            names.append(line.split(" ", 2)[-1].strip() if not line.startswith("Index")
                         else line[7:].strip())
    return [n.strip('"') for n in names if n and n.strip('"') != "/dev/null"]


def stripped(name: str, levels: int) -> str | None:
    """`name` with its first `levels` path parts taken off (`patch -pN`), None if none left."""
    parts = name.split("/")
    if levels >= len(parts):
        return None
    return "/".join(parts[levels:]) if levels else name


def patch_plan(words: list[str]) -> dict:
    """{"input", "dir", "strip", "writes"} of a `patch` command's words (`-i FILE`,
    `--input=FILE`, `-d DIR`, `-pN`, `patch ORIGFILE PATCHFILE`, `-o OUT`)."""
    plan: dict = {"input": None, "dir": None, "strip": None, "writes": []}
    positional = []
    index = 1
    while index < len(words):
        word = words[index]
        name, has_value, value = word.partition("=")
        if word in PATCH_VALUES and index + 1 < len(words):
            name, value, has_value = word, words[index + 1], "="
            index += 1
        elif word[:2] in ("-i", "-d", "-p", "-o") and len(word) > 2 and word[1] != "-":
            name, value, has_value = word[:2], word[2:], "="
        if has_value and name in ("-i", "--input"):
            plan["input"] = value
        elif has_value and name in ("-d", "--directory"):
            plan["dir"] = value
        elif has_value and name in ("-p", "--strip") and value.isdigit():
            plan["strip"] = int(value)
        elif has_value and name in ("-o", "--output"):
            plan["writes"].append(value)
        elif not word.startswith("-") or word == "-":
            positional.append(word)
        index += 1
    if positional:
        plan["writes"].append(positional[0])  # ORIGFILE: patched whatever the patch names
    if len(positional) > 1 and plan["input"] is None:
        plan["input"] = positional[1]
    return plan


def apply_plan(words: list[str]) -> dict | None:
    """The same for `git apply` (default `-p1`, `--directory=ROOT`), None when it does not
    touch the working tree (`--cached`, `--check`, `--stat`)."""
    after = words.index("apply") + 1 if "apply" in words else len(words)
    plan: dict = {"inputs": [], "dir": None, "strip": 1}
    index = after
    while index < len(words):
        word = words[index]
        if word in APPLY_NO_TREE:
            return None
        if word == "-p" and index + 1 < len(words) and words[index + 1].isdigit():
            plan["strip"] = int(words[index + 1])
            index += 1
        elif word.startswith("-p") and word[2:].isdigit():
            plan["strip"] = int(word[2:])
        elif word.startswith("--directory="):
            plan["dir"] = word.split("=", 1)[1]
        elif not word.startswith("-"):
            plan["inputs"].append(word)
        index += 1
    return plan


def tar_plan(words: list[str]) -> dict | None:
    """{"archive", "dir", "strip"} of a `tar` that extracts, else None."""
    first = words[1] if len(words) > 1 else ""
    old_style = bool(first) and first[0] != "-"
    letters = first if old_style else "".join(w[1:] for w in words[1:]
                                               if w[:1] == "-" and w[1:2] != "-")
    if "x" not in letters and not any(w in ("--extract", "--get") for w in words):
        return None
    plan: dict = {"archive": None, "dir": None, "strip": 0}
    index = 2 if old_style else 1
    if old_style:  # `tar xzf A -C D`: the bundle's value letters take the next words in order
        for letter in first:
            if letter in "fC" and index < len(words):
                plan["archive" if letter == "f" else "dir"] = words[index]
                index += 1
    while index < len(words):
        word = words[index]
        nxt = words[index + 1] if index + 1 < len(words) else None
        if word.startswith("--file=") or word.startswith("--directory="):
            plan["archive" if word[2] == "f" else "dir"] = word.split("=", 1)[1]
        elif word in ("--file", "--directory") and nxt is not None:
            plan["archive" if word[2] == "f" else "dir"] = nxt
            index += 1
        elif word.startswith("--strip-components=") and word[19:].isdigit():
            plan["strip"] = int(word[19:])
        elif word[:1] == "-" and word[1:2] != "-" and len(word) > 1:
            for at, letter in enumerate(word[1:], 1):
                if letter in "fC":
                    value = word[at + 1:] or nxt
                    plan["archive" if letter == "f" else "dir"] = value
                    if not word[at + 1:]:
                        index += 1
                    break
        index += 1
    return plan


def tar_members(path: str) -> list[tuple[str, str | None, bool]] | None:
    """(name, link target or None, hard link?) of each member, None when unreadable."""
    try:
        size = os.stat(path).st_size
    except (OSError, ValueError):
        return None
    if size > ARCHIVE_MAX_BYTES:
        return None
    raw = open_bounded(path, ARCHIVE_MAX_BYTES)
    if raw is None:
        return None
    import tarfile

    members = []
    try:
        with tarfile.open(fileobj=_Bounded(raw, TAR_SECONDS), mode="r:*") as archive:
            for member in archive:
                members.append((member.name, member.linkname if member.issym() or
                                member.islnk() else None, member.islnk()))
                if len(members) >= MEMBERS_MAX:
                    break
    except Exception:  # a damaged or unknown archive (tar refuses it), or one too slow to list
        return members or None
    return members


# Listing a compressed archive decompresses every member to skip it: a small file can hold
# gigabytes of zeros. The host gives a hook 10 s; past this the members seen so far are judged
# (what comes after them is hard mode's).
TAR_SECONDS = 2.0


class _Bounded:
    """The archive's bytes as a file tarfile reads, which stops it (TimeoutError) once
    `seconds` have passed: every read of compressed data passes here."""

    def __init__(self, raw: bytes, seconds: float) -> None:
        import io
        import time

        self._data, self._clock = io.BytesIO(raw), time.monotonic
        self._deadline = self._clock() + seconds

    def read(self, size: int = -1) -> bytes:
        if self._clock() > self._deadline:
            raise TimeoutError("the archive takes too long to list")
        return self._data.read(size)

    def seek(self, offset: int, whence: int = 0) -> int:
        return self._data.seek(offset, whence)

    def tell(self) -> int:
        return self._data.tell()


def zip_members(path: str) -> list[str] | None:
    """The member names of a zip archive, None when unreadable."""
    raw = open_bounded(path, ARCHIVE_MAX_BYTES)
    if raw is None:
        return None
    import io
    import zipfile

    try:
        with zipfile.ZipFile(io.BytesIO(raw)) as archive:
            return archive.namelist()[:MEMBERS_MAX]
    except Exception:
        return None
