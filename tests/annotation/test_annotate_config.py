"""The typed settings of annotate.yaml (AnnotateConfig), its groups feedback and length_reference,
the accounting of a ledger row (UnitCounts), and where the helpers moved out of the annotation run
live now."""

from __future__ import annotations

import pytest
from hydra import compose, initialize_config_dir

from litseg.annotation.config import AnnotateConfig, LengthReferenceConfig, annotate_config_from
from litseg.annotation.length_reference import active_reference
from litseg.annotation.totals import RunTotals, UnitCounts
from litseg.chunkers.groups import FeedbackConfig, PromptConfig
from litseg.segmentation.config import PreprocessConfig
from litseg.chunkers.base import config_class
from litseg.llm.config import LLMConfig
from litseg.utils.config import ConfigError, from_dict, shipped_option
from tests.conftest import REPO


def _compose(*overrides: str):
    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
        return compose("annotate", overrides=list(overrides))


def test_annotate_settings_come_typed_from_the_yaml_and_input_may_be_left_for_later():
    settings = annotate_config_from(_compose())
    assert isinstance(settings, AnnotateConfig) and settings.input is None
    assert settings.window_units == 256 and settings.export.enabled and settings.new_dir is False
    # Every group comes as its schema object.
    assert isinstance(settings.method, config_class("litseg_tagger"))
    assert isinstance(settings.llm, LLMConfig) and isinstance(settings.length_reference, LengthReferenceConfig)
    assert isinstance(settings.prompt, PromptConfig) and isinstance(settings.feedback, FeedbackConfig)
    assert isinstance(settings.preprocess, PreprocessConfig) and settings.preprocess.max_sentence_words > 0
    given = annotate_config_from(_compose("input=book.txt", "shard=1/4", "+new_dir=true"))
    assert (given.input, given.shard, given.new_dir) == ("book.txt", "1/4", True)


def test_a_misspelt_or_mistyped_annotate_setting_is_refused_with_its_path():
    with pytest.raises(ConfigError, match="window_unit"):
        annotate_config_from(_compose("+window_unit=3"))
    with pytest.raises(ConfigError, match="export.parquet"):
        annotate_config_from(_compose("export.parquet=maybe"))
    with pytest.raises(ConfigError, match="preprocess.max_sentence_word"):
        annotate_config_from(_compose("+preprocess.max_sentence_word=3"))


def test_a_length_reference_is_read_through_its_schema():
    assert active_reference({"p25": 3, "p50": 6, "p75": None}) is None
    ref = active_reference({"name": "mine", "p25": 3, "p50": 6, "p75": 11, "unit": "words"})
    assert ref is not None and ref["name"] == "mine" and ref["p50"] == 6 and "words" in ref["hint"]
    with pytest.raises(ConfigError, match="length_reference.p5"):
        active_reference({"p25": 3, "p5": 6, "p75": 11})
    # The default, conf/length_reference/none.yaml: off
    assert from_dict(LengthReferenceConfig, shipped_option("length_reference", "none")).p50 is None


def test_ledger_rows_of_older_runs_count_the_same():
    old = UnitCounts.from_row({"tries": 3, "seconds": 2.5, "n_chunks": 4})
    assert (old.retries, old.model_seconds, old.fallback, old.calls) == (2, 2.5, "none", 0)
    totals = RunTotals()
    totals.add(None, {"retries": 1, "fallback": "repair", "stages_unavailable": ["stage2"], "n_chunks": 2})
    totals.add(None, {"fallback": "repair", "stages_unavailable": ["stage2"]})
    d = totals.to_dict()
    assert d["fallbacks"] == {"repair": 2} and d["stages_unavailable"] == {"stage2": 2}
    assert (d["chunks"], d["retries"], d["units"]) == (2, 1, 2)
    assert type(d["fallbacks"]) is dict  # plain JSON in run_summary.json


def test_training_needs_neither_the_test_helpers_nor_the_annotation_run_for_generic_helpers():
    import ast

    imported = {}
    for path in sorted((REPO / "src" / "litseg" / "training").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module:
                imported.setdefault(node.module, set()).add(path.name)
    assert not [m for m in imported if m.startswith("litseg.testing")]
    # synthetic.py makes a teacher run (it runs the annotation); nothing else reaches into it
    assert {f for m, files in imported.items() if m.startswith("litseg.annotation") for f in files} <= {"synthetic.py"}
