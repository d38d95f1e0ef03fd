"""The HTML page: one self-contained file (inline CSS, pictures as inline SVG, no script, a
Content-Security-Policy that lets nothing load), readable offline and without JavaScript.
`render(page)` draws what `collect.gather` read; sections are in `page.sections`."""

from __future__ import annotations

import re
from collections.abc import Callable
from html import escape, unescape
from typing import Any

from clavain.page import attention, cost, outcome, sections, timeline_section

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
.standing { border-width: 2px; }
.outcome-head { display: flex; align-items: center; gap: 14px; flex-wrap: wrap; }
.outcome-badge { font-size: 20px; font-weight: 700; padding: 3px 14px; border-radius: 6px;
  border: 2px solid; }
.tone-ok { background: #dcfce7; border-color: #15803d; color: #14532d; }
.tone-bad { background: #fee2e2; border-color: #b91c1c; color: #7f1d1d;
  border-style: double; border-width: 4px; }
.tone-stopped { background: #fef3c7; border-color: #b45309; color: #78350f;
  border-style: dashed; }
.tone-live { background: #dbeafe; border-color: #1d4ed8; color: #1e3a8a; }
.tone-unknown { background: #f1f5f9; border-color: #64748b; color: #334155; }
.liveness { color: #475569; font-size: 13px; }
.reason { font-size: 15px; margin: 8px 0 2px; }
.times, .spent { color: #475569; margin: 2px 0; }
.next-steps, .sprint-lead { margin: 8px 0 2px; padding-left: 18px; }
.next-steps li, .sprint-lead li { margin: 3px 0; }
.next-steps .error { color: #7f1d1d; }
code.command { font-size: 13px; background: #111827; color: #f9fafb; padding: 1px 6px; }
table.attention td.problem { max-width: 520px; }
.status-failed { color: #b91c1c; font-weight: 600; }
.status-needs_human { color: #a16207; font-weight: 600; }
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
            name = (section.__module__.rsplit(".", 1)[-1] if section.__name__ == "section"
                    else section.__name__)
            failed.append(f"the {name.replace('_', ' ')} section could not be "
                          f"drawn: {type(exc).__name__}: {exc}")
            return ""

    if not page["live"]:
        liveness = ('<span class="liveness" id="liveness" data-live="false">this page is no '
                    "longer rewritten</span>")
    elif refresh:
        liveness = ('<span class="liveness" id="liveness" data-live="true">live — rewritten '
                    f"every {refresh:g} s</span>")
    else:  # a snapshot of live work, which nothing rewrites
        liveness = ('<span class="liveness" id="liveness" data-live="true">still at work '
                    "when written; this page is not rewritten</span>")
    # The order answers a person's questions: how it ended and what to do, which nodes
    # failed or wait, what it cost; the pictures and the long tables after.
    parts = [drawn(outcome.section, page, liveness), drawn(attention.section, page),
             drawn(sections.overview, page), drawn(cost.glance, page)]
    if page["sprint"] is not None:
        parts.append(drawn(sections.sprint_route, page["sprint"]))
    parts.append(drawn(sections.workgraph, page))
    if _has_runner_calls(page):
        parts.append(drawn(timeline_section.section, page))
    parts.append(drawn(cost.budgets, page))
    if page["verdicts"]:
        parts.append(drawn(sections.verdicts, page["verdicts"]))
    if page["loops"]:
        parts.append(drawn(sections.loops, page["loops"]))
    if page["problems"] or failed:
        parts.insert(1, sections.problems([*page["problems"], *failed]))
    title = sections.title(page)
    refresh_meta = (f'<meta http-equiv="refresh" content="{max(int(refresh), 1)}">'
                    if refresh else "")
    nav = "".join(f'<a href="#{anchor}">{escape(label)}</a>'
                  for anchor, label in _anchors(parts))
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
        f'<div class="meta">Written {escape(page["generated_at"])} from '
        f'<code>{escape(page["state_root"])}</code></div></header>',
        f"<nav>{nav}</nav>",
        "<main>", *[part for part in parts if part], "</main>",
        "<footer>Everything on this page was read from the project's state folder and its "
        "database when the page was written; <code>clavain report --html FILE</code> writes it "
        "again.</footer>",
        "</body></html>", ""])


def _has_runner_calls(page: dict[str, Any]) -> bool:
    """Whether the timeline has anything to draw: an empty one is left out."""
    return any(run["timeline"] or run["running"] for run in page["runs"]) or any(
        loop["iterations"] for loop in page["loops"])


def _anchors(parts: list[str]) -> list[tuple[str, str]]:
    """(id, heading) of each section drawn, for the links at the top."""
    found = []
    for part in parts:
        anchor = re.search(r'<section id="([^"]+)"[^>]*>(?:<h2>(.*?)</h2>)?', part)
        if anchor:
            label = re.sub(r"<[^>]+>", "", anchor.group(2) or "") or "Outcome"
            found.append((anchor.group(1), unescape(label)))
    return found
