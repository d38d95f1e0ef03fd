"""`clavain graph import` as a library (`workgraph.imports`), on both stores: imported nodes keep
their origin, importing again updates rather than duplicates (the rule of a sprint's plan
recorded again), items their source closed are done here, and plan lint runs before anything is
written."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from clavain.errors import ClavainError
from clavain.paths import StatePaths
from clavain.plans import findings as plan_findings
from clavain.plans import lint
from clavain.workgraph import claims, imports, kv, nodes
from clavain.workgraph.graphs import DEFAULT_GRAPH, Graph
from tests.conftest import open_project_graph

pytestmark = pytest.mark.usefixtures("backend")


def _spec(number: int, title: str = "", *, deps: tuple[int, ...] = (),
          status: str | None = None, **extra: Any) -> dict[str, Any]:
    origin: dict[str, Any] = {"format": "github", "source_id": str(number),
                              "url": f"https://example.org/issues/{number}"}
    if status is not None:
        origin["status"] = status
    return {"id": f"gh-{number}", "type": "task", "title": title or f"issue {number}",
            "dependsOn": [f"gh-{d}" for d in deps], "verify": [f"test -f f{number}.txt"],
            "ownership": [f"f{number}.txt"], "origin": origin, **extra}


@pytest.fixture
def state(project: Path) -> StatePaths:
    from clavain import locate

    return StatePaths(project / ".clavain", store_url=locate.store_url())


@pytest.fixture
def g(state: StatePaths, project: Path):
    state.root.mkdir()
    conn = open_project_graph(project)
    yield Graph(conn, DEFAULT_GRAPH, state)
    conn.close()


def _import(g: Graph, specs: list[dict[str, Any]], **check: Any) -> dict[str, Any]:
    checked = imports.check(g.state, specs, source="issues.json",
                            known_ids=imports.node_ids(g), **check)
    return imports.record(g, checked)


def _graph(g: Graph) -> list[tuple[Any, ...]]:
    return [(n["id"], n["status"], n["title"], n["depends_on"], n["origin"])
            for n in nodes.list_nodes(g)]


def test_an_import_keeps_each_origin_and_the_dependencies(g: Graph) -> None:
    report = _import(g, [_spec(1), _spec(2, deps=(1,))])
    assert report["added"] == ["gh-1", "gh-2"] and report["updated"] == {}
    node = nodes.get_node(g, "gh-2")
    assert node["depends_on"] == ["gh-1"] and node["unmet_deps"] == 1
    assert node["origin"] == {"format": "github", "source_id": "2",
                              "url": "https://example.org/issues/2"}
    plain = imports.record(g, imports.check(g.state, [{"id": "mine", "type": "task",
                                                       "verify": ["test -f m"]}],
                                            source="x.json", known_ids=[]))
    assert plain["added"] == ["mine"] and nodes.get_node(g, "mine")["origin"] is None


def test_importing_again_changes_nothing(g: Graph) -> None:
    specs = [_spec(1), _spec(2, deps=(1,)), _spec(3, deps=(1, 2), status="closed")]
    _import(g, specs)
    first = _graph(g)
    for _ in range(2):
        report = _import(g, specs)
        assert (report["added"], report["updated"], report["done"]) == ([], {}, [])
        assert report["unchanged"] == ["gh-1", "gh-2", "gh-3"]
        assert _graph(g) == first


def test_an_unstarted_node_takes_the_new_definition(g: Graph) -> None:
    _import(g, [_spec(1), _spec(2), _spec(3)])
    report = _import(g, [_spec(1, "issue one, renamed"), _spec(2, deps=(1,)),
                         _spec(3, status="open"), _spec(4, deps=(3,))])
    assert report["added"] == ["gh-4"]
    assert report["updated"] == {"gh-1": ["title"], "gh-2": ["depends_on"], "gh-3": ["origin"]}
    assert nodes.get_node(g, "gh-1")["title"] == "issue one, renamed"
    assert nodes.get_node(g, "gh-2")["depends_on"] == ["gh-1"]
    assert nodes.get_node(g, "gh-3")["origin"]["status"] == "open"


def test_a_started_node_whose_definition_changed_is_refused_by_name(g: Graph) -> None:
    _import(g, [_spec(1), _spec(2)])
    assert claims.claim_named(g, "gh-1", run_id="r1")["id"] == "gh-1"
    before = _graph(g)
    with pytest.raises(ClavainError, match=r"node 'gh-1' already started, and the import "
                                           r"changes it \(title\)"):
        _import(g, [_spec(1, "new title"), _spec(2, "also new"), _spec(5)])
    assert _graph(g) == before  # nothing of it: not gh-2's title, not gh-5
    # Its source moving on (a label, a priority) is no change of definition.
    report = _import(g, [{**_spec(1), "origin": {**_spec(1)["origin"], "priority": "high"}},
                         _spec(2)])
    assert report["updated"] == {"gh-1": ["origin"]}
    assert nodes.get_node(g, "gh-1")["status"] == "in_progress"


def test_an_item_closed_at_its_source_is_done_and_its_dependents_run(g: Graph) -> None:
    report = _import(g, [_spec(1, status="closed"), _spec(2, deps=(1,))])
    assert report["done"] == ["gh-1"]
    assert nodes.get_node(g, "gh-1")["status"] == "done"
    assert nodes.get_node(g, "gh-2")["unmet_deps"] == 0
    # Closed later at its source: the open, unstarted node is done too.
    report = _import(g, [_spec(1, status="closed"), _spec(2, deps=(1,), status="done")])
    assert report["done"] == ["gh-2"] and report["unchanged"] == ["gh-1"]
    assert nodes.get_node(g, "gh-2")["status"] == "done"


def test_a_started_node_stays_as_it_is_when_its_item_closes(g: Graph) -> None:
    _import(g, [_spec(1)])
    claims.claim_named(g, "gh-1", run_id="r1")
    report = _import(g, [_spec(1, status="closed")])
    assert report["done"] == [] and report["updated"] == {"gh-1": ["origin"]}
    assert nodes.get_node(g, "gh-1")["status"] == "in_progress"


@pytest.mark.parametrize(("existing", "message"), [
    ({"id": "gh-1", "type": "task", "verify": ["test -f x"]},
     "node 'gh-1' already exists in graph 'default' and was not imported (this one is github "
     "item '1'); pick another id"),
    ({**_spec(1), "origin": {"format": "beads", "source_id": "bd-1"}},
     "node 'gh-1' already exists in graph 'default' and is beads item 'bd-1', not github item "
     "'1'; pick another id"),
])
def test_an_id_taken_by_another_node_is_refused_by_name(g: Graph, existing: dict,
                                                        message: str) -> None:
    _import(g, [existing])
    with pytest.raises(ClavainError) as refused:
        _import(g, [_spec(1), _spec(2)])
    assert str(refused.value) == message
    assert [n["id"] for n in nodes.list_nodes(g)] == ["gh-1"]


def test_a_plain_spec_on_a_taken_id_keeps_its_old_refusal(g: Graph) -> None:
    _import(g, [{"id": "a", "type": "task", "verify": ["test -f a"]}])
    with pytest.raises(ClavainError) as refused:
        _import(g, [{"id": "a", "type": "task", "verify": ["test -f a"]}])
    assert str(refused.value) == "node 'a' already exists in graph 'default'; pick another id"


def _finding(severity: str) -> plan_findings.Finding:
    return plan_findings.Finding(severity, "verify_always_passes", "gh-1",
                        "gh-1: verify `true` always passes")


def test_lint_errors_refuse_before_anything_is_written(g: Graph, monkeypatch) -> None:
    seen: dict[str, Any] = {}

    def lint_specs(specs: list, *, project: Path, config: dict, known_ids: Any) -> list:
        seen.update(project=project, known=list(known_ids))
        return [_finding(plan_findings.ERROR), _finding(plan_findings.WARNING)]

    monkeypatch.setattr(lint, "lint_specs", lint_specs)
    with pytest.raises(ClavainError) as refused:
        imports.check(g.state, [_spec(1)], source="issues.json", known_ids=["x"])
    assert refused.value.exit_code == 1
    lines = str(refused.value).splitlines()
    assert lines[1:] == ["error: gh-1: verify `true` always passes",
                         "warning: gh-1: verify `true` always passes"]
    assert seen == {"project": g.state.project, "known": ["x"]}
    # An agent cannot accept them; a person can, and the acceptance is recorded on the graph.
    with pytest.raises(ClavainError, match=r"\(--accept-lint\) is a person's decision"):
        imports.check(g.state, [_spec(1)], source="issues.json", known_ids=[],
                      accept_lint="known flaky", decided_by=None)
    person = {"by": "person", "via": "terminal", "user": "ann"}
    report = _import(g, [_spec(1)], accept_lint="known flaky", decided_by=person)
    assert report["added"] == ["gh-1"] and len(report["lint"]) == 2
    record = json.loads(kv.get(g, kv.RUN_NAMESPACE, imports.LINT_KEY)["value"])
    assert record["reason"] == "known flaky" and record["decided_by"] == person
    assert record["source"] == "issues.json" and record["at"]
    assert [f["severity"] for f in record["findings"]] == ["error", "warning"]


def test_lint_warnings_come_back_and_the_import_goes_on(g: Graph, monkeypatch) -> None:
    monkeypatch.setattr(lint, "lint_specs", lambda *a, **k: [_finding(plan_findings.WARNING)])
    report = _import(g, [_spec(1)])
    assert report["added"] == ["gh-1"]
    assert report["lint"] == [_finding(plan_findings.WARNING).to_json()]
    assert kv.get(g, kv.RUN_NAMESPACE, imports.LINT_KEY) is None


def test_the_hook_takes_accept_lint_for_a_persons_word() -> None:
    from clavain.guards.commands import person_only

    assert person_only("clavain graph import --from beads .beads/issues.jsonl "
                       "--accept-lint 'checked'") is not None
    assert person_only("clavain graph import --from beads .beads/issues.jsonl") is None


def test_an_origin_moves_with_its_graph_to_the_server_and_back(tmp_path: Path,
                                                                pg_url: str) -> None:
    from clavain.store import transfer
    from clavain.store.db import connect

    local = StatePaths(tmp_path / "here" / ".clavain")
    conn = connect(local.db)
    _import(Graph(conn, DEFAULT_GRAPH, local), [_spec(1, status="closed"), _spec(2, deps=(1,))])
    transfer.migrate(local, pg_url)
    back = tmp_path / "back.sqlite"
    transfer.migrate(StatePaths(tmp_path / "there" / ".clavain", store_url=pg_url), str(back))
    returned = Graph(connect(back), DEFAULT_GRAPH, local)
    assert _graph(returned) == _graph(Graph(conn, DEFAULT_GRAPH, local))
    assert nodes.get_node(returned, "gh-1")["origin"]["status"] == "closed"
