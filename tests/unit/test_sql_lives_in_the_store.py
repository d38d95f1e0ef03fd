"""Every workgraph statement is a named query (issue 35): the workgraph, supervisor, loop,
sprint and CLI packages run no SQL text of their own, and which backend a store is gets asked
only inside the store."""

from __future__ import annotations

import ast
import re
from pathlib import Path

LIB = Path(__file__).resolve().parents[2] / "lib" / "clavain"
NO_SQL = ("workgraph", "supervisor", "loop", "sprint", "cli")
# A statement or a fragment of one (a shared WHERE or SET clause), in SQL's capitals.
SQL_TEXT = re.compile(r"^\s*(SELECT \S|INSERT INTO|UPDATE \w+ SET|DELETE FROM|WITH \w+ AS|"
                      r"CREATE (TABLE|INDEX|VIEW|TRIGGER)|PRAGMA \w|BEGIN IMMEDIATE|"
                      r"WHERE \w+ [=<>]|SET \w+ = )")


def _modules(*packages: str) -> list[Path]:
    return sorted(p for package in packages for p in (LIB / package).rglob("*.py"))


def _calls(tree: ast.AST, names: tuple[str, ...]) -> list[int]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if name in names:
                found.append(node.lineno)
    return found


def test_no_sql_text_or_execute_outside_the_store() -> None:
    offenders = []
    for path in _modules(*NO_SQL):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for line in _calls(tree, ("execute", "executemany", "executescript")):
            offenders.append(f"{path.relative_to(LIB)}:{line} runs a statement")
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) \
                    and SQL_TEXT.match(node.value) and " " in node.value.strip():
                offenders.append(f"{path.relative_to(LIB)}:{node.lineno} holds SQL text")
    assert not offenders, "\n".join(offenders)


def test_which_backend_is_asked_only_inside_the_store() -> None:
    offenders = [f"{path.relative_to(LIB)}:{line}"
                 for path in sorted(LIB.rglob("*.py")) if path.parent.name != "store"
                 for line in _calls(ast.parse(path.read_text(encoding="utf-8")),
                                    ("dialect",))]
    assert not offenders, offenders
