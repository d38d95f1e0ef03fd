"""Named queries: every statement the workgraph store runs, found by name in one place per
backend and called by name.

`store/queries/sqlite/<group>.sql` holds each group's SQLite text; `store/queries/postgresql/
<group>.sql` holds the PostgreSQL text of only the queries that differ, written as psycopg takes
it (`%s`, `%(name)s`). A query named `claims.next_unowned` is the block after `-- name:
next_unowned` in the `claims.sql` files; the comment lines right after the name say what it
does. A block with no statement means "nothing to run on this backend" (a lock SQLite's single
writer already holds): `run` then returns an empty result.

A group is read and checked once per process, when its first query is run: every name once,
every PostgreSQL block naming a query of the SQLite file, and the SQLite text of a query with no
PostgreSQL block translated once to psycopg's placeholders (`?` → `%s`, `:name` → `%(name)s`).
Statements then run as they were loaded: nothing is rewritten per call.

Cheap enough for a hook that needs a group (the status line's questions, the typed-once
records): os only, one small file parsed on first use. The budget guards' own SQL (every tool
call, the SQLite state file only) stays beside its code in `guards/`.
"""

from __future__ import annotations

import os

TYPE_CHECKING = False  # `typing` costs the status line ~2 ms a refresh (`statusline._questions`)
if TYPE_CHECKING:
    from typing import Any

QUERIES_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "queries")
BACKENDS = ("sqlite", "postgresql")
_NAME_MARK = "-- name:"

_loaded: dict[tuple[str, str], dict[str, str]] = {}  # (backend, group) → {name: text}


class QueryError(LookupError):
    """A query name no group defines, or a query file that does not check out."""


def backend_of(conn: Any) -> str:
    """"sqlite" or "postgresql": which backend's text `conn` runs."""
    return getattr(conn, "dialect", "sqlite")


def run(conn: Any, name: str, params: Any = ()) -> Any:
    """Run the query `name` ("group.query") on `conn` with bound `params` (a sequence for `?`,
    a mapping for `:name`); its cursor, or an empty result where the backend has nothing to
    run."""
    statement = text(name, backend_of(conn))
    return conn.execute(statement, params) if statement else _NOTHING


def run_many(conn: Any, name: str, rows: Any) -> None:
    """Run the query `name` once per parameter row in `rows`."""
    statement = text(name, backend_of(conn))
    if statement:
        conn.executemany(statement, rows)


def text(name: str, backend: str = "sqlite") -> str:
    """The statement `name` runs on `backend`, as loaded ("" where it has nothing to run)."""
    group, dot, query = name.partition(".")
    if not dot or not query:
        raise QueryError(f"query name {name!r} is not 'group.query'")
    queries = _loaded.get((backend, group))
    if queries is None:
        queries = _load_group(group, backend)
    try:
        return queries[query]
    except KeyError:
        raise QueryError(f"no query {query!r} in {_path('sqlite', group)}") from None


def names(group: str) -> list[str]:
    """Every query of `group`, as "group.query", in file order."""
    return [f"{group}.{query}" for query in _load_group(group, "sqlite")]


def groups() -> list[str]:
    return sorted(name[:-4] for name in os.listdir(os.path.join(QUERIES_DIR, "sqlite"))
                  if name.endswith(".sql"))


def _path(backend: str, group: str) -> str:
    return os.path.join(QUERIES_DIR, backend, f"{group}.sql")


def _load_group(group: str, backend: str) -> dict[str, str]:
    sqlite_path = _path("sqlite", group)
    try:
        with open(sqlite_path, encoding="utf-8") as handle:
            base = parse(handle.read(), sqlite_path)
    except FileNotFoundError:
        raise QueryError(f"no query group {group!r} ({sqlite_path})") from None
    _loaded[("sqlite", group)] = base
    if backend == "sqlite":
        return base
    pg_path = _path("postgresql", group)
    overrides: dict[str, str] = {}
    if os.path.exists(pg_path):
        with open(pg_path, encoding="utf-8") as handle:
            overrides = parse(handle.read(), pg_path)
    unknown = sorted(set(overrides) - set(base))
    if unknown:
        raise QueryError(f"{pg_path} names queries {sqlite_path} does not: "
                         f"{', '.join(unknown)}")
    from clavain.store.placeholders import to_psycopg

    queries = {name: overrides[name] if name in overrides else to_psycopg(statement)
               for name, statement in base.items()}
    _loaded[(backend, group)] = queries
    return queries


def parse(source: str, where: str = "<text>") -> dict[str, str]:
    """{name: statement} from a query file: blocks opened by `-- name: <name>`; the comment
    lines of a block are its description, not sent. Raises QueryError on a repeated name or
    text before the first name."""
    found: dict[str, str] = {}
    name: str | None = None
    lines: list[str] = []

    def close() -> None:
        if name is not None:
            found[name] = "\n".join(lines).strip().rstrip(";").strip()

    for number, line in enumerate(source.splitlines(), 1):
        stripped = line.strip()
        if stripped.startswith(_NAME_MARK):
            close()
            name, lines = stripped[len(_NAME_MARK):].strip(), []
            if not name.isidentifier():
                raise QueryError(f"{where}:{number}: {name!r} is not a query name")
            if name in found:
                raise QueryError(f"{where}:{number}: query {name!r} is named twice")
        elif stripped.startswith("--") or (not stripped and not lines):
            continue
        elif name is None:
            raise QueryError(f"{where}:{number}: a statement before the first '-- name:'")
        else:
            lines.append(line.rstrip())
    close()
    return found


class _Nothing:
    """The result of a query with nothing to run on this backend."""

    rowcount = 0

    def fetchone(self) -> None:
        return None

    def fetchall(self) -> list[Any]:
        return []

    def __iter__(self) -> Any:
        return iter(())

    def close(self) -> None:
        return None


_NOTHING = _Nothing()
