"""Retrieval, chunk, generation and segment metrics and the statistics helpers, checked against
hand-computed values (litseg.rag.metrics, litseg.rag.stats)."""

from __future__ import annotations

import gzip
import itertools
import math
import warnings
from pathlib import Path

import numpy as np
import pytest

from litseg.rag import metrics
from litseg.rag.metrics import (
    exact_match,
    first_relevant_rank,
    generation_scores,
    hit_at_k,
    meteor,
    normalize_answer,
    question_retrieval_scores,
    random_hit_at_k,
    random_mrr,
    random_retrieval_scores,
    rank_candidates,
    reciprocal_rank,
    retrieval_scores,
    rouge_l,
    token_f1,
)
from litseg.rag.chunk_quality import (
    boundary_similarity,
    boundary_text_pairs,
    chunk_boundaries,
    chunk_statistics,
    context_usage,
    length_distribution,
    segment_quality,
    sentence_break_share,
)
from litseg.rag.stats import bootstrap_ci, paired_comparison

T, F = True, False


# -------------------------------------------------------------------------------- retrieval
@pytest.mark.parametrize("ranking, rank, rr10, rr2, hits", [
    ([T, F, F], 1, 1.0, 1.0, (1, 1, 1, 1)),
    ([F, F, T, T], 3, 1 / 3, 0.0, (0, 1, 1, 1)),
    ([F] * 4 + [T], 5, 0.2, 0.0, (0, 0, 1, 1)),
    ([F] * 10 + [T], 11, 0.0, 0.0, (0, 0, 0, 0)),
    ([], None, 0.0, 0.0, (0, 0, 0, 0)),
])
def test_rank_metrics_table(ranking, rank, rr10, rr2, hits) -> None:
    assert first_relevant_rank(ranking) == rank
    assert reciprocal_rank(ranking, 10) == pytest.approx(rr10)
    assert reciprocal_rank(ranking, 2) == pytest.approx(rr2)
    assert tuple(hit_at_k(ranking, k) for k in (1, 3, 5, 10)) == hits
    scores = question_retrieval_scores(ranking)
    assert scores["mrr@10"] == pytest.approx(rr10)
    assert [scores[f"hit@{k}"] for k in (1, 3, 5, 10)] == list(hits)


def test_retrieval_scores_mean() -> None:
    out = retrieval_scores([[T], [F, T], [F, F, F, T], [F]])
    assert out["mrr@10"] == pytest.approx((1 + 0.5 + 0.25 + 0) / 4)
    assert out["hit@1"] == 0.25 and out["hit@3"] == 0.5 and out["hit@5"] == 0.75
    assert out["n_questions"] == 4
    assert retrieval_scores([[F, F, T]], mrr_k=None)["mrr"] == pytest.approx(1 / 3)
    with pytest.raises(ValueError):
        retrieval_scores([])
    with pytest.raises(ValueError):
        hit_at_k([T], 0)


def test_rank_candidates_breaks_ties_by_order() -> None:
    assert rank_candidates([0.5, 0.9, 0.5, float("nan"), 0.1]) == [1, 0, 2, 4, 3]
    assert rank_candidates([0.5, 0.5, 0.5], keys=[2, 0, 1]) == [1, 2, 0]


@pytest.mark.parametrize("r, n, k, expected", [
    (1, 6, 1, 1 / 6),
    (2, 6, 1, 1 / 3),
    (1, 6, 3, 0.5),
    (2, 4, 2, 1 - 1 / 6),   # 1 - C(2,2)/C(4,2)
    (0, 5, 1, 0.0),
    (3, 3, 1, 1.0),
    (1, 4, 10, 1.0),
])
def test_random_hit_at_k_table(r, n, k, expected) -> None:
    assert random_hit_at_k(r, n, k) == pytest.approx(expected)


@pytest.mark.parametrize("r, n, k, expected", [
    (1, 6, None, (1 + 1 / 2 + 1 / 3 + 1 / 4 + 1 / 5 + 1 / 6) / 6),  # 0.408333
    (2, 4, None, 3 / 6 + (2 / 6) / 2 + (1 / 6) / 3),               # 0.722222
    (1, 6, 2, (1 + 1 / 2) / 6),
    (1, 1, None, 1.0),
    (0, 3, None, 0.0),
])
def test_random_mrr_table(r, n, k, expected) -> None:
    assert random_mrr(r, n, k) == pytest.approx(expected)


@pytest.mark.parametrize("r, n", [(1, 5), (2, 5), (3, 6)])
def test_random_baselines_match_enumeration(r: int, n: int) -> None:
    rrs, hits = [], []
    for perm in itertools.permutations(range(n)):
        rel = [p < r for p in perm]
        rrs.append(reciprocal_rank(rel, 3))
        hits.append(hit_at_k(rel, 2))
    assert random_mrr(r, n, 3) == pytest.approx(np.mean(rrs))
    assert random_hit_at_k(r, n, 2) == pytest.approx(np.mean(hits))


def test_random_retrieval_scores() -> None:
    out = random_retrieval_scores([(1, 6), (1, 2)])
    assert out["hit@1"] == pytest.approx((1 / 6 + 1 / 2) / 2)
    assert out["mrr@10"] == pytest.approx((0.408333333 + 0.75) / 2)
    with pytest.raises(ValueError):
        random_hit_at_k(3, 2, 1)


# ---------------------------------------------------------------------------- chunk statistics
CHUNKS = [
    {"book_id": "a", "main_text": "one two three", "text": "T: one two three", "context_ids": []},
    {"book_id": "a", "main_text": "one two three four five", "text": "x", "context_ids": [4, 9]},
    {"book_id": "a", "main_text": "one", "text": "y", "context_ids": [2]},
    {"book_id": "b", "main_text": "one two three four five six seven", "text": "z"},
]


def test_chunk_statistics_hand_values() -> None:
    stats = chunk_statistics(CHUNKS, count_tokens=lambda t: len(t.split()), window=3)
    assert stats["n_chunks"] == 4 and stats["n_books"] == 2
    assert stats["chunks_per_book"]["mean"] == 2.0 and stats["chunks_per_book"]["p50"] == 2.0
    assert stats["words"]["mean"] == pytest.approx(16 / 4)
    assert stats["words"]["p50"] == pytest.approx(4.0)
    assert stats["words"]["p90"] == pytest.approx(5 + 0.7 * 2)  # numpy linear interpolation
    assert stats["share_over_window"] == 0.25  # only "T: one two three" has more than 3 tokens
    assert stats["share_with_context"] == 0.5
    assert stats["mean_context_sentences"] == pytest.approx(3 / 4)
    assert stats["mean_context_sentences_when_used"] == pytest.approx(1.5)
    with pytest.raises(ValueError):
        chunk_statistics(CHUNKS, window=3)
    with pytest.raises(ValueError):
        chunk_statistics([])


def test_chunk_statistics_reads_chunk_objects() -> None:
    from litseg.segmentation.types import Chunk

    c = Chunk(book_id="b", unit_id="u", chunk_id="c", method="m", from_idx=1, to_idx=2, main_ids=[1, 2],
              context_ids=[5], main_spans=[(0, 9)], context_spans=[(20, 25)], main_text="a b c", text="S\na b c")
    stats = chunk_statistics([c])
    assert stats["words"]["mean"] == 3 and stats["share_with_context"] == 1.0
    assert context_usage([]) == {"share_with_context": 0.0, "mean_context_sentences": 0.0,
                                 "mean_context_sentences_when_used": 0.0}
    assert length_distribution([]) == {"n": 0.0}
    assert length_distribution([1, 2, 3, 4])["p50"] == 2.5


# ----------------------------------------------------------------------------------- generation
@pytest.mark.parametrize("pred, refs, em, f1", [
    ("The cat sat.", ["a cat sat"], 1.0, 1.0),
    ("cat sat down", ["the cat sat"], 0.0, 0.8),          # P 2/3, R 1
    ("\u201cEmma\u2019s\u201d", ["emma s"], 1.0, 1.0),    # curly punctuation removed
    ("Paris", ["London", "paris!"], 1.0, 1.0),             # best reference wins
    ("red apple pie", ["green apple tart"], 0.0, 1 / 3),
    ("", ["anything"], 0.0, 0.0),
    ("the", ["a"], 1.0, 1.0),                              # both empty after normalisation
])
def test_em_f1_table(pred, refs, em, f1) -> None:
    assert exact_match(pred, refs) == em
    assert token_f1(pred, refs) == pytest.approx(f1)


def test_normalize_answer() -> None:
    assert normalize_answer("  The Old-Man, an EAGLE!  ") == "old man eagle"
    with pytest.raises(ValueError):
        exact_match("x", [])


def test_rouge_l_hand_values() -> None:
    # LCS "police the gunman" = 3 of 4 tokens each side; stemming makes killed ~ kill: LCS 4
    assert rouge_l("police killed the gunman", ["police kill the gunman"], use_stemmer=False) == pytest.approx(0.75)
    assert rouge_l("police killed the gunman", ["police kill the gunman"]) == pytest.approx(1.0)
    # P = 3/6, R = 3/3 -> F = 2/3; the second reference scores lower and is ignored
    assert rouge_l("a b c x y z", ["a b c", "q"]) == pytest.approx(2 / 3)


def _wordnet_or_skip(tmp_path_factory: pytest.TempPathFactory):
    reader = metrics.load_wordnet(tmp_path_factory.mktemp("cache"), refresh=True)
    if reader is None:
        pytest.skip(f"WordNet not available offline: {metrics.wordnet_status()}")
    return reader


def test_meteor_offline_known_value(tmp_path_factory: pytest.TempPathFactory) -> None:
    wn = _wordnet_or_skip(tmp_path_factory)
    hyp = "It is a guide to action which ensures that the military always obeys the commands of the party"
    ref = "It is a guide to action that ensures that the military will forever heed Party commands"
    # the value nltk documents for this pair (Lavie & Agarwal's example)
    assert meteor(hyp, [ref], wordnet=wn) == pytest.approx(0.6944, abs=1e-4)
    # "car" matches "auto" only through a WordNet synonym set (car.n.01). nltk looks synonyms
    # up for the Porter stems of unmatched words, so the pair must be its own stems.
    same = meteor("a red auto", ["a red auto"], wordnet=wn)
    assert meteor("a red car", ["a red auto"], wordnet=wn) == pytest.approx(same)
    assert meteor("a red tree", ["a red auto"], wordnet=wn) < same
    scores = generation_scores(["a red car"], [["a red auto"]])
    assert scores["mean"]["meteor"] == pytest.approx(same)


def test_meteor_without_wordnet_warns_and_returns_none(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(metrics, "_wordnet_state", {})
    monkeypatch.setattr(metrics, "_find_wordnet", lambda cache_dir: (None, "no WordNet found (test)"))
    with pytest.warns(RuntimeWarning, match="METEOR skipped: no WordNet found"):
        assert meteor("a b", ["a b"]) is None
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # warned once, then quiet
        assert meteor("a b", ["a b"]) is None
    scores = generation_scores(["a b"], [["a b"]])
    assert scores["mean"]["meteor"] is None and scores["mean"]["em"] == 1.0
    assert scores["per_question"]["meteor"] == [None]


def test_lexnames_table_matches_wordnet_manual() -> None:
    page = Path("/usr/share/man/man5/lexnames.5WN.gz")
    if not page.is_file():
        pytest.skip("WordNet's lexnames(5WN) manual page is not installed (Debian wordnet-base)")
    listed = [line.split("\t")[1].strip() for line in gzip.open(page, "rt")
              if line[:2].isdigit() and "\t" in line]
    assert listed == list(metrics._LEXNAMES)


def test_generation_scores_shape() -> None:
    out = generation_scores(["the cat", "dog"], [["a cat"], ["cat", "dog!"]], metrics=("em", "f1"))
    assert out["mean"] == {"em": 1.0, "f1": 1.0}
    assert out["per_question"]["em"] == [1.0, 1.0]
    with pytest.raises(ValueError):
        generation_scores(["x"], [], metrics=("em",))
    with pytest.raises(ValueError, match="unknown"):
        generation_scores(["x"], [["x"]], metrics=("bleu",))


# ------------------------------------------------------------------------------ segment quality
TEXT = "Ann ran. Bob sat. Cy ate."
SENTS = [(0, 8), (9, 17), (18, 25)]


def test_boundaries_and_sentence_breaks() -> None:
    assert chunk_boundaries([(9, 25), (0, 8), (9, 17)]) == [9]
    assert sentence_break_share(SENTS, [9, 8, 17]) == 1.0      # in the gaps or at edges
    assert sentence_break_share(SENTS, [9, 12]) == 0.5         # 12 is inside "Bob sat."
    assert sentence_break_share(SENTS, []) is None
    assert boundary_text_pairs(TEXT, SENTS, [9, 12, 0, 25]) == [("Ann ran.", "Bob sat."), ("Bob", "sat.")]


def test_boundary_similarity_hand_computed() -> None:
    vocab = {"x": [1.0, 0.0], "y": [0.0, 1.0], "xy": [1.0, 1.0]}
    embed = lambda texts: np.array([vocab[t] for t in texts])  # noqa: E731
    out = boundary_similarity([("x", "y"), ("x", "xy"), ("x", "x")], embed)
    assert out["values"] == pytest.approx([0.0, 1 / math.sqrt(2), 1.0])
    assert out["mean"] == pytest.approx((0 + 1 / math.sqrt(2) + 1) / 3)
    assert boundary_similarity([], embed)["mean"] is None
    with pytest.raises(ValueError):
        boundary_similarity([("x", "y")], lambda texts: np.zeros((1, 2)))


def test_segment_quality_over_units() -> None:
    embed = lambda texts: np.array([[len(t), 1.0] for t in texts])  # noqa: E731
    units = [(TEXT, SENTS, [(0, 8), (9, 25)]), (TEXT, SENTS, [(0, 12), (12, 25)]), (TEXT, SENTS, [(0, 25)])]
    out = segment_quality(units, embed)
    assert out["n_boundaries"] == 2 and out["share_on_sentence_breaks"] == 0.5
    pairs = [("Ann ran.", "Bob sat."), ("Bob", "sat.")]
    assert out["boundary_similarity"] == pytest.approx(boundary_similarity(pairs, embed)["mean"])
    assert segment_quality([(TEXT, SENTS, [(0, 25)])]) == {"n_boundaries": 0, "share_on_sentence_breaks": None}


# ---------------------------------------------------------------------------------------- stats
def test_bootstrap_ci_book_level() -> None:
    values = [1, 1, 1, 0, 0, 0, 1, 0, 1, 1]
    groups = ["a", "a", "a", "b", "b", "b", "c", "c", "d", "d"]
    ci = bootstrap_ci(values, groups, n_resamples=500, seed=3)
    assert ci.estimate == pytest.approx(0.6)  # question-weighted mean
    assert ci.low <= ci.estimate <= ci.high
    assert ci.n_groups == 4 and ci.n_items == 10
    assert bootstrap_ci(values, groups, n_resamples=500, seed=3) == ci  # seeded
    # whole-book resampling is wider than pretending the questions are independent
    flat = bootstrap_ci(values, None, n_resamples=500, seed=3)
    assert (ci.high - ci.low) > (flat.high - flat.low)
    single = bootstrap_ci([0.2, 0.4], ["x", "x"])
    assert single.estimate == pytest.approx(0.3) and math.isnan(single.low)
    same = bootstrap_ci([0.5, 0.5, 0.5], ["x", "y", "z"])
    assert (same.low, same.high) == (0.5, 0.5)
    with pytest.raises(ValueError):
        bootstrap_ci([1.0, float("nan")])
    with pytest.raises(ValueError):
        bootstrap_ci([1.0, 2.0], ["a"])


def test_bootstrap_ci_of_a_pooled_ratio() -> None:
    # micro F1 of three units: twice the matched cuts over predicted plus reference cuts
    matched2, weights, books = [4, 2, 2], [4, 4, 2], ["a", "b", "b"]
    ci = bootstrap_ci(matched2, books, weights=weights, n_resamples=500, seed=0)
    assert ci.estimate == pytest.approx(8 / 10) and ci.n_items == 3 and ci.n_groups == 2
    assert ci.low == pytest.approx(4 / 6) and ci.high == pytest.approx(1.0)  # book b alone, book a alone
    with pytest.raises(ValueError):
        bootstrap_ci([1.0, 2.0], ["a", "b"], weights=[1.0, 0.0])


def test_paired_comparison_exact_permutation() -> None:
    # three books, one question each, differences 1, 2, 3: all 8 sign flips give sums
    # +-6, +-4, +-2, 0, 0; |sum| >= 6 in 2 of 8 -> p = 0.25; the exact Wilcoxon p is also 2/8
    a = {"q1": 1.0, "q2": 2.0, "q3": 3.0}
    b = {"q1": 0.0, "q2": 0.0, "q3": 0.0}
    res = paired_comparison(a, b, {"q1": "x", "q2": "y", "q3": "z"}, n_resamples=300)
    assert res.diff.estimate == pytest.approx(2.0)
    assert res.mean_a == pytest.approx(2.0) and res.mean_b == 0.0
    assert res.p_permutation == pytest.approx(0.25)
    assert res.p_wilcoxon == pytest.approx(0.25)
    assert res.n_groups == 3


def test_paired_comparison_edge_cases() -> None:
    a = {f"q{i}": float(i % 2) for i in range(20)}
    res = paired_comparison(a, dict(a), {q: q[-1] for q in a})
    assert res.diff.estimate == 0.0 and res.p_permutation == 1.0 and res.p_wilcoxon is None
    with pytest.raises(ValueError, match="only in A"):
        paired_comparison({"q1": 1.0, "q2": 0.0}, {"q1": 1.0})
    with pytest.raises(ValueError, match="no group"):
        paired_comparison({"q1": 1.0}, {"q1": 0.0}, {})
    rng = np.random.default_rng(0)
    better = {f"q{i}": float(rng.random() < 0.8) for i in range(200)}
    worse = {f"q{i}": float(rng.random() < 0.3) for i in range(200)}
    res = paired_comparison(better, worse, {f"q{i}": i // 10 for i in range(200)}, n_resamples=500)
    assert res.diff.low > 0 and res.p_permutation < 0.01 and res.p_wilcoxon < 0.01


def test_wordnet_absent_gives_status_with_install_hint(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import nltk

    monkeypatch.setattr(metrics, "_wordnet_state", {})
    monkeypatch.setattr(metrics, "SYSTEM_WORDNET_DIRS", ())
    monkeypatch.delenv("LITSEG_WORDNET_DIR", raising=False)

    def no_nltk_data(name: str) -> None:
        raise LookupError(name)

    monkeypatch.setattr(nltk.data, "find", no_nltk_data)
    assert metrics.load_wordnet(tmp_path) is None
    assert "apt-get install -y --no-install-recommends wordnet-base" in metrics.wordnet_status()
