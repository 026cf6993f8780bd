"""Blind rating export, ratings import and agreement statistics (litseg.rag.human_eval)."""

from __future__ import annotations

import csv
import re
from collections import Counter
from pathlib import Path

import pytest

from tests.browser import chromium, dump_dom

from litseg.rag import human_eval as he
from tests.conftest import shared_data_dir


def _chunks(method: str, books: dict[str, int]) -> list[dict]:
    out = []
    for book, n in books.items():
        for i in range(n):
            out.append({"book_id": book, "unit_id": f"{book}-u1", "chunk_id": f"{method}:{book}:{i}",
                        "method": method, "subtitle": f"{method.upper()} heading {i}",
                        "main_text": f"Passage {i} of {book}.", "text": f"{method.upper()} heading {i}\n...",
                        "start": 100 * i, "end": 100 * i + 20})
    return out


def _read(path: Path) -> list[dict]:
    with path.open(newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def test_stratified_sample_spreads_over_books() -> None:
    import random

    chunks = _chunks("m", {"a": 10, "b": 10, "c": 2})
    sample = he.stratified_sample(chunks, 12, random.Random(1))
    per_book = Counter(c["book_id"] for c in sample)
    assert per_book == {"a": 5, "b": 5, "c": 2}  # c is too small, its share passes on
    assert len({c["chunk_id"] for c in sample}) == 12
    assert len(he.stratified_sample(chunks, 50, random.Random(1))) == 22


def test_export_is_blind_and_keyed(tmp_path: Path) -> None:
    data = {"litseg": _chunks("litseg", {"b1": 6, "b2": 6}), "recursive": _chunks("recursive", {"b1": 9, "b2": 3})}
    texts = {"b1": "x" * 2000, "b2": "y" * 2000}
    res = he.export_rating_sample(data, tmp_path, n_per_chunker=6, seed=7, texts=texts, neighbour_chars=30)
    assert res.n_items == 12 and res.per_chunker == {"litseg": 6, "recursive": 6}
    sheet = _read(res.sheet_csv)
    key = he.read_key(res.key_csv)
    assert [r["item_id"] for r in sheet] == [f"P{k:04d}" for k in range(1, 13)]
    assert set(key) == {r["item_id"] for r in sheet}
    assert Counter(k["chunker"] for k in key.values()) == {"litseg": 6, "recursive": 6}
    assert Counter(key[r["item_id"]]["book_id"] for r in sheet if key[r["item_id"]]["chunker"] == "recursive") == {"b1": 3, "b2": 3}
    # nothing the raters see names the chunker, its chunk ids or its subtitles
    for shown in (res.sheet_csv.read_text(encoding="utf-8"), res.sheet_html.read_text(encoding="utf-8")):
        assert not re.search(r"litseg|recursive|LITSEG|RECURSIVE|heading", shown)
    assert all(r[d] == "" for r in sheet for d in he.DIMENSIONS)
    first = sheet[0]
    assert first["passage"].startswith("Passage") and len(first["after"]) == 30
    html = res.sheet_html.read_text(encoding="utf-8")
    assert html.count('class="item"') == 12 and "<script" in html and "http" not in html
    assert "Content Completeness" in res.instructions.read_text(encoding="utf-8")
    if chromium():  # the sheet's script runs in a browser: the progress line is its first output
        assert "0 / 12 items complete" in dump_dom(res.sheet_html)
    again = he.export_rating_sample(data, tmp_path / "again", n_per_chunker=6, seed=7, texts=texts, neighbour_chars=30)
    assert _read(again.key_csv) == _read(res.key_csv)  # seeded


def test_export_subtitles_on_request_and_errors(tmp_path: Path) -> None:
    data = {"m": _chunks("m", {"b": 2})}
    res = he.export_rating_sample(data, tmp_path, n_per_chunker=5, show_subtitle=True)
    assert res.notes == ["m: only 2 chunk(s) available, all taken"]
    assert all(r["passage"].startswith("[M heading") for r in _read(res.sheet_csv))
    with pytest.raises(ValueError):
        he.export_rating_sample({}, tmp_path)
    with pytest.raises(ValueError, match="no chunks with text"):
        he.export_rating_sample({"m": [{"book_id": "b", "main_text": " "}]}, tmp_path)


def _key(path: Path, rows: list[tuple[str, str]]) -> Path:
    with path.open("w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(["item_id", "chunker", "book_id"])
        for iid, chunker in rows:
            w.writerow([iid, chunker, "b"])
    return path


def _ratings(path: Path, header: list[str], rows: list[list[str]]) -> Path:
    with path.open("w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(header)
        w.writerows(rows)
    return path


def test_read_and_summarize_ratings(tmp_path: Path) -> None:
    key = _key(tmp_path / "key.csv", [("P1", "A"), ("P2", "A"), ("P3", "B"), ("P4", "B")])
    head = ["item_id", "Content Completeness", "Topical Coherence", "Boundary Placement", "comment"]
    r1 = _ratings(tmp_path / "ann.csv", head, [["P1", "5", "4", "3", ""], ["P2", "3", "4", "5", "ok"],
                                              ["P3", "2", "2", "2", ""], ["P4", "1", "", "2", ""]])
    r2 = _ratings(tmp_path / "bo.csv", ["item_id", "rater", "comp", "coh", "bnd"],
                  [["P1", "bo", "4", "4", "3"], ["P2", "bo", "4", "4", "4.0"], ["P3", "bo", "2", "3", "2"],
                   ["P4", "bo", "2", "3", "1"]])
    df = he.read_ratings([r1, r2], key)
    assert set(df["rater"]) == {"ann", "bo"} and df.attrs["blank"] == 1
    s = he.summarize_ratings(df)
    a, b = s["per_chunker"]["A"], s["per_chunker"]["B"]
    # A: completeness items (5+4)/2, (3+4)/2 -> 4.0; coherence 4.0; boundary (3+3)/2,(5+4)/2 -> 3.75
    assert (a["content_completeness"], a["topical_coherence"], a["boundary_placement"]) == (4.0, 4.0, 3.75)
    assert a["overall"] == pytest.approx((4 + 4 + 3.75) / 3)
    # B: completeness (2+2)/2,(1+2)/2 -> 1.75; coherence (2+3)/2, 3 -> 2.75; boundary 2, 1.5 -> 1.75
    assert (b["content_completeness"], b["topical_coherence"], b["boundary_placement"]) == (1.75, 2.75, 1.75)
    assert s["n_raters"] == 2 and s["n_items"] == 4 and s["blank_scores"] == 1
    agree = s["agreement"]["content_completeness"]
    assert agree["icc2_1"]["icc"] is None  # four items are too few for an ICC
    assert agree["cohen_kappa"]["ann|bo"]["agreement"] == 0.25
    assert agree["fleiss_kappa"]["n_items"] == 4


@pytest.mark.parametrize("row, message", [
    (["P1", "6", "1", "1"], "integer from 1 to 5"),
    (["P1", "2.5", "1", "1"], "integer from 1 to 5"),
    (["P1", "good", "1", "1"], "not a number"),
    (["P9", "1", "1", "1"], "not in the key"),
])
def test_bad_ratings_are_refused(tmp_path: Path, row: list[str], message: str) -> None:
    key = _key(tmp_path / "key.csv", [("P1", "A")])
    f = _ratings(tmp_path / "r.csv", ["item_id", *he.DIMENSIONS], [row])
    with pytest.raises(ValueError, match=message):
        he.read_ratings([f], key)


def test_duplicate_rating_is_refused(tmp_path: Path) -> None:
    key = _key(tmp_path / "key.csv", [("P1", "A")])
    f = _ratings(tmp_path / "r.csv", ["item_id", *he.DIMENSIONS], [["P1", "1", "1", "1"], ["P1", "2", "2", "2"]])
    with pytest.raises(ValueError, match="twice"):
        he.read_ratings([f], key)


def test_icc_matches_shrout_fleiss_table() -> None:
    import pandas as pd

    # Shrout & Fleiss (1979), 6 targets x 4 judges; their Table 4 gives ICC(2,1) = .29, which
    # the ANOVA formula reproduces: (BMS - EMS) / (BMS + (k-1)EMS + k(JMS - EMS)/n) with
    # BMS = 11.24, JMS = 32.49, EMS = 1.02, k = 4, n = 6 -> 10.22 / 35.28 = 0.2897
    table = [[9, 2, 5, 8], [6, 1, 3, 2], [8, 4, 6, 8], [7, 1, 2, 6], [10, 5, 6, 9], [6, 2, 4, 7]]
    df = pd.DataFrame([{"item_id": f"t{i}", "rater": f"j{j}", "score": v}
                       for i, row in enumerate(table) for j, v in enumerate(row)])
    res = he.icc2_1(df)
    assert res["icc"] == pytest.approx(0.2898, abs=5e-4)
    assert res["n_items"] == 6 and res["n_raters"] == 4
    assert res["ci95"][0] < res["icc"] < res["ci95"][1]


def test_fleiss_kappa_matches_worked_example() -> None:
    # the 10 subjects x 14 raters x 5 categories example of Fleiss (1971) as worked on Wikipedia:
    # P-bar = 0.378, P-bar_e = 0.213 -> kappa = 0.210
    counts = [[0, 0, 0, 0, 14], [0, 2, 6, 4, 2], [0, 0, 3, 5, 6], [0, 3, 9, 2, 0], [2, 2, 8, 1, 1],
              [7, 7, 0, 0, 0], [3, 2, 6, 3, 0], [2, 5, 3, 2, 2], [6, 5, 2, 1, 0], [0, 2, 2, 3, 7]]
    labels: dict[str, dict[str, int]] = {}
    for i, row in enumerate(counts):
        given = [cat for cat, n in enumerate(row, 1) for _ in range(n)]
        for r, cat in enumerate(given):
            labels.setdefault(f"r{r:02d}", {})[f"s{i}"] = cat
    res = he.fleiss_kappa(labels)
    assert res["kappa"] == pytest.approx(0.210, abs=5e-4)
    assert (res["n_items"], res["n_raters"]) == (10, 14)


def test_cohen_kappa_hand_computed() -> None:
    # agreement 3/4; chance (0.5 * 0.25) + (0.5 * 0.75) = 0.5 -> kappa = (0.75 - 0.5) / 0.5
    labels = {"a": {"1": "y", "2": "y", "3": "n", "4": "n"}, "b": {"1": "y", "2": "n", "3": "n", "4": "n", "5": "y"}}
    res = he.cohen_kappas(labels)
    assert res["a|b"] == {"kappa": pytest.approx(0.5), "agreement": 0.75, "n_items": 4}
    same = he.cohen_kappas({"a": {"1": 3, "2": 3}, "b": {"1": 3, "2": 3}})
    assert same["a|b"]["kappa"] is None and same["a|b"]["agreement"] == 1.0


def test_win_rates_ties_count_half(tmp_path: Path) -> None:
    f1 = _ratings(tmp_path / "r1.csv", ["item_id", "judgement"], [["x1", "Win"], ["x2", "Tie"], ["x3", "loss"]])
    f2 = _ratings(tmp_path / "r2.csv", ["item_id", "Judgment"], [["x1", "W"], ["x2", "Win"], ["x3", "Tie"]])
    df = he.read_preferences([f1, f2])
    res = he.win_rates(df)["all"]
    # items: x1 (1 + 1)/2 = 1, x2 (0.5 + 1)/2 = 0.75, x3 (0 + 0.5)/2 = 0.25 -> mean 2/3
    assert res["win_rate"] == pytest.approx(2 / 3)
    assert (res["win"], res["tie"], res["loss"]) == (pytest.approx(3 / 6), pytest.approx(2 / 6), pytest.approx(1 / 6))
    assert res["n_items"] == 3 and res["n_raters"] == 2
    assert res["cohen_kappa"]["r1|r2"]["agreement"] == pytest.approx(1 / 3)
    # with a key: x2 showed the system under test second, so its judgements swap sides
    key = tmp_path / "key.csv"
    key.write_text("item_id,comparison,flipped\nx1,lite-vs-lumber,false\nx2,lite-vs-lumber,true\n"
                   "x3,lite-vs-lumber,no\n", encoding="utf-8")
    keyed = he.win_rates(he.read_preferences([f1, f2], key))["lite-vs-lumber"]
    # x2 becomes (0.5 + 0)/2 = 0.25 -> mean (1 + 0.25 + 0.25)/3
    assert keyed["win_rate"] == pytest.approx(0.5)
    bad = _ratings(tmp_path / "bad.csv", ["item_id", "judgement"], [["x1", "better"]])
    with pytest.raises(ValueError, match="Win, Loss or Tie"):
        he.read_preferences([bad])


def _ten_word_runs(text: str) -> set[tuple[str, ...]]:
    words = re.findall(r"[a-z0-9]+", text.lower())
    return {tuple(words[i:i + 10]) for i in range(len(words) - 9)}


@pytest.mark.shared_data
def test_rater_guide_is_in_our_own_words(repo_root: Path) -> None:
    paper = shared_data_dir().parent / "paper" / "litseg.txt"
    if not paper.is_file():
        pytest.skip("the paper text is not in ../shared/paper")
    shared = _ten_word_runs(paper.read_text(encoding="utf-8"))
    ours = he.rater_instructions_markdown()
    doc = repo_root / "docs" / "evaluation_metrics.md"
    if doc.is_file():
        ours += "\n" + doc.read_text(encoding="utf-8")
    assert not (_ten_word_runs(ours) & shared)
