"""Front and back matter in a run: kept out of the units (documents.jsonl) or as matter units."""

from __future__ import annotations

from pathlib import Path

from litseg.annotation.annotate import setup_differences
from litseg.annotation.entry import run_annotate
from litseg.utils.jsonl import read_jsonl
from tests.annotation.test_annotate_pipeline import compose_cfg
from tests.segmentation.test_structure import PG_FOOT, PG_HEAD, book, prose


def test_documents_record_matter_spans_with_reasons_and_words(tmp_path: Path) -> None:
    text = book(PG_HEAD + "HARBOUR TALES", "CONTENTS", "CHAPTER I. The Tower\nCHAPTER II. The Fog",
                "PREFACE", prose(60, 1), "CHAPTER I. The Tower", prose(120, 2),
                "CHAPTER II. The Fog", prose(120, 3), "INDEX", "Fog, the, 12\nTower, the, 3" + PG_FOOT)
    path = tmp_path / "harbour.txt"
    path.write_text(text, encoding="utf-8")
    run_annotate(compose_cfg(f"input={path}", "method=recursive", "preprocess.index_matter=false"), tmp_path / "run")
    (doc,) = read_jsonl(tmp_path / "run" / "documents.jsonl")
    matter = [(m["where"], m["reason"], m["title"]) for m in doc["matter"]]
    assert matter == [("front", "credits", ""), ("front", "title page", ""),
                      ("front", "contents", "CONTENTS"), ("front", "preface", "PREFACE"),
                      ("back", "index", "INDEX")]
    preface = doc["matter"][3]
    assert preface["words"] == len(text[preface["start"]:preface["end"]].split()) == 61
    assert doc["n_units"] == 2

    # by default the preface is a unit of its own; its chunks and its unit row say so
    run_annotate(compose_cfg(f"input={path}", "method=recursive"), tmp_path / "run2")
    (doc,) = read_jsonl(tmp_path / "run2" / "documents.jsonl")
    assert [m["reason"] for m in doc["matter"]] == ["credits", "title page", "contents", "index"]
    assert doc["n_units"] == 3
    rows = read_jsonl(tmp_path / "run2" / "diagnostics.jsonl")
    assert [(r["unit_id"], r["matter"]) for r in rows] == [("0000-01", "preface"), ("0001", ""), ("0002", "")]
    chunks = read_jsonl(tmp_path / "run2" / "chunks.jsonl")
    assert {c["matter"] for c in chunks if c["unit_id"] == "0000-01"} == {"preface"}
    assert all("CONTENTS" not in c["text"] and "INDEX" not in c["text"] for c in chunks)


def test_a_run_folder_made_before_index_matter_resumes_under_it() -> None:
    old = {"fingerprint": {"name": "recursive"}, "preprocess": {"max_words": 2000}}
    now = {"fingerprint": {"name": "recursive"}, "preprocess": {"max_words": 2000, "index_matter": True}}
    assert setup_differences(old, now) == []  # matter units are added beside the old units, whose keys stay
    off = {"fingerprint": {"name": "recursive"}, "preprocess": {"max_words": 2000, "index_matter": False}}
    assert setup_differences(off, now) == ["preprocess.index_matter: False before, True now"]
