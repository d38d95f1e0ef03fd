"""The colours of a node's status, shared by every picture of a workgraph (the Mermaid chart and
the HTML page's SVG): (fill, stroke)."""

from __future__ import annotations

STATUS_COLORS: dict[str, tuple[str, str]] = {
    "open": ("#ffffff", "#888888"),
    "in_progress": ("#dbeafe", "#2563eb"),
    "done": ("#dcfce7", "#16a34a"),
    "failed": ("#fee2e2", "#dc2626"),
    "needs_human": ("#fef9c3", "#ca8a04"),
    "cancelled": ("#f3f4f6", "#9ca3af"),
}
UNKNOWN_COLORS = ("#f5f5f5", "#555555")


def colors(status: str) -> tuple[str, str]:
    return STATUS_COLORS.get(status, UNKNOWN_COLORS)
