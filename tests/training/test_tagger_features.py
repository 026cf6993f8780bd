"""The boundary stage's sentence features: which columns a reading with fewer of the optional LM
readings keeps, and a stage folder that already holds the wider reading lends it to a narrower one
(the faster reading without the context gain) instead of reading every unit with the LM again."""

from __future__ import annotations

import hashlib
from dataclasses import replace

import numpy as np
import pytest

pytest.importorskip("torch")

from litseg.chunkers.tagger_lm import ALONE_FEATURES  # noqa: E402
from litseg.training.config import BoundarySettings  # noqa: E402
from litseg.training.data import TeacherUnit  # noqa: E402
from litseg.training.tagger import _save_npz, lm_cache, reading_columns, unit_features  # noqa: E402

SETTINGS = BoundarySettings(encoder="default", lm_model="tiny", lm_layers=[1, 2], lm_last_layers=[2], lm_alone=True,
                            epochs=1, learning_rate=1e-2, weight_decay=0.0, batch_units=4, seeds=1, hidden=8, layers=1,
                            dropout=0.0, cue_buckets=64, cue_dim=4, positive_weight=3.0, neighbour_label=0.3, min_block=2,
                            threshold_rule="match_count", context_epochs=1, context_min_precision=0.5, max_context=0)
SIZE = 5  # hidden columns per layer in these tests
WIDTH = 3 * SIZE + ALONE_FEATURES + 2  # two layer means, one last-token state, the context gain, two surprisals


def test_a_reading_without_the_optional_ones_keeps_exactly_the_first_readings_columns():
    first = reading_columns(SETTINGS, replace(SETTINGS, lm_last_layers=[], lm_alone=False), WIDTH)
    assert first == [*range(2 * SIZE), WIDTH - 2, WIDTH - 1]  # layer means, then the surprisal in the unit
    no_alone = reading_columns(SETTINGS, replace(SETTINGS, lm_alone=False), WIDTH)
    assert no_alone == [*range(3 * SIZE), WIDTH - 2, WIDTH - 1]
    assert reading_columns(SETTINGS, SETTINGS, WIDTH) is None  # the same reading: every column
    with pytest.raises(ValueError, match="only leave out"):
        reading_columns(replace(SETTINGS, lm_alone=False), SETTINGS, WIDTH - ALONE_FEATURES)


def _units(n_units: int = 3, n: int = 6) -> list[TeacherUnit]:
    return [TeacherUnit(book_id=f"book-{k}", unit_id="u0", key=f"key-{k}", run_dir="nowhere",
                        sentences=[f"Sentence {i}." for i in range(n)], segments=[{"from_idx": 1, "to_idx": n}],
                        workflow={}, paragraph_starts=[i == 0 for i in range(n)]) for k in range(n_units)]


def _embedded(stage_dir, units) -> None:
    """The stage folder's sentence embedding cache, so no encoder is loaded here."""
    name = f"embeddings-{hashlib.sha256(SETTINGS.encoder.encode()).hexdigest()[:8]}.npz"
    _save_npz({u.key: np.ones((u.n_sentences, 4), dtype=np.float32) for u in units}, stage_dir / name)


def test_a_run_without_the_context_gain_takes_its_features_from_the_wider_cache(tmp_path):
    units = _units()
    _embedded(tmp_path, units)
    rng = np.random.default_rng(0)
    wider = {u.key: rng.normal(size=(u.n_sentences, WIDTH)).astype(np.float16) for u in units}
    _save_npz(wider, lm_cache(tmp_path, SETTINGS))
    narrower = replace(SETTINGS, lm_alone=False)
    assert lm_cache(tmp_path, narrower) != lm_cache(tmp_path, SETTINGS)

    record: dict = {}
    _, lm = unit_features(units, narrower, tmp_path, record)  # a tiny LM would be loaded if any unit were missing
    keep = [*range(3 * SIZE), WIDTH - 2, WIDTH - 1]
    for u in units:
        assert np.array_equal(lm[u.key], wider[u.key][:, keep])
    assert record["lm"] == {"computed": 0, "cached": 3, "seconds": record["lm"]["seconds"], "from_wider_cache": 3}
    assert record["embeddings"] == {"computed": 0, "cached": 3}
    # the narrower cache now holds them itself: a second run takes nothing more from the wider one
    again: dict = {}
    unit_features(units, narrower, tmp_path, again)
    assert "from_wider_cache" not in again["lm"] and again["lm"]["cached"] == 3


def test_a_run_with_the_context_gain_never_reads_a_narrower_cache(tmp_path):
    units = _units(1)
    _embedded(tmp_path, units)
    narrower = replace(SETTINGS, lm_alone=False)
    _save_npz({units[0].key: np.zeros((units[0].n_sentences, WIDTH - ALONE_FEATURES), dtype=np.float16)},
              lm_cache(tmp_path, narrower))
    record: dict = {}
    _, lm = unit_features(units, SETTINGS, tmp_path, record)  # reads the unit with the tiny LM itself
    assert record["lm"]["computed"] == 1 and "from_wider_cache" not in record["lm"]
    assert lm[units[0].key].shape[0] == units[0].n_sentences
