"""benchmarks/novelqa_eval.py: the rows it runs (the paper set's settings, a named subset of books)
and the table it writes from evaluate.py's per-question rows."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import load_benchmark


def load_script():
    return load_benchmark("novelqa_eval")


def test_paper_rows_keep_the_paper_sets_settings_and_their_merge_rows() -> None:
    ne = load_script()
    rows = ne.paper_rows()
    assert list(rows) == ["token", "recursive", "semantic", "perplexity", "margin_sampling", "lumberchunker"]
    assert rows["perplexity"] == ["perplexity", "perplexity_merge"]
    cmd = ne.evaluate_command(ne.Row("perplexity", "paper", books=["46", "5200"]), Path("/tmp/x/eval"))
    assert "chunkers=paper_baselines" in cmd and "suite.args.books=[46,5200]" in cmd
    nulled = {c.split("=")[0].removeprefix("chunkers.") for c in cmd if c.endswith("=null")}
    assert nulled == {"token", "recursive", "semantic", "margin_sampling", "margin_sampling_merge",
                      "lumberchunker", "lumberchunker_merge"}


def test_added_rows_and_book_subsets() -> None:
    ne = load_script()
    row = ne.parse_row("lite=litseg_lite_student chunkers.litseg_lite_student.llm.adapter=/a")
    assert (row.kind, row.added) == ("chunker", True)
    assert ne.evaluate_command(row, Path("/o/lite/eval"))[-2:] == [
        "chunkers=[litseg_lite_student]", "chunkers.litseg_lite_student.llm.adapter=/a"]
    ann = ne.parse_row("tagger=annotate: method=litseg_tagger")
    assert (ann.kind, ann.spec) == ("annotate", "method=litseg_tagger")
    assert "chunkers=[]" in ne.evaluate_command(ann, Path("/o/tagger/eval"))
    assert ne.parse_books(["46", "lite=5200,43"], {"lite"}) == (["46"], {"lite": ["5200", "43"]})
    with pytest.raises(SystemExit, match="no row 'nope'"):
        ne.parse_books(["nope=46"], {"lite"})
    with pytest.raises(SystemExit, match="NAME=CHUNKER"):
        ne.parse_row("just-a-name")


def _fake_run(folder: Path, label: str, scores: dict[str, list[float]], seconds: float) -> None:
    """An evaluate.py run folder as evaluate.py writes it: results.json and per_question rows."""
    eval_dir = folder / "eval"
    (eval_dir / "per_question").mkdir(parents=True)
    rows = []
    for book, values in scores.items():
        for k, v in enumerate(values):
            rows.append({"qid": f"{book}-{k}", "book_id": book, "chunker": label, "mrr@10": v, "hit@1": float(v == 1),
                         "hit@5": float(v > 0), "evidence@1500": v})
    (eval_dir / "per_question" / f"{label}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    summary = {"label": label, "chunks": {"n_books": len(scores), "chunks_per_book": {"mean": 100.0},
                                          "words": {"mean": 150.0, "p50": 140.0}},
               "seconds": {"chunking": seconds}}
    (eval_dir / "results.json").write_text(json.dumps({"results": [summary]}))


def test_the_table_comes_from_the_per_question_rows(tmp_path: Path, monkeypatch) -> None:
    ne = load_script()
    monkeypatch.setattr(ne, "run", lambda cmd, log: pytest.fail(f"nothing may run: {cmd}"))
    books = {"11_A": [1.0, 0.5, 0.0, 1.0], "46_B": [1.0, 1.0, 0.5, 0.0], "43_C": [0.0, 0.0, 1.0, 1.0]}
    _fake_run(tmp_path / "recursive", "recursive", books, seconds=3.0)
    student = {"11_A": [1.0, 1.0, 0.5, 1.0], "46_B": [1.0, 1.0, 1.0, 0.5]}
    _fake_run(tmp_path / "lite", "lite", student, seconds=120.0)
    (tmp_path / "lite" / "row.json").write_text(json.dumps({"kind": "chunker", "spec": "litseg_lite_student",
                                                            "books": ["11", "46"]}))
    (tmp_path / "rows.json").write_text(json.dumps({"lite": {"kind": "chunker", "spec": "litseg_lite_student",
                                                             "books": ["11", "46"]}}))
    block = ne.main(["--out", str(tmp_path), "--rows", "none", "--table-only"])
    main, paired = block.split("Paired differences")
    lines = {ln.split("|")[1].strip(): [c.strip() for c in ln.strip("|").split("|")]
             for ln in main.splitlines() if ln.startswith("| ") and not ln.startswith("| row")}
    assert lines["recursive"][1:3] == ["all 3", "12"] and lines["recursive"][3].startswith("0.583 q ")
    assert " · b 0.50–0.62" in lines["recursive"][3]  # three books: means 0.625, 0.625, 0.5
    assert lines["recursive"][-3:] == ["100", "150 (140)", "1.0"]  # chunks/book, words/chunk, s/book
    assert lines["lite"][1:3] == ["2 of 8: 11, 46", "8"] and lines["lite"][-1] == "60.0"
    assert "Not run yet: token, semantic, perplexity, margin_sampling, lumberchunker." in block
    # paired: lite minus recursive on the 8 questions of the two books they share
    lite = next(ln for ln in paired.splitlines() if ln.startswith("| lite"))
    assert "| 2 | 8 | +0.250 [" in lite
