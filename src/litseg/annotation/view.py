"""Readable views of an annotation run: an HTML page and a terminal table."""

from __future__ import annotations

import html
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from litseg.annotation.totals import UnitCounts

_CSS = """
body{font-family:Georgia,serif;max-width:60rem;margin:2rem auto;color:#222;line-height:1.45}
h1{font-size:1.5rem} h2{font-size:1.2rem;border-bottom:1px solid #ccc;margin-top:2.5rem}
.chunk{border-left:4px solid #6a8caf;padding:.4rem .9rem;margin:1rem 0;background:#f7f9fb}
.chunk:nth-child(even){border-left-color:#c08a4a;background:#fbf8f4}
.meta{font:12px/1.3 monospace;color:#666} .sub{font-weight:bold;margin:.2rem 0 .4rem}
.ctx{color:#777;font-style:italic;white-space:pre-wrap;margin:.3rem 0}
.main{white-space:pre-wrap} .diag{font:12px monospace;color:#a33}
nav.toc{margin:1rem 0 2rem} nav.toc ol{columns:2 18rem;padding-left:1.5rem} nav.toc li{margin:.1rem 0}
nav.toc .n{color:#888;font-size:.85em}
"""


def _unit_heading(unit: str, first: dict[str, Any]) -> str:
    return " / ".join([*first.get("unit_path", []), first.get("unit_title") or unit])


def render_html(title: str, chunks: Sequence[dict[str, Any]], diagnostics: Sequence[dict[str, Any]]) -> str:
    """One page: a contents list (when there is more than one unit) whose entries link to each
    unit's heading, then per book and unit, each chunk with its subtitle, range, context and text."""
    diag = {(d.get("book_id"), d.get("unit_id")): d for d in diagnostics}
    by_unit: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for c in chunks:
        by_unit[(c["book_id"], c["unit_id"])].append(c)
    units = sorted(by_unit.items())
    out = [f"<!doctype html><meta charset='utf-8'><title>{html.escape(title)}</title><style>{_CSS}</style>",
           f"<h1>{html.escape(title)}</h1>"]
    if len(units) > 1:
        out.append("<nav class='toc' id='contents'><strong>Contents</strong><ol>")
        for i, ((book, unit), cs) in enumerate(units, start=1):
            out.append(f"<li><a href='#unit-{i}'>{html.escape(book)} &middot; "
                       f"{html.escape(_unit_heading(unit, cs[0]))}</a> <span class='n'>({len(cs)} chunks)</span></li>")
        out.append("</ol></nav>")
    for i, ((book, unit), cs) in enumerate(units, start=1):
        out.append(f"<h2 id='unit-{i}'>{html.escape(book)} &middot; {html.escape(_unit_heading(unit, cs[0]))}</h2>")
        d = diag.get((book, unit), {})
        if d:
            counts = UnitCounts.from_row(d)  # the ledger row (absent counters: 0)
            out.append(
                "<div class='meta'>"
                + html.escape(
                    f"sentences={d.get('n_sentences')} tries={d.get('tries')} fallback={d.get('fallback')} "
                    f"repairs={counts.repairs} tokens={counts.prompt_tokens}+"
                    f"{counts.completion_tokens} seconds={d.get('seconds') or 0:.1f}"
                )
                + "</div>"
            )
            if d.get("error"):
                out.append(f"<div class='diag'>{html.escape(str(d['error']))}</div>")
        out.append("<div>")
        for c in sorted(cs, key=lambda c: (c["from_idx"], c["to_idx"])):
            ctx = c.get("context_ids") or []
            out.append("<div class='chunk'>")
            out.append(
                f"<div class='meta'>{html.escape(c['chunk_id'])} &middot; sentences "
                f"[{c['from_idx']}, {c['to_idx']}]" + (f" &middot; context {ctx}" if ctx else "")
                + f" &middot; {c.get('n_tokens') or 0} tokens</div>"  # rows made by hand may lack it
            )
            if c.get("subtitle"):
                out.append(f"<div class='sub'>{html.escape(c['subtitle'])}</div>")
            if c.get("context_before"):
                out.append(f"<div class='ctx'>{html.escape(c['context_before'])}</div>")
            out.append(f"<div class='main'>{html.escape(c['main_text'])}</div>")
            if c.get("context_after"):
                out.append(f"<div class='ctx'>{html.escape(c['context_after'])}</div>")
            out.append("</div>")
        out.append("</div>")
    return "\n".join(out) + "\n"


def chunk_table(chunks: Sequence[dict[str, Any]], *, width: int = 60):
    """A rich Table of the chunks (unit, range, context, words, subtitle, opening words)."""
    from rich.table import Table

    t = Table(title=f"{len(chunks)} chunks", show_lines=False)
    for col, kw in (("unit", {}), ("range", {"justify": "right"}), ("ctx", {}), ("words", {"justify": "right"}),
                    ("subtitle", {"max_width": 28}), ("begins", {"max_width": width})):
        t.add_column(col, **kw)
    for c in chunks:
        words = len(c["main_text"].split())  # chunk rows hold every Chunk field
        begins = " ".join(c["main_text"].split()[:14])
        unit = c.get("unit_title") or c["unit_id"]
        ctx = ",".join(map(str, c.get("context_ids") or [])) or "-"
        t.add_row(unit[:24], f"{c['from_idx']}-{c['to_idx']}", ctx, str(words), c.get("subtitle") or "", begins)
    return t
