"""What the import parsers share: the spec they build, ids a node may carry, and how a
command, a verify block and a reference are told apart in text people wrote."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import Any

from clavain.errors import ClavainError
from clavain.textio import clip

TITLE_LIMIT = 500  # NodeSpec.title's max_length
_ID_BAD = re.compile(r"[^A-Za-z0-9._:-]+")

# A line that announces verify commands: a heading or a label such as `**Verify:**`.
VERIFY_LABEL = re.compile(
    r"^\s*(?:#{1,6}\s*)?(?:\*\*|__)?\s*(?:verify|verification|tests?|testing|test plan|"
    r"how to (?:test|verify))\s*:?\s*(?:\*\*|__)?\s*:?\s*$", re.IGNORECASE)
FENCE = re.compile(r"^(\s*)(```+|~~~+)\s*([\w+-]*)")
SHELL_TAGS = frozenset({"", "sh", "bash", "shell", "console", "zsh", "shell-session"})

# Programs whose name starts a command, not a sentence. A name that is also an English word
# counts only before one of the words or flags listed with it ("make sure…" is prose).
_PROGRAMS: dict[str, frozenset[str] | None] = {
    name: None for name in (
        "pytest", "python", "python3", "uv", "tox", "nox", "ruff", "mypy", "pyright", "npm",
        "npx", "pnpm", "yarn", "bun", "deno", "node", "jest", "vitest", "playwright", "cargo",
        "bash", "sh", "gradle", "./gradlew", "mvn", "dotnet", "bundle", "rake", "rspec",
        "phpunit", "composer", "ctest", "cmake", "just", "bats", "shellcheck", "eslint", "tsc",
        "docker", "curl", "grep", "diff", "clavain", "swift", "mix", "elixir", "zig")}
_PROGRAMS.update({
    "make": frozenset({"test", "tests", "check", "lint", "ci", "verify", "all", "build", "e2e"}),
    "go": frozenset({"test", "vet", "build", "run"}),
    "test": frozenset(),  # `test -f x`: flags only
})


def fail(where: str, place: str, problem: str) -> ClavainError:
    """The one-line error for a bad file: `where: place: problem`."""
    return ClavainError(f"{where}: {place}: {problem}" if place else f"{where}: {problem}")


def safe_id(text: str, *, prefix: str = "") -> str:
    """`text` as a node id (NODE_ID_PATTERN): other characters become `-`; cut to 128."""
    cleaned = _ID_BAD.sub("-", f"{prefix}{text}").lstrip("._:-")
    return cleaned[:128] or "item"


def slug(text: str, limit: int = 60) -> str:
    """Lower-case words joined by `-`, cut at a word boundary: the id of a markdown task."""
    words = re.findall(r"[a-z0-9]+", text.lower())
    out = ""
    for word in words:
        candidate = f"{out}-{word}" if out else word
        if len(candidate) > limit:
            break
        out = candidate
    return out or (words[0][:limit] if words else "task")


def unique(base: str, used: set[str]) -> str:
    """`base`, or `base-2`, `base-3`… the first not in `used` (which it joins)."""
    name, n = base, 1
    while name in used:
        n += 1
        name = f"{base[:120]}-{n}"
    used.add(name)
    return name


def title_of(text: str, fallback: str) -> str:
    return clip(text, TITLE_LIMIT) or fallback


def is_command(text: str) -> str | None:
    """The command `text` is (one line, backticks dropped), or None when it is prose."""
    text = text.strip()
    quoted = re.fullmatch(r"`([^`]+)`", text)
    if quoted:
        return quoted.group(1).strip() or None
    if "\n" in text or not text:
        return None
    words = text.split()
    if words[0] not in _PROGRAMS:
        return None
    after = _PROGRAMS[words[0]]
    if after is None:
        return text
    return text if len(words) > 1 and (words[1].startswith("-") or words[1] in after) else None


def block_commands(lines: Iterable[str]) -> list[str]:
    """The commands in a fenced block: each non-empty line that is not a comment, a leading
    `$ ` prompt dropped, `\\` continuations joined."""
    out, pending = [], ""
    for line in lines:
        line = line.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        line = line[2:] if line.startswith("$ ") else line
        if line.endswith("\\"):
            pending += line[:-1].rstrip() + " "
            continue
        out.append(pending + line)
        pending = ""
    if pending.strip():
        out.append(pending.strip())
    return out


def resolve(refs: Iterable[str], lookup: Callable[[str], str | None],
            self_id: str) -> tuple[list[str], list[str]]:
    """(node ids, unresolved refs): `lookup` turns a reference as the source writes it into a
    node id of the same file (None: not there); a reference to itself is dropped, each kept
    once in order."""
    deps: list[str] = []
    missing: list[str] = []
    for ref in refs:
        node = lookup(ref)
        if node is None:
            if ref not in missing:
                missing.append(ref)
        elif node != self_id and node not in deps:
            deps.append(node)
    return deps, missing


def spec(node_id: str, title: str, *, fmt: str, source_id: str, depends_on: list[str],
         verify: list[str], acceptance: list[str], status: str | None = None,
         priority: str | int | None = None, url: str | None = None,
         unresolved: list[str] | None = None) -> dict[str, Any]:
    """One node spec in the camelCase shape of `schemas/node.schema.json`, with its origin."""
    return {"id": node_id, "type": "task", "title": title, "dependsOn": depends_on,
            "verify": verify, "acceptance": acceptance,
            "origin": {"format": fmt, "source_id": source_id, "status": status,
                       "priority": priority, "url": url, "unresolved": unresolved or []}}


def lower_word(value: Any) -> str | None:
    """A source's status word as text, lower-cased (gh writes `OPEN`), or None."""
    return value.strip().lower() or None if isinstance(value, str) else None
