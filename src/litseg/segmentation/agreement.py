"""How close one segmentation of a unit is to another (a student's to its teacher's), and whether
a model's subtitles are real or copied from the instructions.

* :func:`boundary_f1`: the cuts of a segmentation are the first sentences of its blocks after the
  first one; a predicted cut matches a reference cut at most ``tolerance`` sentences away (each cut
  matched at most once, nearest first). Precision, recall and F1 over the matched cuts. Two
  segmentations without any cut agree perfectly (F1 1.0); one without cuts against one with cuts
  scores 0.
* :func:`placeholder_subtitle`: a subtitle that repeats (or is part of) a field description the
  model was shown, e.g. "short name of the block's core action", instead of naming what happens.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any


def _span(segment: Any) -> tuple[int, int]:
    if isinstance(segment, Mapping):
        return int(segment["from_idx"]), int(segment["to_idx"])
    return int(segment.from_idx), int(segment.to_idx)


def cuts(segments: Iterable[Any]) -> list[int]:
    """Sorted first sentences of every block but the first (the block that starts earliest)."""
    starts = sorted({_span(s)[0] for s in segments})
    return starts[1:]


@dataclass(frozen=True, slots=True)
class BoundaryScore:
    precision: float
    recall: float
    f1: float
    matched: int
    predicted: int
    reference: int

    def to_dict(self) -> dict[str, float | int]:
        return {"precision": self.precision, "recall": self.recall, "f1": self.f1, "matched": self.matched,
                "predicted": self.predicted, "reference": self.reference}


def match_cuts(predicted: Sequence[int], reference: Sequence[int], tolerance: int = 1) -> int:
    """Number of one-to-one matches within ``tolerance`` sentences, closest pairs first."""
    pairs = sorted((abs(p - r), i, j) for i, p in enumerate(predicted) for j, r in enumerate(reference)
                   if abs(p - r) <= tolerance)
    used_p: set[int] = set()
    used_r: set[int] = set()
    for _dist, i, j in pairs:
        if i not in used_p and j not in used_r:
            used_p.add(i)
            used_r.add(j)
    return len(used_p)


def boundary_f1(predicted: Iterable[Any], reference: Iterable[Any], tolerance: int = 1) -> BoundaryScore:
    """Cut agreement of two segmentations of the same unit (segments as objects or mappings)."""
    p, r = cuts(predicted), cuts(reference)
    if not p and not r:
        return BoundaryScore(1.0, 1.0, 1.0, 0, 0, 0)
    m = match_cuts(p, r, tolerance)
    precision = m / len(p) if p else 0.0
    recall = m / len(r) if r else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return BoundaryScore(precision, recall, f1, m, len(p), len(r))


def micro_boundary_f1(pairs: Iterable[tuple[Iterable[Any], Iterable[Any]]], tolerance: int = 1) -> BoundaryScore:
    """Pooled over units: matches, predicted and reference cuts summed before the ratios."""
    m = n_p = n_r = 0
    for predicted, reference in pairs:
        p, r = cuts(predicted), cuts(reference)
        m += match_cuts(p, r, tolerance)
        n_p += len(p)
        n_r += len(r)
    if not n_p and not n_r:
        return BoundaryScore(1.0, 1.0, 1.0, 0, 0, 0)
    precision = m / n_p if n_p else 0.0
    recall = m / n_r if n_r else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return BoundaryScore(precision, recall, f1, m, n_p, n_r)


# --------------------------------------------------------------------------------------------
# Placeholder subtitles

_WORDS = re.compile(r"[a-z0-9]+")
_QUOTED = re.compile(r'"((?:[^"\\]|\\.)*)"')


def _norm(text: str) -> str:
    return " ".join(_WORDS.findall(text.lower()))


def instruction_strings(prompt_texts: Iterable[str] = (), schema_models: Iterable[Any] = ()) -> list[str]:
    """Strings a model may copy instead of answering: the quoted values of the prompt's JSON
    shape (``prompt_texts``: its user and system templates; this layer takes the texts, not the
    prompt config, which the chunkers layer types) and the field descriptions of the answer
    schema models (pydantic)."""
    found: list[str] = []
    for text in prompt_texts:
        found.extend(_QUOTED.findall(text or ""))
    for model in schema_models:
        for sub in _models_below(model):
            for info in getattr(sub, "model_fields", {}).values():
                if info.description:
                    found.append(info.description)
    out = []
    for s in found:
        n = _norm(s)
        if len(n.split()) >= 2 and n not in out:
            out.append(n)
    return out


def _models_below(model: Any, seen: set[Any] | None = None) -> list[Any]:
    seen = seen if seen is not None else set()
    if model in seen or not hasattr(model, "model_fields"):
        return []
    seen.add(model)
    out = [model]
    for info in model.model_fields.values():
        for arg in (info.annotation, *getattr(info.annotation, "__args__", ())):
            if hasattr(arg, "model_fields"):
                out.extend(_models_below(arg, seen))
    return out


def placeholder_subtitle(subtitle: str, instructions: Sequence[str]) -> bool:
    """True when the subtitle is empty, equals an instruction string, or one contains the other
    (a copied description, whole or in part, of at least three words)."""
    s = _norm(subtitle)
    if not s:
        return True
    for text in instructions:
        if s == text:
            return True
        if len(s.split()) >= 3 and (s in text or text in s):
            return True
    return False


def placeholder_share(subtitles: Sequence[str], instructions: Sequence[str]) -> float | None:
    if not subtitles:
        return None
    return sum(placeholder_subtitle(s, instructions) for s in subtitles) / len(subtitles)


def repeated_subtitle_share(units: Iterable[Sequence[str]]) -> float | None:
    """Share of blocks whose subtitle (case and spacing aside) repeats an earlier block's of the
    same unit: a small student tends to name every block of a chapter alike."""
    total = repeated = 0
    for subtitles in units:
        seen: set[str] = set()
        for subtitle in subtitles:
            key = " ".join(str(subtitle).lower().split())
            repeated += key in seen
            seen.add(key)
            total += 1
    return repeated / total if total else None


@dataclass(frozen=True, slots=True)
class WindowErrors:
    """Pk or WindowDiff pooled over units: windows in error over windows compared."""

    errors: int
    windows: int

    @property
    def rate(self) -> float:
        return self.errors / self.windows if self.windows else 0.0


def _boundaries(segments: Iterable[Any], n: int) -> list[int]:
    """``b[i]`` = 1 when a block starts at sentence i + 2 (a boundary after sentence i + 1)."""
    marks = [0] * max(0, n - 1)
    for c in cuts(segments):
        if 2 <= c <= n:
            marks[c - 2] = 1
    return marks


def window_size(reference: Iterable[Any], n: int) -> int:
    """Half the mean length of the reference's blocks, in sentences (at least 2), as Pk uses."""
    blocks = len(cuts(reference)) + 1
    return max(2, round(n / blocks / 2))


def pk_errors(predicted: Iterable[Any], reference: Iterable[Any], n: int, k: int | None = None) -> WindowErrors:
    """Pk (Beeferman et al.): over every pair of sentences ``k`` apart, how often the two
    segmentations disagree on whether the pair lies in one block. Lower is better; it does not
    reward cutting often the way a tolerant boundary F1 does."""
    reference = list(reference)
    k = k or window_size(reference, n)
    ref, hyp = _boundaries(reference, n), _boundaries(predicted, n)
    errors = windows = 0
    for i in range(0, n - k):
        windows += 1
        errors += (sum(ref[i:i + k]) == 0) != (sum(hyp[i:i + k]) == 0)
    return WindowErrors(errors, windows)


def windowdiff_errors(predicted: Iterable[Any], reference: Iterable[Any], n: int, k: int | None = None) -> WindowErrors:
    """WindowDiff (Pevzner and Hearst): windows of ``k`` sentences in which the two segmentations
    place a different number of boundaries. Lower is better; it penalises extra cuts that Pk misses."""
    reference = list(reference)
    k = k or window_size(reference, n)
    ref, hyp = _boundaries(reference, n), _boundaries(predicted, n)
    errors = windows = 0
    for i in range(0, n - k):
        windows += 1
        errors += sum(ref[i:i + k]) != sum(hyp[i:i + k])
    return WindowErrors(errors, windows)
