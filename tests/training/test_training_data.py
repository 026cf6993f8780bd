"""The SFT / GRPO dataset builder: targets, by-book splits, length filtering, teacher formats."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from litseg.chunkers.llm_common import render_single_pass_messages
from litseg.segmentation.parsing import parse_answer
from litseg.segmentation.schema import get_schema
from litseg.training.config import DataConfig
from litseg.training.data import (
    DataReport,
    TeacherUnit,
    build_datasets,
    read_teacher_units,
    split_books,
    teacher_target,
)
from litseg.training.synthetic import make_synthetic_run
from litseg.testing.configs import prompt_config


@pytest.fixture(scope="module")
def synthetic_run(tmp_path_factory) -> Path:
    return make_synthetic_run(tmp_path_factory.mktemp("teacher") / "run")


@pytest.fixture(scope="module")
def tokenizer():
    from litseg.llm.embedded import load_embedded_tokenizer

    return load_embedded_tokenizer()


def _write_run(root: Path, units: list[dict]) -> Path:
    """A hand-written annotate run directory (what annotate.py leaves behind)."""
    root.mkdir(parents=True, exist_ok=True)
    with (root / "diagnostics.jsonl").open("w") as diag, (root / "sentences.jsonl").open("w") as sents:
        for u in units:
            for i, text in enumerate(u.pop("texts"), start=1):
                sents.write(json.dumps({"book_id": u["book_id"], "unit_id": u["unit_id"], "idx": i, "start": 0,
                                        "end": len(text), "text": text, "unit_key": u["key"]}) + "\n")
            diag.write(json.dumps(u) + "\n")
    return root


def _teacher_row(book: str, unit: str, n: int, **extra) -> dict:
    half = n // 2
    return {
        "key": f"{book}-{unit}", "book_id": book, "unit_id": unit, "n_sentences": n, "fallback": "none",
        "tries": 1, "error": None, "texts": [f"Sentence {i} of {unit} in {book}." for i in range(1, n + 1)],
        "segments": [{"subtitle": "First half", "from_idx": 1, "to_idx": half, "context_idx": []},
                     {"subtitle": "Second half", "from_idx": half + 1, "to_idx": n, "context_idx": [1]}],
        **extra,
    }


def test_teacher_run_of_the_real_litseg_chunker_gives_targets_with_every_stage(tmp_path):
    """From the three-stage chunker's own diagnostics (scripted stage answers) through a real
    annotate run to the SFT target: each stage's text reaches the target (it once read the
    stages one level too high and every target had empty reasoning)."""
    from omegaconf import OmegaConf

    from litseg.chunkers.litseg import LitSegChunker
    from litseg.llm.testing import ScriptedChatModel
    from litseg.annotation.annotate import annotate
    from litseg.segmentation.preprocess import prepare_document
    from tests.conftest import REPO
    from tests.teacher_fakes import stage_of, teacher_answer, unit_size, write_book

    def answer(request):
        stage, n = stage_of(request.messages), unit_size(request.messages)
        if stage == "stage1":
            return json.dumps({"step_1_events": f"the keeper lights the lamp in {n} sentences"})
        if stage == "stage2":
            return json.dumps({"step_2_threads": "one thread: the keeper's watch, intradiegetic"})
        return teacher_answer(request.messages, block=4)

    staged = prompt_config("litseg")
    chunker = LitSegChunker(ScriptedChatModel(answer), staged)
    book = write_book(tmp_path / "lamp.md", "Lamp", chapters=2, sentences=9)
    run = tmp_path / "teacher"
    annotate(inputs=[book], chunker=chunker, out_dir=run, prepare=prepare_document, progress=False)

    report = DataReport()
    units = read_teacher_units(run, report)
    assert len(units) == 2 and report.units_read == 2
    for unit in units:
        target = json.loads(teacher_target(unit, "lite"))
        assert target["step1"]["step_1_events"] == f"the keeper lights the lamp in {unit.n_sentences} sentences"
        assert target["step2"]["step_2_threads"] == "one thread: the keeper's watch, intradiegetic"
        assert target["step3"]["chapter_title"] == "a chapter"
        assert target["step3"]["step_3_turning_points"] == [{"type": "reversal", "description": "x"}]
        assert target["step3"]["segments"][0]["from_idx"] == 1
        assert target["step3"]["segments"][-1]["to_idx"] == unit.n_sentences
        # The paragraph flags travel with the sentences for prompts that show paragraph breaks.
        assert unit.paragraph_starts is not None and unit.paragraph_starts[0] is True


@pytest.mark.parametrize("schema,keys", [
    ("lite", ["step1", "step2", "step3"]), ("lite_no_step1", ["step2", "step3"]),
    ("lite_no_step2", ["step1", "step3"]), ("lite_no_turning_points", ["step1", "step2", "step3"]),
    ("lite_no_theory", ["segments"]),
])
def test_targets_follow_each_ablation_schema_and_read_back_strictly(schema, keys):
    unit = TeacherUnit("b", "u", "k", "run", ["a."] * 5,
                       [{"subtitle": "s", "from_idx": 1, "to_idx": 5, "context_idx": []}],
                       {"step_1_events": "e", "step_2_threads": "t", "chapter_title": "c",
                        "step_3_turning_points": [{"type": "climax", "description": "d"}]})
    text = teacher_target(unit, schema)
    assert list(json.loads(text)) == keys
    parsed = parse_answer(text, get_schema(schema))
    assert parsed.strict_ok and [(s.from_idx, s.to_idx) for s in parsed.segments] == [(1, 5)]
    if schema == "lite_no_turning_points":
        assert "step_3_turning_points" not in json.loads(text)["step3"]


def test_unusable_units_are_dropped_and_counted(tmp_path):
    rows = [
        _teacher_row("b1", "ok", 6),
        _teacher_row("b1", "err", 6, error="RuntimeError: boom"),
        _teacher_row("b1", "fb", 6, fallback="whole_unit"),
        _teacher_row("b1", "short", 1),
        {**_teacher_row("b1", "bad", 6), "segments": [{"subtitle": "x", "from_idx": 1, "to_idx": 2,
                                                       "context_idx": []}]},
    ]
    rows[3]["segments"] = [{"subtitle": "x", "from_idx": 1, "to_idx": 1, "context_idx": []}]
    missing = _teacher_row("b1", "nosent", 4)
    missing["texts"] = []
    run = _write_run(tmp_path / "run", [*rows, missing])
    report = DataReport()
    units = read_teacher_units(run, report)
    assert [u.unit_id for u in units] == ["ok"]
    assert report.units_read == 6
    assert report.dropped == {"teacher_error": 1, "teacher_fallback_whole_unit": 1, "too_few_sentences": 1,
                              "segments_invalid": 1, "sentences_missing": 1}


def test_split_is_by_book_and_deterministic():
    books = [f"book{i}" for i in range(10)]
    a = split_books(books, val_fraction=0.2, test_fraction=0.1, seed=3)
    assert a == split_books(reversed(books), val_fraction=0.2, test_fraction=0.1, seed=3)
    counts = {s: sum(v == s for v in a.values()) for s in ("train", "validation", "test")}
    assert counts == {"train": 7, "validation": 2, "test": 1}
    assert split_books(["only"], val_fraction=0.5, test_fraction=0.5, seed=0) == {"only": "train"}
    assert set(split_books(["a", "b"], val_fraction=0.1, test_fraction=0.0, seed=0).values()) == {"train", "validation"}


def test_build_datasets_from_a_real_annotate_run(synthetic_run, tokenizer):
    pytest.importorskip("datasets")
    prompt = prompt_config("litseg_lite")
    ds, report = build_datasets(DataConfig(runs=[str(synthetic_run)], val_fraction=0.3), prompt, tokenizer)
    train_books = set(ds["train"]["book_id"])
    val_books = set(ds["validation"]["book_id"])
    assert train_books and val_books and not train_books & val_books
    row = ds["train"][0]
    # The prompt is exactly the inference prompt of the chunker.
    sentences = [line.split("] ", 1)[1] for line in row["chapter"].splitlines()]
    assert row["prompt"] == render_single_pass_messages(prompt, sentences)
    assert row["completion"][0]["role"] == "assistant"
    assert parse_answer(row["completion"][0]["content"], get_schema("lite")).strict_ok
    assert row["n_sentences"] == len(sentences) and row["schema"] == "lite"
    assert report.kept == len(ds["train"]) + len(ds["validation"])
    assert report.completion_tokens["max"] >= report.completion_tokens["min"] > 0


def test_overlong_examples_are_dropped_with_their_reason(synthetic_run, tokenizer):
    pytest.importorskip("datasets")
    prompt = prompt_config("litseg_lite")
    _, full = build_datasets(DataConfig(runs=[str(synthetic_run)]), prompt, tokenizer)
    median_completion = int(full.completion_tokens["median"])
    cfg = DataConfig(runs=[str(synthetic_run)], max_completion_tokens=median_completion)
    _, report = build_datasets(cfg, prompt, tokenizer)
    assert report.dropped["completion_too_long"] > 0
    assert report.kept + report.dropped["completion_too_long"] == full.kept
    with pytest.raises(ValueError, match="prompt_too_long"):
        build_datasets(DataConfig(runs=[str(synthetic_run)], max_prompt_tokens=10), prompt, tokenizer)


def test_missing_run_directory_is_a_clear_error(tmp_path, tokenizer):
    pytest.importorskip("datasets")
    with pytest.raises(FileNotFoundError, match="not an annotate run directory"):
        build_datasets(DataConfig(runs=[str(tmp_path)]), prompt_config("litseg_lite"), tokenizer)
    with pytest.raises(ValueError, match="data.runs"):
        build_datasets(DataConfig(runs=[]), prompt_config("litseg_lite"), tokenizer)
