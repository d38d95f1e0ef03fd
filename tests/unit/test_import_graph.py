"""No knot (issue 35): no import cycle, at module level or through an import inside a function
(save the listed hook-path deferrals), and no import up the layers of scripts/import_graph.py."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _checker():
    if "import_graph" not in sys.modules:
        script = REPO / "scripts" / "import_graph.py"
        spec = importlib.util.spec_from_file_location("import_graph", script)
        module = importlib.util.module_from_spec(spec)
        sys.modules["import_graph"] = module  # dataclasses look their module up there
        spec.loader.exec_module(module)
    return sys.modules["import_graph"]


def test_no_cycle_and_nothing_imports_upward() -> None:
    found = _checker().report()
    assert found["module_level_cycles"] == []
    assert found["cycles"] == [], "cycles through imports (module or function level)"
    assert found["upward"] == [], "imports up the layers"
    assert found["stale_deferrals"] == [], "DEFERRED names an import that is gone"


def test_every_module_has_a_layer() -> None:
    checker = _checker()
    for name in checker.modules():
        checker.layer_of(name)  # raises, naming the module, when it has none


def test_the_checker_sees_a_deferred_cycle_and_an_upward_import(tmp_path: Path) -> None:
    package = tmp_path / "clavain"
    (package / "models").mkdir(parents=True)
    (package / "hooks").mkdir()
    for init in (package, package / "models", package / "hooks"):
        (init / "__init__.py").write_text("")
    (package / "errors.py").write_text("def f():\n    from clavain import paths\n")
    (package / "paths.py").write_text("from clavain.errors import f\n")
    (package / "models" / "node.py").write_text("from clavain.hooks import run\n")
    (package / "hooks" / "run.py").write_text("if TYPE_CHECKING:\n    import clavain.cli\n")
    found = _checker().report(tmp_path)
    assert found["module_level_cycles"] == []
    assert found["cycles"] == [["clavain.errors", "clavain.paths"]]
    assert found["upward"] == ["clavain.models.node:1 -> clavain.hooks.run"]
    assert found["function_level_statements"] == 1
