"""How complex a request is, 1–5, from explainable signals (no model call): the sprint routes by
it (`route`), and the user sees the signals that decided it. The word lists are in
`complexity_cues`, the cues in the shape of a phrase (families of stems and word orders, so
fresh wording of the same kind of work matches) in `complexity_forms`.

A request may hold several asks (`rewrite the auth system to use JWT and fix a typo`): it is
read whole, then each ask on its own (split at new lines, sentences, `;`, `then`, `also`,
`and`), and the larger score wins when an ask is moderate or more — a typo beside a rewrite
does not make the rewrite trivial.

Signals are whole words, phrases or stems, case-insensitive, in four families, in this order:
1. research (5): an open question rather than a deliverable — research, investigate, spike,
   recommend, propose, "find out", "should we", "pros/cons", "X vs Y", a choice ("which queue
   fits us best", "gRPC or REST?"), a design to settle ("how failover should work"), an
   intermittent failure ("once a week", "every other run", "nobody has worked out why"), a
   request for options or ideas only ("what are our options", "don't change anything") … One
   strong cue or two weak ones (why, whether, audit, "don't know", a question mark …) decide
   it, unless a trivial cue names a concrete edit ("research shows we should just bump
   lodash"), or the request asks for the fix too ("find out why and fix it": a defect whose
   cause must be found, 3 — no ask alone makes it research then). A question mark on a
   deliverable asked politely ("could you add … ?") is no question.
2. trivial (1): a mechanical edit — typo, rename, version bump within a major version, a
   comment, docstring, changelog, formatting, one value set to another ("from 60 to 30",
   "set MAX_UPLOAD_MB to 25", "2 -> 3", "to `pip`", quoted text to quoted text), stale or
   misspelt text ("still says", "should say 'X'", "says X instead of Y", "missing a comma"),
   a link, a colour, a code comment (not a comment box), an unused import or a duplicated log
   line … — unless a danger cue (production, live data,
   a migration, "everywhere", across services, a schema) says the blast radius is large, the
   edit changes a system-wide concern (3.), the request builds something (`add a changelog
   page`; a separate ask that builds — "add a tooltip … and fix the typo" — makes it simple,
   2), or `--files` is 10 or more (a mechanical edit over many files still is one when it
   says "mechanical").
3. complex (4): a large blast radius — named large work (OAuth, JWT, RBAC, personal data,
   deletion, encryption, concurrency and races — work in parallel that writes one shared
   file, row or table —, secrets, security findings and signed updates, a monolith, a major
   version upgrade ("from python 2.7 to 3.11") …), or a system-wide concern (authentication,
   password hashing, payments, a database, the service layout, a framework) that the request
   changes (rewrite, replace, migrate, split, upgrade …, or alters its scheme, pipeline,
   provider …), applies
   everywhere (every endpoint, across the codebase) or risks live data (in production,
   existing rows, downtime); adding something everywhere ("audit history on every model")
   counts too, as does work that must happen exactly once ("never runs a job twice"). A
   concern named on a screen or a button alone, or inside quotes (text, not the system), is
   local work.
4. otherwise, under five words say too little (3; code and paths count as words); else simple
   (2), raised to moderate (3) by building a capability (add, implement, support, "let users"
   … before an endpoint, pagination, export, notifications, search …, or in a system-wide
   area: "implement password reset"), by naming a capability without reporting a defect in
   it ("paginate the orders list", but not "the /health endpoint returns 200 even when …"),
   by performance, concurrency, background-job or restructuring work ("speed up", "thread
   pool", "into a celery task", "convert the page into tabs", "split it into modules",
   "refactor the X module"), by a defect whose cause must be found (a flaky test to
   diagnose), by a request that lists six or more parts, or four when it builds a whole thing
   (implement, build, create: "implement X: a, b and c"), or by 40+ words that report no
   defect and never say the work is small (quick, small, tiny …);
   lowered by simplicity cues (just, quick, one call site, a line number) unless the request
   runs to 30+ words (an aside then) or must find a cause first. `--files` moves it too: 5+
   files lift simple work to moderate (moderate work often spans that many), 20+ files +2
   (kept within 1–4), and the reasons say so. It must be a whole number from 0 (unknown) to
   MAX_FILES, else a one-line ClavainError.

Words are counted in any script; Chinese and Japanese, written without spaces, count one word
per two characters. When the score rests on little (too few words, a sensitive area touched
by a small edit) the result carries `uncertain`: the reason, for the sprint to show with how
to restart with `--complexity N`.

Then a learned second opinion (`complexity_model`, weights trained on every labelled request)
weighs the words: on a description of 10+ words it decides unless the rules' score is nearly as
likely, or a structure the rules read decided (`_holds`); it never takes a rules' 4–5 to 1–2,
and lifts a 1–2 to 3 when it puts 40 % or more on large work. Its first reason says so.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from clavain.errors import ClavainError
from clavain.sprint import complexity_cues as cue
from clavain.sprint import complexity_forms as form
from clavain.sprint import complexity_model as model

LABELS = {1: "trivial", 2: "simple", 3: "moderate", 4: "complex", 5: "research"}
MAX_FILES = 100_000
# Words from which a request describes enough work that a simplicity cue in it is an aside.
LONG = 30
# Words from which a request that reports no defect and never says the work is small describes
# moderate work (several parts, constraints, context), whatever words it uses.
LONG_WORK = 40


@dataclass
class _Verdict:
    score: int
    reasons: list[str]
    uncertain: str | None = None
    # Family (research, trivial, complex, …) -> the words and phrases of the text that matched.
    cues: dict[str, list[str]] = field(default_factory=dict)


def check_files(file_count: object) -> int:
    """`--files`: a whole number from 0 (unknown) to MAX_FILES, else one ClavainError line."""
    if file_count is None:
        return 0
    if isinstance(file_count, bool) or not isinstance(file_count, int) \
            or not 0 <= file_count <= MAX_FILES:
        raise ClavainError(f"--files must be a whole number of files from 0 to {MAX_FILES}, "
                           f"got {file_count!r}")
    return file_count


def classify(text: str, file_count: int = 0) -> dict[str, object]:
    """{"score": 1-5, "label", "reasons": [one line per signal that decided it]}, plus
    "uncertain" (why the score may be wrong) when it rests on little."""
    return _result(_with_model(_decide(text, file_count), text, check_files(file_count))[0])


def explain(text: str, file_count: int = 0) -> dict[str, object]:
    """`classify`'s result with the cues behind it (`clavain sprint classify --explain`):
    `cues` (family -> the words and phrases that matched, in the verdict that decided),
    `decided_by` ("whole", or "ask N" when one ask's score won), and `whole` and each of
    `asks` judged on its own: text, score, label, reasons, cues; and `model`, the learned
    second opinion: its probabilities, the rules' score, and the features that pushed most."""
    decided = _decide(text, file_count)
    _, whole, asks, winner = decided
    verdict, opinion = _with_model(decided, text, check_files(file_count))

    def shown(judged: _Verdict, piece: str) -> dict[str, object]:
        return {"text": piece, "score": judged.score, "label": LABELS[judged.score],
                "reasons": judged.reasons, "cues": judged.cues}

    return {**_result(verdict), "cues": verdict.cues,
            "decided_by": "whole" if winner is None else f"ask {winner + 1}",
            "whole": shown(whole, cue.normalise(text)),
            "asks": [shown(judged, piece) for judged, piece in asks], "model": opinion}


def rule_score(text: str, file_count: int = 0) -> tuple[int, bool]:
    """The rules' score alone, before the learned second opinion (`complexity_model`), and
    whether they hold (see `_with_model`): what `benchmarks/train_complexity.py` measures and
    combines the model with."""
    decided = _decide(text, file_count)
    return decided[0].score, _holds(decided, check_files(file_count))


def _with_model(decided: tuple[_Verdict, _Verdict, list, int | None], text: str, files: int
                ) -> tuple[_Verdict, dict | None]:
    """`_decide`'s verdict after the model's second opinion (`complexity_model.combine`), and
    what the model said (None when there is no description, or no weights file)."""
    verdict = decided[0]
    if not cue.word_count(cue.normalise(text)):
        return verdict, None
    opinion = model.opinion(text, files, verdict.score, hold=_holds(decided, files))
    if opinion is None or opinion["score"] == verdict.score:
        return verdict, opinion
    return _Verdict(opinion["score"], [opinion["reason"], *verdict.reasons], verdict.uncertain,
                    verdict.cues), opinion


def _holds(decided: tuple[_Verdict, _Verdict, list, int | None], files: int) -> bool:
    """Whether a structure the rules read decided, which a bag of words does not see: the
    larger of several asks, a cause to find then fix, a deliverable asked politely, 5+ files."""
    verdict, whole, _, winner = decided
    return winner is not None or files >= 5 or any(
        whole.cues.get(family) or verdict.cues.get(family) for family in ("fix_after", "request"))


def _decide(text: str, file_count: int
            ) -> tuple[_Verdict, _Verdict, list[tuple[_Verdict, str]], int | None]:
    """The verdict, the whole request's, each ask's (when there are several), and the index
    of the ask whose score won (None: the whole request's did)."""
    files = check_files(file_count)
    pieces = cue.asks(text)
    whole = _judge(cue.normalise(text), files, pieces)
    asks = [(_judge(piece, 0, [piece], part=True), piece) for piece in pieces] \
        if len(pieces) > 1 else []
    if asks:
        # A question answered by the fix the request asks for (`find out why and fix it`), or
        # weak cues in a deliverable asked for politely (`could you add …, whether …?`), are
        # not research in one ask either.
        ranked = [at for at in range(len(asks)) if not (asks[at][0].score == 5 and (
            "fix_after" in whole.cues
            or ("request" in whole.cues and "research" not in asks[at][0].cues)))]
        index = max(ranked or [0], key=lambda at: asks[at][0].score)
        best, ask = asks[index]
        if best.score >= 3 and best.score > whole.score:
            quoted = ask if len(ask) <= 60 else ask[:57].rstrip() + "…"
            return _Verdict(best.score, [
                f"the larger of {len(pieces)} asks: \"{quoted.strip()}\"", *best.reasons],
                best.uncertain, best.cues), whole, asks, index
    return whole, whole, asks, None


def _judge(text: str, files: int, pieces: list[str], *, part: bool = False) -> _Verdict:
    """Score one text: the whole request (`pieces` its asks), or one ask (`part`); the cues
    that matched go with the verdict (`explain`, the sprint's routing record)."""
    seen: dict[str, list[str]] = {}
    verdict = _score(text, files, pieces, seen, part=part)
    verdict.cues = {family: list(dict.fromkeys(hits)) for family, hits in seen.items() if hits}
    return verdict


def _score(text: str, files: int, pieces: list[str], seen: dict[str, list[str]], *,
           part: bool = False) -> _Verdict:
    """`_judge`'s rules; each family of cues it reads is put in `seen` as it is read."""
    found = cue.words(text)
    count = cue.word_count(text)
    if not count:
        return _Verdict(3, ["no description: moderate until known"],
                        "there is no description to judge")
    trivial = cue.cues(text, found, cue.TRIVIAL) + cue.stems(text, form.TRIVIAL_FORMS)
    strong = cue.cues(text, found, cue.RESEARCH_STRONG) + (
        ["X vs Y"] if cue.VS.search(text) else []) + cue.stems(text, form.RESEARCH_FORMS)
    request = cue.stems(text, form.POLITE_ASK) if "?" in text or "？" in text else []
    weak = cue.cues(text, found, cue.RESEARCH_WEAK) + (
        ["a question"] if ("?" in text or "？" in text) and not request else [])
    seen.update(research=strong, research_weak=weak, trivial=trivial, request=request)
    fixed = cue.stems(text, form.FIX_AFTER) if strong or weak else []
    seen["fix_after"] = fixed
    if ((strong and not trivial) or len(strong) >= 2 or (len(weak) >= 2 and not trivial)) \
            and not fixed:
        return _Verdict(5, [f"an open question: {', '.join(strong + weak)}"])

    danger = (cue.cues(text, found, cue.DANGER) + cue.stems(text, cue.SCOPE)
              + cue.stems(text, cue.RISK))
    major = _major_upgrade(text)
    named = {kind: hits for kind, vocab in cue.COMPLEX.items()
             if (hits := cue.cues(text, found, vocab))}
    if cue.stems(text, form.CONCURRENT):
        once = cue.stems(text, form.SHARED_WRITE)
        if once:
            named["concurrency"] = once
    if once := cue.stems(text, form.COMPLEX_FORMS):
        named["concurrency"] = named.get("concurrency", []) + once
    changed = _changed_concerns(text, pieces)
    if major:
        named["upgrade"] = [major]
    seen.update(danger=danger, complex=[hit for hits in named.values() for hit in hits],
                system_change=[hit for hits in changed.values() for hit in hits])
    beside = _beside(pieces) if trivial and not part else None
    if trivial and not danger and not major and not changed and not beside and (
            not form.builds(text, places=True)) and (
            files < 10 or "mechanical" in trivial):
        unsure = (f"a small edit ({', '.join(trivial)}) in a sensitive area "
                  f"({', '.join(named)})" if named else None)
        return _Verdict(1, [f"a mechanical edit: {', '.join(trivial)}"], unsure)
    set_aside = [f"--files {files}: too many files for a one-line edit "
                 f"({', '.join(trivial)})"] if trivial and files >= 10 else []
    if named or changed or (trivial and danger):
        merged = {kind: list(dict.fromkeys(named.get(kind, []) + changed.get(kind, [])))
                  for kind in {**named, **changed}}
        reasons = [f"large blast radius: {kind} ({', '.join(hits)})"
                   for kind, hits in merged.items()]
        if trivial and danger:
            reasons.append(f"{', '.join(trivial)} — but {', '.join(_widest(danger))}")
        return _Verdict(4, reasons + set_aside)

    if count < 5 and not part:
        return _Verdict(3, [f"{count} words: too little to judge, moderate", *set_aside],
                        f"only {count} words to judge by")
    score, reasons = 2, ["a specific change", *set_aside]
    if beside:
        quoted = beside if len(beside) <= 60 else beside[:57].rstrip() + "…"
        reasons[0] = f"more than a mechanical edit ({', '.join(trivial)}): \"{quoted.strip()}\""
    moderate = [] if beside else (cue.cues(text, found, cue.MODERATE)
                                  + cue.stems(text, form.MODERATE_FORMS) + form.built(text)
                                  + [f"a cause to find, then a fix ({hit})" for hit in fixed])
    parts = _parts(text)
    # Something built to a spec of several parts (`implement X: a, b, and c`).
    if not moderate and parts >= 4 and cue.stems(cue.unquote(text), form.CONSTRUCT):
        moderate = [f"built with {parts} parts"]
    if moderate or parts >= 6:
        score += 1
        reasons.append(f"moderate: {', '.join(moderate) or f'{parts} parts'}")
    simple = cue.cues(text, found, cue.SIMPLE)
    seen.update(moderate=moderate, simplicity=simple)
    # An aside (`the file just looks wrong`) in a long description, or a fix whose cause must
    # be found first, does not make the work small.
    if simple and score > 2 and count < LONG and not fixed:
        score -= 1
        reasons.append(f"simpler: {', '.join(simple)}")
    if score == 2 and count >= LONG_WORK and not trivial and not cue.stems(text, form.DEFECT) \
            and not cue.cues(text, found, cue.SMALL):
        score = 3
        reasons.append(f"moderate: {count} words describe the work, with no defect reported "
                       f"and no word that it is small")
    step = 2 if files >= 20 else 1 if files >= 5 and score < 3 else 0
    if step:
        score += step
        why = "" if set_aside else "many files, "
        reasons.append(f"--files {files}: {why}{step:+d}")
    score = max(1, min(4, score))
    touched = {family: hits for family, pattern in cue.CONCERNS.items()
               if (hits := cue.stems(text, pattern))}
    seen["concern"] = [hit for hits in touched.values() for hit in hits]
    unsure = None
    if touched and score <= 2:
        areas = "; ".join(f"{family} ({', '.join(hits)})" for family, hits in touched.items())
        unsure = (f"it touches {areas} but names no change to how it works; a system-wide "
                  f"change needs 4")
    return _Verdict(score, reasons, unsure)


def _changed_concerns(text: str, pieces: list[str]) -> dict[str, list[str]]:
    """System-wide concerns that the request applies everywhere or puts live data at risk
    with (read whole: `across the order, payment, and accounting services`), or that one of
    its asks changes (read per ask, so one ask's verb does not change another's concern);
    also a change everywhere, or a risky change, whatever it concerns."""
    out: dict[str, list[str]] = {}
    text, pieces = cue.unquote(text), [cue.unquote(piece) for piece in pieces]

    def add(family: str, hits: list[str]) -> None:
        out.setdefault(family, []).extend(hits)

    reach = cue.stems(text, cue.SCOPE) + cue.stems(text, cue.RISK)
    for family, pattern in cue.CONCERNS.items():
        if reach and (hits := cue.stems(text, pattern)):
            add(family, hits + reach)
    for piece in pieces:
        big = cue.stems(piece, cue.BIG_CHANGE)
        alter = cue.stems(piece, cue.ALTER)
        system = cue.stems(piece, cue.SYSTEM)
        how = big or (alter + system if alter and system else [])
        if how and not cue.stems(piece, cue.UI):
            for family, pattern in cue.CONCERNS.items():
                if hits := cue.stems(piece, pattern):
                    add(family, hits + how)
        if (scope := cue.stems(piece, cue.SCOPE)) and (
                change := big or alter or form.builds(piece)):
            add("scope", scope + change)
        if (risk := cue.stems(piece, cue.RISK)) and (
                change := big or alter or cue.stems(piece, cue.DESTRUCTIVE)):
            add("risk", risk + change)
    return {family: list(dict.fromkeys(hits)) for family, hits in out.items()}


def _beside(pieces: list[str]) -> str | None:
    """The ask that builds something beside a mechanical edit (`add a tooltip to the save
    button and fix the typo in its label`), or None: the request is then more than the edit."""
    if len(pieces) < 2:
        return None
    # `new` alone describes (`the new board ships at 115200`); it builds only with a verb.
    return next((piece for piece in pieces if set(cue.stems(piece, form.BUILD)) - {"new"}
                 and not cue.cues(piece, cue.words(piece), cue.TRIVIAL)
                 and not cue.stems(piece, form.TRIVIAL_FORMS)), None)


def _major_upgrade(text: str) -> str | None:
    """`major version 3 -> 5`, `an upgrade to rails 7`, or None."""
    jump = cue.VERSION_JUMP.search(text)
    versions = [v for v in (jump.groups() if jump else ()) if v is not None]
    if len(versions) == 2 and versions[0] != versions[1] and (
            jump.group(0)[0] not in "0123456789" or "." in jump.group(0)
            or cue.stems(text, cue.VERSIONED)):
        return f"major version {versions[0]} -> {versions[1]}"
    if not jump and (target := cue.MAJOR_TARGET.search(text)):
        return f"an upgrade to {target.group(0).split(' to ')[-1]}"
    return None


def _widest(hits: list[str]) -> list[str]:
    """The hits that are not part of a longer one (`across` inside `across the codebase`)."""
    unique = list(dict.fromkeys(hits))
    return [hit for hit in unique if not any(hit != other and hit in other for other in unique)]


def _parts(text: str) -> int:
    """How many parts a request lists (commas, `+`, `and`, colons), a sign of a bigger job."""
    return (text.count(",") + text.count(" + ") + len(re.findall(r"\band\b", text))
            + text.count(": ") + len(re.findall(r"[，、；]|以及|并且", text)) + 1)


def _result(verdict: _Verdict) -> dict[str, object]:
    result: dict[str, object] = {"score": verdict.score, "label": LABELS[verdict.score],
                                 "reasons": verdict.reasons}
    if verdict.uncertain:
        result["uncertain"] = verdict.uncertain
    return result
