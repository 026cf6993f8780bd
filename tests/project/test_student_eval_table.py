"""benchmarks/student_eval.py reads evaluate.py's results.json the way evaluate.py writes it, and
its held-out measures and targets say what they measured."""

from __future__ import annotations

import json

from tests.conftest import REPO, load_benchmark


def load_script():
    return load_benchmark("student_eval")


def row(label: str, mrr: float, evidence: float = 0.5) -> dict:
    # The shape of one entry of results.json["results"] (litseg.rag.evaluation).
    est = lambda x: {"estimate": x, "low": x - 0.05, "high": x + 0.05}  # noqa: E731
    return {"label": label, "metrics": {"mrr@10": est(mrr), "hit@1": est(mrr - 0.1), "random_hit@1": est(0.1),
                                        "evidence@1500": est(evidence)},
            "chunks": {"words": {"mean": 150.0, "p50": 140.0}}}


def pairwise(a: str, b: str, metric: str, diff: float) -> dict:
    # evaluate.py stores a minus b with its interval
    return {"a": a, "b": b, "metric": metric, "diff": diff, "diff_low": diff - 0.03, "diff_high": diff + 0.03,
            "p_permutation": 0.5}


def test_the_retrieval_table_reads_rows_pairs_and_main_text_runs():
    se = load_script()
    rows = se.make_rows(None, None)
    results = {"results": [row("recursive", 0.66, 0.55), row("tagger", 0.70, 0.52), row("tagger__main", 0.69, 0.53)],
               "pairwise": [pairwise("recursive", "tagger", "mrr@10", -0.04),
                            pairwise("tagger__main", "tagger", "evidence@1500", 0.01)]}
    text = se.ftqa_table({k: rows[k] for k in ("recursive", "tagger")}, results)
    tagger = next(line for line in text.splitlines() if line.startswith("| LitSeg-Tagger"))
    cells = [c.strip() for c in tagger.strip("|").split("|")]
    assert cells[1:5] == ["0.700", "0.520", "150", "0.100"]
    assert cells[5] == "+0.040 [+0.010, +0.070] p=0.5"  # tagger minus recursive
    assert cells[7] == "0.690 / 0.530" and cells[9] == "-0.010 [-0.040, +0.020] p=0.5"
    checks = se.targets({}, results, "tagger")
    assert "met: FairytaleQA val MRR@10 at least recursive's: 0.700 against 0.660" in checks
    assert "NOT MET: FairytaleQA val evidence@1500 at least recursive's: 0.520 against 0.550 (missed by 0.030)" in checks
    json.dumps(results)


def held(f1: float, pk: float, chance: float, repeated=None, wps=None) -> dict:
    return {"units": 10, "failed": 0, "f1": f1, "low": f1 - 0.05, "high": f1 + 0.05, "exact_f1": f1 - 0.1,
            "pk": pk, "windowdiff": pk + 0.05, "cuts_per_1000_words": 3.0, "teacher_cuts_per_1000_words": 3.4,
            "chance": {"mean": chance, "low": chance - 0.02, "high": chance + 0.02}, "repeated_subtitles": repeated,
            "placeholder_subtitles": 0.0 if repeated is not None else None, "words_per_second": wps}


def test_targets_of_the_default_are_checked_against_recursive_and_its_chance_line():
    se = load_script()
    scores = {"recursive": held(0.36, 0.47, 0.30), "tagger": held(0.58, 0.31, 0.33, repeated=0.05, wps=210.0)}
    scores["tagger"]["near_2000"] = {"words": 1999, "seconds": 20.0, "words_per_second": 99.95}
    checks = se.targets(scores, {}, "tagger")
    assert ("NOT MET: words per second of one core >= 150 on the held-out unit nearest 2,000 words (1,999 words): "
            "99.950 against 150.000 (missed by 50.050)") in checks
    assert "NOT MET: held-out boundary F1 ±1 >= 0.60: 0.580 against 0.600 (missed by 0.020)" in checks
    assert "met: held-out boundary F1 ±1 above recursive's: 0.580 against 0.360" in checks
    assert "met: held-out boundary F1 ±1 above the chance line at recursive's cut count: 0.580 against 0.300" in checks
    assert "met: Pk below recursive's: 0.310 against 0.470" in checks
    assert "met: repeated subtitles <= 10 %: 0.050 against 0.100" in checks
    assert "met: words per second of one core >= 150: 210.000 against 150.000" in checks
    table = se.heldout_table({k: se.make_rows(None, None)[k] for k in scores}, scores)
    assert "The teacher cuts 3.40 times per 1,000 words" in table


def test_chance_line_cuts_at_paragraph_starts_as_often_as_the_row(tmp_path):
    from litseg.segmentation.types import Document, Sentence, Unit

    se = load_script()
    text = "A one.\n\nB two.\n\nC three.\n\nD four."
    starts = [text.index(x) for x in "ABCD"]
    sentences = [Sentence(i + 1, s, text.index(".", s) + 1) for i, s in enumerate(starts)]
    unit = Unit(book_id="b", unit_id="u", index=0, start=0, end=len(text), sentences=sentences)
    doc = Document(book_id="b", text=text, units=[unit])
    gold = [{"from_idx": 1, "to_idx": 2}, {"from_idx": 3, "to_idx": 4}]
    every = se.chance_line([(doc, unit, gold)], {("b", "u"): 3})  # every paragraph start is cut
    none = se.chance_line([(doc, unit, gold)], {("b", "u"): 0})
    assert every["mean"] == every["low"] == every["high"] == 0.5  # 1 of 3 cuts matched, 1 of 1 reference
    assert none["mean"] == 0.0


def test_held_out_units_give_back_the_sentences_of_a_crlf_book(tmp_path):
    """The held-out units are rebuilt from the imported run's stored text: on a CRLF book the
    offsets count the "\\r", so the text must be read as stored (it was once read with
    read_text(), every span slid, and every row was scored on shifted sentences)."""
    from hydra import compose, initialize_config_dir

    from litseg.annotation.entry import run_annotate
    from litseg.testing.imported_records import write_whole_unit_records
    from litseg.utils.jsonl import read_jsonl

    se = load_script()
    book = tmp_path / "crlf-tale.txt"
    paragraphs = [f"Brannock counts the {w} nets on the quay. He calls to the ferryman twice." for w in
                  ("red", "blue", "green", "grey", "old", "new")]
    book.write_bytes("\r\n\r\n".join(p.replace(". ", ".\r\n") for p in paragraphs).encode("utf-8"))
    records = write_whole_unit_records(book, tmp_path / "ann.jsonl", uid_prefix="crlf", subtitle="The nets")
    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base=None):
        cfg = compose("annotate", overrides=["method=imported", f"method.annotations={records}", "print_table=0",
                                             "view=false", "export.enabled=false"])
    run = tmp_path / "run"
    run_annotate(cfg, run)
    stored = {(s["unit_id"], s["idx"]): s["text"] for s in read_jsonl(run / "sentences.jsonl")}
    units = se.held_out_units(run, [read_jsonl(run / "documents.jsonl")[0]["book_id"]])
    assert units and stored
    for doc, unit, _ in units:
        assert "\r" in doc.text
        for s in unit.sentences:
            assert doc.text[s.start:s.end] == stored[(unit.unit_id, s.idx)]


def test_words_per_second_leaves_out_units_answered_from_the_response_cache(tmp_path):
    """A replayed answer carries the seconds of the run that asked it (another machine, another
    load): the speed counts only the units this run's model answered, and says how many it left out."""
    from litseg.segmentation.types import Document, Sentence, Unit

    se = load_script()

    def unit_of(book: str, words: int):
        text = " ".join(["word"] * words) + "."
        unit = Unit(book_id=book, unit_id="u", index=0, start=0, end=len(text), sentences=[Sentence(1, 0, len(text))])
        return Document(book_id=book, text=text, units=[unit]), unit, []

    units = [unit_of("fresh", 2000), unit_of("tagger-replayed", 1000), unit_of("lite-replayed", 1000)]
    diags = [{"book_id": "fresh", "unit_id": "u", "model_seconds": 10.0, "replayed_answers": 0},
             {"book_id": "tagger-replayed", "unit_id": "u", "model_seconds": 100.0, "replayed_answers": 2},
             {"book_id": "lite-replayed", "unit_id": "u", "model_seconds": 100.0,
              "attempts": [{"from_cache": True, "seconds": 100.0}]}]
    (tmp_path / "diagnostics.jsonl").write_text("".join(json.dumps(d) + "\n" for d in diags))
    speed = se.words_per_second(tmp_path, se.make_rows(None, None)["tagger"], units)
    assert speed["words_per_second"] == 200.0 and speed["replayed_units"] == 2
    assert speed["near_2000"]["words"] == 2000
    cell = se.speed_cell({"words_per_second": 200.0, "replayed_units": 2})
    assert cell == "200 (2 units replayed from the cache, not counted)"
