"""The soft length reference: quantiles from an earlier run, a config group, and the prompts."""

from __future__ import annotations

import dataclasses
import json
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from omegaconf import OmegaConf, open_dict

from litseg.annotation.entry import build_chunker_for_run, run_annotate
from litseg.annotation.length_reference import (
    HINTS,
    LengthReferenceError,
    active_reference,
    compute_length_reference,
    segment_lengths,
    with_length_hint,
    write_reference,
)
from litseg.annotation.store import CHUNKS, RunStore
from litseg.utils.jsonl import read_jsonl
from litseg.testing.configs import prompt_config
from tests.conftest import REPO
from tests.teacher_fakes import write_corpus

FAKE_LLM = {"backend": "tests.teacher_fakes:make_teacher_model"}


def fake_run(run: Path, units: list[tuple[list[tuple[int, int]], str]], *, with_reference: bool = False) -> Path:
    """A run directory whose ledger holds units with the given (from, to) segments and fallback."""
    with RunStore(run) as store:
        for k, (spans, fallback) in enumerate(units):
            segments = [{"subtitle": "", "from_idx": a, "to_idx": b, "context_idx": []} for a, b in spans]
            chunks = [{"chunk_id": f"u{k}:{i}", "main_text": " ".join(["w"] * (3 * (b - a + 1)))}
                      for i, (a, b) in enumerate(spans)]
            store.commit_unit(f"key{k}", chunks, [], {"book_id": "b", "unit_id": str(k), "segments": segments,
                                                     "fallback": fallback, "error": None})
    summary = {"method": "litseg", "fingerprint": {"model": {"name": "m"},
                                                   "length_reference": {"p50": 9} if with_reference else None}}
    (run / "run_summary.json").write_text(json.dumps(summary))
    return run


def test_quantiles_come_from_segment_lengths_without_fallback_units(tmp_path: Path) -> None:
    run = fake_run(tmp_path / "run", [
        ([(1, 3), (4, 10), (11, 12)], "none"),        # lengths 3, 7, 2
        ([(1, 5), (5, 20)], "repair"),                # 5, 16 (repaired answers still count)
        ([(1, 40)], "whole_unit"),                    # cut by the word cap: left out
        ([(1, 1), (2, 9), (10, 30), (31, 31)], "none"),  # 1, 8, 21, 1
    ])
    lengths, n_units = segment_lengths([run])
    assert sorted(lengths) == [1, 1, 2, 3, 5, 7, 8, 16, 21] and n_units == 3
    ref = compute_length_reference([run], min_segments=5)
    exact = statistics.quantiles(lengths, n=4, method="inclusive")
    assert (ref["p25"], ref["p50"], ref["p75"]) == tuple(max(1, round(q)) for q in exact) == (2, 5, 8)
    assert ref["unit"] == "sentences" and ref["hint"] == HINTS["sentences"]
    assert ref["source"]["n_segments"] == 9 and ref["source"]["model"] == {"name": "m"}
    with_fallbacks, _ = segment_lengths([run], include_fallbacks=True)
    assert 40 in with_fallbacks
    words, _ = segment_lengths([run], unit="words")
    assert sorted(words) == sorted(3 * x for x in lengths)


def test_refuses_unsound_sources(tmp_path: Path) -> None:
    few = fake_run(tmp_path / "few", [([(1, 3), (4, 6)], "none")])
    with pytest.raises(LengthReferenceError, match="only 2 segment"):
        compute_length_reference([few])
    biased = fake_run(tmp_path / "biased", [([(1, 3), (4, 6), (7, 9)], "none")], with_reference=True)
    with pytest.raises(LengthReferenceError, match="already ran with a length reference"):
        compute_length_reference([biased], min_segments=2)
    assert compute_length_reference([biased], min_segments=2, force=True)["p50"] == 3
    with pytest.raises(FileNotFoundError):
        segment_lengths([tmp_path / "missing"])


def test_reference_config_group_and_prompt_hint(tmp_path: Path) -> None:
    assert active_reference(OmegaConf.load(REPO / "conf" / "length_reference" / "none.yaml")) is None
    ref = active_reference({"p25": 3, "p50": 6, "p75": 11, "unit": "sentences"})
    assert ref is not None and ref["hint"] == HINTS["sentences"]
    lite = prompt_config("litseg_lite")
    assert lite.length_hint == ""  # off by default
    assert with_length_hint(lite, ref).length_hint == HINTS["sentences"]
    assert with_length_hint(dataclasses.replace(lite, length_hint="own {p50}"), ref).length_hint == "own {p50}"
    assert with_length_hint(lite, None).length_hint == ""


def test_command_writes_a_config_that_later_runs_put_into_their_prompts(tmp_path: Path) -> None:
    corpus = write_corpus(tmp_path / "corpus", books=3, chapters=2, sentences=12)
    conf = tmp_path / "conf"
    shutil.copytree(REPO / "conf", conf)
    from hydra import compose, initialize_config_dir

    def cfg(*overrides: str):
        with initialize_config_dir(config_dir=str(conf), version_base=None):
            c = compose("annotate", overrides=[f"input={corpus}", "print_table=0", "view=false", *overrides])
        with open_dict(c):
            c.llm = OmegaConf.create(FAKE_LLM)
        return c

    # 1. A calibration run without a reference (the fake teacher cuts blocks of 5 sentences).
    calib = tmp_path / "calib"
    run_annotate(cfg("method=litseg"), calib)
    out = conf / "length_reference" / "calib.yaml"
    proc = subprocess.run([sys.executable, "-m", "litseg.annotation.length_reference", str(calib), "--out", str(out),
                           "--min-segments", "5"], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "p25=" in proc.stdout and out.exists()
    data = yaml.safe_load(out.read_text())
    assert data["name"] == "calib" and data["unit"] == "sentences" and data["source"]["n_units"] == 6
    # 12-sentence units cut into blocks of 5 -> lengths 5, 5, 2 (+ the heading sentence) per unit.
    assert data["p25"] <= data["p50"] <= data["p75"] and data["p75"] <= 5
    assert out.read_text().startswith("# Soft length reference")

    # 2. A later run selects it as a config group: the teacher's stage 3 and the Lite prompt carry it.
    teacher_cfg = cfg("method=litseg", "length_reference=calib")
    chunker, reference = build_chunker_for_run(teacher_cfg)
    assert reference is not None and chunker.length_reference == reference
    expected = HINTS["sentences"].format(**reference)
    summary = run_annotate(teacher_cfg, tmp_path / "guided")
    assert summary["length_reference"]["p50"] == data["p50"]
    assert summary["fingerprint"]["length_reference"]["p50"] == data["p50"]
    from litseg.segmentation.preprocess import prepare_document

    doc = prepare_document(corpus / "book_01.md")
    stage3 = chunker.stage_messages(doc, doc.units[0], "stage3")[1]["content"]
    assert expected in stage3 and expected not in chunker.stage_messages(doc, doc.units[0], "stage1")[1]["content"]

    lite, lite_ref = build_chunker_for_run(cfg("method=litseg_lite", "prompt=litseg_lite", "length_reference=calib"))
    assert lite.length_reference == lite_ref
    assert expected in lite.messages(doc, doc.units[0])[1]["content"]
    plain, none_ref = build_chunker_for_run(cfg("method=litseg_lite", "prompt=litseg_lite"))
    assert none_ref is None and expected not in plain.messages(doc, doc.units[0])[1]["content"]
    # Another reference, another key: the guided run did not reuse the calibration units.
    assert summary["units"] == 6 and summary["units_skipped"] == 0
    assert {c["unit_key"] for c in read_jsonl(calib / CHUNKS)}.isdisjoint(
        {c["unit_key"] for c in read_jsonl(tmp_path / "guided" / CHUNKS)})
    # The guided run cannot calibrate the next one.
    assert subprocess.run([sys.executable, "-m", "litseg.annotation.length_reference", str(tmp_path / "guided"),
                           "--out", str(tmp_path / "x.yaml")], capture_output=True, cwd=REPO,
                          timeout=120).returncode == 2


def test_write_reference_round_trips(tmp_path: Path) -> None:
    run = fake_run(tmp_path / "run", [([(1, 2), (3, 6), (7, 12), (13, 13)], "none")])
    ref = compute_length_reference([run], min_segments=2)
    path = write_reference(ref, tmp_path / "conf" / "mine.yaml")
    loaded = active_reference(OmegaConf.load(path))
    assert loaded is not None and (loaded["p25"], loaded["p50"], loaded["p75"]) == (ref["p25"], ref["p50"], ref["p75"])
    assert loaded["name"] == "mine"
