"""The import graph of lib/clavain: cycles, the knot they make, and arrows against the layers.

Run: python scripts/import_graph.py [--json]     (exit 1 when something is wrong)

Every `import clavain.…` / `from clavain… import …` is read with `ast`, at module level or
inside a function (a deferred import is still an arrow: it runs, only later). `LAYERS` below is
the one declaration of the layer order; docs/ARCHITECTURE.md names the same layers. A module
may import from its own layer or any layer below it. `DEFERRED` is the one list of imports that
would close a cycle and stay inside a function because the hook path must not pay for them at
start-up; each names why.
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
from dataclasses import dataclass
from pathlib import Path

LIB = Path(__file__).resolve().parents[1] / "lib"

# Bottom to top. A package's name covers its modules; a module named here (`sprint.route`)
# overrides its package's layer; a root module is named alone.
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    # Stdlib helpers every layer may use; none imports a package above.
    ("basics", ("clavain", "errors", "clock", "textio", "fastjson", "fsutil", "locate", "paths",
                "processes", "markdown_keys", "tree", "gitstatus", "notices", "detached",
                "claude_bin", "schema_check", "config", "hints", "authority", "bootstrap",
                "confine", "sandbox", "hard_mode", "project", "statusline_setup", "hook_log",
                "tables", "stop_flag", "lean_import")),
    ("store", ("store",)),
    # What the rules are and what is recorded: the hook path's guards, verdict files, the
    # workgraph, the sprint's own records, and the pydantic models that mirror the stdlib rules
    # (their bounds are the rules' constants: the hook path cannot import pydantic).
    ("domain", ("models", "guards", "verdicts", "workgraph", "plans", "sprint.checkpoint",
                "sprint.typed_once", "sprint.route")),
    ("sprint", ("sprint", "current_graph")),
    ("runs", ("session", "supervisor", "loop", "status", "statusline", "page", "doctor")),
    ("front doors", ("hooks", "cli", "__main__")),
]

# (importer, imported) → why it stays inside a function although it closes a cycle. Only the
# hook path's start-up cost is a reason: each tool call imports what that call needs.
_G = "clavain.guards."
DEFERRED: dict[tuple[str, str], str] = {
    ("clavain.store.db", "clavain.store.health"): "every hook opens the database: the damage "
                                                  "judgement only once a marker exists or a "
                                                  "command checks the file",
    (_G + "gate", _G + "agents"): "PreToolUse: a subagent's transcript only for a call made "
                                  "inside a subagent",
    (_G + "gate", _G + "window"): "PreToolUse: the 5-hour window only for a call that starts "
                                  "subagents",
    (_G + "gate", _G + "usage"): "PreToolUse: a usage measurement only when one is due",
    (_G + "budget", _G + "fanout"): "PreToolUse: fan-out rules only for a call in or starting "
                                    "a subagent",
    (_G + "budget", _G + "agents"): "PreToolUse: telling the parent only once a subagent was "
                                    "stopped by its cap",
    (_G + "fanout", _G + "agents"): "PreToolUse: a subagent's own cap only for a call made "
                                    "inside one",
    (_G + "commands", _G + "writes"): "PreToolUse: what `find` writes only for a `find` that "
                                      "may remove (the common call imports no landing module)",
    (_G + "landing", _G + "command_landing"): "PreToolUse: a shell command's landing only for "
                                              "a Bash call (Write/Edit need none of it)",
    (_G + "command_landing", _G + "find_rule"): "PreToolUse: the `find` rule only for a `find`",
    ("clavain.workgraph.graphs", "clavain.workgraph.nodes"):
        "PreCompact reads graphs (the recovery note); nodes (json, config) only to close a graph",
}


@dataclass(frozen=True)
class Arrow:
    importer: str
    imported: str
    line: int
    deferred: bool  # inside a function


def modules(lib: Path = LIB) -> dict[str, Path]:
    found = {}
    for path in sorted((lib / "clavain").rglob("*.py")):
        parts = list(path.relative_to(lib).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def arrows(known: dict[str, Path]) -> list[Arrow]:
    """Every internal import; `from P import name` is an arrow to P.name when that is a module.
    Imports under `if TYPE_CHECKING:` never run and are left out."""
    found: list[Arrow] = []
    for name, path in known.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))

        def walk(node: ast.AST, deferred: bool, name: str = name) -> None:
            for child in ast.iter_child_nodes(node):
                if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                    for other in child.orelse:
                        walk_one(other, deferred, name)
                    continue
                walk_one(child, deferred, name)

        def walk_one(child: ast.AST, deferred: bool, name: str) -> None:
            targets: list[str] = []
            if isinstance(child, ast.Import):
                targets = [a.name for a in child.names if a.name.split(".")[0] == "clavain"]
            elif (isinstance(child, ast.ImportFrom) and child.level == 0 and child.module
                  and child.module.split(".")[0] == "clavain"):
                subs = [f"{child.module}.{a.name}" for a in child.names]
                targets = [s for s in subs if s in known]
                if len(targets) < len(subs):
                    targets.append(child.module)
            for target in targets:
                if target != name:
                    found.append(Arrow(name, target, child.lineno, deferred))
            inner = isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            walk(child, deferred or inner)

        walk(tree, False)
    return found


def unit(module: str) -> str:
    """The package or root module a module belongs to: clavain.guards.gate → guards."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def layer_of(module: str) -> int:
    """The layer of the longest name in LAYERS that covers `module`."""
    name = module.removeprefix("clavain.") if module != "clavain" else module
    parts = name.split(".")
    for length in range(len(parts), 0, -1):
        for index, (_, members) in enumerate(LAYERS):
            if ".".join(parts[:length]) in members:
                return index
    raise LookupError(f"{module} is in no layer: add it to LAYERS in scripts/import_graph.py")


def knots(nodes: list[str], edges: set[tuple[str, str]]) -> list[list[str]]:
    """Strongly connected components of more than one node (`workgraph.cycles`: the library's
    own cycle finder, a pure function)."""
    if str(LIB) not in sys.path:
        sys.path.insert(0, str(LIB))
    from clavain.workgraph.cycles import cycle_members

    following: dict[str, list[str]] = {n: [] for n in nodes}
    for a, b in sorted(edges):
        following[a].append(b)
    return sorted(sorted(members) for members in cycle_members(following) if len(members) > 1)


def report(lib: Path = LIB) -> dict:
    known = modules(lib)
    found = arrows(known)
    names = sorted(known)
    module_level = {(a.importer, a.imported) for a in found if not a.deferred}
    every = {(a.importer, a.imported) for a in found}
    allowed = every - set(DEFERRED)
    units = sorted({unit(n) for n in names})
    between_units = {(unit(a), unit(b)) for a, b in every if unit(a) != unit(b)}
    upward = sorted({f"{a.importer}:{a.line} -> {a.imported}" for a in found
                     if layer_of(a.importer) < layer_of(a.imported)})
    statements = {(a.importer, a.line, a.deferred) for a in found}
    deferred_arrows = {(a.importer, a.imported) for a in found if a.deferred}
    return {
        "modules": len(names),
        "import_statements": len(statements),
        "function_level_statements": sum(1 for s in statements if s[2]),
        "module_level_cycles": knots(names, module_level),
        "cycles": knots(names, allowed),
        "package_knots": knots(units, between_units),
        "upward": upward,
        "stale_deferrals": sorted(f"{a} -> {b}" for a, b in DEFERRED
                                  if (a, b) not in deferred_arrows),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    found = report()
    if args.json:
        print(json.dumps(found, indent=2))
    else:
        print(f"{found['modules']} modules, {found['import_statements']} internal import "
              f"statements, {found['function_level_statements']} inside functions")
        for key in ("module_level_cycles", "cycles", "package_knots"):
            sizes = [len(k) for k in found[key]]
            print(f"{key}: {len(sizes)} (sizes {sizes})")
            for knot in found[key]:
                print("   ", " ".join(knot))
        print(f"upward: {len(found['upward'])}")
        for line in found["upward"]:
            print("   ", line)
        for line in found["stale_deferrals"]:
            print("stale deferral:", line)
    wrong = (found["module_level_cycles"] or found["cycles"] or found["upward"]
             or found["stale_deferrals"])
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
