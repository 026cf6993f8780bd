"""The top level read from a contents list (stories, essays, poems), or from upper-case titles
when the collection has no contents list.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from collections import Counter
from dataclasses import dataclass

from litseg.segmentation.structure.choice import CONTAINERS, choose_units
from litseg.segmentation.structure.contents import Entry, norm, align_contents
from litseg.segmentation.structure.headings import clean, join_title, caps_title_candidates
from litseg.segmentation.structure.patterns import KIND_RANK, BACK_REASONS
from litseg.segmentation.structure.records import Block, Heading
from litseg.segmentation.structure.thresholds import (
    MIN_LISTED_SHARE,
    MIN_NARRATIVE_WORDS,
    MIN_PROSE,
)


def _run_indents(entries: list[Entry]) -> None:
    """Numbers right-aligned in a column (``   III``, ``  VIII``) indent their lines unevenly: a
    run of consecutive numbered entries takes the indentation most of its lines have."""
    k = 0
    while k < len(entries):
        j = k
        while j < len(entries) and entries[j].numbered:
            j += 1
        if j > k:
            common = Counter(e.indent for e in entries[k:j]).most_common(1)[0][0]
            for e in entries[k:j]:
                e.indent = common
        k = j + 1


def _numbered_works(pairs: list[tuple[int, int]], entries: list[Entry], cands: list[Heading],
                    role) -> list[tuple[int, int]]:
    """Numbered works that the contents names by their first line while the body heads them
    with the number alone (``I. Fair Harvard, dear guide ...`` / ``I.``): such an entry takes
    the heading with its number between the works matched before and after it."""
    matched = dict(pairs)
    numbered = [h for h in cands if h.real and h.number is not None and h.family in ("kw", "numeral")]
    if not numbered:
        return pairs
    order = sorted(matched)
    out = dict(matched)
    for ei, e in enumerate(entries):
        if ei in matched or e.number is None or role(e) != "work":
            continue
        k = bisect_left(order, ei)
        lo = matched[order[k - 1]] if k > 0 else -1
        hi = matched[order[k]] if k < len(order) else 10**9
        lo = max([lo] + [b for x, b in out.items() if x < ei])
        h = next((h for h in numbered if lo < h.block < hi and h.number == e.number
                  and h.block not in out.values()), None)
        if h is not None:
            out[ei] = h.block
    return sorted(out.items())


def _author_names(author: str) -> set[str]:
    """Normalised names in a header's author field ("Charles Dickens and Hallie Erminie Rives")."""
    names = re.split(r"\s*(?:,|;|\band\b|&|\bwith\b|\btranslated by\b|\bedited by\b)\s*", author or "")
    return {norm(n) for n in names if len(norm(n).split()) >= 2}


@dataclass(slots=True)
class Works:
    """The top level read from a contents list: group and work headings in text order, the
    children found for numbered or deeper entries, and where back matter listed in the
    contents begins (a block index, or None)."""

    mains: list[Heading]
    children: list[Heading]
    back_block: int | None


def find_works(text: str, blocks: list[Block], acc: list[int], cands: list[Heading],
               contents: tuple[list[Entry], int] | None, author: str = "") -> Works | None:
    """Works named by the contents list, when it names most of them and they are found."""
    if contents is None:
        return None
    entries, after = contents
    _run_indents(entries)
    names = _author_names(author)
    for e in entries:
        if e.reason is None and not e.numbered and e.key in names:
            e.reason = "introduction"  # a section named after the author: a biographical note
    titled = [e for e in entries if e.key and not e.label and e.reason is None]
    unnumbered = [e for e in titled if not e.numbered]
    pool = unnumbered if len(unnumbered) >= 2 else titled
    if len(pool) < 2:
        return None
    counts = Counter(e.indent for e in pool)
    level = max(counts, key=lambda k: (counts[k], k))  # a tie goes to the deeper (items) level

    def role(e: Entry) -> str:
        if e.label or e.indent > level:
            return "child"
        return "group" if e.indent < level else "work"

    works_listed = [e for e in titled if role(e) == "work"]
    if len(works_listed) < 2:
        return None
    taken = {k for h in cands if h.number is not None or h.family in ("numeral", "md")
             for k in range(h.block, h.last_block + 1)}
    # in a list of titles, "I Am Content" read as numeral I is doubtful: such an entry may
    # name a numbered body heading word for word ("I AM CONTENT.")
    doubtful = ({ei for ei, e in enumerate(entries) if e.number == 1 and e.key}
                if sum(e.numbered for e in titled) < 0.2 * len(titled) else set())
    pairs = align_contents(text, blocks, entries, after, taken, doubtful)
    found_works = sum(1 for ei, _ in pairs if role(entries[ei]) == "work" and entries[ei].reason is None)
    if found_works < 2 or found_works < MIN_LISTED_SHARE * len(works_listed):
        return None
    pairs = _numbered_works(pairs, entries, cands, role)
    mains: list[Heading] = []
    children: list[Heading] = []
    for ei, bi in pairs:
        e, b = entries[ei], blocks[bi]
        r = role(e)
        glued = b.n_lines > 3 or b.n_words > 24  # a title on the first line of its text
        title = clean(b.first if glued else " ".join(text[b.start:b.end].split()))
        if e.number is not None and e.title and norm(e.title) not in norm(title):
            title = join_title([title, e.title])  # "I." headed in the body, titled in the contents
        h = Heading(block=bi, start=b.start, end=b.first_end if glued else b.end, last_block=bi,
                    kind="listed_group" if r == "group" else "listed_title", family="listed",
                    rank=7.5 if r == "group" else KIND_RANK["listed_title"],
                    title=title, real=True, reason=e.reason)
        (children if r == "child" else mains).append(h)
    # apparatus listed before the first work is front matter, from the first back-matter entry
    # after it everything is back matter; apparatus-like titles between works are works
    # ("A FAMILIAR PREFACE")
    first = next((k for k, h in enumerate(mains) if h.kind == "listed_title" and h.reason is None), None)
    if first is None:
        return None
    back_block = None
    for k, h in enumerate(mains):
        if k < first:
            continue
        if h.reason in BACK_REASONS:
            back_block = h.block
            mains = mains[:k]
            break
        h.reason = None
    front = [h for h in mains[:first] if h.reason]
    mains = [h for h in mains if not h.reason]
    # a work with no text of its own before the next work only groups the works after it
    for k, h in enumerate(mains):
        nxt = mains[k + 1] if k + 1 < len(mains) else None
        if h.kind == "listed_title" and nxt is not None and nxt.kind == "listed_title":
            if acc[nxt.block] - acc[h.last_block + 1] < MIN_PROSE:
                h.kind, h.rank = "listed_group", 7.5
    if sum(h.kind == "listed_title" for h in mains) < 2:
        return None
    for h in front:  # kept as front-matter headings (their reason says why)
        h.real = False
    return Works(mains=mains, children=children + front, back_block=back_block)


def _title_keys(title: str) -> set[str]:
    """The book's title from its header, normalised, with and without its subtitle."""
    main = re.split(r"\s*(?:[:;]|,?\s+or,?\s+)\s*", title, maxsplit=1, flags=re.I)[0]
    return {k for k in (norm(title), norm(main)) if k}


def caps_works(text: str, blocks: list[Block], acc: list[int], cands: list[Heading],
                title: str = "") -> Works | None:
    """Stories of a collection without a contents list: upper-case titles set apart by wide
    gaps, with the numbered headings found starting over under them (a story in parts) and at
    least one story with no numbered part at all - else the titles only group chapters. The
    book's own title line (a title page or half-title over the chapters) names no story."""
    choice = choose_units(cands, blocks, acc)
    if choice is None or choice[0] in CONTAINERS or choice[0] in ("act", "scene") or choice[0].startswith("md"):
        return None
    units = [h for h in choice[1] if h.kind == choice[0]]
    if all(h.number is None for h in units):
        return None  # letters: nothing to start over
    taken = {k for h in cands for k in range(h.block, h.last_block + 1)}
    caps = caps_title_candidates(text, blocks, taken=taken, min_count=2)
    apparatus = [h.block for h in cands if h.family == "apparatus"]
    book_title = _title_keys(title)
    mains = []
    for h in caps:
        nxt = _next_block(caps, h, len(blocks))
        if acc[nxt] - acc[h.last_block + 1] < MIN_PROSE:
            continue
        if any(h.block < a < nxt for a in apparatus):
            continue  # a title page over an introduction or a contents list
        if norm(clean(blocks[h.block].first)) in book_title and any(h.block < u.block < nxt for u in units):
            continue  # the book's title over its chapters, not a story holding them
        mains.append(h)
    if len(mains) < 2:
        return None
    for h in mains:
        h.kind, h.family, h.rank, h.real = "listed_title", "listed", KIND_RANK["listed_title"], True
    starts = [h.block for h in mains] + [len(blocks)]
    leaf = 0
    for a, b in zip(starts, starts[1:]):
        inside = [h for h in units if a < h.block < b]
        if not inside:
            # a story of its own, not a prefatory note ("EXPLANATORY" before Huckleberry Finn)
            leaf += acc[b] - acc[a] >= MIN_NARRATIVE_WORDS
        elif inside[0].number not in (1, None):
            return None
    if not leaf or units[0].block < mains[0].block:
        return None
    return Works(mains=mains, children=[], back_block=None)


def _next_block(heads: list[Heading], h: Heading, n: int) -> int:
    k = heads.index(h)
    return heads[k + 1].block if k + 1 < len(heads) else n


def works_win(works: Works, cands: list[Heading], blocks: list[Block], acc: list[int]) -> bool:
    """Do the works of the contents list make the top level? Not when a heading kind found
    elsewhere starts before them, nor when its numbers run on across the works (chapters
    numbered through the whole book under part titles): then the titles only group them."""
    taken = {h.block for h in works.mains + works.children}
    rest = [h for h in cands if h.block not in taken]
    choice = choose_units(rest, blocks, acc)
    if choice is None:
        return True
    kind, bounds = choice
    units = [h for h in bounds if h.kind == kind]
    if not units or units[0].block < works.mains[0].block:
        return not units
    starts = [h.block for h in works.mains if h.kind == "listed_title"] + [len(blocks)]
    ok = holding = 0
    for a, b in zip(starts, starts[1:]):
        inside = [h for h in units if a < h.block < b]
        holding += bool(inside)
        if not inside or inside[0].number in (1, None):
            ok += 1
    if holding == 1 and len(units) > len(starts) - 1:
        return False  # one "work" holds all the numbered units: the others are prefatory pieces
    return ok == len(starts) - 1
