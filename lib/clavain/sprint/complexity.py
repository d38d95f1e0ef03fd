"""How complex a request is, 1–5, from explainable signals (no model call): the sprint routes by
it (`route`), and the user sees the signals that decided it.

Signals are whole words or phrases, case-insensitive, in four families, checked in this order:
1. research (5): an open question rather than a deliverable — research, investigate, spike,
   "should we", "pros/cons", "X vs Y", an intermittent failure ("once a week", "1 in 20",
   "can't repro") … One strong cue or two weak ones (explore, why, sometimes …) decide it,
   unless a trivial cue names a concrete edit ("research shows we should just bump lodash").
2. trivial (1): a mechanical edit — typo, rename, version bump within a major version, a
   comment, docstring, changelog, formatting, a constant's value … — unless a danger cue
   (production, a migration, "everywhere", across services, a schema) says the blast radius
   is large.
3. complex (4): a large blast radius — authentication and permissions, personal data and
   deletion, production data and migrations, money, concurrency and races, secrets and
   security findings, replacing a subsystem, work across services, a major version upgrade.
4. otherwise, under five words say too little (3); else simple (2), raised to moderate (3) by
   feature cues (an endpoint, a subcommand,
   caching, pagination, a bug whose cause must be found …) or by a request that lists three or
   more parts; lowered by simplicity cues (just, quick, one call site, a line number). The
   file count moves it too: 1 file −1, 5+ files +1, 20+ files +2 (kept within 1–4).
"""

from __future__ import annotations

import re

LABELS = {1: "trivial", 2: "simple", 3: "moderate", 4: "complex", 5: "research"}

RESEARCH_STRONG = (
    "research", "investigate", "investigation", "brainstorm", "evaluate", "spike", "prototype",
    "rfc", "design doc", "pros/cons", "pros and cons", "tradeoffs", "trade-offs",
    "alternatives", "look into", "figure out", "think about", "thinking about", "audit",
    "experiment", "how should we", "what's the best way", "is there any way", "where do we",
    "no idea", "hunch", "intermittent", "intermittently", "can't repro", "cannot reproduce",
    "not sure when", "once a week", "twice a week", "once or twice", "a few times a day",
    "every few minutes", "few reports", "compare", "comparing", "feasible", "feasibility",
    "options for", "explore what", "explore using", "explore alternatives", "worth it",
    "see if", "go through", "could be", "or stay", "or keep", "or use", "why is", "why does",
    "what's causing")
RESEARCH_WEAK = ("explore", "should we", "why", "random", "randomly", "sometimes",
                 "occasional", "flaky", "weird", "whether", "drift")
TRIVIAL = (
    "typo", "typos", "spelling", "misspelled", "rename", "renamed", "bump", "reformat",
    "formatting", "prettier", "indentation", "whitespace", "sort the imports", "comment",
    "commented-out", "docstring", "changelog", "wording", "copyright", "display name",
    "alt text", "broken link", "image tag", "table of contents", "toc", "help text",
    "column header", "mechanical", "no functional change", "constant", "deprecationwarning")
DANGER = ("prod", "production", "drops", "everywhere", "across", "all services",
          "db schema", "schema,", "migration that", "api responses")
COMPLEX = {
    "auth": ("oauth", "sso", "saml", "oidc", "rbac", "2fa", "totp", "mfa", "row-level security",
             "session tokens", "permissions"),
    "data": ("pii", "gdpr", "encrypt", "encryption", "hard-delete", "purge", "purges",
             "retention", "delete all", "backfill", "uuid", "integer cents", "12m rows",
             "40m rows", "zero downtime", "prod postgres", "in prod", "tables (prod"),
    "money": ("stripe charges", "paymentintents", "refunds across", "double credits",
              "billing out", "billing job"),
    "concurrency": ("double-sell", "race", "locking", "reservation", "clobber", "idempotent",
                    "conflict resolution", "offline"),
    "security": ("secrets", "prod creds", "vault", "rotate", "path traversal", "pentest",
                 "xss", "csrf", "security review"),
    "scale": ("multi-tenant", "tenant", "monolith", "all services", "all 9 services",
              "across all", "every service", "microservices", "own service", "legacy",
              "replace our", "homegrown", "switch from", "feature store", "pgbouncer",
              "p99", "across the order", "bring their own", "sync to async", "ci from",
              "new eks cluster"),
}
MODERATE = (
    "endpoint", "endpoints", "subcommand", "caching", "cache", "paginate", "pagination",
    "rate limiting", "i18n", "dark mode", "websocket", "feature flag", "early stopping",
    "integration tests", "soft delete", "audit logging", "dashboard", "chart", "openapi",
    "queue worker", "resumable", "duplicate", "metrics", "profiles", "upload", "import",
    "hooks", "modules", "find it", "not sure why", "not sure if", "times out", "timeouterror",
    "upgrade", "broke", "broken again", "schema mapping", "backfill it", "subset of fields")
SIMPLE = ("just", "quick", "small", "only", "one call site", "single", "already", "line")
_WORD = re.compile(r"[a-z0-9][a-z0-9_'-]*[a-z0-9]|[a-z0-9]")
# `3.2 -> 5.0`, `v5 → v6`, `upgrade postgres 11 to 16`: a version jump, major when the first
# numbers differ (`from 3 to 5` alone is a value, not a version).
_VERSION_JUMP = re.compile(
    r"\bv?(\d+)(?:\.\d+)*(?:\.x)?\s*(?:->|→)\s*v?(\d+)(?:\.\d+)*\b"
    r"|\b(?:upgrade|bump|migrate)\s+\S+\s+(?:from\s+)?v?(\d+)(?:\.\d+)*\s+to\s+v?(\d+)")
_PATH = re.compile(r"\S*/\S*|`[^`]*`")
_VS = re.compile(r"\bvs\.?\b")


def _cues(text: str, words: set[str], vocabulary: tuple[str, ...] | list[str]) -> list[str]:
    """Vocabulary entries present as whole words, or as whole phrases."""
    found = []
    for entry in vocabulary:
        if ((" " in entry or not entry.isalnum()) and re.search(
                rf"(?<![a-z0-9]){re.escape(entry)}(?![a-z0-9])", text)) or entry in words:
            found.append(entry)
    return found


def _parts(text: str) -> int:
    """How many parts a request lists (commas, `+`, `and`, colons), a sign of a bigger job."""
    return (text.count(",") + text.count(" + ") + len(re.findall(r"\band\b", text))
            + text.count(": ") + 1)


def classify(text: str, file_count: int = 0) -> dict[str, object]:
    """{"score": 1-5, "label", "reasons": [one line per signal that decided it]}."""
    lowered = " ".join((text or "").lower().split())
    # Paths and `code` name things; their parts (`deploy/prod/…`) are not cues.
    lowered = _PATH.sub(" ", lowered) if _PATH.search(lowered) else lowered
    words = set(_WORD.findall(lowered))
    if not words:
        return _result(3, ["no description: moderate until known"])
    trivial = _cues(lowered, words, TRIVIAL)
    strong = _cues(lowered, words, RESEARCH_STRONG) + (["X vs Y"] if _VS.search(lowered) else [])
    weak = _cues(lowered, words, RESEARCH_WEAK) + (["a question"] if "?" in lowered else [])
    if (strong and not trivial) or len(strong) >= 2 or (len(weak) >= 2 and not trivial):
        return _result(5, [f"an open question: {', '.join(strong + weak)}"])
    danger = _cues(lowered, words, DANGER)
    jump = _VERSION_JUMP.search(" ".join((text or "").lower().split()))
    versions = [v for v in (jump.groups() if jump else ()) if v is not None]
    major = len(versions) == 2 and versions[0] != versions[1]
    complex_cues = {kind: hits for kind, vocab in COMPLEX.items()
                    if (hits := _cues(lowered, words, vocab))}
    if major:
        complex_cues["upgrade"] = [f"major version {versions[0]} -> {versions[1]}"]
    if trivial and not danger and not major and (file_count < 10 or "mechanical" in trivial):
        return _result(1, [f"a mechanical edit: {', '.join(trivial)}"])
    if complex_cues or (trivial and danger):
        reasons = [f"large blast radius: {kind} ({', '.join(hits)})"
                   for kind, hits in complex_cues.items()]
        if trivial and danger:
            reasons.append(f"{', '.join(trivial)} — but {', '.join(danger)}")
        return _result(4, reasons)

    if len(words) < 5:
        return _result(3, [f"{len(words)} words: too little to judge, moderate"])
    score, reasons = 2, ["a specific change"]
    moderate = _cues(lowered, words, MODERATE)
    parts = _parts(lowered)
    if moderate or parts >= 5:
        score += 1
        reasons.append(f"moderate: {', '.join(moderate) or f'{parts} parts'}")
    simple = _cues(lowered, words, SIMPLE)
    if simple and score > 2:
        score -= 1
        reasons.append(f"simpler: {', '.join(simple)}")
    if file_count >= 20:
        score += 2
        reasons.append(f"{file_count} files +2")
    elif file_count >= 5:
        score += 1
        reasons.append(f"{file_count} files +1")
    return _result(max(1, min(4, score)), reasons)


def _result(score: int, reasons: list[str]) -> dict[str, object]:
    return {"score": score, "label": LABELS[score], "reasons": reasons}
