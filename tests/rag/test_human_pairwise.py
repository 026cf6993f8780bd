"""Pairwise human evaluation of answers (litseg.rag.human_pairwise): the blind sheet with the
source window around the gold evidence, the import through the key, and win/tie/loss with
agreement."""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import pytest

from tests.browser import chromium, dump_dom

from litseg.rag import human_pairwise as hp
from litseg.rag.benchmarks.records import Benchmark, BenchmarkBook, Evidence, Question


def _bench() -> Benchmark:
    text_a = "".join(f"Sentence number {i:04d} of the first tale. " for i in range(200))  # ~8,400 chars
    text_b = "A short second tale with no marked evidence at all."
    books = [BenchmarkBook(book_id="a", title="First Tale", text=text_a),
             BenchmarkBook(book_id="b", title="Second Tale", text=text_b)]
    qs = [Question(qid=f"a{i}", book_id="a", question=f"What happens in part {i}?", answers=[f"thing {i}"],
                   evidence=[Evidence("span", 1000 * i + 100, 1000 * i + 160)]) for i in range(1, 7)]
    qs.append(Question(qid="a7", book_id="a", question="Two places?", answers=["both"],
                       evidence=[Evidence("span", 7000, 7050), Evidence("span", 7400, 7420)]))
    qs.append(Question(qid="b1", book_id="b", question="What is the tale?", answers=["short"]))
    return Benchmark(name="tiny", books=books, questions=qs)


CODE = {"litseg_lite": "SYS", "lumberchunker": "OTHER1", "recursive": "OTHER2"}


def _answers() -> dict[str, dict[str, dict]]:
    qids = [f"a{i}" for i in range(1, 8)] + ["b1"]
    out = {m: {q: {"qid": q, "answer": f"{CODE[m]}-ANSWER-{q}", "answer_error": None} for q in qids}
           for m in ("litseg_lite", "lumberchunker", "recursive")}
    out["recursive"]["a3"] = {"qid": "a3", "answer": "", "answer_error": "HTTP 500"}  # a failed request
    return out


def _read(path: Path) -> list[dict[str, str]]:
    with path.open(newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def test_source_window_merges_and_cuts_at_the_text_edges() -> None:
    text = "".join(chr(ord("a") + i % 26) for i in range(3000))
    assert hp.source_window(text, [(1000, 1010)], 500) == text[500:1510]
    assert hp.source_window(text, [(100, 110), (700, 710)], 500) == text[0:1210]  # windows meet: one piece
    two = hp.source_window(text, [(100, 110), (2500, 2510)], 500)
    assert two == text[0:610] + hp.GAP + text[2000:3000]
    with pytest.raises(ValueError):
        hp.source_window(text, [(0, 1)], -1)


def test_export_is_blind_keyed_and_windowed(tmp_path: Path) -> None:
    bench = _bench()
    res = hp.export_pairwise_sheet(_answers(), bench, tmp_path, system="litseg_lite", n_per_comparison=5, seed=3)
    assert res.per_comparison == {"litseg_lite vs lumberchunker": 5, "litseg_lite vs recursive": 5}
    sheet, key = _read(res.sheet_csv), hp.read_key(res.key_csv)
    assert len(sheet) == res.n_items == 10 and set(key) == {r["item_id"] for r in sheet}
    shown = res.sheet_csv.read_text(encoding="utf-8") + res.sheet_html.read_text(encoding="utf-8")
    if chromium():  # the sheet's script runs in a browser: the progress line is its first output
        assert "0 / 10 items judged" in dump_dom(res.sheet_html)
    assert not re.search(r"litseg|lumber|recursive", shown, re.I)  # answers are labelled by side only
    text = bench.books[0].load_text()
    sides = set()
    for row in sheet:
        k = key[row["item_id"]]
        sides.add(k["system_side"])
        sys_ans = row[f"answer_{k['system_side']}"]
        other_ans = row["answer_1" if k["system_side"] == "2" else "answer_2"]
        assert sys_ans == f"SYS-ANSWER-{k['qid']}"
        assert other_ans == f"{CODE[k['other']]}-ANSWER-{k['qid']}"
        assert not (k["other"] == "recursive" and k["qid"] == "a3")  # a failed answer is never shown
        q = next(q for q in bench.questions if q.qid == k["qid"])
        if q.gold_spans and q.book_id == "a":
            s, e = q.gold_spans[0]
            assert row["source"].startswith(text[s - 500:e + 500].strip()[:200])
            assert len(row["source"]) <= sum(e - s + 1000 for s, e in q.gold_spans) + len(hp.GAP)
        else:
            assert "whole book" in row["source"] and (tmp_path / "books" / f"{q.book_id}.txt").is_file()
    assert sides == {"1", "2"}  # both orders occur
    assert "Factually right" in res.instructions.read_text() or "factually right" in res.instructions.read_text()
    again = hp.export_pairwise_sheet(_answers(), bench, tmp_path / "again", system="litseg_lite",
                                     n_per_comparison=5, seed=3)
    assert _read(again.key_csv) == _read(res.key_csv)  # seeded
    with pytest.raises(ValueError, match="no answers of"):
        hp.export_pairwise_sheet(_answers(), bench, tmp_path / "x", system="litseg")


def _write_sheet(path: Path, rater: str, rows: list[tuple[str, str]]) -> Path:
    with path.open("w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(["item_id", "rater", "judgement", "comment"])
        for iid, j in rows:
            w.writerow([iid, rater, j, ""])
    return path


def _key(path: Path) -> Path:
    rows = [("Q1", "s vs x", "1"), ("Q2", "s vs x", "2"), ("Q3", "s vs x", "1"), ("Q4", "s vs y", "2"),
            ("Q5", "s vs y", "1")]
    with path.open("w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(["item_id", "comparison", "system", "other", "qid", "book_id", "system_side"])
        for iid, comp, side in rows:
            w.writerow([iid, comp, "s", comp[-1], iid.lower(), "b", side])
    return path


def test_import_maps_sides_to_win_loss_and_the_paper_rates(tmp_path: Path) -> None:
    key = _key(tmp_path / "key.csv")
    # r1 and r2 agree everywhere but Q3; r3 judged only some items and left one blank
    s1 = _write_sheet(tmp_path / "r1.csv", "r1", [("Q1", "1"), ("Q2", "1"), ("Q3", "tie"), ("Q4", "2"), ("Q5", "2")])
    s2 = _write_sheet(tmp_path / "r2.csv", "r2", [("Q1", "1"), ("Q2", "1"), ("Q3", "1"), ("Q4", "2"), ("Q5", "2")])
    s3 = _write_sheet(tmp_path / "r3.csv", "r3", [("Q1", "2"), ("Q2", ""), ("Q3", "tie")])
    df = hp.read_pairwise([s1, s2, s3], key)
    assert df.attrs["blank"] == 1
    got = {(r, i): j for r, i, j in zip(df["rater"], df["item_id"], df["judgement"])}
    # Q1: system shown first, "1" = win; Q2: system second, "1" = loss; Q4: system second, "2" = win
    assert got[("r1", "Q1")] == "win" and got[("r1", "Q2")] == "loss" and got[("r1", "Q4")] == "win"
    assert got[("r1", "Q5")] == "loss" and got[("r3", "Q1")] == "loss" and got[("r2", "Q3")] == "win"
    summ = hp.pairwise_summary(df, n_resamples=200)
    x = summ["comparisons"]["s vs x"]
    # per item, the share of raters choosing each outcome: Q1 2/3 win, Q2 0, Q3 1/3 win; ties Q1 0, Q3 2/3
    assert x["win_rate"] == pytest.approx((2 / 3 + 0 + 1 / 3) / 3)
    assert x["loss_rate"] == pytest.approx((1 / 3 + 1 + 0) / 3)
    assert x["tie_rate"] == pytest.approx((0 + 0 + 2 / 3) / 3)
    assert x["win_rate_ties_half"] == pytest.approx((2 / 3 + 0 + (1 / 3 + 1 / 3)) / 3)
    assert x["n_items"] == 3 and x["n_raters"] == 3 and x["n_judgements"] == 8
    assert x["cohen_kappa"]["r1|r2"]["agreement"] == pytest.approx(2 / 3)
    assert x["fleiss_kappa"]["n_items"] == 2  # Q1 and Q3 were judged by all three
    y = summ["comparisons"]["s vs y"]
    assert (y["win_rate"], y["loss_rate"], y["tie_rate"]) == (0.5, 0.5, 0.0)
    assert y["cohen_kappa"]["r1|r2"] == {"kappa": 1.0, "agreement": 1.0, "n_items": 2}
    assert summ["all"]["n_items"] == 5
    table = hp.summary_markdown(summ)
    assert "| s vs x | 3 | 3 | 33.3%" in table and "all comparisons" in table


def test_import_errors(tmp_path: Path) -> None:
    key = _key(tmp_path / "key.csv")
    with pytest.raises(ValueError, match="not 1, 2 or tie"):
        hp.read_pairwise([_write_sheet(tmp_path / "a.csv", "r", [("Q1", "better")])], key)
    with pytest.raises(ValueError, match="not in the key"):
        hp.read_pairwise([_write_sheet(tmp_path / "b.csv", "r", [("Q9", "1")])], key)
    with pytest.raises(ValueError, match="twice"):
        hp.read_pairwise([_write_sheet(tmp_path / "c.csv", "r", [("Q1", "1"), ("Q1", "2")])], key)


def test_cli_round_trip_from_a_run_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    run = tmp_path / "run"
    (run / "per_question").mkdir(parents=True)
    for label, rows in _answers().items():
        with (run / "per_question" / f"{label}.jsonl").open("w", encoding="utf-8") as fh:
            for r in rows.values():
                fh.write(json.dumps(r) + "\n")
    (run / "per_question" / "no_generation.jsonl").write_text(json.dumps({"qid": "a1"}) + "\n")
    answers = hp.load_run_answers(run)
    assert set(answers) == {"litseg_lite", "lumberchunker", "recursive", "no_generation"}
    assert answers["no_generation"] == {}
    monkeypatch.setattr(hp, "_benchmark_of_run", lambda run_dir: _bench())
    out = tmp_path / "sheet"
    assert hp.main(["export", str(run), "--others", "lumberchunker", "--n", "4", "--out", str(out)]) == 0
    key = hp.read_key(out / "key.csv")
    assert len(key) == 4 and {k["other"] for k in key.values()} == {"lumberchunker"}
    filled = _write_sheet(tmp_path / "r1.csv", "r1", [(i, k["system_side"]) for i, k in key.items()])
    assert hp.main(["analyze", str(filled), "--key", str(out / "key.csv"), "--out", str(tmp_path / "s.json")]) == 0
    assert "100.0%" in capsys.readouterr().out
    assert json.loads((tmp_path / "s.json").read_text())["all"]["win_rate"] == 1.0
