"""`plans.import_formats`: each format's sample (tests/data/imports, written in the format's
documented shape) becomes node specs with deterministic ids, kept dependencies, verify and
origin; a bad file is one line naming the file and the place."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from clavain.errors import ClavainError
from clavain.plans import import_formats
from clavain.plans.imports import common
from clavain.workgraph.nodes import validate_specs

SAMPLES = Path(__file__).resolve().parents[1] / "data" / "imports"
SAMPLE = {"github": "github_issues.json", "markdown": "markdown_prd.md",
          "beads": "beads_issues.jsonl", "taskmaster": "taskmaster_tasks.json"}
ORIGIN_KEYS = ["format", "source_id", "status", "priority", "url", "unresolved"]


def _parse(fmt: str) -> list[dict[str, Any]]:
    name = SAMPLE[fmt]
    return import_formats.parse(fmt, (SAMPLES / name).read_bytes(), name)


def _table(specs: list[dict[str, Any]]) -> dict[str, tuple[Any, ...]]:
    return {s["id"]: (s["title"], s["dependsOn"], s["verify"], s["origin"]["status"],
                      s["origin"]["unresolved"]) for s in specs}


def _bad(fmt: str, raw: bytes | str, name: str = "in.json") -> str:
    with pytest.raises(ClavainError) as caught:
        import_formats.parse(fmt, raw, name)
    message = str(caught.value)
    assert "\n" not in message and message.startswith(f"{name}: "), message
    return message


@pytest.mark.parametrize("fmt", import_formats.FORMATS)
def test_each_sample_is_deterministic_valid_and_keeps_its_origin(fmt: str) -> None:
    specs = _parse(fmt)
    assert specs and specs == _parse(fmt)  # parsing again: the same ids, the same specs
    assert json.loads(json.dumps(specs)) == specs
    assert any(s["dependsOn"] for s in specs)
    ids = [s["id"] for s in specs]
    assert len(set(ids)) == len(ids)
    assert all(dep in ids for s in specs for dep in s["dependsOn"])
    for s in specs:
        assert s["type"] == "task" and list(s["origin"]) == ORIGIN_KEYS
        assert s["origin"]["format"] == fmt and s["origin"]["source_id"]
    models = validate_specs(specs)
    assert [m.origin.source_id for m in models] == [s["origin"]["source_id"] for s in specs]
    assert validate_specs([{k: v for k, v in s.items() if k != "origin"} for s in specs])


def test_text_already_decoded_parses_the_same() -> None:
    raw = (SAMPLES / SAMPLE["beads"]).read_bytes()
    assert import_formats.parse("beads", raw.decode(), "x") == import_formats.parse("beads", raw,
                                                                                    "x")


def test_github_issues() -> None:
    specs = _parse("github")
    assert _table(specs) == {
        "gh-10": ("Login epic", ["gh-11", "gh-12"], [], "open", ["#99"]),
        "gh-11": ("Login form", ["gh-12"], ["python3 -m pytest -q tests/test_login.py"], "open",
                  []),
        "gh-12": ("Session store", [], [], "closed", ["#7"]),  # `#11` in code is no reference
        "gh-13": ("Write the docs", [], [], "open", []),
    }
    by_id = {s["id"]: s for s in specs}
    assert by_id["gh-11"]["acceptance"] == ["shows an error on a bad password",
                                            "remembers the email"]
    assert by_id["gh-11"]["origin"] == {
        "format": "github", "source_id": "11", "status": "open", "priority": "P1",
        "url": "https://github.com/acme/shop/issues/11", "unresolved": []}
    assert by_id["gh-12"]["origin"]["priority"] == "high"


def test_github_dependency_wordings() -> None:
    issues = [{"number": 1, "title": "a", "body": "Depends-on: #2, #3\nrequires #4 and #5\n"
                                                  "see also #6; acme/other#2 is elsewhere"},
              *({"number": n, "title": str(n)} for n in range(2, 7))]
    spec = import_formats.parse("github", json.dumps(issues), "i.json")[0]
    assert spec["dependsOn"] == ["gh-2", "gh-3", "gh-4", "gh-5"]
    assert spec["origin"]["status"] is None and spec["origin"]["unresolved"] == []


def test_github_verify_is_a_block_under_a_verify_label_until_the_next_heading() -> None:
    body = ("**Test plan**\n\n```\nmake check\n```\n\n## Notes\n```sh\nrm -rf build\n```\n"
            "```verify\npython3 -m pytest -q\n```\n")
    spec = import_formats.parse("github", json.dumps([{"number": 1, "title": "x",
                                                       "body": body}]), "i.json")[0]
    assert spec["verify"] == ["make check", "python3 -m pytest -q"]


def test_markdown_checkboxes_without_headings() -> None:
    text = "# Plan\n- [ ] a\n- [ ] b\n  depends on: a\n"
    assert _table(import_formats.parse("markdown", text, "plan.md")) == {
        "a": ("a", [], [], "open", []), "b": ("b", ["a"], [], "open", [])}
    assert import_formats.parse("markdown", "just prose\n", "plan.md") == []


def test_markdown_plan() -> None:
    assert _table(_parse("markdown")) == {
        "session-store": ("Session store",
                          ["create-the-sessions-table", "expire-sessions-after-30-days"],
                          ["python3 -m pytest -q tests/test_sessions.py"], None, []),
        "create-the-sessions-table": ("Create the sessions table", [], [], "done", []),
        "expire-sessions-after-30-days": ("Expire sessions after 30 days", [], [], "open", []),
        "login-form": ("Login form", ["build-the-form", "wire-the-submit-button",
                                      "build-the-form-2", "session-store"], [], None, []),
        "build-the-form": ("Build the form", [], ["test -f web/login.html"], "open", []),
        "wire-the-submit-button": ("Wire the submit button", ["build-the-form"], [], "open", []),
        "build-the-form-2": ("Build the form", [], [], "open", []),
        "rate-limiting": ("Rate limiting", [], ["python3 -m pytest -q tests/test_rate_limit.py"],
                          None, ["Captcha service"]),
    }  # Overview and Notes name parts of the document: no tasks
    login = next(s for s in _parse("markdown") if s["id"] == "login-form")
    assert login["acceptance"] == ["shows an error on a bad password"]


def test_markdown_section_done_when_its_items_are_and_nested_items() -> None:
    text = ("## Ship it\n- [x] One\n- [X] Two\n\n## Build\n- [ ] Outer\n  - [ ] Inner\n"
            "# Title again\n```sh\n## not a heading\n- [ ] not a task\n```\n")
    table = _table(import_formats.parse("markdown", text, "plan.md"))
    assert table == {"ship-it": ("Ship it", ["one", "two"], [], "done", []),
                     "one": ("One", [], [], "done", []), "two": ("Two", [], [], "done", []),
                     "build": ("Build", ["outer"], [], None, []),
                     "outer": ("Outer", ["inner"], [], "open", []),
                     "inner": ("Inner", [], [], "open", [])}


def test_beads_jsonl() -> None:
    assert _table(_parse("beads")) == {
        "bd-a1": ("Epic: billing", ["bd-a2", "bd-a3"], [], "open", []),  # waits for children
        "bd-a2": ("Invoice model", [], [], "closed", []),
        "bd-a3": ("Invoice PDF", ["bd-a2"], [], "in_progress", ["bd-zz"]),  # related: no order
        "bd-a5": ("Tax rounding found while testing", [], [], "open", ["bd-a4"]),  # tombstone
    }
    by_id = {s["id"]: s for s in _parse("beads")}
    assert by_id["bd-a3"]["acceptance"] == ["the PDF shows the total", "the PDF shows the date"]
    assert by_id["bd-a1"]["origin"]["priority"] == 1


def test_beads_id_made_a_node_id() -> None:
    line = json.dumps({"id": "my proj/x1", "title": "t", "status": "open"})
    spec = import_formats.parse("beads", line, "issues.jsonl")[0]
    assert spec["id"] == "my-proj-x1" and spec["origin"]["source_id"] == "my proj/x1"


def test_taskmaster_tagged_tasks() -> None:
    assert _table(_parse("taskmaster")) == {
        "tm-1": ("Set up the project", [], ["python3 -m pytest -q tests/test_setup.py"], "done",
                 []),
        "tm-2": ("Add the API", ["tm-2.1", "tm-2.2", "tm-1"], [], "in-progress", []),
        "tm-2.1": ("Define the routes", [], ["python3 -m pytest -q tests/test_routes.py"], "done",
                   []),
        "tm-2.2": ("Write the handlers", ["tm-2.1"], [], "pending", ["1.1"]),
        "tm-4": ("Document the API", ["tm-2", "tm-2.2"], [], "pending", ["3"]),  # 3 cancelled
    }
    api = next(s for s in _parse("taskmaster") if s["id"] == "tm-2")
    assert api["acceptance"] == ["Check that every endpoint answers with the right status code"]
    assert api["origin"]["priority"] == "medium"


def test_taskmaster_legacy_shape() -> None:
    text = json.dumps({"tasks": [{"id": "1", "title": "a", "status": "pending",
                                  "testStrategy": "npm test"}]})
    assert _table(import_formats.parse("taskmaster", text, "tasks.json")) == {
        "tm-1": ("a", [], ["npm test"], "pending", [])}


@pytest.mark.parametrize(("text", "command"), [
    ("`npm run test:unit`", "npm run test:unit"),
    ("pytest -q tests/test_api.py", "pytest -q tests/test_api.py"),
    ("make test", "make test"),
    ("go test ./...", "go test ./..."),
    ("test -f dist/app.js", "test -f dist/app.js"),
    ("make sure the page loads", None),
    ("Test components with React Testing Library", None),
    ("test the login by hand", None),
    ("Run the app and check the logs", None),
])
def test_a_command_is_told_from_prose(text: str, command: str | None) -> None:
    assert common.is_command(text) == command


@pytest.mark.parametrize(("fmt", "raw", "expected"), [
    ("github", b"{not json", "issues.json: not valid JSON"),
    ("github", b'{"number": 1}', "issues.json: expected a JSON array of issues"),
    ("github", b'[{"number": 1, "title": "a"}, {"number": 2}, {"title": "c"}]',
     'issues.json: item 3: "number" is missing'),
    ("github", b'[{"number": 1, "title": "a"}, {"number": 1, "title": "b"}]',
     "issues.json: item 2: issue #1 is already item 1"),
    ("github", b'[{"number": "7", "title": "a"}]',
     "issues.json: item 1: \"number\" must be a positive integer, not '7'"),
    ("github", b'["gh-1"]', "issues.json: item 1: expected an issue object"),
    ("github", b'[{"number": 1, "title": "caf\xe9"}]', "issues.json: not UTF-8 text (byte"),
    ("beads", b'{"id": "bd-1", "title": "a"}\n\n{"id": "bd-2", "title": "b"\n',
     "issues.json: line 3: not valid JSON"),
    ("beads", b'{"title": "a"}\n', 'issues.json: line 1: "id" is missing'),
    ("beads", b'[1]\n', "issues.json: line 1: expected an issue object"),
    ("beads", b'{"id": "a", "dependencies": ["b"]}\n',
     "issues.json: line 1: dependencies[0]: expected an object"),
    ("beads", b'{"id": "a"}\n{"id": "a"}\n', "issues.json: line 2: issue a is already on line 1"),
    ("beads", b'\xff\xfe{"id": "a"}\n', "issues.json: not UTF-8 text"),
    ("taskmaster", b"[]", "issues.json: expected an object with a \"tasks\" list"),
    ("taskmaster", b'{"tasks": {"id": 1}}', "issues.json: tasks: must be a list of tasks"),
    ("taskmaster", b'{"master": {"tasks": [{"title": "a"}]}}',
     'issues.json: master.tasks[1]: "id" is missing'),
    ("taskmaster", b'{"tasks": [{"id": 1, "subtasks": [{"id": 1}, {"title": "x"}]}]}',
     'issues.json: tasks[1].subtasks[2]: "id" is missing'),
    ("taskmaster", b'{"tasks": [{"id": 1, "dependencies": ["soon"]}]}',
     "issues.json: tasks[1]: dependency 'soon' is not a task id"),
    ("taskmaster", b'{"a": {"tasks": []}, "b": {"tasks": []}}',
     "issues.json: tags a, b and no master tag"),
    ("taskmaster", b'{"meta": {}}', 'issues.json: no "tasks" list'),
    ("markdown", b"## caf\xe9\n", "issues.json: not UTF-8 text"),
])
def test_a_bad_file_is_one_line_naming_the_file_and_the_place(fmt: str, raw: bytes,
                                                              expected: str) -> None:
    assert _bad(fmt, raw, "issues.json").startswith(expected)


def test_an_unknown_format_is_one_line() -> None:
    with pytest.raises(ClavainError, match="unknown import format 'jira'"):
        import_formats.parse("jira", b"", "x")


def test_the_module_of_a_format_loads_only_when_asked() -> None:
    import subprocess
    import sys

    code = ("import sys; from clavain.plans import import_formats; "
            "import_formats.parse('beads', b'', 'x'); "
            "print(sorted(m for m in sys.modules if m.startswith('clavain.plans.imports.')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "['clavain.plans.imports.beads', 'clavain.plans.imports.common']"
