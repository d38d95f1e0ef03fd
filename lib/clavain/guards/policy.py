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
# Fan-out (`guards.fanout`): one subagent's own cap (null: none but the session's), what one
# subagent is projected to cost where this project has no measured history, and the share of
# the subscription's 5-hour and weekly windows past which no new fan-out starts (null: off).
AGENT_CAPS = ("perAgentMaxTokens", "perAgentMaxCalls")
AGENT_PROJECTION = {"agentTokens": 300_000, "agentCostUsd": 1.0}
WINDOW_SHARE = "windowShareMax"
SETTINGS = ("enabled", "profile", "scope", *LIMIT_KEYS, "maxPatchRepeats", "testPatterns",
            *AGENT_CAPS, *AGENT_PROJECTION, WINDOW_SHARE)
# The largest limit accepted (a trillion commands, tokens or dollars): a bigger number is a
# typo, not a budget. `clavain.models.config` uses it too, so the schema says the same.
LIMIT_MAX = 10 ** 12
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
    meaning none), the environment and the sprint's complexity. A bad value or an unknown key
    is named in `problems` (a misspelled key with the setting it is closest to) and the
    default used instead: a budget never crashes a session.

    The rule, the same as `schemas/config.schema.json` (a test feeds both the same values): a
    limit in the file is a JSON number from 0 to LIMIT_MAX, a whole one (3 or 3.0) except
    `maxCostUsd`, never text nor true/false; `null` means the default. A variable is text: a
    whole decimal number (`CLAVAIN_BUDGET_MAX_COST_USD`: any decimal number)."""
    problems: list[str] = []
    settings = settings if isinstance(settings, dict) else {}
    problems += [_unknown(key) for key in settings if key not in SETTINGS]
    profile = _choice(settings, "profile", PROFILES, "strict", problems)
    if env.get(PROFILE_ENV):
        profile = env[PROFILE_ENV]
        if profile not in PROFILES:
            problems.append(f"budget profile {_written(profile)} ({PROFILE_ENV}) is not one of "
                            f"{', '.join(PROFILES)}; using strict")
            profile = "strict"
    scope = _choice(settings, "scope", SCOPES, None, problems) or "medium"
    scope = scope_for(complexity) or scope
    enabled = settings.get("enabled", True)
    if not isinstance(enabled, bool):
        problems.append(f"budgets enabled {_written(enabled)} is not true or false; budgets "
                        "stay on")
        enabled = True
    limits: dict = {"profile": profile, "scope": scope, "enabled": enabled,
                    **dict(zip(LIMIT_KEYS, LIMITS[(profile, scope)], strict=True))}
    for key in LIMIT_KEYS:
        integral = key != "maxCostUsd"
        kind = "a whole number" if integral else "a number"
        # The file first, the variable over it; a bad value of either keeps what was there.
        for given, parse, where in ((settings.get(key), _setting, ""),
                                    (env.get(ENV[key]) or None, _variable, f" ({ENV[key]})")):
            if given is None:
                continue
            value = parse(given, integral=integral)
            if value is None:
                problems.append(f"budget {key} {_written(given)}{where} is not {kind} from 0 to "
                                f"{LIMIT_MAX:,}; using {limits[key]}")
            else:
                limits[key] = value
    repeats = settings.get("maxPatchRepeats", DEFAULT_PATCH_REPEATS)
    limits["maxPatchRepeats"] = _setting(repeats, integral=True)
    if limits["maxPatchRepeats"] is None:
        problems.append(f"budget maxPatchRepeats {_written(repeats)} is not a whole number "
                        f"from 0 to {LIMIT_MAX:,}; using {DEFAULT_PATCH_REPEATS}")
        limits["maxPatchRepeats"] = DEFAULT_PATCH_REPEATS
    _fan_out(settings, limits, problems)
    patterns = settings.get("testPatterns", [])
    if not isinstance(patterns, list) or not all(isinstance(p, str) for p in patterns):
        problems.append(f"budget testPatterns {_written(patterns)} is not a list of texts; "
                        "using the text ones")
    limits["testPatterns"] = [p for p in patterns if isinstance(p, str)] \
        if isinstance(patterns, list) else []
    return limits, problems


def _fan_out(settings: dict, limits: dict, problems: list[str]) -> None:
    """The fan-out settings into `limits`: the per-subagent caps and the window share (None
    when unset), the per-subagent projection (its default when unset)."""
    for key in (*AGENT_CAPS, WINDOW_SHARE, *AGENT_PROJECTION):
        default = AGENT_PROJECTION.get(key)
        given = settings.get(key)
        limits[key] = default
        if given is None:
            continue
        integral = key in AGENT_CAPS or key == "agentTokens"
        value = _setting(given, integral=integral)
        top = 100 if key == WINDOW_SHARE else LIMIT_MAX
        if value is None or value > top:
            kind = "a whole number" if integral else "a number"
            problems.append(f"budget {key} {_written(given)} is not {kind} from 0 to {top:,}; "
                            f"using {'none' if default is None else default}")
        else:
            limits[key] = value


def _written(value: object) -> str:
    """A setting as the person wrote it: JSON (`true`, `"fast"`), never Python's `True`."""
    from clavain.fastjson import dumps  # only when a setting is wrong

    try:
        return dumps(value)
    except (TypeError, ValueError):
        return str(value)


def _unknown(key: str) -> str:
    """A key `budgets` has no setting for, with the setting it is closest to."""
    import difflib  # only when a key is wrong

    close = difflib.get_close_matches(key, SETTINGS, n=1, cutoff=0.6) or \
        [name for name in SETTINGS if name.lower() == key.lower()]
    hint = f"did you mean {close[0]}?" if close else f"known: {', '.join(SETTINGS)}"
    return f"budgets key {_written(key)} is not a budget setting ({hint}); ignored"


def _choice(settings: dict, key: str, allowed: tuple, default: str | None,
            problems: list[str]) -> str | None:
    """A setting that names one of `allowed` (`null` too when the default is None)."""
    if key not in settings or (settings[key] is None and default is None):
        return default
    value = settings[key]
    if value in allowed and isinstance(value, str):
        return value
    fallback = default or "medium"
    problems.append(f"budget {key} {_written(value)} is not one of {', '.join(allowed)}; "
                    f"using {fallback}")
    return default


def _setting(raw: object, *, integral: bool) -> int | float | None:
    """A limit from the file: a JSON number from 0 to LIMIT_MAX (whole when `integral`: 3
    or 3.0, as JSON Schema counts integers); None for anything else, text and true/false
    included."""
    if isinstance(raw, bool) or not isinstance(raw, (int, float)):
        return None
    if raw != raw or not 0 <= raw <= LIMIT_MAX:  # NaN; negative, infinite or too big
        return None
    if integral:
        return int(raw) if float(raw).is_integer() else None
    return float(raw)


def _variable(text: str, *, integral: bool) -> int | float | None:
    """A limit from a variable: a whole decimal number (`integral`), else a decimal one."""
    text = text.strip()
    if integral:
        ok = text.isascii() and text.isdigit() and len(text) <= 20  # int() refuses 4,300 digits
        return _setting(int(text), integral=True) if ok else None
    if not text or len(text) > 40 or not all(c in "0123456789.eE+-" for c in text):
        return None  # no `nan`, `inf` or `1_000`
    try:
        return _setting(float(text), integral=False)
    except ValueError:
        return None
