"""Metrics of a chunk set itself, before any question: chunk statistics (lengths, context use,
overlap, the share over an embedder's window) and segment quality (cuts on sentence breaks,
similarity across each cut). The question-level metrics are in :mod:`litseg.rag.metrics`."""

from __future__ import annotations

import statistics
from bisect import bisect_right
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np

Span = tuple[int, int]


# ------------------------------------------------------------------------------ chunk statistics
def _field(chunk: Any, name: str, default: Any = None) -> Any:
    if isinstance(chunk, Mapping):
        return chunk.get(name, default)
    return getattr(chunk, name, default)


def _chunk_text(chunk: Any, key: str, fallback: str) -> str:
    t = _field(chunk, key) or _field(chunk, fallback) or ""
    return str(t)


def length_distribution(values: Sequence[float], percentiles: Sequence[float] = (10, 25, 50, 75, 90)
                        ) -> dict[str, float]:
    """Mean, standard deviation, min, max and the given percentiles (``p50`` = median)."""
    if len(values) == 0:
        return {"n": 0.0}
    arr = np.asarray(values, dtype=float)
    out = {"n": float(arr.size), "mean": float(arr.mean()), "std": float(arr.std()),
           "min": float(arr.min()), "max": float(arr.max())}
    for p in percentiles:
        out[f"p{p:g}"] = float(np.percentile(arr, p))
    return out


def context_usage(chunks: Iterable[Any]) -> dict[str, float]:
    """How much chunks use context sentences outside their main range (LitSeg's
    ``context_ids``): share of chunks with any, mean count over all chunks and over those."""
    counts = [len(_field(c, "context_ids", None) or []) for c in chunks]
    if not counts:
        return {"share_with_context": 0.0, "mean_context_sentences": 0.0,
                "mean_context_sentences_when_used": 0.0}
    used = [n for n in counts if n > 0]
    return {"share_with_context": len(used) / len(counts),
            "mean_context_sentences": float(np.mean(counts)),
            "mean_context_sentences_when_used": float(np.mean(used)) if used else 0.0}


def main_text_overlap(chunks: Iterable[Any]) -> dict[str, float]:
    """How much chunks share main text (token windows with overlap, LitSeg's optional overlap of
    adjacent blocks): ``share_overlapping`` = share of chunks whose main span overlaps another
    chunk's of the same book; ``overlap_chars_share`` = characters read more than once per
    character covered (0 when the chunks tile the text). Empty when no chunk carries
    ``main_spans``."""
    by_book: dict[str, list[tuple[int, int, int]]] = {}
    n = 0
    for i, c in enumerate(chunks):
        spans = _field(c, "main_spans", None)
        if not spans:
            continue
        n += 1
        lst = by_book.setdefault(str(_field(c, "book_id", "")), [])
        lst.extend((int(s), int(e), i) for s, e in spans)
    if not n:
        return {}
    overlapping: set[int] = set()
    total = covered = 0
    for spans in by_book.values():
        spans.sort()
        reach, owner = -1, -1  # furthest end so far and the chunk that reaches it
        cur_s, cur_e = None, None
        for s, e, i in spans:
            total += e - s
            if s < reach and owner != i:
                overlapping.update((i, owner))
            if e > reach:
                reach, owner = e, i
            if cur_e is None or s > cur_e:
                if cur_e is not None:
                    covered += cur_e - cur_s
                cur_s, cur_e = s, e
            else:
                cur_e = max(cur_e, e)
        if cur_e is not None:
            covered += cur_e - cur_s
    return {"share_overlapping": len(overlapping) / n,
            "overlap_chars_share": (total - covered) / covered if covered else 0.0}


def chunk_statistics(chunks: Sequence[Any], *, count_tokens: Callable[[str], int] | None = None,
                     window: int | None = None, text_key: str = "main_text",
                     embed_text_key: str = "text") -> dict[str, Any]:
    """Size profile of one chunker's output (chunk dicts from ``chunks.jsonl`` or
    :class:`~litseg.segmentation.types.Chunk` objects).

    * ``chunks_per_book``: mean/median/min/max over books;
    * ``words``: words per chunk (whitespace split of ``text_key``, falling back to ``text``)
      with mean, median (p50) and p90; ``chars``: the same in characters;
    * ``share_over_window``: with ``count_tokens`` (e.g. ``Embedder.count_tokens``) and
      ``window`` (e.g. 256 word pieces for all-MiniLM-L6-v2), the share of chunks whose embedded
      text (``embed_text_key``, the context-enriched ``text`` by default) is longer than the
      window, i.e. would be truncated by the embedder. ``Embedder.count_tokens`` leaves out the
      special tokens, so for BERT-style models pass ``window = max_seq_length - 2`` (254);
    * context-sentence usage (see :func:`context_usage`);
    * shared main text (see :func:`main_text_overlap`).
    """
    if not chunks:
        raise ValueError("no chunks")
    if (count_tokens is None) != (window is None):
        raise ValueError("give both count_tokens and window, or neither")
    per_book = Counter(str(_field(c, "book_id", "")) for c in chunks)
    main_texts = [_chunk_text(c, text_key, "text") for c in chunks]
    words = [len(t.split()) for t in main_texts]
    out: dict[str, Any] = {
        "n_chunks": len(chunks),
        "n_books": len(per_book),
        "chunks_per_book": length_distribution(list(per_book.values()), (50,)),
        "words": length_distribution(words, (50, 90)),
        "chars": length_distribution([len(t) for t in main_texts], (50, 90)),
        **context_usage(chunks),
        **main_text_overlap(chunks),
    }
    if count_tokens is not None and window is not None:
        over = sum(1 for c in chunks if count_tokens(_chunk_text(c, embed_text_key, text_key)) > window)
        out["window"] = window
        out["share_over_window"] = over / len(chunks)
    return out



# ------------------------------------------------------------------------------- segment quality
def chunk_boundaries(chunk_spans: Sequence[Span]) -> list[int]:
    """Cut offsets of one unit's chunks: the start of every chunk's main range except the first
    (earliest) one. ``chunk_spans`` are the (start, end) of the main ranges."""
    starts = sorted({int(s) for s, _ in chunk_spans})
    return starts[1:]


def _sentence_index(sentence_spans: Sequence[Span]) -> list[int]:
    starts = [s for s, _ in sentence_spans]
    if starts != sorted(starts):
        raise ValueError("sentence spans must be sorted by start")
    return starts


def on_sentence_break(sentence_spans: Sequence[Span], boundary: int) -> bool:
    """True when ``boundary`` does not fall strictly inside any sentence."""
    starts = _sentence_index(sentence_spans)
    i = bisect_right(starts, boundary - 1) - 1  # last sentence starting before the boundary
    return i < 0 or sentence_spans[i][1] <= boundary


def sentence_break_share(sentence_spans: Sequence[Span], boundaries: Sequence[int]) -> float | None:
    """Share of boundaries that lie between sentences rather than inside one (None if there are
    no boundaries). Report it beside boundary similarity: mid-sentence cuts score low on
    similarity without being good cuts."""
    if not boundaries:
        return None
    return sum(on_sentence_break(sentence_spans, b) for b in boundaries) / len(boundaries)


def boundary_text_pairs(text: str, sentence_spans: Sequence[Span], boundaries: Sequence[int]
                        ) -> list[tuple[str, str]]:
    """For each boundary, the text just before and just after it: the sentences on either side
    for a cut between sentences; for a cut inside a sentence, the two pieces of that sentence.
    Boundaries before the first or after the last sentence are skipped."""
    starts = _sentence_index(sentence_spans)
    pairs: list[tuple[str, str]] = []
    for b in boundaries:
        i = bisect_right(starts, b - 1) - 1
        if i < 0:
            continue
        s, e = sentence_spans[i]
        if e > b:  # cut inside sentence i
            left, right = text[s:b], text[b:e]
        else:
            if i + 1 >= len(sentence_spans):
                continue
            s2, e2 = sentence_spans[i + 1]
            left, right = text[s:e], text[s2:e2]
        left, right = left.strip(), right.strip()
        if left and right:
            pairs.append((left, right))
    return pairs


def boundary_similarity(pairs: Sequence[tuple[str, str]], embed: Callable[[list[str]], Any]
                        ) -> dict[str, Any]:
    """Mean cosine similarity between the texts on either side of each boundary (lower = the
    cut separates less related text). ``embed`` maps a list of strings to an (n, d) array, e.g.
    ``Embedder.encode``."""
    if not pairs:
        return {"n_boundaries": 0, "mean": None, "values": []}
    vecs = np.asarray(embed([p[0] for p in pairs] + [p[1] for p in pairs]), dtype=float)
    if vecs.shape[0] != 2 * len(pairs):
        raise ValueError(f"embed returned {vecs.shape[0]} vectors for {2 * len(pairs)} texts")
    left, right = vecs[: len(pairs)], vecs[len(pairs):]
    norms = np.linalg.norm(left, axis=1) * np.linalg.norm(right, axis=1)
    cos = np.where(norms > 0, (left * right).sum(axis=1) / np.where(norms > 0, norms, 1.0), 0.0)
    return {"n_boundaries": len(pairs), "mean": float(cos.mean()), "values": cos.tolist()}


def segment_quality(units: Iterable[tuple[str, Sequence[Span], Sequence[Span]]],
                    embed: Callable[[list[str]], Any] | None = None) -> dict[str, Any]:
    """Boundary measures over many units. Each unit is ``(text, sentence_spans, chunk_spans)``
    with sentence and chunk main-range spans as offsets into ``text``. Returns the number of
    boundaries, the share on sentence breaks and, with ``embed``, the mean boundary similarity."""
    n_bounds = 0
    on_break = 0
    pairs: list[tuple[str, str]] = []
    for text, sentences, chunk_spans in units:
        bounds = chunk_boundaries(chunk_spans)
        n_bounds += len(bounds)
        on_break += sum(on_sentence_break(sentences, b) for b in bounds)
        if embed is not None:
            pairs.extend(boundary_text_pairs(text, sentences, bounds))
    out: dict[str, Any] = {"n_boundaries": n_bounds,
                           "share_on_sentence_breaks": on_break / n_bounds if n_bounds else None}
    if embed is not None:
        sim = boundary_similarity(pairs, embed)
        out["boundary_similarity"] = sim["mean"]
        out["n_boundary_pairs"] = sim["n_boundaries"]
    return out


def mean_or_none(values: Iterable[float | None]) -> float | None:
    """Mean of the non-None values, None when there are none."""
    got = [v for v in values if v is not None]
    return statistics.fmean(got) if got else None
