"""What SessionStart puts in the model's context: a few sections, each actionable, under a hard
cap, or nothing at all.

Sections are shown in a fixed order. Until the text fits, sections are dropped whole in
`DROP_ORDER`; a section given as several versions (richest first: the recovery note) is
shortened version by version before it is dropped. Each dropped section leaves one line saying
what was left out and where to read it. The cap is in tokens by `token_estimate` (which errs
high) and, whatever the estimate says, in characters (`max_chars`), so the text stays far below
the host's 10,000-character limit, past which the model would see only a preview.
"""

from __future__ import annotations

from clavain.session.token_estimate import estimate_tokens

DEFAULT_MAX_TOKENS = 500
MAX_TOKENS_CEILING = 2000  # the config's ceiling
HOST_LIMIT_CHARS = 10_000
# Shown in this order; `recovery` (after a compaction or resume) stands in for `sprint`.
# `recording`: tool calls cannot be recorded here (one line; never dropped).
SHOW_ORDER = ("recording", "recovery", "sprint", "handoff", "agents")
# Dropped first to last: the handoff is the largest and is a file the model can read; the
# sprint and its recovery note are what the session is for.
DROP_ORDER = ("handoff", "agents", "sprint", "recovery")
WHERE = {
    "handoff": "the handoff note: read .clavain/scratch/handoff.md",
    "agents": "agents still running in this project",
    "sprint": "the active sprint: `clavain sprint resume`",
    "recovery": "the recovery note: `clavain sprint resume`",
}


def max_chars(max_tokens: int) -> int:
    """Four characters a token, and never past 80 % of the host's limit."""
    return min(4 * max_tokens, HOST_LIMIT_CHARS * 8 // 10)


def fits(text: str, max_tokens: int) -> bool:
    return len(text) <= max_chars(max_tokens) and estimate_tokens(text) <= max_tokens


def fit(sections: dict[str, str | list[str]], max_tokens: int = DEFAULT_MAX_TOKENS
        ) -> tuple[str, list[str]]:
    """(text to inject, names of the sections dropped). Empty text when nothing is left."""
    versions = {name: [v for v in ([value] if isinstance(value, str) else value) if v]
                for name, value in sections.items()}
    chosen = {name: options[0] for name, options in versions.items() if options}
    dropped: list[str] = []
    for name in DROP_ORDER:
        for shorter in versions.get(name, [])[1:]:
            if fits(render(chosen, dropped), max_tokens):
                break
            chosen[name] = shorter
        text = render(chosen, dropped)
        if fits(text, max_tokens):
            return text, dropped
        if name in chosen:
            del chosen[name]
            dropped.append(name)
    text = render(chosen, dropped)
    return (text, dropped) if fits(text, max_tokens) else ("", dropped)


def render(sections: dict[str, str], dropped: list[str]) -> str:
    parts = [sections[name] for name in SHOW_ORDER if name in sections]
    if dropped:
        parts.append("Left out to keep this short: "
                     + "; ".join(WHERE[name] for name in dropped) + ".")
    return "\n\n".join(parts)
