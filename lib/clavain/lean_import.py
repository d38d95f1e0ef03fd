"""Standard library modules imported without the dependencies a hook never reaches.

A hook is a fresh `python -I -S` per call, so import time is most of what it costs (issue 37).
Two modules the hooks need import far more than the hooks use:
- `_sqlite3` imports `functools` (and with it `collections`, `itertools`, `operator` …) for
  one name, `lru_cache`, its statement cache;
- `pathlib` imports `re` (with `enum`), `fnmatch` and `urllib.parse` (with `ipaddress`), about
  half of a bare interpreter's start, for `glob`, `match` and `as_uri`, which no hook calls.
Such a module is imported here while those dependencies are stood in for. A stand-in imports
the real module on the first name looked up in it, so a stand-in that is used behaves as the
real module, only later; `functools`' stand-in holds the real `lru_cache` C wrapper, which the
import itself calls. The stand-ins leave `sys.modules` as soon as the import is done, so any
later `import re` gets the real module. Only a module not imported yet is stood in for, so a
process that has `re` already (every CLI command) imports as usual. Another thread importing a
stood-in module meanwhile would get the stand-in (which behaves as the module, but is not the
same object): the hooks and `store.db` import before any thread starts. Stdlib only; nothing
here imports more than `sys` and C modules.
"""

from __future__ import annotations

import sys

_Module = type(sys)


class _StandIn(_Module):
    """A module not imported yet: the first name looked up in it imports the real one."""

    def __getattr__(self, name: str) -> object:
        if name.startswith("__"):
            raise AttributeError(name)
        value = getattr(_real(self), name)
        setattr(self, name, value)  # looked up once
        return value


def _real(stand_in: _StandIn) -> object:
    name = stand_in.__name__
    if sys.modules.get(name) is stand_in:  # looked up during the import it stands in for
        del sys.modules[name]
    __import__(name)
    return sys.modules[name]


def _deferred_function(module: str, name: str):
    """`name` from `module` for a `from module import name` in the import: the module is
    imported at the first call."""

    def call(*args, **kwargs):
        __import__(module)
        return getattr(sys.modules[module], name)(*args, **kwargs)

    call.__name__ = name
    return call


def _lru_cache(maxsize=128, typed=False):  # functools.lru_cache's signature
    if callable(maxsize):  # used bare: @lru_cache
        return _cached(maxsize, 128, typed)
    return lambda function: _cached(function, maxsize, typed)


def _cached(function, maxsize, typed):
    """What `functools.lru_cache` returns, from the same C wrapper: `cache_info()` is a plain
    tuple (hits, misses, maxsize, currsize) rather than a named one."""
    from _functools import _lru_cache_wrapper

    wrapper = _lru_cache_wrapper(function, maxsize, typed, _cache_info)
    for name in ("__module__", "__name__", "__qualname__", "__doc__"):  # as update_wrapper
        setattr(wrapper, name, getattr(function, name, None))
    wrapper.__wrapped__ = function
    return wrapper


def _cache_info(hits: int, misses: int, maxsize: int | None, currsize: int) -> tuple:
    return (hits, misses, maxsize, currsize)


def import_without(name: str, deferred: dict[str, dict[str, object]]) -> object:
    """Import module `name` while each module in `deferred` (not imported yet) is a stand-in
    holding the names given for it; returns the module. A plain import when `name` is
    imported already or the lean one fails."""
    if name in sys.modules:
        return sys.modules[name]
    stand_ins = {}
    for module, names in deferred.items():
        if module not in sys.modules:
            stand_in = _StandIn(module)
            for attribute, value in names.items():
                setattr(stand_in, attribute, value)
            stand_ins[module] = sys.modules[module] = stand_in
    try:
        __import__(name)
    except Exception:
        sys.modules.pop(name, None)  # a half-run module; the plain import below runs it again
    finally:
        for module, stand_in in stand_ins.items():
            if sys.modules.get(module) is stand_in:
                del sys.modules[module]
    if name not in sys.modules:
        __import__(name)
    return sys.modules[name]


def _functools_stand_in() -> dict[str, object]:
    try:
        from _functools import _lru_cache_wrapper  # noqa: F401
    except ImportError:  # an interpreter without the C wrapper: the real functools
        return {}
    return {"functools": {"lru_cache": _lru_cache}}


def import_pathlib() -> object:
    """`pathlib`, without `re`, `fnmatch` and `urllib.parse` (with `ipaddress`) until a path
    globs, matches or becomes a URI, nor `warnings` until a deprecated method warns, nor the
    `operator` module around the C `attrgetter` its classes use. From Python 3.12, pathlib
    itself uses `functools` and `fnmatch` (3.13: `glob`) as it is imported: those stand-ins
    give way at once, and what is saved is `urllib.parse` and `ipaddress`."""
    quote = _deferred_function("urllib.parse", "quote_from_bytes")
    # Not `ntpath`: Python 3.13's PureWindowsPath hands it out (`.parser`), where a stand-in
    # would not be the module itself.
    deferred = {**_functools_stand_in(), "re": {}, "fnmatch": {}, "warnings": {},
                "urllib.parse": {"quote_from_bytes": quote}}
    try:  # the C `attrgetter` the `operator` module re-exports
        from _operator import attrgetter
    except ImportError:
        pass
    else:
        deferred["operator"] = {"attrgetter": attrgetter}
    return import_without("pathlib", deferred)


def import_sqlite_driver() -> object:
    """`_sqlite3` (the C driver), without `functools` beyond `lru_cache`."""
    return import_without("_sqlite3", _functools_stand_in())
