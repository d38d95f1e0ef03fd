"""The wheel carries the plugin folders the CLI names (skills/, commands/, agents/, schemas/),
at `clavain/_plugin/`, so a plain `pip install` prints only paths that exist
(`clavain.paths.plugin_root` finds them there). The repository keeps them at its root, where
Claude Code reads them; everything else about the build is in pyproject.toml."""

from __future__ import annotations

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent
PLUGIN_FOLDERS = ("skills", "commands", "agents", "schemas")


class BuildWithPluginFolders(build_py):
    def run(self) -> None:
        super().run()
        if getattr(self, "editable_mode", False):
            return  # an editable install reads them from the clone itself
        target = Path(self.build_lib) / "clavain" / "_plugin"
        for name in PLUGIN_FOLDERS:
            source = HERE / name
            if not source.is_dir():
                raise SystemExit(f"setup.py: {source} is missing; build from a full clone")
            shutil.rmtree(target / name, ignore_errors=True)
            shutil.copytree(source, target / name,
                            ignore=shutil.ignore_patterns("__pycache__", "*.py[cod]"))


setup(cmdclass={"build_py": BuildWithPluginFolders})
