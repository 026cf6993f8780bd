"""Readable views of an annotation run: an HTML page and a terminal table."""

from __future__ import annotations

import html
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
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


def _unit_heading(unit: str, first: dict[str, Any], part: str = "") -> str:
    return " / ".join([*first.get("unit_path", []), first.get("unit_title") or unit]) + part


def unit_parts(ledger: Iterable[Mapping[str, Any]]) -> defaultdict[tuple[str, str], str]:
    """``" (part k of n)"`` for every unit that is a piece of a unit split by the word cap (its
    ledger row's ``cut``), keyed by ``(book_id, unit_id)``: the pieces share their unit's title.
    Any other unit reads as ``""``."""
    parts: defaultdict[tuple[str, str], str] = defaultdict(str)
    for row in ledger:
        if row.get("cut"):
            parts[(str(row["book_id"]), str(row["unit_id"]))] = f" (part {row['cut']['part']} of {row['cut']['parts']})"
    return parts


def size_label(chunk: Mapping[str, Any]) -> str:
    """The chunk's size as the record gives it: ``N words`` (whitespace words of its text) and,
    when the chunker counted them, ``M tokens (TOKENIZER)``."""
    words = chunk.get("n_words") or len((chunk.get("text") or chunk["main_text"]).split())  # older rows lack it
    if chunk.get("n_tokens") is None or not chunk.get("tokenizer"):
        return f"{words} words"
    return f"{words} words, {chunk['n_tokens']} tokens ({chunk['tokenizer']})"


def render_html(title: str, chunks: Sequence[dict[str, Any]], diagnostics: Sequence[dict[str, Any]]) -> str:
    """One page: a contents list (when there is more than one unit) whose entries link to each
    unit's heading, then per book and unit, each chunk with its subtitle, range, context and text."""
    diag = {(d.get("book_id"), d.get("unit_id")): d for d in diagnostics}
    parts = unit_parts(diagnostics)
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
                       f"{html.escape(_unit_heading(unit, cs[0], parts[(book, unit)]))}</a> "
                       f"<span class='n'>({len(cs)} chunks)</span></li>")
        out.append("</ol></nav>")
    for i, ((book, unit), cs) in enumerate(units, start=1):
        heading = _unit_heading(unit, cs[0], parts[(book, unit)])
        out.append(f"<h2 id='unit-{i}'>{html.escape(book)} &middot; {html.escape(heading)}</h2>")
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
                + f" &middot; {html.escape(size_label(c))}</div>"
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


def chunk_table(chunks: Sequence[dict[str, Any]], *, width: int = 60,
                parts: defaultdict[tuple[str, str], str] | None = None):
    """A rich Table of the chunks (unit, range, context, words, tokens when counted, subtitle,
    opening words); ``parts`` (:func:`unit_parts`) marks the pieces of a split unit."""
    from rich.table import Table

    parts = parts if parts is not None else unit_parts(())
    tokenizers = sorted({str(c["tokenizer"]) for c in chunks if c.get("tokenizer")})
    title = f"{len(chunks)} chunks" + (f"; tokens: {', '.join(tokenizers)}" if tokenizers else "")
    t = Table(title=title, show_lines=False)
    columns = [("unit", {}), ("range", {"justify": "right"}), ("ctx", {}), ("words", {"justify": "right"})]
    if tokenizers:
        columns.append(("tokens", {"justify": "right"}))
    for col, kw in (*columns, ("subtitle", {"max_width": 28}), ("begins", {"max_width": width})):
        t.add_column(col, **kw)
    for c in chunks:
        words = c.get("n_words") or len((c.get("text") or c["main_text"]).split())  # older rows lack it
        begins = " ".join(c["main_text"].split()[:14])
        unit = (c.get("unit_title") or c["unit_id"])[:24] + parts[(c["book_id"], c["unit_id"])]
        ctx = ",".join(map(str, c.get("context_ids") or [])) or "-"
        sizes = [str(words)] + ([str(c["n_tokens"]) if c.get("n_tokens") is not None else "-"] if tokenizers else [])
        t.add_row(unit, f"{c['from_idx']}-{c['to_idx']}", ctx, *sizes, c.get("subtitle") or "", begins)
    return t
