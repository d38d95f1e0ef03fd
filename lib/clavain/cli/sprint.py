"""`clavain sprint …`: the main flow. `/clavain:sprint` runs `clavain sprint start` (or `resume`)
before its prompt; after each step the model runs `clavain sprint done STEP`."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from clavain.cli._output import add_command, add_json_flag, emit_json

STEP_HELP = ("brainstorm, strategy, plan, plan-review, execute, test, quality-gates, resolve, "
             "ship")


def register(commands: argparse._SubParsersAction) -> None:
    sprint = add_command(commands, "sprint", "a sprint: classify, route, checkpoint, resume",
                         _no_subcommand)
    sub = sprint.add_subparsers(dest="sprint_command", metavar="SUBCOMMAND")

    p = add_command(sub, "classify", "how complex a request is (1-5) and why", _classify)
    p.add_argument("text", nargs="+", help="the request")
    p.add_argument("--files", type=int, default=0, metavar="N",
                   help="how many files it touches, when known")
    p.add_argument("--explain", action="store_true",
                   help="show the cues: for the whole request and each ask, each family of "
                        "cues (research, trivial, complex, danger, moderate, simplicity …), "
                        "the words and phrases that matched, and the score they gave")
    add_json_flag(p)

    p = add_command(sub, "start", "start a sprint: classify, route, write the checkpoint",
                    _start)
    p.add_argument("text", nargs="*", help="the request (slash-command arguments arrive here)")
    p.add_argument("--complexity", metavar="N", help="1-5, instead of the classifier's score")
    p.add_argument("--skip-to", metavar="STEP", help=f"start at this step ({STEP_HELP})")
    p.add_argument("--files", type=int, default=0, metavar="N",
                   help="how many files it touches, when known")
    p.add_argument("--resume", action="store_true",
                   help="resume the active sprint instead (what /clavain:sprint --resume does)")
    p.add_argument("--from-step", metavar="STEP",
                   help="with --resume: go back to this step (never forward)")
    p.add_argument("--stdin", action="store_true",
                   help="read the options and the request, verbatim, from stdin")
    p.add_argument("--from-prompt", action="store_true",
                   help="the options and the request the UserPromptSubmit hook recorded for "
                        "this session (how /clavain:sprint passes what the user typed: no "
                        "shell parses it)")
    add_json_flag(p)

    p = add_command(sub, "done", "record the current step through its gate (plan: record the "
                    "plan's tasks)", _done)
    p.add_argument("step", metavar="STEP", help=STEP_HELP)
    p.add_argument("--plan", metavar="PATH", help="the plan file the plan step wrote (again "
                   "after `resume --from-step plan` to record a corrected plan)")
    p.add_argument("--decision", metavar="TEXT", help="a key decision to remember (last 5)")
    p.add_argument("--waive", metavar="REASON",
                   help="a person passes the step's gate on purpose; recorded as WAIVED with "
                        "the reason (denied to the agent inside Claude Code)")
    p.add_argument("--accept-lint", metavar="REASON",
                   help="with step plan: a person records a plan whose lint found errors; the "
                        "findings and the reason go into the checkpoint and the sprint's "
                        "summary (denied to the agent inside Claude Code)")
    add_json_flag(p)

    p = add_command(sub, "resume", "where the active sprint stands and what to do next",
                    _resume)
    p.add_argument("--from-step", metavar="STEP",
                   help="go back to this step (a done one, or the current): it and the steps "
                        "after it are recorded again")
    add_json_flag(p)

    p = add_command(sub, "status", "the active sprint's checkpoint", _status)
    add_json_flag(p)

    p = add_command(sub, "summary", "steps done, gates waived, agents dispatched, verdicts, "
                    "measured tokens (the active sprint, else the last one that ended)", _summary)
    p.add_argument("--sprint", metavar="ID", help="an archived sprint (.clavain/runs/ID/)")
    add_json_flag(p)

    p = add_command(sub, "abandon", "stop the active sprint: cancel its open nodes, archive it "
                    "(a damaged checkpoint is set aside)", _abandon)
    add_json_flag(p)


def _no_subcommand(args: argparse.Namespace) -> int:
    from clavain.errors import ClavainError

    raise ClavainError("missing subcommand; `clavain sprint --help` lists them")


def _state() -> Any:
    from clavain.paths import StatePaths

    return StatePaths.discover()


def _classify(args: argparse.Namespace) -> int:
    from clavain.sprint.complexity import classify, explain

    result = (explain if args.explain else classify)(" ".join(args.text), args.files)
    if args.json:
        emit_json(result)
    else:
        print(f"{result['score']}/5 ({result['label']})")
        for reason in result["reasons"]:  # type: ignore[attr-defined]
            print(f"- {reason}")
        if result.get("uncertain"):
            print(f"Uncertain: {result['uncertain']}; a sprint can be started with "
                  "--complexity N instead")
        if args.explain:
            _print_cues(result)
    return 0


def _print_cues(result: dict[str, Any]) -> None:
    """The cues behind the score: the whole request's, then each ask's."""
    from clavain.cli._output import print_table

    judged = [("whole request", result["whole"])] + [
        (f"ask {at}", ask) for at, ask in enumerate(result["asks"], 1)]
    decider = result["decided_by"]
    print(f"Decided by: {'the whole request' if decider == 'whole' else decider}")
    for name, one in judged:
        print(f"\n{name}: \"{one['text']}\" -> {one['score']}/5 ({one['label']}): "
              f"{'; '.join(one['reasons'])}")
        if one["cues"]:
            print_table([{"family": family, "matched": ", ".join(hits)}
                         for family, hits in one["cues"].items()], ["family", "matched"],
                        unclipped=["matched"])
        else:
            print("(no cue matched)")
    if opinion := result.get("model"):  # the learned second opinion (complexity_model)
        odds = ", ".join(f"{s}: {p:.0%}" for s, p in opinion["probabilities"].items())
        pushed = ", ".join(f"{name} {weight:+.2f}" for name, weight in opinion["top_features"])
        print(f"\nmodel: {odds} (rules: {opinion['rules_score']}); "
              f"pushed by {pushed or 'nothing'}")


def _start(args: argparse.Namespace) -> int:
    from clavain.project import ensure_state
    from clavain.sprint import lifecycle

    record = None  # what the person typed in Claude Code (`--from-prompt`)
    args.waive = args.accept_lint = None
    if args.stdin or args.from_prompt:
        from clavain.sprint.invocation import parse

        if args.from_prompt:
            from clavain.sprint import typed_request

            record = typed_request.take_record(_state())
            typed = parse(record["arguments"])
        else:
            from clavain.cli._input import read_input

            typed = parse(read_input("-"))
        args.text = [str(typed.pop("text"))]
        for key, value in typed.items():
            if value not in (None, False, 0):
                setattr(args, key, value)
    decided_by = _decided_by(record)
    if args.waive or args.accept_lint:
        # `/clavain:sprint --waive STEP REASON`, `--accept-lint PLAN REASON`: the text is the
        # reason
        flag = "--waive STEP" if args.waive else "--accept-lint PLAN"
        others = [name for name in ("complexity", "skip_to", "resume", "from_step", "files",
                                    "accept_lint" if args.waive else "waive")
                  if getattr(args, name, None)]
        if others:
            from clavain.errors import ClavainError

            raise ClavainError(f"{flag} REASON takes nothing else (got --"
                               f"{others[0].replace('_', '-')})")
        reason = " ".join(args.text)
        args.plan = args.decision = None
        if args.accept_lint:
            args.step, args.plan = "plan", args.accept_lint
            return _report_done(lifecycle.done(_state(), "plan", plan_path=args.plan,
                                               accept_lint=reason, decided_by=decided_by),
                                args)
        args.step, args.waive = args.waive, reason
        return _report_done(lifecycle.done(_state(), args.step, waive=args.waive,
                                           decided_by=decided_by), args)
    if args.resume:
        return _print_resume(lifecycle.resume(_state(), from_step=args.from_step), args)
    if args.from_step:
        from clavain.errors import ClavainError

        raise ClavainError("--from-step goes with --resume")
    state = _state()
    text = " ".join(args.text)
    started = lifecycle.start(ensure_state(state) if text.strip() else state, text,
                              complexity=args.complexity, skip_to=args.skip_to,
                              file_count=args.files, decided_by=decided_by)
    _worked_on(started["sprint_id"])
    if started.get("routing_log_problem"):
        print(f"clavain: warning: {started['routing_log_problem']}", file=sys.stderr)
    if args.json:
        emit_json(started)
        return 0
    # The model reads this banner on every sprint: what runs and the next action, no more (why
    # this complexity: `clavain sprint classify`; the lenses: the quality-gates step names them).
    print(f"Sprint {started['sprint_id']}. {started['routing']}")
    if started["uncertain"]:
        print(f"Uncertain complexity: {started['uncertain']}; if it is wrong: `clavain sprint "
              f"abandon`, then start again with --complexity N")
    print(f"Next: {lifecycle.next_action(started)}")
    return 0


def _done(args: argparse.Namespace) -> int:
    from clavain.sprint import lifecycle

    def progress(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    person = args.waive is not None or args.accept_lint is not None
    report = lifecycle.done(_state(), args.step, plan_path=args.plan, decision=args.decision,
                            waive=args.waive, progress=None if args.json else progress,
                            accept_lint=args.accept_lint,
                            decided_by=_decided_by(None) if person else None)
    return _report_done(report, args)


def _decided_by(record: dict | None) -> dict | None:
    """A person's provenance for a person-only decision, or None when an agent asks
    (`clavain.authority`: process ancestry, a terminal, what was typed in Claude Code)."""
    from clavain.authority import who_asks

    asker = who_asks(typed=record)
    return asker.provenance if asker.is_person else None


def _report_done(report: dict, args: argparse.Namespace) -> int:
    from clavain.sprint import lifecycle

    if not report["archived"]:
        _worked_on(report["sprint_id"])
    for finding in report.get("lint", []):  # the plan's warnings, or the findings accepted
        print(f"{finding['severity']}: {finding['message']}", file=sys.stderr)
    if args.json:
        emit_json(report)
        return 0
    line = f"{args.step} done"
    if report["plan"] is not None:
        line += f"; plan recorded: {_plan_changes(report['plan'])}"
    if report["waived"]:
        line += f"; gate WAIVED ({report['waived']['reason']})"
    if report["plan"] is not None and report.get("plan_lint"):
        line += f"; lint findings ACCEPTED ({report['plan_lint']['reason']})"
    print(line)
    if report["archived"]:
        print(f"Sprint shipped; archived in {report['archived']}")
    else:
        print(f"Next: {lifecycle.next_action(report, folder_named=True)}")
    return 0


def _plan_changes(plan: dict[str, Any]) -> str:
    """`1 task added (task-b), 1 updated (task-a: verify), 2 unchanged`."""
    parts = []
    if plan["added"]:
        parts.append(f"{len(plan['added'])} task(s) added ({', '.join(plan['added'])})")
    if plan["updated"]:
        changed = "; ".join(f"{node}: {', '.join(fields)}"
                            for node, fields in plan["updated"].items())
        parts.append(f"{len(plan['updated'])} updated ({changed})")
    if plan["removed"]:
        parts.append(f"{len(plan['removed'])} removed ({', '.join(plan['removed'])})")
    if plan["unchanged"]:
        parts.append(f"{len(plan['unchanged'])} unchanged")
    return ", ".join(parts)


def _resume(args: argparse.Namespace) -> int:
    from clavain.sprint import lifecycle

    return _print_resume(lifecycle.resume(_state(), from_step=args.from_step), args)


def _worked_on(sprint_id: str) -> None:
    """Inside a Claude Code session, remember that it worked on this sprint: only such a
    session is asked for a handoff when it stops (a read-only state folder just skips it)."""
    import contextlib

    from clavain.authority import session_id
    from clavain.errors import ClavainError
    from clavain.session.handoff import mark_worked

    with contextlib.suppress(OSError, ClavainError):
        mark_worked(_state(), sprint_id, session_id())


def _print_resume(report: dict[str, Any], args: argparse.Namespace) -> int:
    _worked_on(report["sprint_id"])
    if args.json:
        emit_json(report)
        return 0
    step = report["current_step"]
    completed = ", ".join(report["completed_steps"]) or "none"
    print(f"Sprint {report['sprint_id']}: {report['description']}")
    print(f"Resuming from step {report['step_number']} ({step}). Completed: [{completed}]"
          if step else f"All steps done. Completed: [{completed}]")
    if report["git_warning"]:
        print(f"Warning: {report['git_warning']}")
    counts = ", ".join(f"{n} {s}" for s, n in report["verdict_counts"].items())
    print(f"Verdicts: {counts or 'none yet'}")
    if report["plan_path"]:
        print(f"Plan: {report['plan_path']}")
    print(f"Next: {report['next_action']}")
    return 0


def _status(args: argparse.Namespace) -> int:
    from clavain.sprint import lifecycle

    active = lifecycle.require_active(_state())
    keys = ("sprint_id", "description", "complexity", "route", "completed_steps",
            "current_step", "plan_path", "git_sha")
    if args.json:
        emit_json({key: active[key] for key in keys} | {
            key: active[key] for key in active if key not in keys})
        return 0
    for key in keys:
        value = active[key]
        shown = ", ".join(value) if isinstance(value, list) else value
        print(f"{key + ':':<17}{'' if shown is None else shown}")
    return 0


def _summary(args: argparse.Namespace) -> int:
    from clavain.sprint import summary

    report = summary.for_sprint(_state(), args.sprint)
    emit_json(report) if args.json else print(summary.render(report))
    return 0


def _abandon(args: argparse.Namespace) -> int:
    from clavain.sprint import lifecycle

    report = lifecycle.abandon(_state(), decided_by=_decided_by(None))
    if args.json:
        emit_json(report)
    elif report["set_aside"]:
        print(f"The damaged checkpoint was set aside as {report['set_aside']} "
              f"({report['problem']}); a new sprint can start")
    else:
        cancelled = (f"; cancelled {len(report['cancelled'])} open node(s)"
                     if report["cancelled"] else "")
        print(f"Sprint {report['sprint_id']} abandoned{cancelled}; archived in "
              f"{report['archived']}")
    return 0
