"""The manifest, marketplace and icon that Claude Code and its plugin directory read."""

import importlib.util
import json
import struct
from pathlib import Path

from clavain import __version__

REPO = Path(__file__).resolve().parents[2]


def test_versions_agree() -> None:
    plugin = json.loads((REPO / ".claude-plugin" / "plugin.json").read_text())
    market = json.loads((REPO / ".claude-plugin" / "marketplace.json").read_text())
    pyproject = (REPO / "pyproject.toml").read_text()
    assert plugin["name"] == "clavain" and plugin["license"] == "MIT"
    assert plugin["version"] == __version__ == market["plugins"][0]["version"]
    assert f'version = "{__version__}"' in pyproject
    assert market["plugins"][0]["name"] == "clavain" and market["plugins"][0]["source"] == "./"


def test_icon_is_a_square_512_png_made_by_the_script() -> None:
    icon = (REPO / ".claude-plugin" / "icon.png").read_bytes()
    assert icon[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", icon[16:24])
    assert width == height == 512
    spec = importlib.util.spec_from_file_location("make_icon", REPO / "scripts" / "make_icon.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.png_bytes() == icon
