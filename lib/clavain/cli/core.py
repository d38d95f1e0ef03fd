"""`clavain init` and `clavain doctor`."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from clavain.cli._output import add_command, add_json_flag, emit_json, print_table

if TYPE_CHECKING:
    from clavain.authority import Asker
    from clavain.paths import StatePaths


def register(commands: argparse._SubParsersAction) -> None:
    init = add_command(commands, "init", "create .clavain/ here, git-ignore its volatile parts "
                       "and, run by a person, turn hard mode on where the machine can sandbox",
                       _init)
    mode = init.add_mutually_exclusive_group()
    mode.add_argument("--sandbox", action="store_true",
                      help="hard mode (the default for a person where the machine can sandbox): "
                           "Claude Code's sandbox keeps .clavain/, Clavain's code and the "
                           "host's settings read-only to the agent; refused where it cannot run")
    mode.add_argument("--no-sandbox", action="store_true",
                      help="turn hard mode off: remove what Clavain added to "
                           ".claude/settings.local.json (a person's decision)")
    init.add_argument("--statusline", action="store_true",
                      help="show Clavain's line in Claude Code's status bar (this project's "
                           ".claude/settings.local.json; a status line of your own is kept)")
    own = init.add_mutually_exclusive_group()
    own.add_argument("--combine", action="store_true",
                     help="with --statusline: keep the status line already set and show "
                          "Clavain's after it (one command runs both)")
    own.add_argument("--force", action="store_true",
                     help="with --statusline: replace a status line already set")
    add_json_flag(init)
    doctor = add_command(commands, "doctor",
                         "check python, venv, dependencies, claude, plugin root and state", _doctor)
    add_json_flag(doctor)


def _init(args: argparse.Namespace) -> int:
    from clavain.authority import who_asks
    from clavain.paths import StatePaths
    from clavain.project import init_state

    state = StatePaths.discover()
    asker = who_asks()
    if (args.sandbox or args.no_sandbox) and not asker.is_person:
        _refuse_sandbox_change(asker.detail, "--sandbox" if args.sandbox else "--no-sandbox")
    result = init_state(state)
    # After init_state: the folders hard mode denies exist before any session starts.
    result["sandbox"] = _hard_mode(state, asker, args)
    if args.statusline:
        result["statusline"] = _install_statusline(state.project, args.force, args.combine)
    if args.json:
        emit_json(result)
        return 0
    verb = "created" if result["created"] else "already present:"
    print(f"{verb} {result['state_dir']}")
    if result["gitignore_updated"]:
        print(f"git now ignores Clavain's volatile paths (in {result['gitignore']})")
    _print_sandbox(result["sandbox"])
    if args.statusline:
        done = result["statusline"]
        print(f"status line {'set' if done['changed'] else 'already set'}: {done['settings']}"
              + (" (replaced the one there)" if done["replaced"] is not None else "")
              + (f" (yours first, then Clavain's: {done['combined']!r} runs as before)"
                 if done.get("combined") else ""))
    return 0


def _hard_mode(state: StatePaths, asker: Asker, args: argparse.Namespace) -> dict:
    """What `init` does about hard mode: a person's plain `init` turns it on where it can run
    (unless a person turned it off before), `--sandbox` insists, `--no-sandbox` turns it off;
    an agent's `init` changes nothing."""
    from clavain import hard_mode
    from clavain.errors import ClavainError

    root, project = state.root, state.project
    if not asker.is_person:
        return {**hard_mode.status(project, root, probe=False), "action": "left_to_person"}
    by = asker.provenance
    if args.no_sandbox:
        return {**hard_mode.disable(root, project, by), **hard_mode.status(project, root),
                "action": "turned_off"}
    if not args.sandbox and hard_mode.turned_off_by_person(root):
        return {**hard_mode.status(project, root, probe=False), "action": "kept_off"}
    try:
        done = hard_mode.enable(root, project, by)
    except ClavainError:
        if args.sandbox:  # asked for explicitly: where it cannot run is an error
            raise
        return {**hard_mode.status(project, root), "action": "unavailable"}
    return {**done, **hard_mode.status(project, root, probe=False), "action": "turned_on"}


def _install_statusline(project: object, force: bool, combine: bool = False) -> dict:
    """bin/clavain by its absolute path: the status line runs outside the plugin's hooks, where
    ${CLAUDE_PLUGIN_ROOT} is not substituted."""
    import os
    import shlex

    from clavain.authority import who_asks
    from clavain.errors import ClavainError
    from clavain.statusline_setup import install
    from clavain.workgraph.runner_env import clavain_bin

    asker = who_asks()
    if force and not asker.is_person:  # whose status line goes is the person's to say
        raise ClavainError(f"replacing a status line is a person's decision ({asker.detail}): "
                           "the user runs `clavain init --statusline --force` in a terminal")
    launcher = clavain_bin()  # the plugin's bin/clavain, else a package's console script
    return install(os.fspath(project), f"{shlex.quote(os.path.abspath(launcher))} statusline",
                   force=force, combine=combine)


def _refuse_sandbox_change(detail: str, flag: str) -> None:
    """Claude Code asks the person before its agent edits `.claude/` settings; Clavain writing
    them on the agent's behalf must not be the way around that."""
    from clavain.errors import ClavainError

    raise ClavainError(f"turning hard mode on or off changes Claude Code's settings, a person's "
                       f"decision, not an agent's ({detail}): the user runs "
                       f"`clavain init {flag}` in a terminal")


def _print_sandbox(report: dict) -> None:
    """One line: what changed and how to undo it, or why the project has best effort."""
    action = report["action"]
    if action == "turned_on":
        verb = "hard mode on" if report["changed"] else "hard mode already on"
        print(f"{verb}: Claude Code's sandbox keeps .clavain/, Clavain's code and the host's "
              f"settings read-only to the agent ({report['settings']}); "
              "`clavain init --no-sandbox` turns it off")
        for entry in report["path_inside_project"]:
            print(f"  warning: PATH folder {entry} is inside the project: a `clavain` the agent "
                  "puts there would run outside the sandbox; keep it off PATH for sessions")
    elif action == "turned_off":
        what = (f"removed what Clavain added to {report['settings']}" if report["changed"]
                else "nothing of Clavain's was in the settings")
        print(f"hard mode off ({what}); {report['detail']}")
    elif action == "left_to_person" and report["mode"] != "hard mode":
        print("hard mode: not changed; turning it on is a person's decision (the user runs "
              "`clavain init` in a terminal)")
    else:  # best effort's detail says so itself
        print(report["detail"] if report["mode"] == "best effort"
              else f"hard mode: {report['detail']}")


def _doctor(args: argparse.Namespace) -> int:
    from clavain import doctor

    report = doctor.run()
    if args.json:
        emit_json(report)
    else:
        print_table(report["checks"], ["check", "status", "detail"], unclipped=["detail"])
    return 0 if report["healthy"] else 1
