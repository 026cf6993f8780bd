"""Which heading candidates are real (text follows them) and count on in sequence."""

from __future__ import annotations

from litseg.segmentation.structure.patterns import KIND_RANK
from litseg.segmentation.structure.records import Block, Heading
from litseg.segmentation.structure.thresholds import MIN_PROSE


def mark_real(cands: list[Heading], blocks: list[Block], prose_acc: list[int]) -> None:
    """A structural candidate is real when body text follows it before the next candidate, or
    when the next candidate is deeper and real itself (``BOOK ONE`` then ``I.`` then text)."""
    nb = len(blocks)
    for i in range(len(cands) - 1, -1, -1):
        h = cands[i]
        if h.family == "apparatus":
            h.real = False
            continue
        nxt = cands[i + 1] if i + 1 < len(cands) else None
        stop = nxt.block if nxt else nb
        prose = prose_acc[stop] - prose_acc[h.last_block + 1] + h.rest_words
        if prose >= MIN_PROSE:
            h.real = True
        elif h.md_level and stop > h.last_block + 1:
            h.real = True  # an explicit Markdown heading needs only some text under it
        elif nxt is not None and nxt.family != "apparatus" and _opens_below(h, nxt) and nxt.real:
            h.real = True
        else:
            h.real = False


def _opens_below(h: Heading, nxt: Heading) -> bool:
    """Can ``nxt`` open a level below ``h``: a deeper kind, or another numbered keyword of the
    same rank (``CHAPTER IV`` then ``SECTION 1``; which of the two encloses the other is decided
    when the unit kind is chosen)?"""
    if nxt.rank > h.rank:
        return True
    return (nxt.rank == h.rank and nxt.kind != h.kind and h.family == nxt.family == "kw"
            and h.number is not None and nxt.number is not None)


def filter_sequences(cands: list[Heading]) -> None:
    """Unmark numbered candidates that break their kind's sequence.

    Numbers go up by one; 1 may restart a sequence anywhere (a new volume), and any number may
    start one right after an enclosing heading (``ACT III`` / ``SCENE II`` when the source lacks
    scene I); small gaps pass, and so does a misprint that the next heading corrects (III, VI,
    V, VI). Numbers before the first 1 of their kind with no enclosing heading before them are
    dropped when a 1 follows: that is the tail of a contents list."""
    real = [h for h in cands if h.real]
    numbered: dict[str, list[int]] = {}
    for k, h in enumerate(real):
        if h.family in ("kw", "numeral") and h.number is not None:
            numbered.setdefault(h.kind, []).append(k)
    for kind, positions in numbered.items():
        rank = KIND_RANK[kind]
        last: int | None = None
        enclosed = False
        seen = set(positions)
        next_pos = {p: q for p, q in zip(positions, positions[1:])}
        later_one = set()
        found_one = False
        for p in reversed(positions):
            if found_one:
                later_one.add(p)
            if real[p].number == 1:
                found_one = True
        for k, h in enumerate(real):
            if k not in seen:
                if h.rank < rank and h.family in ("kw", "special", "md"):
                    last, enclosed = None, True
                continue
            v = h.number
            if v is None:
                continue
            nxt_k = next_pos.get(k)
            nxt = real[nxt_k].number if nxt_k is not None else None
            if last is None:
                if v != 1 and not enclosed and k in later_one:
                    h.real = False  # tail of a contents list before the real first heading
                    continue
                last = v
            elif v == 1 or v == last + 1:
                last = v
            elif nxt is not None and nxt == last + 2:
                last = last + 1  # misprinted number; the next heading confirms the count
            elif last < v <= last + 3:
                last = v  # a heading or two missing
            else:
                h.real = False


def merge_numeral_kinds(cands: list[Heading]) -> None:
    """Titled and bare numerals that count on together (``III. THE RIDING FORTH``, ``IV.``,
    ``V. AT THE FORD``) are one sequence: the bare ones become titled headings without a title.
    Numbered sub-sections inside numbered stories restart at I and are left alone."""
    nums = [h for h in cands if h.real and h.family == "numeral" and h.number is not None]
    kinds = {h.kind for h in nums}
    if len(kinds) < 2 or len(nums) < 3:
        return
    def counts_on(seq: list[Heading]) -> bool:
        steps = sum(1 for a, b in zip(seq, seq[1:]) if b.number == a.number + 1)
        return len(seq) >= 2 and steps >= 0.8 * (len(seq) - 1)

    # only when neither kind counts on alone (twelve titled stories with numbered sections
    # inside some of them are two sequences, not one)
    if counts_on(nums) and not any(counts_on([h for h in nums if h.kind == k]) for k in kinds):
        for h in nums:
            h.kind, h.rank = "numeral_titled", KIND_RANK["numeral_titled"]
