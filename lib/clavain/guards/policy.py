"""Budget limits for a run: a profile (how strict) × a scope (how big the job is), overridden
by `.clavain/config.json` → `budgets` and by `CLAVAIN_BUDGET_*` variables.

Profiles: `strict` (the default: counts a red test re-run, denies only at the limits), `yolo`
and `smoke` (smaller budgets; a red test re-run with nothing changed is denied). The scope
follows the active sprint's complexity (1-2 tiny, 3 medium, 4-5 large), else the configured
scope, else medium. strict/large and yolo/tiny come from the ticket this feature grew out of
(seeds/002); the rest are interpolated. Stdlib only (PreToolUse reads it on every tool call).
"""

from __future__ import annotations

PROFILES = ("strict", "yolo", "smoke")
SCOPES = ("tiny", "medium", "large")
# (commands, test runs, web requests, tokens, dollars) per run.
LIMITS = {
    ("strict", "tiny"): (30, 5, 15, 6_000_000, 5.0),
    ("strict", "medium"): (45, 8, 20, 15_000_000, 12.0),
    ("strict", "large"): (60, 10, 30, 40_000_000, 30.0),
    ("yolo", "tiny"): (20, 2, 10, 4_000_000, 3.0),
    ("yolo", "medium"): (30, 4, 15, 10_000_000, 8.0),
    ("yolo", "large"): (45, 6, 20, 25_000_000, 20.0),
    ("smoke", "tiny"): (10, 1, 5, 2_000_000, 1.5),
    ("smoke", "medium"): (15, 2, 8, 5_000_000, 4.0),
    ("smoke", "large"): (25, 3, 10, 12_000_000, 10.0),
}
LIMIT_KEYS = ("maxCommands", "maxTestRuns", "maxWebRequests", "maxTokens", "maxCostUsd")
ENV = {"maxCommands": "CLAVAIN_BUDGET_MAX_COMMANDS", "maxTestRuns": "CLAVAIN_BUDGET_MAX_TEST_RUNS",
       "maxWebRequests": "CLAVAIN_BUDGET_MAX_WEB_REQUESTS",
       "maxTokens": "CLAVAIN_BUDGET_MAX_TOKENS", "maxCostUsd": "CLAVAIN_BUDGET_MAX_COST_USD"}
PROFILE_ENV = "CLAVAIN_BUDGET_PROFILE"
DEFAULT_PATCH_REPEATS = 2
# An identical command with nothing changed in between: a warning at the third run, a denial
# at the fifth, within ten minutes.
REPEAT_WARN = 3
REPEAT_DENY = 5
REPEAT_WINDOW_SECONDS = 600
WARN_AT = 0.8


def scope_for(complexity: object) -> str | None:
    if type(complexity) is not int:
        return None
    return "tiny" if complexity <= 2 else "medium" if complexity == 3 else "large"


def resolve(settings: object, env: dict, complexity: object = None) -> tuple[dict, list[str]]:
    """(limits, problems): the run's limits from `budgets` settings (a dict, or anything else
    meaning none), the environment and the sprint's complexity. A bad value is named in
    `problems` and its default used instead: a budget never crashes a session."""
    problems: list[str] = []
    settings = settings if isinstance(settings, dict) else {}
    profile = env.get(PROFILE_ENV) or settings.get("profile") or "strict"
    if profile not in PROFILES:
        problems.append(f"budget profile {profile!r} is not one of {', '.join(PROFILES)}; "
                        "using strict")
        profile = "strict"
    scope = scope_for(complexity) or settings.get("scope") or "medium"
    if scope not in SCOPES:
        problems.append(f"budget scope {scope!r} is not one of {', '.join(SCOPES)}; "
                        "using medium")
        scope = "medium"
    enabled = settings.get("enabled", True)
    if not isinstance(enabled, bool):
        problems.append(f"budgets enabled {enabled!r} is not true or false; budgets stay on")
        enabled = True
    limits: dict = {"profile": profile, "scope": scope, "enabled": enabled,
                    **dict(zip(LIMIT_KEYS, LIMITS[(profile, scope)], strict=True))}
    for key in LIMIT_KEYS:
        raw = env.get(ENV[key]) or settings.get(key)
        if raw is None or raw == "":
            continue
        value = _number(raw, integral=key != "maxCostUsd")
        if value is None:
            problems.append(f"budget {key} {raw!r} is not a non-negative number; using "
                            f"{limits[key]}")
        else:
            limits[key] = value
    repeats = settings.get("maxPatchRepeats", DEFAULT_PATCH_REPEATS)
    limits["maxPatchRepeats"] = _number(repeats, integral=True)
    if limits["maxPatchRepeats"] is None:
        problems.append(f"budget maxPatchRepeats {repeats!r} is not a non-negative integer; "
                        f"using {DEFAULT_PATCH_REPEATS}")
        limits["maxPatchRepeats"] = DEFAULT_PATCH_REPEATS
    patterns = settings.get("testPatterns", [])
    limits["testPatterns"] = [p for p in patterns if isinstance(p, str)] \
        if isinstance(patterns, list) else []
    return limits, problems


def _number(raw: object, *, integral: bool) -> int | float | None:
    if isinstance(raw, bool):
        return None
    try:
        value = float(raw) if isinstance(raw, str) else raw
    except ValueError:
        return None
    try:
        if not isinstance(value, (int, float)) or value != value or value < 0 or \
                float(value) == float("inf"):
            return None
        if integral:
            return int(value) if float(value).is_integer() else None
        return float(value)
    except OverflowError:  # a 400-digit integer: no budget is that big
        return None
