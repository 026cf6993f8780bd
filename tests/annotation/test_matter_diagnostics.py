"""The front and back matter kept out of the units shows in the run's documents.jsonl."""

from __future__ import annotations

from pathlib import Path

from litseg.annotation.entry import run_annotate
from litseg.annotation.store import read_jsonl
from tests.annotation.test_annotate_pipeline import compose_cfg
from tests.segmentation.test_structure import PG_FOOT, PG_HEAD, book, prose


def test_documents_record_matter_spans_with_reasons_and_words(tmp_path: Path) -> None:
    text = book(PG_HEAD + "HARBOUR TALES", "CONTENTS", "CHAPTER I. The Tower\nCHAPTER II. The Fog",
                "PREFACE", prose(60, 1), "CHAPTER I. The Tower", prose(120, 2),
                "CHAPTER II. The Fog", prose(120, 3), "INDEX", "Fog, the, 12\nTower, the, 3" + PG_FOOT)
    path = tmp_path / "harbour.txt"
    path.write_text(text, encoding="utf-8")
    run_annotate(compose_cfg(f"input={path}", "method=recursive"), tmp_path / "run")
    (doc,) = read_jsonl(tmp_path / "run" / "documents.jsonl")
    matter = [(m["where"], m["reason"], m["title"]) for m in doc["matter"]]
    assert matter == [("front", "credits", ""), ("front", "title page", ""),
                      ("front", "contents", "CONTENTS"), ("front", "preface", "PREFACE"),
                      ("back", "index", "INDEX")]
    preface = doc["matter"][3]
    assert preface["words"] == len(text[preface["start"]:preface["end"]].split()) == 61
    assert doc["n_units"] == 2
