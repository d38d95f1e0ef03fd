from pathlib import Path

import pytest

from clavain import config
from clavain.errors import ClavainError


def test_defaults_when_no_file(tmp_path: Path) -> None:
    cfg = config.load(tmp_path / "config.json")
    assert config.get(cfg, "defaults.verifyRunner") == "shellVerify"


def test_user_file_merges_deeply(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text('{"defaults": {"maxAttempts": 5}, "runners": {"claude": {"cmd": "x"}}}')
    cfg = config.load(path)
    assert config.get(cfg, "defaults.maxAttempts") == 5
    assert config.get(cfg, "defaults.verifyRunner") == "shellVerify"
    assert config.get(cfg, "runners.claude.cmd") == "x"
    assert config.get(cfg, "runners.nope.cmd", "fallback") == "fallback"
    # Loading never mutates the shared defaults.
    assert config.get(config.DEFAULTS, "defaults.maxAttempts") == 3


@pytest.mark.parametrize("text", ["{not json", "[1, 2]"])
def test_broken_file_is_a_clear_error(tmp_path: Path, text: str) -> None:
    path = tmp_path / "config.json"
    path.write_text(text)
    with pytest.raises(ClavainError, match=r"config\.json"):
        config.load(path)
