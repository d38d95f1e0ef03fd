"""`lean_import` imports `pathlib`, `re` and the SQLite driver without the modules they load and
a hook never uses, and what it imports behaves as the plain import does (issue 37). Each check
runs in a fresh `python -I -S`, as a hook does: in this process everything is imported already."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

LIB = Path(__file__).resolve().parents[2] / "lib"
PRELUDE = "import sys; sys.path.insert(0, sys.argv[1])\nfrom clavain import lean_import\n"


def _run(code: str, *args: str) -> str:
    result = subprocess.run([sys.executable, "-I", "-S", "-c", PRELUDE + code, str(LIB), *args],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout


# What pathlib comes without. From Python 3.12 pathlib itself uses `functools` and `fnmatch`
# (3.13: `glob`, which compiles patterns) as it is imported: only `urllib.parse` is saved.
LEFT_OUT = (("re", "enum", "fnmatch", "functools", "collections", "warnings", "operator")
            if sys.version_info < (3, 12) else ()) + ("urllib.parse", "ipaddress")


def test_pathlib_comes_without_re_and_still_globs_matches_and_quotes(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("")
    (tmp_path / "b.txt").write_text("")
    out = _run(
        "lean_import.import_pathlib()\n"
        f"print(sorted(m for m in {LEFT_OUT!r} if m in sys.modules))\n"
        "from pathlib import Path, PureWindowsPath\n"
        "root = Path(sys.argv[2])\n"
        "print([p.name for p in sorted(root.glob('*.py'))], Path('x/y.py').match('*.py'))\n"
        "print(Path('/t/a b').as_uri(), PureWindowsPath('C:/a/b').parts)\n"
        "import re, functools, fnmatch\n"  # later imports get the real modules
        "print(type(re).__name__, re.sub('a+', 'b', 'caat'), functools.reduce.__name__,\n"
        "      fnmatch.fnmatch('x.py', '*.py'))\n", str(tmp_path))
    assert out.splitlines() == ["[]", "['a.py'] True", "file:///t/a%20b ('C:\\\\', 'a', 'b')",
                                "module cbt reduce True"]


def test_cpython_s_own_pathlib_tests_pass_on_the_lean_module() -> None:
    """The strongest check there is: the standard library's own tests of pathlib, run against
    pathlib as the hooks import it."""
    pytest.importorskip("test.test_pathlib")  # some distributions ship Python without them
    out = _run("lean_import.import_pathlib()\n"
               "assert 'urllib.parse' not in sys.modules  # the module under test is lean\n"
               "import unittest\n"
               "tests = unittest.defaultTestLoader.loadTestsFromName('test.test_pathlib')\n"
               "result = unittest.TextTestRunner(stream=sys.stderr, verbosity=0).run(tests)\n"
               "print(result.testsRun, len(result.failures) + len(result.errors))\n")
    ran, broken = map(int, out.split())
    assert ran > 100 and broken == 0


def test_a_stand_in_used_while_importing_gives_the_real_module(tmp_path: Path) -> None:
    (tmp_path / "probe_uses.py").write_text("import json\nTEXT = json.dumps([1, 'x'])\n")
    out = _run("sys.path.insert(0, sys.argv[2])\n"
               "probe = lean_import.import_without('probe_uses', {'json': {}})\n"
               "import json\n"
               "print(probe.TEXT, type(sys.modules['json']).__name__, probe.json.loads('2'))\n",
               str(tmp_path))
    assert out.split() == ['[1,', '"x"]', "module", "2"]


def test_an_import_that_fails_lean_is_done_plainly(tmp_path: Path) -> None:
    """A module that cannot work with a stand-in (here: it checks) is imported again the plain
    way, and no stand-in is left behind."""
    (tmp_path / "probe_refuses.py").write_text(
        "import json\nassert type(json).__name__ == 'module', 'a stand-in'\nOK = True\n")
    out = _run("sys.path.insert(0, sys.argv[2])\n"
               "probe = lean_import.import_without('probe_refuses', {'json': {}})\n"
               "print(probe.OK, type(sys.modules['json']).__name__)\n", str(tmp_path))
    assert out.split() == ["True", "module"]


def test_a_module_imported_already_is_returned_as_it_is() -> None:
    out = _run("import re, pathlib\n"
               "print(lean_import.import_pathlib() is pathlib, pathlib.re is re)\n")
    assert out.split() == ["True", "True"]
