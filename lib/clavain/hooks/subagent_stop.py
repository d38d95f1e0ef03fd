"""SubagentStop: turn a Clavain agent's final answer into
`.clavain/verdicts/<agent>--<dispatch>.md` + `.json` (the dispatch is the host's `agent_id`);
for every agent, settle its budget (`guards.agents.subagent_stopped`: its spend measured, its
reservation released).

Only this plugin's agents (`clavain:<name>`, or `clavain:<folder>:<name>` as Claude Code names
agents kept in sub-folders) are recorded, as `clavain:<name>`; every other agent is ignored. The
header is parsed from `last_assistant_message`, TOKENS_SPENT is replaced by what the agent's
transcript measures, and an agent whose Output Contract owes a header but sent none (or a broken
one) gets an ERROR verdict.

No hostile payload may lose an owed verdict: odd ids are dropped, the answer is scrubbed, a
failure while building the verdict becomes an ERROR verdict naming it, and everything that went
wrong on one call is ONE line in hooks.log. Stdlib only.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from clavain.fsutil import names_ending
from clavain.locate import payload_cwd
from clavain.paths import StatePaths, plugin_root
from clavain.project import ensure_state
from clavain.textio import scrub
from clavain.verdicts import files as verdict_files
from clavain.verdicts.parser import VerdictParseError, parse_header
from clavain.verdicts.transcript import holds_final_message

TYPE_CHECKING = False
if TYPE_CHECKING:  # `typing` costs the hook an import
    from typing import Any

CONTRACT_TITLE = "Output Contract"
NO_HEADER_SUMMARY = "no verdict header"
# No `re` on this hook's path (with `enum` it costs about a third of a bare interpreter start).
_ALNUM = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789")
_NAME_CHARS = _ALNUM | {"_", "-"}


def agent_name_ok(name: str) -> bool:
    """An agent or folder name: an ASCII letter or digit, then up to 63 of those, `_` or `-`
    (nothing that could climb out of `agents/` or glob)."""
    return 0 < len(name) <= 64 and name[0] in _ALNUM and all(c in _NAME_CHARS for c in name)


def has_contract_heading(text: str) -> bool:
    """A line `## Output Contract` (space after the hashes, any spacing around the title)."""
    for line in text.split("\n"):
        rest = line[2:] if line.startswith("##") else ""
        if rest[:1].isspace() and rest.strip() == CONTRACT_TITLE:
            return True
    return False


def plugin_agent(agent_type: object) -> tuple[str, str | None] | None:
    """(name, folder) of one of this plugin's agents, else None. Claude Code 2.1.330 namespaces
    agents by their folder: `clavain:review:reviewer` → ("reviewer", "review");
    `clavain:reviewer` → ("reviewer", None)."""
    if not isinstance(agent_type, str) or not agent_type.startswith(verdict_files.PLUGIN_PREFIX):
        return None
    parts = agent_type[len(verdict_files.PLUGIN_PREFIX):].split(":")
    if len(parts) > 2 or not all(agent_name_ok(part) for part in parts):
        return None
    return (parts[-1], parts[0] if len(parts) == 2 else None)


def owes_verdict(name: str, folder: str | None = None, root: Path | None = None) -> bool:
    """True when this plugin's `agents/<folder or any>/<name>.md` has an `## Output Contract`."""
    if not agent_name_ok(name) or (folder is not None and not agent_name_ok(folder)):
        return False
    agents = str(root or plugin_root()) + "/agents"
    # Every folder directly in agents/, as `agents/*/<name>.md` would find them (a file there
    # has no `<name>.md` below it, so it is passed over like a missing one).
    folders = [folder] if folder is not None else names_ending(agents, "")
    for path in sorted(f"{agents}/{each}/{name}.md" for each in folders):
        try:
            with open(path, encoding="utf-8") as handle:
                if has_contract_heading(handle.read()):
                    return True
        except (OSError, UnicodeDecodeError):
            continue
    return False


def _agent_detail(state: StatePaths, candidate: str) -> Path | None:
    """The existing file an agent's DETAIL_PATH names, if it lies inside the project and not
    in the verdicts folder (whose files belong to dispatches: a stale or another run's answer
    must not stand beside this verdict); else None."""
    try:  # RuntimeError: a symlink loop (Python < 3.13)
        path = (state.project / candidate).resolve()
        project, verdicts = state.project.resolve(), state.verdicts.resolve()
    except (ValueError, OSError, RuntimeError):
        return None
    if not path.is_relative_to(project) or path.is_relative_to(verdicts):
        return None
    fits = len(path.relative_to(project).as_posix()) <= verdict_files.MAX_PATH_CHARS
    # os.path: False on every OSError (pathlib raises ENAMETOOLONG).
    return path if fits and os.path.isfile(path) else None


def _relative(project: Path, path: Path) -> str:
    try:
        return path.resolve().relative_to(project.resolve()).as_posix()
    except (ValueError, RuntimeError):
        return str(path)


# How long one SubagentStop waits, in all, for the host to write the subagent's transcript
# (its prompt for the lens, its final message for the tokens): one deadline for both waits.
TRANSCRIPT_WAIT_SECONDS = 5.0


def _wait_for_transcript(path: Path, message: str, deadline: float) -> bool:
    while not (not message.strip() or holds_final_message(path, message)):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)
    return True


def _measure(payload: dict[str, Any], verdict: dict[str, Any], message: str,
             notes: list[str], deadline: float, measured: dict[str, Any]) -> None:
    """Replace reported tokens (and a missing model) with what the transcript shows. Once the
    transcript holds the final message, what was read is kept in `measured["usage"]` for the
    budget's settling: the same file, read once."""
    transcript = payload.get("agent_transcript_path")
    if transcript is None or transcript == "":
        return
    if not isinstance(transcript, str) or not os.path.isfile(transcript):
        notes.append(f"agent_transcript_path {_short(transcript)} is no readable file; "
                     "keeping the reported tokens")
        return
    complete = _wait_for_transcript(Path(transcript), message, deadline)
    if not complete:
        notes.append(f"transcript {_short(transcript)} lacks the final message after "
                     f"{TRANSCRIPT_WAIT_SECONDS:g}s; measured what is there")
    from clavain.verdicts.transcript import transcript_usage

    try:
        usage = transcript_usage(Path(transcript))
    except OSError as exc:
        notes.append(f"transcript unreadable, keeping the reported tokens: {exc}")
        return
    if complete:
        measured["usage"] = usage
    if usage.messages:
        verdict_files.apply_usage(verdict, usage)


def _short(value: object) -> str:
    """A payload value as a log line can carry it."""
    text = repr(value)
    return text if len(text) <= 120 else text[:119] + "…"


def _text_id(payload: dict[str, Any], key: str, notes: list[str]) -> str | None:
    """An optional id from the payload: text of 1-200 characters, else dropped (and noted)
    rather than failing the verdict."""
    value = payload.get(key)
    if value is None or value == "":
        return None
    if isinstance(value, str) and len(value) <= verdict_files.MAX_AGENT_CHARS:
        return scrub(value)
    notes.append(f"{key} {_short(value)} dropped: not text of 1-"
                 f"{verdict_files.MAX_AGENT_CHARS} characters")
    return None


def _verdict(message: str, agent: str, found: tuple[str, str | None], ids: dict[str, Any],
             root: Path | None) -> dict[str, Any] | None:
    """The verdict for this answer, or None for an agent that owes none and sent none."""
    try:
        fields = parse_header(message)
    except VerdictParseError as exc:
        if not owes_verdict(*found, root):
            return None
        no_header = exc.problems[0].startswith(NO_HEADER_SUMMARY)
        reason = NO_HEADER_SUMMARY if no_header else f"bad verdict header: {exc}"
        return verdict_files.error_verdict(agent, reason, **ids)
    try:
        return verdict_files.build(fields, agent=agent, **ids)
    except ValueError as exc:  # parsed, but out of the schema's bounds (e.g. a huge MODEL)
        return verdict_files.error_verdict(agent, f"bad verdict header: {exc}", **ids)


def record(payload: dict[str, Any], *, root: Path | None = None,
           notes: list[str] | None = None,
           measured: dict[str, Any] | None = None) -> Path | None:
    """Write the verdict for this SubagentStop; the JSON file's path, or None when ignored.
    What went wrong without stopping the verdict is appended to `notes`; the agent's
    transcript usage, once read whole, to `measured["usage"]`."""
    notes = [] if notes is None else notes
    measured = {} if measured is None else measured
    found = plugin_agent(payload.get("agent_type"))
    if found is None:
        return None
    # One name per agent whatever the host's namespacing: `clavain:executor`; the reviewer's
    # verdicts are kept apart per lens: `clavain:reviewer/quality`.
    agent = verdict_files.PLUGIN_PREFIX + found[0]
    message = payload.get("last_assistant_message")
    message = scrub(message) if isinstance(message, str) else ""
    deadline = time.monotonic() + TRANSCRIPT_WAIT_SECONDS
    lens = reviewer_lens(payload.get("agent_transcript_path"), message, notes,
                         deadline=deadline) if found[0] == "reviewer" else None
    if lens:
        agent += f"/{lens}"
    ids = {"agent_id": _text_id(payload, "agent_id", notes),
           "session_id": _text_id(payload, "session_id", notes)}
    try:
        verdict = _verdict(message, agent, found, ids, root)
    except Exception as exc:  # a bug here must not lose an owed verdict
        notes.append(f"building the verdict failed, recorded as ERROR: "
                     f"{type(exc).__name__}: {exc}")
        verdict = verdict_files.error_verdict(
            agent, f"verdict not built: {type(exc).__name__}: {exc}", **ids)
    if verdict is None:
        return None

    cwd = payload_cwd(payload)
    if payload.get("cwd") not in (None, "", cwd):
        notes.append(f"payload cwd {_short(payload.get('cwd'))} is no existing folder; "
                     f"used {cwd}")
    state = ensure_state(StatePaths.discover(cwd))
    try:
        _measure(payload, verdict, message, notes, deadline, measured)
    except Exception as exc:  # measuring is a bonus; the verdict is owed
        notes.append(f"tokens not measured: {type(exc).__name__}: {exc}")
    dispatch = verdict_files.dispatch_for(state.verdicts, agent, ids["agent_id"])
    claimed = verdict.get("detail_path")
    detail = _agent_detail(state, claimed) if claimed else None
    if detail is None:
        # The answer first, the verdict naming it last: a crash between the two leaves an
        # orphan .md, never a verdict beside another run's answer.
        detail = verdict_files.write_detail(state.verdicts, agent, dispatch,
                                            message or "(the agent sent no final message)",
                                            inside=state.root)
    verdict["detail_path"] = _relative(state.project, detail)
    from clavain.verdicts import dispatches

    recorded, sprint_id = dispatches.started_under(state, ids["agent_id"])
    from clavain.sprint.checkpoint import active_sprint_id

    verdict["sprint_id"] = sprint_id if recorded else active_sprint_id(state, notes)
    written = verdict_files.write(state.verdicts, verdict, dispatch, inside=state.root)
    transcript = payload.get("agent_transcript_path")
    if verdict.get("tokens_source") != "measured" and isinstance(transcript, str) and transcript:
        from clavain.verdicts.backfill import mark

        mark(state.verdicts, agent, dispatch, transcript, inside=state.root)
        notes.append("tokens to be measured once the transcript is readable")
    if found[0] == "executor":
        from clavain.hooks import executor_result

        executor_result.apply(payload, message, state.project, notes)
    return written


def reviewer_lens(transcript: object, message: str, notes: list[str], *,
                  deadline: float | None = None) -> str | None:
    """The reviewer dispatch's lens: its prompt's first line, waiting (until `deadline`, by
    default TRANSCRIPT_WAIT_SECONDS from now) while the host has not yet written the prompt to
    the transcript; only when no prompt can be read, the first line of its answer (the
    reviewer begins with its `Lens:` line). A verdict filed without its lens would never count
    for the gate that asked for it."""
    from clavain.verdicts.lens import first_line_lens
    from clavain.verdicts.transcript import first_user_text

    if deadline is None:
        deadline = time.monotonic() + TRANSCRIPT_WAIT_SECONDS
    while True:
        prompt = first_user_text(transcript)
        # Wait only while the host has not started the file: one that holds lines but no
        # prompt will not grow one.
        if prompt or not isinstance(transcript, str) or not transcript \
                or _has_content(transcript) or time.monotonic() >= deadline:
            break
        time.sleep(0.05)
    if prompt:  # the dispatch's own words decide; its answer cannot pick another lens
        return first_line_lens(prompt)
    answered = first_line_lens(message)
    if answered:
        notes.append(f"lens {answered} read from the reviewer's answer: its transcript "
                     f"{_short(transcript)} named none")
    return answered


def _has_content(path: str) -> bool:
    try:
        return os.stat(path).st_size > 0
    except OSError:
        return False


def handle(payload: dict[str, Any]) -> dict[str, Any] | None:
    notes: list[str] = []
    measured: dict[str, Any] = {}  # the agent's transcript, read once for verdict and budget
    try:
        record(payload, notes=notes, measured=measured)
    except Exception as exc:
        notes.append(f"{type(exc).__name__}: {exc}")
    try:  # reported (or ignored): a review gate no longer waits on this dispatch
        from clavain.verdicts import dispatches

        dispatches.finished(StatePaths.discover(payload_cwd(payload)), payload.get("agent_id"))
    except Exception as exc:
        notes.append(f"dispatch record not cleared: {type(exc).__name__}: {exc}")
    try:  # any agent: its spend measured, then its reservation given back (`guards.agents`)
        from clavain.guards.agents import subagent_stopped

        settled = subagent_stopped(payload, measured.get("usage"))
        if settled:
            notes.append(f"budget: {settled}")
    except Exception as exc:  # the reservation stays: the session over-counts, never under
        notes.append(f"subagent budget not settled: {type(exc).__name__}: {exc}")
    if notes:
        from clavain.hook_log import log_failure  # only once something failed

        log_failure("SubagentStop", "; ".join(notes), payload)
    return None
