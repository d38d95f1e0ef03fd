"""A folder nobody may create files in, for tests of a read-only or full `.clavain/`.

Not root: the folder is made 0555 and its files 0444, as a person's `chmod` would. Root writes
through modes, so there the folder gets the immutable attribute (`chattr +i`): no file can be
created in it, by root either — the database's `-shm` included. Where neither works (root
without CAP_LINUX_IMMUTABLE, a file system without attributes) the test is skipped with the
reason.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest


@contextlib.contextmanager
def unwritable(folder: Path) -> Iterator[None]:
    if os.geteuid() != 0:
        modes = {path: stat.S_IMODE(path.stat().st_mode) for path in folder.iterdir()
                 if path.is_file()}
        folder_mode = stat.S_IMODE(folder.stat().st_mode)
        for path in modes:
            path.chmod(0o444)
        folder.chmod(0o555)
        try:
            yield
        finally:
            folder.chmod(folder_mode)
            for path, mode in modes.items():
                path.chmod(mode)
        return
    chattr = shutil.which("chattr")
    made = subprocess.run([chattr, "+i", str(folder)], capture_output=True, text=True) \
        if chattr else None
    if made is None or made.returncode != 0:
        why = made.stderr.strip() if made is not None else "no chattr on the PATH"
        pytest.skip(f"running as root, where chmod does not stop writes, and `chattr +i` is "
                    f"unavailable here ({why})")
    try:
        probe = folder / ".probe"
        with contextlib.suppress(OSError):
            probe.touch()
            probe.unlink()
            pytest.fail(f"{folder} is still writable after chattr +i")
        yield
    finally:
        subprocess.run([chattr, "-i", str(folder)], check=True)
