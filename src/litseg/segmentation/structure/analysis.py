"""The analysis of one book: blocks, candidates, contents or heading kinds, units and matter."""

from __future__ import annotations

from litseg.segmentation.structure.blocks import block_at, is_dramatic, prose_prefix, scan_blocks
from litseg.segmentation.structure.build import (
    attach_children,
    build_segments,
    paragraph_spans,
    trim_end,
)
from litseg.segmentation.structure.choice import (
    absorb_leading_headings,
    add_prefix_containers,
    choose_units,
    in_sequence,
    try_caps_titles,
)
from litseg.segmentation.structure.contents import parse_contents
from litseg.segmentation.structure.headings import find_candidates
from litseg.segmentation.structure.matter import (
    find_back_matter_start,
    heading_reasons,
    matter_spans,
    pattern_reason,
    back_matter,
    back_matter_start,
    front_matter,
)
from litseg.segmentation.structure.realness import filter_sequences, mark_real, merge_numeral_kinds
from litseg.segmentation.structure.records import Block, Heading, StructuralUnit, Structure
from litseg.segmentation.structure.thresholds import LIST_BREAK_WORDS
from litseg.segmentation.structure.works import caps_works, works_win, find_works


_CHILD_FAMILIES = frozenset({"kw", "numeral", "special", "listed", "caps", "md"})


def analyze_structure(text: str, start: int = 0, end: int | None = None, *,
                      author: str = "", title: str = "") -> Structure:
    """Find the top-level segments of ``text[start:end]`` and the front and back matter around
    them. ``author`` and ``title`` (from the header) let a section named after the author be
    read as a biographical introduction, and the book's title repeated after a contents list
    be told from its last entry."""
    end = len(text) if end is None else end
    blocks = scan_blocks(text, start, end)
    if not blocks:
        return Structure(start, start, [], "")
    acc = prose_prefix(blocks)
    dramatic = is_dramatic(blocks)
    cands = find_candidates(text, blocks, dramatic)
    add_prefix_containers(text, blocks, cands)
    mark_real(cands, blocks, acc)
    merge_numeral_kinds(cands)
    filter_sequences(cands)

    contents = parse_contents(text, blocks, cands, title)
    if contents is not None:  # headings inside the contents list are its entries
        lo = next(h.block for h in cands if h.family == "apparatus" and h.reason == "contents")
        cands = [h for h in cands if not lo < h.block < contents[1]]
    works = find_works(text, blocks, acc, cands, contents, author)
    if works is None or not works_win(works, cands, blocks, acc):
        works = caps_works(text, blocks, acc, cands, title)
    back_block: int | None = None
    if works is not None:
        unit_kind = "listed_title"
        boundaries = works.mains
        taken = {h.block for h in works.mains + works.children}
        children = works.children + [h for h in cands if h.real and h.block not in taken]
        back_block = works.back_block
        known = cands + works.mains + works.children
    else:
        choice = choose_units(cands, blocks, acc)
        choice, cands = try_caps_titles(text, blocks, acc, cands, choice)
        known = cands
        if choice is None:
            return _unstructured(text, blocks, cands)
        unit_kind, boundaries = choice
        boundaries = in_sequence(cands, boundaries, unit_kind, acc)
        absorb_leading_headings(cands, boundaries, acc)
        back_block, boundaries = find_back_matter_start(cands, boundaries, unit_kind)
        chosen = {id(h) for h in boundaries}
        children = [h for h in cands if h.real and id(h) not in chosen]
    reasons = heading_reasons(known)
    g = back_matter_start(text, blocks, boundaries[-1].block, back_block)
    body_end = blocks[-1].end if g is None else trim_end(text, boundaries[0].start, blocks[g].start)
    segments = build_segments(text, blocks, acc, boundaries, unit_kind, body_end, dramatic)
    first = block_at(blocks, segments[0].start)
    spans, narrative = front_matter(text, blocks, reasons, first, narrative_ok=not dramatic)
    if narrative is not None:
        lead = blocks[narrative].start
        segments.insert(0, StructuralUnit(lead, trim_end(text, lead, segments[0].start), "section", ""))
    attach_children(segments, [h for h in children if h.family in _CHILD_FAMILIES])
    matter = matter_spans(blocks, spans, "front")
    if g is not None:
        matter += matter_spans(blocks, back_matter(text, blocks, reasons, g), "back")
    front = (matter[0].start, segments[0].start) if spans else None
    back = (blocks[g].start, blocks[-1].end) if g is not None else None
    return Structure(segments[0].start, segments[-1].end, segments, unit_kind, front, back,
                     headings=[h for h in known if h.real], matter=matter,
                     paragraphs=paragraph_spans(blocks))


def _unstructured(text: str, blocks: list[Block], cands: list[Heading]) -> Structure:
    """No usable headings: one segment, after a title page of short non-prose blocks (or up to
    an apparatus heading) and before back matter recognised by its wording."""
    reasons = heading_reasons(cands)
    first = 0
    while (first < len(blocks) and first not in reasons
           and (pattern_reason(text, blocks[first]) is not None
                or not (blocks[first].prose and blocks[first].n_words >= LIST_BREAK_WORDS))):
        first += 1
    if first >= len(blocks):
        first = 0  # nothing reads as running text: keep it all as the one segment
    spans, _ = front_matter(text, blocks, reasons, first, narrative_ok=False)
    g = back_matter_start(text, blocks, first, None)
    last = len(blocks) if g is None else g
    seg = StructuralUnit(blocks[first].start, blocks[last - 1].end, "section", "")
    matter = matter_spans(blocks, spans, "front")
    if g is not None:
        matter += matter_spans(blocks, back_matter(text, blocks, reasons, g), "back")
    return Structure(seg.start, seg.end, [seg], "", (matter[0].start, seg.start) if spans else None,
                     (blocks[g].start, blocks[-1].end) if g is not None else None,
                     headings=[h for h in cands if h.real], matter=matter,
                     paragraphs=paragraph_spans(blocks))
