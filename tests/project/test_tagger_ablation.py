"""benchmarks/tagger_ablation.py: folds by book, every pooled unit scored once by a net that never
saw its book, finished folds read back instead of retrained, and rows compared on the same units."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest

from tests.conftest import load_benchmark

torch = pytest.importorskip("torch")

from litseg.training.config import BoundarySettings  # noqa: E402
from litseg.training.data import TeacherUnit  # noqa: E402


def load_script():
    return load_benchmark("tagger_ablation")


SETTINGS = BoundarySettings(encoder="default", lm_model="none", lm_layers=[], lm_last_layers=[], lm_alone=False,
                            epochs=1, learning_rate=1e-2, weight_decay=0.0, batch_units=4, seeds=1, hidden=8, layers=1, dropout=0.0,
                            cue_buckets=64, cue_dim=4, positive_weight=3.0, neighbour_label=0.3, min_block=2,
                            threshold_rule="match_count", context_epochs=1, context_min_precision=0.5,
                            max_context=0)


def units(books: int = 8, per_book: int = 2, n: int = 24) -> tuple[list[TeacherUnit], dict]:
    rng = np.random.default_rng(0)
    out, vectors = [], {}
    for b in range(books):
        for k in range(per_book):
            key = f"b{b}-u{k}"
            segments = [{"from_idx": a, "to_idx": min(n, a + 5)} for a in range(1, n + 1, 6)]
            out.append(TeacherUnit(book_id=f"book-{b}", unit_id=f"u{k}", key=key, run_dir="nowhere",
                                   sentences=[f"Sentence {i} of {key}." for i in range(1, n + 1)], segments=segments,
                                   workflow={}, paragraph_starts=[i % 6 == 0 for i in range(n)]))
            v = rng.normal(size=(n, 8)).astype(np.float32)
            vectors[key] = v / np.linalg.norm(v, axis=1, keepdims=True)
    return out, vectors


def test_folds_and_learning_curve_shares_are_fixed_by_book_id():
    ab = load_script()
    ids = [f"book-{i}" for i in range(600)]
    assert [ab.fold_of(b, 4) for b in ids] == [ab.fold_of(b, 4) for b in ids]
    assert {ab.fold_of(b, 4) for b in ids} == {0, 1, 2, 3}
    assert all(ab.kept_for_training(b, 1.0) for b in ids)
    kept = sum(ab.kept_for_training(b, 1 / 3) for b in ids)
    assert 150 < kept < 250  # about a third, drawn independently of the fold


def test_every_unit_is_scored_once_by_a_net_that_never_saw_its_book(tmp_path):
    ab = load_script()
    pool, vectors = units()
    variant = ab.BY_NAME["as_trained"]
    records = [ab.run_fold(variant, f, 2, pool, SETTINGS, vectors, None, tmp_path) for f in range(2)]
    scored = [u["key"] for r in records for u in r["units"]]
    assert sorted(scored) == sorted(u.key for u in pool)
    for r in records:
        held_books = {u["book_id"] for u in r["units"]}
        assert r["train_units"] + r["held_units"] == len(pool)
        assert not held_books & {u.book_id for u in pool if ab.fold_of(u.book_id, 2) != r["fold"]}
        for u in r["units"]:  # the decoded blocks cover each unit in order
            assert u["predicted"][0]["from_idx"] == 1 and u["predicted"][-1]["to_idx"] == 24
    # a finished fold is read back, not trained again
    saved = (tmp_path / "as_trained" / "fold-0.json").read_text()
    (tmp_path / "as_trained" / "net-0.pt").unlink()
    again = ab.run_fold(variant, 0, 2, pool, SETTINGS, vectors, None, tmp_path)
    assert json.dumps(again) + "\n" == saved and not (tmp_path / "as_trained" / "net-0.pt").exists()


def test_a_learning_curve_row_trains_on_fewer_books_and_rows_compare_on_the_same_units(tmp_path):
    ab = load_script()
    pool, vectors = units(books=12)
    full = [ab.run_fold(ab.BY_NAME["as_trained"], f, 2, pool, SETTINGS, vectors, None, tmp_path) for f in range(2)]
    third = [ab.run_fold(ab.BY_NAME["books_1_3"], f, 2, pool, SETTINGS, vectors, None, tmp_path) for f in range(2)]
    assert sum(r["train_units"] for r in third) < sum(r["train_units"] for r in full)
    reference = ab.unit_counts(full, 1)
    kinds = {u.book_id: "prose" for u in pool}
    same = ab.summarise(ab.BY_NAME["as_trained"], full, kinds, reference)
    other = ab.summarise(ab.BY_NAME["books_1_3"], third, kinds, reference)
    assert "minus_as_trained" not in same  # the reference row is not compared with itself
    diff, low, high = other["minus_as_trained"]
    assert diff == pytest.approx(other["f1"] - same["f1"]) and low <= diff <= high
    assert same["low"] <= same["f1"] <= same["high"] and set(same["by_kind"]) == {"prose"}
    table = ab.render([same, other], 2, "run", {"prose": len(pool)})
    assert "| a third of the training books | " in table and f"{other['f1']:.3f}" in table


def test_identical_rows_differ_by_zero():
    ab = load_script()
    counts = {"a": ("x", 3, 8), "b": ("y", 1, 6), "c": ("y", 2, 4), "whole": ("z", 0, 0)}
    assert ab.paired_interval(counts, dict(counts)) == (0.0, 0.0, 0.0)


def test_a_unit_neither_side_cut_leaves_the_pooled_f1_and_its_interval_alone():
    ab = load_script()
    whole = {"book_id": "w", "key": "w-0", "predicted": [{"from_idx": 1, "to_idx": 9}],
             "reference": [{"from_idx": 1, "to_idx": 9}]}
    cut = {"book_id": "c", "key": "c-0", "predicted": [{"from_idx": 1, "to_idx": 4}, {"from_idx": 5, "to_idx": 9}],
           "reference": [{"from_idx": 1, "to_idx": 5}, {"from_idx": 6, "to_idx": 9}]}
    other = {**cut, "book_id": "d", "key": "d-0"}
    record = {"units": [whole, cut, other], "train_units": 3}
    s = ab.summarise(ab.BY_NAME["as_trained"], [record], {}, None)
    assert s["f1"] == pytest.approx(1.0) and s["units"] == 3 and s["reference_cuts"] == 2


def test_a_folder_that_is_not_a_tagger_run_gets_one_error_line(tmp_path, capsys):
    ab = load_script()
    with pytest.raises(SystemExit, match="not found: --run takes a train.py"):
        ab.main(["--run", str(tmp_path)])
    with pytest.raises(SystemExit):
        ab.main(["--run", str(tmp_path), "--variants", "nope"])
    assert "unknown variant(s) nope" in capsys.readouterr().err
    assert replace(SETTINGS, dropout=0.4).dropout == 0.4


def test_a_variant_equal_to_the_runs_settings_is_left_out():
    ab = load_script()
    run_at = {d: replace(SETTINGS, dropout=d) for d in (0.2, 0.4)}
    assert ab.same_as_run(ab.BY_NAME["dropout_0_2"], run_at[0.2])
    assert not ab.same_as_run(ab.BY_NAME["dropout_0_2"], run_at[0.4])
    assert ab.same_as_run(ab.BY_NAME["dropout_0_4"], run_at[0.4])
    # the run's own row and a learning-curve row are never "the same as the run"
    assert not ab.same_as_run(ab.BY_NAME["as_trained"], run_at[0.2])
    assert not ab.same_as_run(ab.BY_NAME["books_1_3"], run_at[0.2])
    kept = [v.name for v in ab.VARIANTS if not ab.same_as_run(v, run_at[0.4])]
    assert "dropout_0_2" in kept and "dropout_0_4" not in kept


def test_the_threshold_study_scores_the_saved_fold_nets_at_thresholds_chosen_on_other_books(tmp_path):
    ab = load_script()
    pool, vectors = units(books=12)
    variant = ab.BY_NAME["as_trained"]
    records = [ab.run_fold(variant, f, 3, pool, SETTINGS, vectors, None, tmp_path) for f in range(3)]
    held = [ab.held_out_scores(variant, f, 3, pool, SETTINGS, vectors, None, tmp_path) for f in range(3)]
    # the saved nets give back the held-out units of each fold, in the record's order
    assert [[e.unit.key for e in enc] for enc, _ in held] == [[u["key"] for u in r["units"]] for r in records]
    study = ab.threshold_study(held, sample_books=2, min_block=SETTINGS.min_block, draws=3)
    # at each fold's own threshold the pooled F1 is the table's first row
    counts = ab.unit_counts(records, 1)
    assert study["own_fold"]["f1"] == pytest.approx(ab.pooled_f1(counts))
    assert len(study["sampled"]) == 3 and study["sample_books"] == 2
    for d in [study["own_fold"], study["other_folds"], *study["sampled"]]:
        assert 0.0 <= d["f1"] <= 1.0 and d["cuts_share"] >= 0.0
    line = ab.render_threshold_study(study)
    assert line.startswith("Where the threshold is chosen") and f"{study['own_fold']['f1']:.3f}" in line
