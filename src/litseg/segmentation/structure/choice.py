"""The heading kind chosen as unit, the boundaries it gives, and the adjustments made to them."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

from litseg.segmentation.structure.headings import clean, join_title, caps_title_candidates
from litseg.segmentation.structure.patterns import KIND_RANK
from litseg.segmentation.structure.realness import filter_sequences, mark_real
from litseg.segmentation.structure.records import Block, Heading
from litseg.segmentation.structure.thresholds import (
    MAX_FRONT_SHARE,
    MAX_FRONT_WORDS,
    MAX_UNIT_SHARE,
    MIN_PROSE,
)
from litseg.segmentation.types import NEVER_INDEXED


_CHAPTER_LIKE = ("scene", "chapter", "stave", "fit", "letter", "canto", "section")
CONTAINERS = ("volume", "part", "book", "act")


def try_caps_titles(text: str, blocks: list[Block], acc: list[int], cands: list[Heading],
                     choice: tuple[str, list[Heading]] | None):
    """Upper-case titles set apart by wide gaps, when no heading kind was found or only
    containers were (``PART ONE`` over titled chapters): the titles are then the units."""
    if choice is not None and choice[0] not in CONTAINERS:
        return choice, cands
    keep = [replace(h) for h in cands
            if h.family in ("apparatus", "special")
            or (choice is not None and h.real and h.kind in CONTAINERS)]
    taken = {k for h in keep for k in range(h.block, h.last_block + 1)}
    taken.update(h.block for h in cands if h.kind != "letter")
    caps = caps_title_candidates(text, blocks, taken=taken)
    if not caps:
        return choice, cands
    merged = sorted(keep + caps, key=lambda h: h.block)
    mark_real(merged, blocks, acc)
    filter_sequences(merged)
    alt = choose_units(merged, blocks, acc, only="caps_title")
    if alt is None:
        return choice, cands
    n_caps = sum(h.kind == "caps_title" for h in alt[1])
    if choice is None or n_caps >= 2 * len(choice[1]):
        return alt, merged
    return choice, cands


def absorb_leading_headings(cands: list[Heading], boundaries: list[Heading], acc: list[int]) -> None:
    """A heading line that is not a boundary but sits right before one, with no text between
    (``THE WEDDING OF MRS HERON`` / ``FIRST TELLING``, ``# INTERMISSION`` / ``### SCENE IV``),
    belongs to the unit that follows, not to the end of the previous one."""
    index = {id(h): k for k, h in enumerate(cands)}
    chosen = {id(h) for h in boundaries}
    for b in boundaries[1:]:
        k = index.get(id(b))
        if k is None:
            continue
        for _ in range(2):
            if k == 0:
                break
            prev = cands[k - 1]
            if (id(prev) in chosen or prev.family == "apparatus"
                    or acc[b.block] - acc[prev.last_block + 1] > 0):
                break
            b.start = prev.start
            if prev.family == b.family and prev.title and b.title:
                b.title = join_title([prev.title, b.title])
            k -= 1


def in_sequence(cands: list[Heading], boundaries: list[Heading], unit_kind: str,
                 acc: list[int]) -> list[Heading]:
    """The boundaries with every apparatus heading that stands where the units' numbers leave a
    gap made a unit: ``INTRODUCTION`` before ``CHAPTER II`` (a novel whose first chapter is
    titled so, and listed as chapter I in its contents), or between chapters V and VII. Such a
    heading takes the missing number, whatever its word (not a contents list, an index or the
    like, which are no one's writing)."""
    out = list(boundaries)
    prev_number: int | None = None
    prev_block = -1
    for u in [h for h in boundaries if h.kind == unit_kind]:
        if u.number is None:
            continue
        gap = u.number == 2 if prev_number is None else u.number == prev_number + 2
        before = [h for h in cands if prev_block < h.block < u.block]
        h = before[-1] if before else None
        if (gap and h is not None and h.family == "apparatus" and h.reason not in NEVER_INDEXED
                and acc[u.block] - acc[h.last_block + 1] >= MIN_PROSE):
            h.kind, h.family, h.rank, h.number = unit_kind, u.family, u.rank, u.number - 1
            h.real, h.reason = True, None
            out.append(h)
        prev_number, prev_block = u.number, u.block
    return sorted(out, key=lambda h: h.block)


def add_prefix_containers(text: str, blocks: list[Block], cands: list[Heading]) -> None:
    """``Inferno: Canto I`` names its container; a lone ``INFERNO`` line becomes a part heading."""
    prefixes = {h.prefix.lower() for h in cands if h.prefix}
    if not prefixes:
        return
    taken = {k for h in cands for k in range(h.block, h.last_block + 1)}
    for k, b in enumerate(blocks):
        if k in taken or b.n_lines != 1:
            continue
        if clean(b.first).rstrip(".").lower() in prefixes:
            cands.append(Heading(block=k, start=b.start, end=b.end, last_block=k, kind="part",
                                 family="kw", rank=KIND_RANK["part"], title=clean(b.first),
                                 bare=True))
    cands.sort(key=lambda h: h.block)


def choose_units(cands: list[Heading], blocks: list[Block], acc: list[int],
                  only: str | None = None) -> tuple[str, list[Heading]] | None:
    real = [h for h in cands if h.real]
    counts = Counter(h.kind for h in real)
    options: list[str] = []
    if only is not None:
        options = [only]
    else:
        # one heading of a kind divides nothing; letters ("TO RAISE POULTRY" is a sketch's
        # title) need a run of them
        chapter_like = sorted((k for k in _CHAPTER_LIKE if counts[k] >= (3 if k == "letter" else 2)),
                              key=lambda k: (-counts[k], _CHAPTER_LIKE.index(k)))
        options += _outer_first(chapter_like, real)
        if counts["act"]:
            options.append("act")
        options += [k for k in ("numeral_titled", "numeral_bare") if counts[k] >= 2]
        # a single PART or BOOK heading (a title page's "Part 2.") divides nothing
        options += [k for k in ("book", "part", "volume") if counts[k] >= 2]
        md_unit = _markdown_unit_level(real)
        if md_unit:
            options.append(md_unit)
    total = max(1, acc[-1])
    for kind in options:
        boundaries = _boundaries(real, kind)
        if not boundaries:
            continue
        front_words = acc[boundaries[0].block] - acc[0]
        if front_words > MAX_FRONT_SHARE * total and front_words > MAX_FRONT_WORDS:
            continue
        if len(boundaries) >= 3:
            cuts = [h.block for h in boundaries] + [len(blocks)]
            largest = max(acc[b] - acc[a] for a, b in zip(cuts, cuts[1:]))
            if largest > MAX_UNIT_SHARE * total:
                continue  # a handful of numbered sub-sections inside one story
        return kind, boundaries
    return None




def _outer_first(kinds: list[str], real: list[Heading]) -> list[str]:
    """Chapter-like kinds with a kind that encloses another before it: numbered sections inside
    chapters (``CHAPTER IV`` / ``SECTION 1``, ``SECTION 2``) outnumber the chapters, but the
    chapter is the unit and the sections stay inside it (children, where the word cap cuts)."""
    out = list(kinds)
    for inner in kinds:
        for outer in kinds:
            if outer != inner and out.index(inner) < out.index(outer) and _encloses(outer, inner, real):
                out.remove(outer)
                out.insert(out.index(inner), outer)
    return out


def _encloses(outer: str, inner: str, real: list[Heading]) -> bool:
    """Both kinds are numbered, headings of ``outer`` come first and most stretches between two
    of them hold headings of ``inner``: ``inner`` is a level below ``outer``."""
    heads = [h for h in real if h.kind in (outer, inner)]
    if not heads or heads[0].kind != outer or sum(h.number is None for h in heads) > 0.2 * len(heads):
        return False  # "TO MR. ROSE" over each canto of a poem is a dedication, not a level
    stretches = holding = 0
    for k, h in enumerate(heads):
        if h.kind == outer:
            stretches += 1
            holding += k + 1 < len(heads) and heads[k + 1].kind == inner
    return stretches >= 2 and holding >= 0.5 * stretches


def _markdown_unit_level(real: list[Heading]) -> str | None:
    md = [h for h in real if h.family == "md"]
    if not md:
        return None
    levels: dict[int, list[Heading]] = {}
    for h in md:
        levels.setdefault(h.md_level, []).append(h)
    multi = sorted(lv for lv, hs in levels.items() if len(hs) >= 2)
    if not multi:
        return f"md{min(levels)}" if len(md) >= 1 else None
    first = multi[0]
    if len(multi) >= 2:
        second = multi[1]
        outer, inner = levels[first], levels[second]
        if len(inner) >= 2 * len(outer):
            # every outer section must hold at least one inner heading to be a container
            starts = [h.block for h in outer] + [10**12]
            if all(any(s <= h.block < e for h in inner) for s, e in zip(starts, starts[1:])):
                return f"md{second}"
    return f"md{first}"


def _boundaries(real: list[Heading], unit_kind: str) -> list[Heading]:
    """Headings that cut the body: units, their containers, and special sections."""
    if unit_kind.startswith("md"):
        level = int(unit_kind[2:])
        md_title = _markdown_title(real)
        keep = [h for h in real if h is not md_title and (
            (h.family == "md" and h.md_level <= level) or h.family == "special")]
    else:
        rank = KIND_RANK[unit_kind]
        containers = {k for k in CONTAINERS if KIND_RANK[k] < rank}
        if unit_kind == "numeral_bare":
            containers.add("numeral_titled")
        md_title = _markdown_title(real)
        keep = []
        for h in real:
            if h.kind == unit_kind or h.kind in containers or h.family == "special":
                keep.append(h)
            elif h.family == "md" and h is not md_title and not unit_kind.startswith("md"):
                keep.append(h)  # e.g. "# INTERMISSION" between scenes: a section of its own
    if not any(h.kind == unit_kind for h in keep):
        return []
    return keep


def _markdown_title(real: list[Heading]) -> Heading | None:
    """A single level-1 Markdown heading before everything else is the book's title."""
    md = [h for h in real if h.family == "md"]
    if md and md[0].md_level == 1 and sum(h.md_level == 1 for h in md) == 1 and md[0] is real[0]:
        return md[0]
    return None
