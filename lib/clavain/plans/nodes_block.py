"""Where a plan's Markdown keeps its tasks: the ```json block that holds `"nodes"`. Asked by
plan lint (any plan file) and by the sprint's plan step (which then checks the block as a
sprint's plan must be)."""

from __future__ import annotations

import re

_JSON_FENCE = re.compile(r"^```json[ \t]*\n(.*?)^```[ \t]*$", re.DOTALL | re.MULTILINE)


def nodes_blocks(text: str) -> list[str]:
    """The ```json blocks of a plan's Markdown that hold `"nodes"` (a plan has exactly one)."""
    return [block for block in _JSON_FENCE.findall(text) if '"nodes"' in block]
