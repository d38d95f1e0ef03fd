"""The HTML page: one self-contained file (inline CSS, pictures as inline SVG, no script, a
Content-Security-Policy that lets nothing load), readable offline and without JavaScript.
`render(page)` draws what `collect.gather` read; sections are in `page.sections`."""

from __future__ import annotations

from collections.abc import Callable
from html import escape
from typing import Any

from clavain.page import sections

# How a file is known to be a page Clavain wrote (and so may be replaced by the next one).
GENERATOR = '<meta name="generator" content="clavain report --html">'
# Nothing may load when the page opens: no network, no file beside it, no script.
CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"

CSS = """
:root { color-scheme: light; }
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; margin: 0;
  color: #1f2937; background: #f8fafc; }
header { background: #111827; color: #f9fafb; padding: 14px 24px; }
header h1 { font-size: 19px; margin: 0 0 4px; }
header .meta { color: #cbd5e1; font-size: 12px; }
header code { background: #1f2937; color: #e5e7eb; }
nav { padding: 6px 24px; background: #e5e7eb; font-size: 13px; }
nav a { margin-right: 14px; color: #1d4ed8; text-decoration: none; }
main { padding: 8px 24px 40px; }
section { background: #fff; border: 1px solid #e5e7eb; border-radius: 8px; margin: 14px 0;
  padding: 10px 16px; }
h2 { font-size: 16px; margin: 6px 0 10px; }
h3 { font-size: 14px; margin: 12px 0 6px; }
table { border-collapse: collapse; margin: 4px 0 8px; font-size: 13px; }
th, td { text-align: left; padding: 3px 10px 3px 0; vertical-align: top;
  border-bottom: 1px solid #f1f5f9; }
th { color: #475569; font-weight: 600; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
.badge { display: inline-block; padding: 1px 8px; border-radius: 10px; font-size: 12px;
  border: 1px solid #cbd5e1; background: #f8fafc; }
.live { background: #dbeafe; border-color: #2563eb; color: #1e3a8a; }
.finished { background: #dcfce7; border-color: #16a34a; color: #14532d; }
.cards { display: flex; flex-wrap: wrap; gap: 10px; margin: 4px 0 6px; }
.card { border: 1px solid #e5e7eb; border-radius: 6px; padding: 6px 12px; min-width: 110px; }
.card b { display: block; font-size: 18px; }
.card span { color: #64748b; font-size: 12px; }
.meter { width: 180px; height: 10px; background: #f1f5f9; border-radius: 5px;
  overflow: hidden; display: inline-block; vertical-align: middle; }
.meter i { display: block; height: 100%; background: #16a34a; }
.meter i.high { background: #ca8a04; } .meter i.over { background: #dc2626; }
.route { display: flex; flex-wrap: wrap; gap: 6px; margin: 6px 0; padding: 0; }
.route li { list-style: none; border: 1px solid #cbd5e1; border-radius: 6px; padding: 4px 10px;
  background: #fff; font-size: 13px; }
.route li.done { background: #dcfce7; border-color: #16a34a; }
.route li.current { background: #dbeafe; border-color: #2563eb; font-weight: 600; }
.route li.waived { background: #fef9c3; border-color: #ca8a04; }
.route li small { display: block; color: #64748b; font-weight: 400; }
.status-CLEAN, .status-COMPLETE { color: #15803d; font-weight: 600; }
.status-NEEDS_ATTENTION, .status-PARTIAL { color: #a16207; font-weight: 600; }
.status-FAILED, .status-ERROR, .status-BLOCKED { color: #b91c1c; font-weight: 600; }
.scroll { overflow-x: auto; }
.problems { border-color: #dc2626; background: #fef2f2; }
.empty { color: #64748b; font-style: italic; }
.legend { font-size: 12px; color: #475569; }
.swatch { display: inline-block; width: 12px; height: 12px; border: 1px solid;
  border-radius: 3px; margin: 0 4px 0 10px; vertical-align: -2px; }
details summary { cursor: pointer; color: #1d4ed8; margin: 6px 0; }
code { font-size: 12px; background: #f1f5f9; padding: 0 3px; border-radius: 3px; }
footer { color: #64748b; font-size: 12px; padding: 0 24px 24px; }
"""


def render(page: dict[str, Any], *, refresh_seconds: float | None = None) -> str:
    """The page; `refresh_seconds` (while a watcher rewrites the file and the subject is live)
    makes the browser reload it that often."""
    refresh = refresh_seconds if refresh_seconds and page["live"] else None
    failed: list[str] = []

    def drawn(section: Callable[..., str], *args: Any) -> str:
        """A section, or one line saying why it could not be drawn: what a hand-edited file
        holds must not cost the rest of the page."""
        try:
            return section(*args)
        except Exception as exc:
            failed.append(f"the {section.__name__.replace('_', ' ')} section could not be "
                          f"drawn: {type(exc).__name__}: {exc}")
            return ""

    parts = [drawn(sections.overview, page)]
    if page["sprint"] is not None:
        parts.append(drawn(sections.sprint_route, page["sprint"]))
    parts.append(drawn(sections.workgraph, page))
    parts.append(drawn(sections.timeline, page))
    parts.append(drawn(sections.budgets, page))
    if page["sprint"] is not None or page["verdicts"]:
        parts.append(drawn(sections.verdicts, page["verdicts"]))
    if page["loops"]:
        parts.append(drawn(sections.loops, page["loops"]))
    if page["problems"] or failed:
        parts.insert(1, sections.problems([*page["problems"], *failed]))
    title = sections.title(page)
    refresh_meta = (f'<meta http-equiv="refresh" content="{max(int(refresh), 1)}">'
                    if refresh else "")
    if not page["live"]:
        state_line = ('<span class="badge finished" id="liveness" data-live="false">finished'
                      "</span>")
    elif refresh:
        state_line = ('<span class="badge live" id="liveness" data-live="true">live — '
                      f"rewritten every {refresh:g} s</span>")
    else:  # a snapshot of live work, which nothing rewrites
        state_line = ('<span class="badge live" id="liveness" data-live="true">still at work '
                      "when written; this page is not rewritten</span>")
    nav = "".join(f'<a href="#{anchor}">{label}</a>' for anchor, label in sections.anchors(page))
    return "\n".join([
        "<!DOCTYPE html>",
        f'<html lang="en"><head><meta charset="utf-8">{GENERATOR}',
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        refresh_meta,
        f"<title>{escape(title)} — Clavain</title>",
        f"<style>{CSS}</style></head>",
        f'<body data-subject-kind="{escape(page["subject"]["kind"])}" '
        f'data-subject-id="{escape(page["subject"]["id"])}">',
        f"<header><h1>{escape(title)}</h1>",
        f'<div class="meta">{state_line} written {escape(page["generated_at"])} from '
        f'<code>{escape(page["state_root"])}</code></div></header>',
        f"<nav>{nav}</nav>",
        "<main>", *parts, "</main>",
        "<footer>Everything on this page was read from the project's state folder and its "
        "database when the page was written; <code>clavain report --html FILE</code> writes it "
        "again.</footer>",
        "</body></html>", ""])
