"""benchmarks/student_eval.py reads evaluate.py's results.json the way evaluate.py writes it."""

from __future__ import annotations

import importlib.util
import json

import pytest

from tests.conftest import REPO


def load_script():
    spec = importlib.util.spec_from_file_location("student_eval", REPO / "benchmarks" / "student_eval.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def row(label: str, mrr: float) -> dict:
    # The shape of one entry of results.json["results"] (litseg.rag.evaluation).
    est = lambda x: {"estimate": x, "low": x - 0.05, "high": x + 0.05}  # noqa: E731
    return {"label": label, "metrics": {"mrr@10": est(mrr), "hit@1": est(mrr - 0.1), "random_hit@1": est(0.1),
                                        "evidence@1500": est(0.5)},
            "chunks": {"words": {"mean": 150.0, "p50": 140.0}}}


def test_the_table_takes_every_column_from_evaluate_results():
    se = load_script()
    results = {"results": [row("recursive", 0.66), row("semantic", 0.72), row("litseg_lite_student", 0.65)],
               "pairwise": [{"a": "recursive", "b": "litseg_lite_student", "metric": "mrr@10", "diff": 0.01,
                             "diff_low": -0.03, "diff_high": 0.05, "p_permutation": 0.5}]}
    results["main_text"] = {"results": [row("litseg_lite_student", 0.68)], "pairwise": []}
    stats = {"student": {"first_try_valid": 1.0, "fallback_repair": 0.0, "fallback_whole_unit": 0.0,
                         "placeholder_share": 0.0, "repeated_subtitles": 0.5, "seconds_per_unit": 60.0}}
    text = se.table(results, stats, {"student": {"boundary_f1": 0.47, "units": 18}})
    student = next(line for line in text.splitlines() if line.startswith("| LitSeg-Lite student"))
    cells = [c.strip() for c in student.strip("|").split("|")]
    assert cells[1:4] == ["0.650", "0.680", "0.550"]
    assert cells[4:7] == ["0.100", "0.500", "150"]
    assert cells[-3:] == ["50 %", "60.0", "0.470 (18 units)"]
    assert "litseg_lite_student minus recursive: -0.010 [-0.050, +0.030], permutation p = 0.5" in se.paired_lines(results)
    json.dumps(results)  # the fixture stays JSON, as results.json is


def test_baselines_get_their_held_out_agreement_cell():
    se = load_script()
    results = {"results": [row("recursive", 0.66), row("semantic", 0.72)], "pairwise": []}
    text = se.table(results, {}, {}, {"recursive": {"boundary_f1": 0.31, "units": 18}})
    cells = {line.split("|")[1].strip(): line.split("|")[-2].strip() for line in text.splitlines()[2:]}
    assert cells == {"recursive 1000c": "0.310 (18 units)", "semantic": "-"}


def chunk(unit: str, subtitle: str, main: str, before: str = "", after: str = "") -> dict:
    return {"unit_key": unit, "subtitle": subtitle, "main_text": main, "context_before": before,
            "context_after": after, "text": "stale", "main_spans": [[0, len(main)]]}


def test_enrichment_variants_change_the_indexed_text_only(tmp_path):
    se = load_script()
    src = tmp_path / "run"
    src.mkdir()
    chunks = [chunk("a", "Ann rows out", "M1", before="C0"), chunk("a", "ann rows out ", "M2"),
              chunk("b", "Ann rows out", "M3", after="C9")]
    (src / "chunks.jsonl").write_text("".join(json.dumps(c) + "\n" for c in chunks))
    (src / "run.lock").write_text("")
    (src / "documents.jsonl").write_text("{}\n")
    expected = {
        "enrich_no_repeats": ["Ann rows out\n\nC0\n\nM1", "M2", "Ann rows out\n\nM3\n\nC9"],
        "enrich_no_subtitle": ["C0\n\nM1", "M2", "M3\n\nC9"],
        "enrich_main_only": ["M1", "M2", "M3"],
    }
    for label, texts in expected.items():
        dst = se.derived_run(src, tmp_path / label, se.ENRICHMENT[label][1])
        got = [json.loads(line) for line in (dst / "chunks.jsonl").read_text().splitlines()]
        assert [c["text"] for c in got] == texts
        assert [{k: v for k, v in c.items() if k != "text"} for c in got] == \
            [{k: v for k, v in c.items() if k != "text"} for c in chunks]
        assert (dst / "documents.jsonl").is_file() and not (dst / "run.lock").exists()


def test_enrichment_table_reads_the_paired_differences_against_as_built():
    se = load_script()
    results = {"results": [row("enrich_as_built", 0.65), row("enrich_main_only", 0.68)],
               "pairwise": [{"a": "enrich_as_built", "b": "enrich_main_only", "metric": "mrr@10", "diff": -0.03,
                             "diff_low": -0.05, "diff_high": -0.01, "p_permutation": 0.02}]}
    lines = se.enrichment_table(results).splitlines()
    main_only = next(line for line in lines if line.startswith("| main text only"))
    cells = [c.strip() for c in main_only.strip("|").split("|")]
    assert cells[1:4] == ["0.680", "0.500", "+0.030 [+0.010, +0.050], p = 0.02"]
    assert cells[4] == "-"


def test_chance_reference_cuts_at_paragraph_starts_as_often_as_the_student(tmp_path):
    from litseg.segmentation.preprocess import prepare_document

    se = load_script()
    path = tmp_path / "tale.txt"
    path.write_text("CHAPTER I\n\nAnn rowed out. The fog came.\n\nShe turned back. The light was lit.\n\n"
                    "Tom waited. He saw her.\n", encoding="utf-8")
    doc = prepare_document(path)
    unit = doc.units[0]   # paragraphs start at sentences 1 (heading), 2, 4 and 6
    gold = [{"from_idx": 1, "to_idx": 3}, {"from_idx": 4, "to_idx": unit.n_sentences}]
    run = tmp_path / "heldout-student"
    run.mkdir()
    for cuts, expected in ((3, 2 / 4), (0, 0.0)):   # every paragraph start, or none
        segments = [{"from_idx": 1, "to_idx": 1}, {"from_idx": 2, "to_idx": 3}, {"from_idx": 4, "to_idx": 5},
                    {"from_idx": 6, "to_idx": unit.n_sentences}][: cuts + 1]
        (run / "diagnostics.jsonl").write_text(json.dumps(
            {"book_id": doc.book_id, "unit_id": unit.unit_id, "segments": segments}) + "\n")
        got = se.random_paragraph_cuts([(doc, unit, gold)], tmp_path, draws=5)
        # 3 cuts at 2, 4, 6 against the teacher's one at 4: each lies within one sentence of it,
        # but one teacher cut matches one predicted cut: precision 1/3, recall 1, F1 0.5
        assert got["mean_f1"] == pytest.approx(expected) and got["low"] == got["high"]


def test_held_out_score_has_a_book_bootstrap_interval():
    from types import SimpleNamespace as NS

    se = load_script()
    blocks = lambda *starts: [{"from_idx": a, "to_idx": b - 1} for a, b in zip(starts, [*starts[1:], 21])]  # noqa: E731
    units = [(NS(book_id="a"), NS(unit_id="1"), blocks(1, 5, 10)), (NS(book_id="b"), NS(unit_id="1"), blocks(1, 8)),
             (NS(book_id="b"), NS(unit_id="2"), blocks(1, 15))]
    got = {("a", "1"): blocks(1, 5, 10), ("b", "1"): blocks(1, 12), ("b", "2"): blocks(1, 15)}
    score = se.score_against_teacher(got, units, {}, resamples=200)
    # pooled: 3 of 4 cuts match (book a both, book b one of two); a book resampled alone gives 1.0 or 0.5
    assert score["boundary_f1"] == 0.75 and (score["units"], score["books"]) == (3, 2)
    assert 0.5 <= score["low"] < score["boundary_f1"] < score["high"] <= 1.0
    assert score == se.score_against_teacher(got, units, {}, resamples=200)   # seeded
    assert se.interval(score).startswith(" [0.")
