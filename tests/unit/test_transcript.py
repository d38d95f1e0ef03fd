"""Measured tokens: one count per API response, however many lines repeat it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clavain.verdicts.transcript import (
    _usage_lines,
    session_usage,
    subagent_files,
    transcript_usage,
)


def usage(inp: int, out: int, write: int = 0, read: int = 0) -> dict:
    return {"input_tokens": inp, "output_tokens": out, "cache_creation_input_tokens": write,
            "cache_read_input_tokens": read,
            "cache_creation": {"ephemeral_5m_input_tokens": write, "ephemeral_1h_input_tokens": 0},
            "server_tool_use": {"web_search_requests": 0, "web_fetch_requests": 0}}


def assistant(message_id: str | None, request_id: str | None, use: dict, block: dict, *,
              sidechain: bool = False, model: str = "claude-sonnet-4-5") -> dict:
    message = {"model": model, "type": "message", "role": "assistant", "content": [block],
               "stop_reason": None, "usage": use}
    if message_id:
        message["id"] = message_id
    line = {"parentUuid": None, "isSidechain": sidechain, "type": "assistant",
            "message": message, "uuid": "u", "timestamp": "2026-01-31T12:00:00Z"}
    if request_id:
        line["requestId"] = request_id
    return line


def user(text: str) -> dict:
    return {"type": "user", "isSidechain": False,
            "message": {"role": "user", "content": [{"type": "tool_result", "content": text}]}}


def write_jsonl(path: Path, records: list[dict | str]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n"
                            for r in records))
    return path


def naive_sum(path: Path) -> int:
    total = 0
    for line in path.read_text().splitlines():
        record = json.loads(line)
        use = record.get("message", {}).get("usage") if isinstance(record, dict) else None
        if record.get("type") == "assistant" and use:
            total += sum(use[k] for k in ("input_tokens", "output_tokens",
                                          "cache_creation_input_tokens",
                                          "cache_read_input_tokens"))
    return total


THINK = {"type": "thinking", "thinking": "hm"}
TEXT = {"type": "text", "text": "Let me look."}
TOOL = {"type": "tool_use", "id": "toolu_1", "name": "Read", "input": {"file_path": "a.py"}}


@pytest.fixture
def session(tmp_path: Path) -> Path:
    """A main transcript whose responses are split into one line per content block."""
    return write_jsonl(tmp_path / "proj" / "s1.jsonl", [
        user("please review"),
        # msg_1: three content blocks, usage repeated; the first line has a partial output count
        assistant("msg_1", "req_1", usage(10, 1, 500, 0), THINK),
        assistant("msg_1", "req_1", usage(10, 40, 500, 0), TEXT),
        assistant("msg_1", "req_1", usage(10, 40, 500, 0), TOOL),
        user('{"usage": "a tool result that mentions \\"usage\\" is not an assistant line"}'),
        # msg_2: two blocks
        assistant("msg_2", "req_2", usage(5, 20, 0, 510), TEXT),
        assistant("msg_2", "req_2", usage(5, 20, 0, 510), TOOL),
        '{"type": "assistant", "message": {"id": "msg_3", "usage": {"input_tok',  # torn line
    ])


def test_repeated_content_block_lines_count_once(session: Path) -> None:
    measured = transcript_usage(session)
    assert measured.messages == 2 and measured.usage_lines == 5
    assert (measured.input_tokens, measured.output_tokens) == (15, 60)
    assert (measured.cache_creation_input_tokens, measured.cache_read_input_tokens) == (500, 510)
    assert measured.total == 1085
    assert naive_sum_without_torn(session) == 2681  # what a naive sum over-counts to


def naive_sum_without_torn(path: Path) -> int:
    good = [line for line in path.read_text().splitlines() if line.endswith("}")]
    copy = path.with_name("naive.jsonl")
    copy.write_text("\n".join(good) + "\n")
    return naive_sum(copy)


def test_sidechain_copies_count_once_and_the_larger_wins(session: Path) -> None:
    sub = write_jsonl(session.with_suffix("") / "subagents" / "agent-a1.jsonl", [
        assistant("msg_9", "req_9", usage(100, 7, 0, 0), TEXT, sidechain=True,
                  model="claude-haiku-4-5"),
        assistant("msg_9", "req_9", usage(100, 70, 0, 0), TOOL, sidechain=True,
                  model="claude-haiku-4-5"),
        # a sidechain copy of a main-thread message, without its requestId
        assistant("msg_2", None, usage(5, 20, 0, 510), TEXT, sidechain=True),
    ])
    assert subagent_files(session) == [sub]
    alone = transcript_usage(sub)
    assert (alone.messages, alone.total, alone.main_model) == (2, 705, "claude-haiku-4-5")

    total, per_file = session_usage(session)
    assert [path.name for path, _ in per_file] == ["s1.jsonl", "agent-a1.jsonl"]
    assert total.messages == 3  # msg_1, msg_2 (once, despite the copy), msg_9
    assert total.total == 1085 + 170
    assert total.models == {"claude-sonnet-4-5": 2, "claude-haiku-4-5": 1}

    without, files = session_usage(session, with_subagents=False)
    assert without.total == 1085 and len(files) == 1


def test_same_message_with_different_requests_on_the_main_thread_counts_twice(
        tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "t.jsonl", [
        assistant("msg_1", "req_1", usage(1, 1), TEXT),
        assistant("msg_1", "req_2", usage(1, 1), TEXT),
    ])
    assert transcript_usage(path).messages == 2


def test_lines_without_ids_are_each_counted(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "t.jsonl", [
        assistant(None, None, usage(1, 2), TEXT),
        assistant(None, None, usage(1, 2), TEXT),
        assistant("msg_1", None, usage(3, 4), TEXT),
        assistant("msg_1", None, usage(3, 4), TOOL),
    ])
    assert (transcript_usage(path).messages, transcript_usage(path).total) == (3, 13)


def test_junk_is_ignored(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "t.jsonl", [
        "[1, 2]", '"usage"', "{bad json with \"usage\"",
        {"type": "assistant", "message": "usage"},
        {"type": "assistant", "message": {"id": "m", "usage": "lots"}},
        {"type": "assistant", "message": {"id": "m2", "usage": {"input_tokens": -5,
                                                                "output_tokens": True}}},
        {"type": "summary", "message": {"id": "m3", "usage": usage(9, 9)}},
        {"type": "user", "toolUseResult": {"usage": usage(9, 9)}},
    ])
    measured = transcript_usage(path)
    assert (measured.messages, measured.total) == (1, 0)


def test_empty_transcript(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "t.jsonl", [])
    assert transcript_usage(path).total == 0
    assert transcript_usage(path).main_model is None
    assert subagent_files(path) == []


@settings(max_examples=100, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(lines=st.lists(st.sampled_from(['{"usage": 1}', "{}", '{"x": "usage"}', "", "a" * 30,
                                       '{"usage": "' + "b" * 40 + '"}']), max_size=12),
       chunk_size=st.integers(1, 64), torn_tail=st.booleans())
def test_chunked_scan_finds_exactly_the_usage_lines(tmp_path: Path, lines: list[str],
                                                    chunk_size: int, torn_tail: bool) -> None:
    text = "\n".join(lines) + ("" if torn_tail else "\n")
    path = tmp_path / "t.jsonl"
    path.write_text(text)
    expected = [line.encode() for line in text.split("\n") if '"usage"' in line]
    assert list(_usage_lines(path, chunk_size)) == expected


def test_a_sidechain_copy_merges_into_its_own_request_not_the_first_one(tmp_path: Path) -> None:
    """msg_1 answered two requests on the main thread; the sidechain copy of the second (with a
    larger, final output count) must replace the second, not inflate the first."""
    path = write_jsonl(tmp_path / "t.jsonl", [
        assistant("msg_1", "req_1", usage(0, 10), TEXT),
        assistant("msg_1", "req_2", usage(0, 20), TEXT),
        assistant("msg_1", "req_2", usage(0, 25), TEXT, sidechain=True),
    ])
    measured = transcript_usage(path)
    assert (measured.messages, measured.total) == (2, 35)


def test_null_missing_and_nested_usage_fields_and_no_final_newline(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    use = {"input_tokens": None, "output_tokens": 5, "cache_read_input_tokens": 7,
           "cache_creation": {"ephemeral_5m_input_tokens": 100, "ephemeral_1h_input_tokens": 0}}
    lines = [json.dumps(assistant("msg_1", "req_1", use, TEXT)), "{not json, \"usage\"",
             json.dumps(assistant("msg_2", "req_2", {"output_tokens": 3}, TEXT))]
    path.write_text("\n".join(lines))  # the last line has no newline
    for chunk_size in (7, 64, 1 << 22):  # lines split across read chunks
        counted = [json.loads(line) for line in _usage_lines(path, chunk_size)
                   if line.startswith(b'{"parentUuid"')]
        assert len(counted) == 2
    measured = transcript_usage(path)
    assert (measured.messages, measured.total) == (2, 15)  # the nested dict is not added again


def test_a_too_deeply_nested_line_is_skipped_not_fatal(tmp_path: Path) -> None:
    deep = '{"type": "user", "toolUseResult": {"usage": ' + "[" * 100_000 + "]" * 100_000 + "}}"
    path = write_jsonl(tmp_path / "t.jsonl", [deep, assistant("msg_1", "req_1", usage(1, 2),
                                                              TEXT)])
    assert transcript_usage(path).total == 3


def test_a_folder_named_like_a_subagent_transcript_is_not_read(session: Path) -> None:
    (session.with_suffix("") / "subagents" / "agent-odd.jsonl").mkdir(parents=True)
    assert subagent_files(session) == []
    assert session_usage(session)[0].total == 1085


@pytest.mark.parametrize("copy_first", [False, True])
def test_a_sidechain_copy_with_a_different_request_id_counts_once(tmp_path: Path,
                                                                  copy_first: bool) -> None:
    """The same response seen on the main thread (req_main) and in a subagent file under another
    requestId (req_side): one response, the larger total kept. On the main thread alone the
    same pair would count twice (see the test above)."""
    original = assistant("msg_7", "req_main", usage(100, 10), TEXT)
    copy = assistant("msg_7", "req_side", usage(100, 30), TEXT, sidechain=True)
    path = write_jsonl(tmp_path / "t.jsonl", [copy, original] if copy_first else [original, copy])
    measured = transcript_usage(path)
    assert (measured.messages, measured.total) == (1, 130)
