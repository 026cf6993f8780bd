"""Structural units built from the chosen boundaries: containers as paths, children attached."""

from __future__ import annotations

from bisect import bisect_left

from litseg.segmentation.structure.patterns import KIND_RANK
from litseg.segmentation.structure.records import Block, Heading, StructuralUnit
from litseg.segmentation.structure.thresholds import MIN_CONTAINER_PROSE


def paragraph_spans(blocks: list[Block]) -> list[tuple[int, int, int]]:
    if any(b.md_heading for b in blocks):
        return []  # Markdown heading lines are blocks of their own without a blank line
    return [(b.start, b.end, b.n_words) for b in blocks]


def attach_children(segments: list[StructuralUnit], heads: list[Heading]) -> None:
    heads = sorted(heads, key=lambda h: h.start)
    starts = [h.start for h in heads]
    for seg in segments:
        k = bisect_left(starts, seg.start + 1)
        while k < len(heads) and heads[k].start < seg.end:
            seg.children.append((heads[k].start, heads[k].title))
            k += 1


def trim_end(text: str, lo: int, end: int) -> int:
    while end > lo and text[end - 1].isspace():
        end -= 1
    return end


def build_segments(text: str, blocks: list[Block], acc: list[int], boundaries: list[Heading],
                    unit_kind: str, body_end: int, dramatic: bool) -> list[StructuralUnit]:
    rank_unit = KIND_RANK.get(unit_kind, 10 + int(unit_kind[2:]) if unit_kind.startswith("md") else 8)
    if unit_kind == "listed_title":
        rank_unit = KIND_RANK["listed_title"]
    unit_name = _unit_name(unit_kind, dramatic)
    segments: list[StructuralUnit] = []
    stack: list[tuple[float, str, int]] = []  # (rank, title, md_level)
    pending: int | None = None
    for i, h in enumerate(boundaries):
        seg_end = boundaries[i + 1].start if i + 1 < len(boundaries) else body_end
        seg_end = trim_end(text, h.start, seg_end)
        next_block = boundaries[i + 1].block if i + 1 < len(boundaries) else len(blocks)
        own_prose = acc[next_block] - acc[h.last_block + 1] + h.rest_words
        title = h.title
        is_unit_kind = h.kind == unit_kind
        container_rank = _container_rank(h, unit_kind, rank_unit)
        if container_rank is not None and not is_unit_kind:
            nxt = boundaries[i + 1] if i + 1 < len(boundaries) else None
            # A prologue encloses the following units only when the Markdown levels say so
            # (the Shrew's "## PROLOGUE" over "### SCENE I"); with text of its own it is a unit.
            if h.family == "special" and (own_prose >= MIN_CONTAINER_PROSE or nxt is None
                                          or nxt.kind != unit_kind or not h.md_level
                                          or nxt.md_level <= h.md_level):
                container_rank = None
        if container_rank is not None and not is_unit_kind:
            while stack and stack[-1][0] >= container_rank:
                stack.pop()
            if own_prose >= MIN_CONTAINER_PROSE:
                segments.append(StructuralUnit(pending if pending is not None else h.start, seg_end,
                                               _kind_name(h, unit_name), title, [t for _, t, _ in stack]))
                pending = None
            elif pending is None:
                pending = h.start
            stack.append((container_rank, title, h.md_level))
            continue
        if h.family == "special" or (h.family == "md" and not unit_kind.startswith("md")):
            if h.md_level:
                while stack and stack[-1][2] and stack[-1][2] >= h.md_level:
                    stack.pop()
            elif h.family == "special":
                stack.clear()
        segments.append(StructuralUnit(pending if pending is not None else h.start, seg_end,
                                       _kind_name(h, unit_name), title, [t for _, t, _ in stack]))
        pending = None
    if pending is not None and segments:
        # a container heading at the very end with no text: fold it into the last unit
        segments[-1].end = body_end
    elif pending is not None:
        segments.append(StructuralUnit(pending, body_end, unit_name, "", []))
    return segments


def _container_rank(h: Heading, unit_kind: str, rank_unit: float) -> float | None:
    if h.family == "special":
        return KIND_RANK["special"]
    if h.family == "md" and unit_kind.startswith("md"):
        return 10 + h.md_level if h.md_level < int(unit_kind[2:]) else None
    if h.family == "md":
        return None
    return h.rank if h.rank < rank_unit else None


def _unit_name(unit_kind: str, dramatic: bool) -> str:
    if unit_kind.startswith("numeral"):
        return "scene" if dramatic else "chapter"
    if unit_kind in ("listed_title", "caps_title"):
        return "episode"
    if unit_kind.startswith("md"):
        return "section"
    return unit_kind


def _kind_name(h: Heading, unit_name: str) -> str:
    if h.family in ("numeral", "listed", "caps"):
        return unit_name
    if h.family == "md":
        return "section"
    return h.kind
