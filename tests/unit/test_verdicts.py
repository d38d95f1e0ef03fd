"""The verdicts library: safe names, one atomic pair per dispatch, reading them back."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clavain.verdicts import files as verdict_files
from clavain.verdicts.parser import STATUSES_BY_TYPE


def make(agent: str = "clavain:fd-quality", status: str = "CLEAN", *,
         at: str = "2026-01-31T12:00:00.000Z", agent_id: str | None = None,
         **extra: object) -> dict:
    kind = "implementation" if status in STATUSES_BY_TYPE["implementation"] else "verdict"
    fields = {"type": kind, "status": status, "summary": f"{agent} says {status}", **extra}
    return verdict_files.build(fields, agent=agent, agent_id=agent_id, session_id="s1",
                               timestamp=at)


# --- names ----------------------------------------------------------------------------------

@pytest.mark.parametrize(
    ("agent", "name"),
    [
        ("clavain:fd-quality", "clavain-fd-quality"),
        ("../../etc/passwd", "etc-passwd"),
        ("/abs/path", "abs-path"),
        ("..", None),
        ("a/../../b", "a-.-.-b"),
        ("C:\\win\\x", "C-win-x"),
        ("naïve agent", "na-ve-agent"),
        ("", None),
        ("::", None),
        ("a\x00b", None),
    ],
)
def test_safe_agent_name(agent: str, name: str | None) -> None:
    if name is None:
        with pytest.raises(ValueError):
            verdict_files.safe_agent_name(agent)
    else:
        assert verdict_files.safe_agent_name(agent) == name


def test_over_long_names_are_cut_and_kept_distinct() -> None:
    first = verdict_files.safe_agent_name("a" * 500)
    second = verdict_files.safe_agent_name("a" * 499 + "b")
    assert len(first) == len(second) == verdict_files.MAX_NAME_CHARS
    assert first != second


@settings(max_examples=300, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(agent=st.text(min_size=1, max_size=300), dispatch=st.text(min_size=1, max_size=300))
def test_no_name_escapes_the_folder_and_names_split_back(tmp_path: Path, agent: str,
                                                         dispatch: str) -> None:
    folder = tmp_path / "verdicts"
    try:
        path = verdict_files.verdict_path(folder, agent, dispatch)
    except ValueError:
        return
    assert path.parent == folder
    assert path.resolve().parent == folder.resolve()
    assert not path.name.startswith(".")
    assert len(path.name) <= 2 * verdict_files.MAX_NAME_CHARS + len("--.json") < 255
    assert verdict_files.split_name(path.stem) == (verdict_files.safe_agent_name(agent),
                                                   verdict_files.safe_dispatch(dispatch))


def test_writing_a_traversal_name_stays_inside(tmp_path: Path) -> None:
    folder = tmp_path / "project" / ".clavain" / "verdicts"
    path = verdict_files.write(folder, make(agent="../../../outside"), "../d1")
    assert path == folder / "outside--d1.json"
    assert sorted(p.name for p in tmp_path.rglob("*.json")) == ["outside--d1.json"]


def test_old_single_pair_names_split_without_a_dispatch() -> None:
    assert verdict_files.split_name("clavain-fd-quality") == ("clavain-fd-quality", None)
    assert verdict_files.split_name("clavain-fd-quality--a1") == ("clavain-fd-quality", "a1")


# --- write / read -----------------------------------------------------------------------------

def _verdict_strategy() -> st.SearchStrategy[dict]:
    text = st.text(min_size=1, max_size=40).filter(lambda s: "\n" not in s and "\r" not in s)
    kind_status = st.sampled_from([(k, s) for k, ss in STATUSES_BY_TYPE.items() for s in ss])
    return st.builds(
        lambda ks, summary, agent, model, tokens, source, files, findings, detail, session: {
            "type": ks[0], "status": ks[1], "model": model, "tokens_spent": tokens,
            "tokens_source": source, "files_changed": files, "findings_count": findings,
            "summary": summary, "detail_path": detail, "agent": agent, "agent_id": session,
            "session_id": session, "sprint_id": session,
            "timestamp": "2026-01-31T12:00:00.123+02:00"},
        kind_status, text, text.filter(lambda a: _usable(a)), st.none() | text,
        st.none() | st.integers(0, 10**12), st.sampled_from(verdict_files.TOKENS_SOURCES),
        st.lists(text, max_size=5), st.integers(0, 10**6), st.none() | text, st.none() | text,
    )


def _usable(agent: str) -> bool:
    try:
        verdict_files.safe_agent_name(agent)
    except ValueError:
        return False
    return True


@settings(max_examples=150, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(verdict=_verdict_strategy())
def test_write_then_read_round_trips(tmp_path: Path, verdict: dict) -> None:
    folder = tmp_path / "verdicts"
    verdict_files.write(folder, verdict, "d1")
    assert verdict_files.read(folder, verdict["agent"]) == verdict | {"dispatch": "d1"}
    verdict_files.clean(folder)


def test_write_rejects_an_invalid_verdict_and_leaves_nothing(tmp_path: Path) -> None:
    bad = make() | {"status": "COMPLETE"}
    with pytest.raises(ValueError, match="status: must be one of CLEAN"):
        verdict_files.write(tmp_path, bad)
    assert list(tmp_path.iterdir()) == []


def test_build_refuses_fields_that_do_not_validate() -> None:
    with pytest.raises(ValueError, match="findings_count"):
        verdict_files.build({"type": "verdict", "status": "CLEAN", "summary": "x",
                        "findings_count": -1}, agent="a")


def test_read_finds_the_short_name_and_reports_missing(tmp_path: Path) -> None:
    verdict_files.write(tmp_path, make(), "d1")
    assert verdict_files.read(tmp_path, "fd-quality")["agent"] == "clavain:fd-quality"
    with pytest.raises(LookupError, match="no verdict for 'fd-safety'"):
        verdict_files.read(tmp_path, "fd-safety")
    with pytest.raises(LookupError, match="no verdict for 'fd-quality' dispatch 'd2'"):
        verdict_files.read(tmp_path, "fd-quality", "d2")


def test_read_gives_the_latest_dispatch_or_the_one_asked_for(tmp_path: Path) -> None:
    """Later by time, not by file name: `a9` was recorded before `a10`, and an old single-pair
    file (no dispatch) is still read."""
    (tmp_path / "clavain-fd-quality.json").write_text(json.dumps(
        make(status="BLOCKED", at="2026-01-31T11:00:00Z")))
    verdict_files.write(tmp_path, make(status="NEEDS_ATTENTION", at="2026-01-31T12:00:00.900Z"),
                        "a9")
    verdict_files.write(tmp_path, make(status="CLEAN", at="2026-01-31T12:00:01.100Z"), "a10")
    assert verdict_files.read(tmp_path, "fd-quality")["dispatch"] == "a10"
    assert verdict_files.read(tmp_path, "clavain:fd-quality", "a9")["status"] == "NEEDS_ATTENTION"
    verdict_files.write(tmp_path, make(agent_id="x/y", at="2026-01-31T10:00:00.000Z"))
    assert verdict_files.read(tmp_path, "fd-quality", "x/y")["agent_id"] == "x/y"  # sanitised
    (tmp_path / "clavain-fd-quality--a10.json").unlink()
    (tmp_path / "clavain-fd-quality--a9.json").unlink()
    assert verdict_files.read(tmp_path, "fd-quality") == make(
        status="BLOCKED", at="2026-01-31T11:00:00Z") | {"dispatch": None}


def test_latest_is_by_moment_whatever_the_offset_or_fraction_digits() -> None:
    stamps = ["2026-01-31T11:59:59.999-01:00",  # 12:59:59.999Z
              "2026-01-31T12:00:00Z",
              "2026-01-31T13:00:00.1+00:30",  # 12:30:00.1Z
              "2026-01-31T12:00:00.5Z"]
    ordered = sorted((make(at=stamp) for stamp in stamps), key=verdict_files.order_key)
    assert [v["timestamp"] for v in ordered] == [stamps[1], stamps[3], stamps[2], stamps[0]]


def test_read_reports_an_invalid_file(tmp_path: Path) -> None:
    (tmp_path / "x--d1.json").write_text(json.dumps({"type": "verdict", "status": "MEH"}))
    with pytest.raises(ValueError) as caught:
        verdict_files.read(tmp_path, "x")
    assert "status: must be one of" in str(caught.value)
    assert "summary: required" in str(caught.value)


def test_the_dispatch_is_the_agent_id_else_a_fresh_unique_id(tmp_path: Path) -> None:
    agent = "clavain:fd-quality"
    assert verdict_files.dispatch_for(tmp_path, agent, "a1b2") == "a1b2"
    verdict_files.write(tmp_path, make(agent_id="a/b"))
    assert [p.name for p in tmp_path.iterdir()] == ["clavain-fd-quality--a-b.json"]
    # The same agent_id again is the same dispatch (a repeated SubagentStop replaces its pair)
    assert verdict_files.dispatch_for(tmp_path, agent, "a/b") == "a-b"
    # another agent_id that sanitises alike must not take over that pair
    other = verdict_files.dispatch_for(tmp_path, agent, "a:b")
    generated = [verdict_files.dispatch_for(tmp_path, agent, None) for _ in range(3)]
    for dispatch in (other, *generated, verdict_files.dispatch_for(tmp_path, agent, "::")):
        assert re.fullmatch(r"\d{8}T\d{9}Z-[0-9a-f]{8}", dispatch)
    assert len(set(generated)) == 3


def test_clean_removes_verdicts_and_details_only(tmp_path: Path) -> None:
    verdict_files.write(tmp_path, make(), "d1")
    verdict_files.write_detail(tmp_path, "clavain:fd-quality", "d1", "full answer")
    (tmp_path / "keep.txt").write_text("x")
    assert verdict_files.clean(tmp_path) == 2
    assert [p.name for p in tmp_path.iterdir()] == ["keep.txt"]
    assert verdict_files.clean(tmp_path / "missing") == 0


def test_parse_all_reads_every_dispatch_by_agent_then_time(tmp_path: Path) -> None:
    verdict_files.write(tmp_path, make(status="CLEAN", at="2026-01-31T12:00:02.000Z"), "b")
    verdict_files.write(tmp_path, make(status="NEEDS_ATTENTION", at="2026-01-31T12:00:01.000Z"),
                        "c")
    verdict_files.write(tmp_path, make("clavain:executor", "FAILED"), "a")
    (tmp_path / "clavain-fd-quality.json").write_text(json.dumps(
        make(status="ERROR", at="2026-01-30T00:00:00Z")))
    found = verdict_files.parse_all(tmp_path)
    assert [(v["agent"], v["dispatch"], v["status"]) for v in found] == [
        ("clavain:executor", "a", "FAILED"),
        ("clavain:fd-quality", None, "ERROR"),
        ("clavain:fd-quality", "c", "NEEDS_ATTENTION"),
        ("clavain:fd-quality", "b", "CLEAN")]
    assert set(found[0]) == {*verdict_files.FIELDS, "dispatch"}


def test_a_broken_file_is_an_error_row_not_skipped(tmp_path: Path) -> None:
    verdict_files.write(tmp_path, make(), "d1")
    (tmp_path / "clavain-fd-quality--d2.json").write_text("{not json")
    found = verdict_files.parse_all(tmp_path)
    junk = next(v for v in found if v["status"] == "ERROR")
    assert (junk["agent"], junk["dispatch"]) == ("clavain-fd-quality", "d2")
    assert junk["summary"].startswith("unreadable verdict file: clavain-fd-quality--d2.json")
    assert junk["detail_path"] == str(tmp_path / "clavain-fd-quality--d2.json")


def test_empty_folder() -> None:
    assert verdict_files.parse_all(Path("/nonexistent/verdicts")) == []


# --- review: hostile folders and file names ------------------------------------------------------

def test_clean_refuses_a_verdicts_folder_that_is_a_symlink(tmp_path: Path) -> None:
    """A committed `.clavain/verdicts -> ..` would make `clean` delete the project's README.md,
    package.json, …: the folder must be a real folder."""
    project = tmp_path / "project"
    (project / ".clavain").mkdir(parents=True)
    (project / "README.md").write_text("readme")
    (project / "package.json").write_text("{}")
    (project / ".clavain" / "verdicts").symlink_to("..", target_is_directory=True)
    with pytest.raises(ValueError, match="symlink"):
        verdict_files.clean(project / ".clavain" / "verdicts")
    assert sorted(p.name for p in project.iterdir()) == [".clavain", "README.md", "package.json"]


def test_clean_unlinks_symlinked_files_without_touching_their_targets(tmp_path: Path) -> None:
    outside = tmp_path / "outside.md"
    outside.write_text("keep me")
    folder = tmp_path / "verdicts"
    folder.mkdir()
    (folder / "clavain-x.md").symlink_to(outside)
    assert verdict_files.clean(folder) == 1
    assert outside.read_text() == "keep me" and list(folder.iterdir()) == []


def test_write_replaces_a_symlink_instead_of_writing_through_it(tmp_path: Path) -> None:
    outside = tmp_path / "outside.json"
    outside.write_text("keep me")
    folder = tmp_path / "verdicts"
    folder.mkdir()
    (folder / "clavain-fd-quality--d1.json").symlink_to(outside)
    (folder / "clavain-fd-quality--d1.md").symlink_to(outside)
    verdict_files.write_detail(folder, "clavain:fd-quality", "d1", "detail")
    verdict_files.write(folder, make(), "d1")
    assert outside.read_text() == "keep me"
    assert not (folder / "clavain-fd-quality--d1.json").is_symlink()
    assert verdict_files.read(folder, "fd-quality")["status"] == "CLEAN"


def test_write_refuses_a_verdicts_folder_that_is_a_symlink(tmp_path: Path) -> None:
    """A committed `.clavain/verdicts -> ~/somewhere` must not turn verdicts into writes
    there."""
    from clavain.fsutil import UnsafePathError

    outside = tmp_path / "outside"
    outside.mkdir()
    state = tmp_path / ".clavain"
    state.mkdir()
    (state / "verdicts").symlink_to(outside, target_is_directory=True)
    with pytest.raises(UnsafePathError):
        verdict_files.write_detail(state / "verdicts", "clavain:fd-quality", "d1", "answer",
                                   inside=state)
    with pytest.raises(UnsafePathError):
        verdict_files.write(state / "verdicts", make(), "d1")  # default: inside its parent
    assert list(outside.iterdir()) == []


def test_a_broken_file_with_a_long_name_is_still_an_error_row(tmp_path: Path) -> None:
    name = "a" * 240 + ".json"  # a legal file name, longer than an agent name may be
    (tmp_path / name).write_text("{not json")
    [row] = verdict_files.parse_all(tmp_path)
    assert row["status"] == "ERROR" and row["agent"].startswith("aaaa")
    assert row["dispatch"] is None
    assert verdict_files.validate({k: v for k, v in row.items()
                                   if k not in ("detail_path", "dispatch")}) == []
