"""The fallback that turns any segmentation into a valid one, recording every change.

Paper section 3.1.2: when coverage gaps remain after the retries, the missing sentences join
their left-adjacent segment in source order (the right-adjacent one when nothing lies to their
left); when nothing usable came back at all, the whole unit becomes the output. Beyond that rule
this module also mends what a parser cannot: swapped ranges are turned round, ranges reaching
outside ``1..n`` are clamped (or dropped when they lie wholly outside), identical ranges are
merged, segments are put in source order, and context indices that are out of bounds, repeated,
or inside their own main range are dropped, and an answer that repeats the unit's text too
often is cut back to the spread limit of validation (ranges kept in answer order while the main
ranges, gaps filled, hold at most ``MAX_SPREAD * n`` sentences; context lists likewise). The
whole-unit fallback splits the unit greedily under a word cap so that no chunk exceeds what the
downstream consumers accept.

Repair is linear in ``n`` plus the size of the answer, and the chunks built from its output hold
at most ``2 * MAX_SPREAD`` times the unit's text.

Postcondition (property-tested): ``validate_segments(repair_segments(s, n)[0], n) == []``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from litseg.segmentation.schema import Segment
from litseg.segmentation.validation import MAX_SPREAD, coverage_counts, format_runs, runs


class RepairKind(str, Enum):
    SWAPPED_RANGE = "swapped_range"
    CLAMPED_RANGE = "clamped_range"
    DROPPED_RANGE = "dropped_range"
    MERGED_DUPLICATE = "merged_duplicate"
    SORTED = "sorted"
    FILLED_GAP = "filled_gap"
    DROPPED_CONTEXT = "dropped_context"
    WHOLE_UNIT = "whole_unit"


@dataclass(frozen=True, slots=True)
class Repair:
    """One change made by the fallback. ``segment`` is the position of the segment concerned in
    the list given to :func:`repair_segments` (None for changes to the list as a whole);
    ``indices`` are the sentence indices concerned."""

    kind: RepairKind
    message: str
    segment: int | None = None
    indices: tuple[int, ...] = field(default_factory=tuple)

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind.value, "message": self.message, "segment": self.segment,
                "indices": list(self.indices)}


@dataclass(slots=True)
class _Draft:
    pos: int  # position in the input list
    subtitle: str
    start: int
    end: int
    context: list[int]


def whole_unit_segments(n: int, sentence_words: Sequence[int], max_words: int, *,
                        subtitle: str = "") -> list[Segment]:
    """Consecutive segments covering ``1..n``, each as long as possible under ``max_words``.

    A sentence longer than the cap on its own forms its own segment (sentences are never cut).
    """
    if len(sentence_words) != n:
        raise ValueError(f"sentence_words has {len(sentence_words)} entries for {n} sentences")
    if max_words < 1:
        raise ValueError(f"max_words must be >= 1, got {max_words}")
    spans: list[tuple[int, int]] = []
    start, words = 1, 0
    for idx, w in enumerate(sentence_words, start=1):
        if idx > start and words + w > max_words:
            spans.append((start, idx - 1))
            start, words = idx, 0
        words += max(0, w)
    if n:
        spans.append((start, n))
    return [Segment(subtitle=subtitle, from_idx=a, to_idx=b) for a, b in spans]


def repair_segments(
    segments: Sequence[Segment], n: int, *, sentence_words: Sequence[int] | None = None,
    max_words: int | None = None, fallback_subtitle: str = "",
) -> tuple[list[Segment], list[Repair]]:
    """A valid segmentation of ``1..n`` made from ``segments``, and the list of changes.

    When no usable range survives, the whole unit is returned: split under ``max_words`` when
    ``sentence_words`` and ``max_words`` are given, otherwise as the single range ``1..n``.
    """
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    repairs: list[Repair] = []
    drafts: list[_Draft] = []
    for pos, seg in enumerate(segments):
        start, end = seg.from_idx, seg.to_idx
        if start > end:
            start, end = end, start
            repairs.append(Repair(RepairKind.SWAPPED_RANGE,
                                  f"segment {pos + 1}: range {seg.from_idx}-{seg.to_idx} turned round",
                                  pos, (start, end)))
        if end < 1 or start > n:
            repairs.append(Repair(RepairKind.DROPPED_RANGE,
                                  f"segment {pos + 1}: range {start}-{end} lies outside 1-{n}; dropped",
                                  pos, (start, end)))
            continue
        clamped = (max(1, start), min(n, end))
        if clamped != (start, end):
            repairs.append(Repair(RepairKind.CLAMPED_RANGE,
                                  f"segment {pos + 1}: range {start}-{end} clamped to {clamped[0]}-{clamped[1]}",
                                  pos, clamped))
        drafts.append(_Draft(pos, seg.subtitle, clamped[0], clamped[1], list(seg.context_idx)))

    if n == 0:
        return [], _folded(repairs)
    if not drafts:
        whole = (whole_unit_segments(n, sentence_words, max_words, subtitle=fallback_subtitle)
                 if sentence_words is not None and max_words is not None
                 else [Segment(subtitle=fallback_subtitle, from_idx=1, to_idx=n)])
        repairs.append(Repair(RepairKind.WHOLE_UNIT,
                              f"no usable range; whole unit used as {len(whole)} segment(s)",
                              None, tuple(s.from_idx for s in whole)))
        return whole, _folded(repairs)

    drafts = _within_spread(_merge_duplicates(drafts, repairs), n, repairs)
    ordered = sorted(drafts, key=lambda d: (d.start, d.end))
    if [d.pos for d in ordered] != [d.pos for d in drafts]:
        repairs.append(Repair(RepairKind.SORTED, "segments put in source order"))
    drafts = ordered
    _fill_gaps(drafts, n, repairs)
    drafts = _merge_duplicates(sorted(drafts, key=lambda d: (d.start, d.end)), repairs)
    context_left = MAX_SPREAD * n
    for d in drafts:
        _clean_context(d, n, repairs)
        if len(d.context) > context_left:
            cut = d.context[context_left:]
            d.context = d.context[:context_left]
            repairs.append(Repair(RepairKind.DROPPED_CONTEXT,
                                  f"segment {d.pos + 1}: context_idx {format_runs(cut)} dropped (the "
                                  f"context lists may name at most {MAX_SPREAD * n} sentences in all)",
                                  d.pos, tuple(cut[:40])))
        context_left -= len(d.context)
    return [Segment(subtitle=d.subtitle, from_idx=d.start, to_idx=d.end, context_idx=d.context)
            for d in drafts], _folded(repairs)


#: Repairs of one kind listed one by one; further ones are folded into a single record.
MAX_REPAIRS_PER_KIND = 20


def _folded(repairs: list[Repair]) -> list[Repair]:
    """At most :data:`MAX_REPAIRS_PER_KIND` records per kind, then one that counts the rest
    (a pathological answer must not make the diagnostics huge)."""
    seen: Counter[RepairKind] = Counter()
    out: list[Repair] = []
    for r in repairs:
        seen[r.kind] += 1
        if seen[r.kind] <= MAX_REPAIRS_PER_KIND:
            out.append(r)
    for kind, count in seen.items():
        if count > MAX_REPAIRS_PER_KIND:
            out.append(Repair(kind, f"... and {count - MAX_REPAIRS_PER_KIND} more {kind.value} repairs",
                              None, (count - MAX_REPAIRS_PER_KIND,)))
    return out


def _within_spread(drafts: list[_Draft], n: int, repairs: list[Repair]) -> list[_Draft]:
    """The longest prefix (in answer order) of ``drafts`` whose ranges, once the gaps are
    filled, hold at most ``MAX_SPREAD * n`` sentences. Linear: the work stops at the limit."""
    limit = MAX_SPREAD * n
    total = sum(d.end - d.start + 1 for d in drafts)
    if total <= limit - n:  # even filling every sentence stays within the limit
        return drafts
    counts = coverage_counts([Segment(from_idx=d.start, to_idx=d.end) for d in drafts], n)
    if total + sum(1 for c in counts[1:] if not c) <= limit:
        return drafts
    covered = bytearray(n + 1)
    n_covered = total = 0
    kept: list[_Draft] = []
    for d in drafts:
        length = d.end - d.start + 1
        if total + length > limit:
            break
        new = [i for i in range(d.start, d.end + 1) if not covered[i]]
        if total + length + (n - n_covered - len(new)) > limit:
            break
        for i in new:
            covered[i] = 1
        n_covered += len(new)
        total += length
        kept.append(d)
    dropped = drafts[len(kept):]
    repairs.append(Repair(RepairKind.DROPPED_RANGE,
                          f"{len(dropped)} range(s) dropped from segment {dropped[0].pos + 1} on: the main "
                          f"ranges may hold at most {limit} sentences ({MAX_SPREAD} per sentence)",
                          dropped[0].pos, (len(dropped),)))
    return kept


def _merge_duplicates(drafts: list[_Draft], repairs: list[Repair]) -> list[_Draft]:
    kept: dict[tuple[int, int], _Draft] = {}
    for d in drafts:
        first = kept.get((d.start, d.end))
        if first is None:
            kept[(d.start, d.end)] = d
            continue
        first.context.extend(d.context)
        if not first.subtitle:
            first.subtitle = d.subtitle
        repairs.append(Repair(RepairKind.MERGED_DUPLICATE,
                              f"segment {d.pos + 1} repeats range {d.start}-{d.end} of segment "
                              f"{first.pos + 1}; merged", d.pos, (d.start, d.end)))
    return list(kept.values())


def _fill_gaps(drafts: list[_Draft], n: int, repairs: list[Repair]) -> None:
    """Give each uncovered run to the segment ending just before it (else the one after it)."""
    counts = coverage_counts([Segment(from_idx=d.start, to_idx=d.end) for d in drafts], n)
    gaps = runs(i for i in range(1, n + 1) if not counts[i])
    if not gaps:
        return
    # A gap's left neighbour is a range ending just before it (the last such in source order);
    # gaps are separated by covered sentences, so growing one owner never makes it another's.
    ending: dict[int, _Draft] = {}
    starting: dict[int, _Draft] = {}
    for d in drafts:
        ending[d.end] = d
        starting.setdefault(d.start, d)
    for a, b in gaps:
        if a - 1 in ending:
            owner = ending[a - 1]
            owner.end = b
            side = "preceding"
        else:
            owner = starting[b + 1]
            owner.start = a
            side = "following"
        repairs.append(Repair(RepairKind.FILLED_GAP,
                              f"sentences {format_runs(range(a, b + 1))} added to the {side} "
                              f"segment {owner.pos + 1}", owner.pos, tuple(range(a, b + 1))))


def _clean_context(d: _Draft, n: int, repairs: list[Repair]) -> None:
    keep: list[int] = []
    kept: set[int] = set()
    outside: list[int] = []
    inside: list[int] = []
    repeated: list[int] = []
    for c in d.context:
        if not 1 <= c <= n:
            outside.append(c)
        elif d.start <= c <= d.end:
            inside.append(c)
        elif c in kept:
            repeated.append(c)
        else:
            keep.append(c)
            kept.add(c)
    d.context = sorted(keep)
    reasons = [(outside, f"outside 1-{n}"), (inside, "inside the main range"), (repeated, "repeated")]
    dropped = [f"{format_runs(ix)} ({why})" for ix, why in reasons if ix]
    if dropped:
        repairs.append(Repair(RepairKind.DROPPED_CONTEXT,
                              f"segment {d.pos + 1}: context_idx dropped: {'; '.join(dropped)}",
                              d.pos, tuple(outside + inside + repeated)))
