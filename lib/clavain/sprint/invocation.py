"""What the user typed after `/clavain:sprint`, read verbatim.

The command's text never holds it: the UserPromptSubmit hook records the raw prompt's arguments
and `clavain sprint start --from-prompt` takes them (`clavain.sprint.typed_request`), so no shell
ever parses them (an apostrophe in "fix the user's login" cannot break the command, a `$(…)` or
a heredoc delimiter cannot run anything). Leading options are read here — `--complexity N`,
`--skip-to STEP`, `--files N`, `--resume`, `--from-step STEP`, `--waive STEP` and
`--accept-lint PLAN` (the rest is the reason), also as `--option=value` — and the rest,
untouched, is the request.
"""

from __future__ import annotations

from clavain.errors import ClavainError

VALUED = ("--complexity", "--skip-to", "--files", "--from-step", "--waive", "--accept-lint")
FLAGS = ("--resume",)


def parse(raw: str) -> dict[str, object]:
    """{"complexity", "skip_to", "files", "from_step", "resume", "waive", "text"} from the raw
    line, and "accept_lint" when typed (`waive`: the step whose gate the person passes;
    `accept_lint`: the plan recorded with its lint findings accepted; the text is then the
    reason)."""
    options: dict[str, object] = {"complexity": None, "skip_to": None, "files": 0,
                                  "from_step": None, "resume": False, "waive": None}
    rest = raw.strip()
    while rest.startswith("--"):
        head, _, tail = rest.partition(" ")
        name, equals, value = head.partition("=")
        if name in FLAGS and not equals:
            options[name[2:]] = True
            rest = tail.strip()
            continue
        if name not in VALUED:
            if name == "--":  # the request itself starts with dashes
                rest = tail.strip()
                break
            raise ClavainError(f"unknown option {name}; the options are "
                               f"{', '.join((*VALUED, *FLAGS))}, before the request")
        if not equals:
            value, _, tail = tail.strip().partition(" ")
        if not value:
            raise ClavainError(f"{name} needs a value")
        key = name[2:].replace("-", "_")
        if key == "files":
            if not value.isdigit():
                raise ClavainError(f"--files must be a whole number, got {value!r}")
            options[key] = int(value)
        else:
            options[key] = value
        rest = tail.strip()
    options["text"] = rest
    return options
