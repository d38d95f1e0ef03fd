"""`clavain init` and `clavain doctor`."""

from __future__ import annotations

import argparse

from clavain.cli._output import add_command, add_json_flag, emit_json, print_table


def register(commands: argparse._SubParsersAction) -> None:
    init = add_command(commands, "init", "create .clavain/ here and git-ignore its volatile parts",
                       _init)
    init.add_argument("--sandbox", action="store_true",
                      help="hard mode: Claude Code's sandbox keeps .clavain/ read-only for the "
                           "agent's Bash; only `clavain` commands write it (Linux: bubblewrap "
                           "and socat; a person's decision)")
    init.add_argument("--statusline", action="store_true",
                      help="show Clavain's line in Claude Code's status bar (this project's "
                           ".claude/settings.local.json; a status line of your own is kept)")
    init.add_argument("--force", action="store_true",
                      help="with --statusline: replace a status line already set")
    add_json_flag(init)
    doctor = add_command(commands, "doctor",
                         "check python, venv, dependencies, claude, plugin root and state", _doctor)
    add_json_flag(doctor)


def _init(args: argparse.Namespace) -> int:
    from clavain.paths import StatePaths
    from clavain.project import init_state

    state = StatePaths.discover()
    if args.sandbox:
        _require_person_for_sandbox()
    result = init_state(state)
    if args.sandbox:
        from clavain.sandbox import enable

        # After init_state: a denied folder that does not exist yet is masked, not protected.
        result["sandbox"] = enable(state.root, state.project)
    if args.statusline:
        result["statusline"] = _install_statusline(state.project, args.force)
    if args.json:
        emit_json(result)
        return 0
    verb = "created" if result["created"] else "already present:"
    print(f"{verb} {result['state_dir']}")
    if result["gitignore_updated"]:
        print(f"added Clavain's volatile paths to {result['gitignore']}")
    if args.sandbox:
        _print_sandbox(result["sandbox"])
    if args.statusline:
        done = result["statusline"]
        print(f"status line {'set' if done['changed'] else 'already set'}: {done['settings']}"
              + (" (replaced the one there)" if done["replaced"] is not None else ""))
    return 0


def _install_statusline(project: object, force: bool) -> dict:
    """bin/clavain by its absolute path: the status line runs outside the plugin's hooks, where
    ${CLAUDE_PLUGIN_ROOT} is not substituted."""
    import os
    import shlex

    from clavain.authority import who_asks
    from clavain.errors import ClavainError
    from clavain.statusline import install
    from clavain.workgraph.runner_env import clavain_bin

    asker = who_asks()
    if force and not asker.is_person:  # whose status line goes is the person's to say
        raise ClavainError(f"replacing a status line is a person's decision ({asker.detail}): "
                           "the user runs `clavain init --statusline --force` in a terminal")
    launcher = clavain_bin()  # the plugin's bin/clavain, else a package's console script
    return install(os.fspath(project), f"{shlex.quote(os.path.abspath(launcher))} statusline",
                   force=force)


def _require_person_for_sandbox() -> None:
    """Claude Code asks the person before its agent edits `.claude/` settings; Clavain writing
    them on the agent's behalf must not be the way around that."""
    from clavain.authority import who_asks
    from clavain.errors import ClavainError

    asker = who_asks()
    if not asker.is_person:
        raise ClavainError(f"turning hard mode on changes Claude Code's settings, a person's "
                           f"decision, not an agent's ({asker.detail}): the user runs "
                           f"`clavain init --sandbox` in a terminal")


def _print_sandbox(report: dict) -> None:
    if report["changed"]:
        print(f"hard mode on: {report['settings']}")
        for change in report["changed"]:
            print(f"  {change}")
        print("  new Claude Code sessions in this project run the agent's Bash in the sandbox; "
              "only a command that is just `clavain …` writes .clavain/")
    else:
        print(f"hard mode already on: {report['settings']}")
    if report["git_excluded"]:
        print("  kept out of git in .git/info/exclude (it names this machine's paths)")
    for entry in report["path_inside_project"]:
        print(f"  warning: PATH folder {entry} is inside the project: a `clavain` the agent "
              "puts there would run outside the sandbox; keep it off PATH for sessions")


def _doctor(args: argparse.Namespace) -> int:
    from clavain import doctor

    report = doctor.run()
    if args.json:
        emit_json(report)
    else:
        print_table(report["checks"], ["check", "status", "detail"], unclipped=["detail"])
    return 0 if report["healthy"] else 1
