"""The agents' markdown: model tier, turn limit, narrow tools, a short Output Contract; and the
one full contract reference, whose examples must all parse."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from clavain.hooks.subagent_stop import owes_verdict
from clavain.verdicts.parser import STATUSES_BY_TYPE, parse_header

REPO = Path(__file__).resolve().parents[2]
# Two agents, not ten: one reviewer whose lens the prompt names, one executor. Ten listings
# cost ~518 tokens in every request of every session (benchmarks/context_cost.py).
REVIEW = ["reviewer"]
WORKFLOW = ["executor"]
AGENTS = [("review", name) for name in REVIEW] + [("workflow", name) for name in WORKFLOW]
WRITE_TOOLS = {"Edit", "Write", "Bash", "NotebookEdit"}


def frontmatter(path: Path) -> tuple[dict[str, str], str]:
    text = path.read_text()
    match = re.match(r"^---\n(.*?)\n---\n(.*)$", text, re.DOTALL)
    assert match, f"{path} has no frontmatter"
    fields = dict(line.split(": ", 1) for line in match[1].splitlines())
    return fields, match[2]


def test_exactly_the_planned_agents_exist() -> None:
    found = sorted((p.parent.name, p.stem) for p in (REPO / "agents").glob("*/*.md"))
    assert found == sorted(AGENTS)


@pytest.mark.parametrize(("kind", "name"), AGENTS)
def test_agent_declares_what_it_needs(kind: str, name: str) -> None:
    fields, body = frontmatter(REPO / "agents" / kind / f"{name}.md")
    assert fields["name"] == name
    assert fields["description"].startswith("Use when") and len(fields["description"]) < 150
    assert fields["model"] in ("haiku", "sonnet", "opus")
    assert 5 <= int(fields["maxTurns"]) <= (15 if kind == "review" else 30)
    tools = {tool.strip() for tool in fields["tools"].split(",")}
    assert tools <= {"Read", "Grep", "Glob", "Edit", "Write", "Bash"}
    if kind == "review":
        assert not tools & WRITE_TOOLS, "reviewers are read-only"
    assert len(body.splitlines()) < 70


@pytest.mark.parametrize(("kind", "name"), AGENTS)
def test_agent_has_a_short_output_contract_of_its_type(kind: str, name: str) -> None:
    _, body = frontmatter(REPO / "agents" / kind / f"{name}.md")
    contract = body.split("## Output Contract", 1)[1]
    assert len(contract.strip().splitlines()) <= 15
    expected = "verdict" if kind == "review" else "implementation"
    assert f"TYPE: {expected}\n" in contract
    for status in STATUSES_BY_TYPE[expected]:
        assert status in contract
    assert "agent-contracts.md" in contract
    assert owes_verdict(name, kind, REPO) and owes_verdict(name, None, REPO)


def test_owes_verdict_refuses_odd_names() -> None:
    assert not owes_verdict("../review/reviewer", None, REPO)
    assert not owes_verdict("*", None, REPO)
    assert not owes_verdict("reviewer", "*", REPO)
    assert not owes_verdict("reviewer", "workflow", REPO)
    assert not owes_verdict("no-such-agent", None, REPO)


def test_the_reviewer_knows_every_lens_a_sprint_asks_for() -> None:
    from clavain.sprint.route import GOAL_CHECK, PLAN_REVIEW, REVIEWERS

    _, body = frontmatter(REPO / "agents" / "review" / "reviewer.md")
    lenses = {lens for tier in REVIEWERS.values() for lens in tier} | {GOAL_CHECK, PLAN_REVIEW}
    for lens in lenses:
        assert f"- **{lens}**:" in body, lens


def test_contract_reference_has_a_parsing_example_for_every_type_and_status() -> None:
    text = (REPO / "skills" / "using-clavain" / "references" / "agent-contracts.md").read_text()
    examples = re.findall(r"```\n(TYPE:.*?)```", text, re.DOTALL)
    covered = {(parsed["type"], parsed["status"])
               for parsed in (parse_header(example) for example in examples)}
    assert covered == {(kind, status) for kind, statuses in STATUSES_BY_TYPE.items()
                       for status in statuses}


def test_skill_is_small_and_points_at_the_reference() -> None:
    fields, body = frontmatter(REPO / "skills" / "using-clavain" / "SKILL.md")
    assert fields["name"] == "using-clavain"
    assert fields["description"].startswith("Use when") and len(fields["description"]) < 300
    assert len(body) < 1200
    assert "references/agent-contracts.md" in body and "clavain verdicts summary" in body


def test_verdicts_command_passes_its_arguments_to_the_cli() -> None:
    fields, body = frontmatter(REPO / "commands" / "verdicts.md")
    assert fields["description"]
    assert "clavain verdicts $ARGUMENTS" in body
    assert fields["allowed-tools"] == "Bash(clavain verdicts:*)"


def test_plugin_json_lists_every_agent_file() -> None:
    """Listing the files keeps agent names flat (`clavain:fd-quality`); a new agent file that is
    not listed would silently not load."""
    import json

    manifest = json.loads((REPO / ".claude-plugin" / "plugin.json").read_text())
    on_disk = sorted(f"./{path.relative_to(REPO).as_posix()}"
                     for path in (REPO / "agents").glob("*/*.md"))
    assert sorted(manifest["agents"]) == on_disk


# SubagentStop reads agent names and the contract heading without `re` (issue 37); the rules
# are the patterns it used, with a line's end meaning the end of the line (the old `$` also let
# a name end in a newline, and `\s+` could run a heading over two lines).
_NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}")
_HEADING_PATTERN = re.compile(r"^##[^\S\n]+Output Contract[^\S\n]*$", re.MULTILINE)
_NAME_ALPHABET = "aZ09_-.:/ \n*é"
_HEADING_ALPHABET = ["#", " ", "\t", "\n", "\r", "\u00a0", "\u2003", "Output Contract", "x",
                     "## Output Contract"]


@given(st.text(alphabet=_NAME_ALPHABET, max_size=70))
def test_agent_names_are_read_as_the_pattern_read_them(name: str) -> None:
    from clavain.hooks.subagent_stop import agent_name_ok

    assert agent_name_ok(name) is bool(_NAME_PATTERN.fullmatch(name))


@given(st.lists(st.sampled_from(_HEADING_ALPHABET), max_size=8).map("".join))
def test_the_contract_heading_is_found_as_the_pattern_found_it(text: str) -> None:
    from clavain.hooks.subagent_stop import has_contract_heading

    assert has_contract_heading(text) is bool(_HEADING_PATTERN.search(text))


def test_owes_verdict_looks_one_folder_deep_as_the_glob_did(tmp_path: Path) -> None:
    """`agents/*/<name>.md`: any folder (a hidden one, a symlinked one), never agents/ itself
    or deeper; a file that is not UTF-8 is passed over."""
    contract = "# x\n\n## Output Contract\n"
    for where in ("agents/reviewer.md", "agents/a/b/deep.md"):
        (tmp_path / where).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / where).write_text(contract)
    (tmp_path / "agents" / ".hidden").mkdir()
    (tmp_path / "agents" / ".hidden" / "secret.md").write_text(contract)
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "linked.md").write_text(contract)
    (tmp_path / "agents" / "link").symlink_to(tmp_path / "elsewhere")
    (tmp_path / "agents" / "a" / "latin.md").write_bytes(b"## Output Contract\n\xff\n")
    (tmp_path / "agents" / "z").mkdir()
    (tmp_path / "agents" / "z" / "latin.md").write_text(contract)
    assert not owes_verdict("reviewer", None, tmp_path)
    assert not owes_verdict("deep", None, tmp_path)
    assert owes_verdict("secret", None, tmp_path) and owes_verdict("linked", None, tmp_path)
    assert owes_verdict("latin", None, tmp_path) and not owes_verdict("latin", "a", tmp_path)
    assert not owes_verdict("reviewer", None, tmp_path / "missing")
