"""Importing segmentations made elsewhere (annotate.py method=imported): mapping by character
spans onto the current units and sentences, validation and repair, clear errors, partial units."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from litseg.annotation.annotate import annotate
from litseg.annotation.importing import ImportedChunker, ImportError_, first_difference, read_records
from litseg.utils.jsonl import read_jsonl
from litseg.segmentation.preprocess import prepare_document
from litseg.training.data import DataReport, read_teacher_units, teacher_target
from tests.conftest import REPO
from tests.teacher_fakes import write_book


def _record(uid: str, text: str, spans: list[tuple[int, int]], segments: list[dict], *, source: str | None,
            offset: int | None = None, events: str = "events", threads: str = "threads") -> dict:
    return {"uid": uid, "source": source, "text": text, "sentences": [list(s) for s in spans],
            "unit_start": offset,
            "annotation": {"step1": {"step_1_events": events}, "step2": {"step_2_threads": threads},
                           "step3": {"chapter_title": "T", "step_3_turning_points": [], "segments": segments}}}


def _write(path: Path, records: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def _pairs(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """An annotator's coarser split: every two sentences of ours are one of theirs."""
    return [(spans[i][0], spans[min(i + 1, len(spans) - 1)][1]) for i in range(0, len(spans), 2)]


@pytest.fixture
def book(tmp_path: Path) -> Path:
    return write_book(tmp_path / "src" / "lamp.md", "Lamp", chapters=2, sentences=8)


def _chapter_record(doc, unit, uid: str, *, source: str, coarse: bool = True, cut: int | None = None) -> dict:
    """A record over ``unit`` whose annotator split sentences differently (pairs) and cut its
    blocks after its own sentence ``cut``."""
    spans = [(s.start - unit.start, s.end - unit.start) for s in unit.sentences]
    theirs = _pairs(spans) if coarse else spans
    n = len(theirs)
    k = cut or n // 2
    segments = [{"subtitle": "The keeper climbs", "from_idx": 1, "to_idx": k, "context_idx": []},
                {"subtitle": "The lamp is lit", "from_idx": k + 1, "to_idx": n, "context_idx": [1]}]
    return _record(uid, doc.text[unit.start:unit.end], theirs, segments, source=source, offset=unit.start,
                   events=f"events of {uid}", threads=f"threads of {uid}")


def test_annotations_map_by_character_spans_onto_our_sentences(book: Path, tmp_path: Path) -> None:
    doc = prepare_document(book)
    records = [_chapter_record(doc, u, f"lamp-{u.unit_id}", source="src/lamp.md") for u in doc.units]
    path = _write(tmp_path / "ann.jsonl", records)
    chunker = ImportedChunker(str(path))
    run = tmp_path / "run"
    summary = annotate(inputs=chunker.book_sources(prepare_document), chunker=chunker, out_dir=run,
                       prepare=prepare_document, progress=False)
    assert summary["units"] == len(doc.units) and summary["units_failed"] == 0
    assert chunker.partial_units == [] and chunker.standalone == []
    diags = read_jsonl(run / "diagnostics.jsonl")
    for diag, unit in zip(diags, doc.units):
        # Their sentence k covers our sentences 2k-1 and 2k: their cut after 2 of 4 pairs -> ours after 4.
        n = unit.n_sentences
        assert [(s["from_idx"], s["to_idx"]) for s in diag["segments"]] == [(1, n // 2), (n // 2 + 1, n)]
        assert diag["segments"][1]["context_idx"] == [1]
        assert diag["fallback"] == "none" and diag["repairs"] == []
        assert diag["stages"]["stage1"]["answer"]["step_1_events"] == f"events of lamp-{unit.unit_id}"
        assert diag["imported_from"] == [f"lamp-{unit.unit_id}"]
    chunks = read_jsonl(run / "chunks.jsonl")
    for c in chunks:  # exact spans into the source, as for every chunker
        for start, end in c["main_spans"]:
            assert doc.text[start:end] in c["main_text"]
    # The run is a teacher run the training-data builder reads, reasoning included.
    report = DataReport()
    units = read_teacher_units(run, report)
    assert len(units) == len(doc.units)
    target = json.loads(teacher_target(units[0], "lite"))
    assert target["step1"]["step_1_events"].startswith("events of lamp-")


def test_a_record_whose_text_differs_from_the_source_names_the_record_and_offset(book: Path, tmp_path: Path) -> None:
    doc = prepare_document(book)
    rec = _chapter_record(doc, doc.units[0], "bad-one", source="src/lamp.md")
    rec["text"] = rec["text"][:57] + "X" + rec["text"][58:]
    path = _write(tmp_path / "ann.jsonl", [rec])
    chunker = ImportedChunker(str(path))
    (source,) = chunker.book_sources(prepare_document)
    with pytest.raises(ImportError_, match=r"record 'bad-one'.*record offset 57"):
        source.load()


def test_partly_covered_units_are_reported_not_written(book: Path, tmp_path: Path) -> None:
    doc = prepare_document(book)
    unit = doc.units[0]
    half = unit.sentences[len(unit.sentences) // 2 - 1].end
    text = doc.text[unit.start:half]
    spans = [(s.start - unit.start, s.end - unit.start) for s in unit.sentences if s.end <= half]
    rec = _record("half", text, spans, [{"subtitle": "a", "from_idx": 1, "to_idx": len(spans)}],
                  source="src/lamp.md", offset=unit.start)
    chunker = ImportedChunker(str(_write(tmp_path / "ann.jsonl", [rec])))
    summary = annotate(inputs=chunker.book_sources(prepare_document), chunker=chunker, out_dir=tmp_path / "run",
                       prepare=prepare_document, progress=False)
    assert summary["units"] == 0
    (partial,) = chunker.partial_units
    assert partial["unit_id"] == unit.unit_id and partial["records"] == ["half"]
    assert partial["covered"] == pytest.approx(len(spans) / unit.n_sentences, abs=1e-3)


def test_record_without_a_readable_source_stands_alone(tmp_path: Path) -> None:
    text = "Once there was a fox. The fox was hungry.\n\nHe found a hen. The hen ran away."
    spans = [(0, 21), (22, 41), (43, 58), (59, 76)]
    rec = _record("fox-1", text, spans, [{"subtitle": "Fox hungry", "from_idx": 1, "to_idx": 2},
                                         {"subtitle": "Hen escapes", "from_idx": 3, "to_idx": 4}], source=None)
    chunker = ImportedChunker(str(_write(tmp_path / "ann.jsonl", [rec])))
    run = tmp_path / "run"
    summary = annotate(inputs=chunker.book_sources(prepare_document), chunker=chunker, out_dir=run,
                       prepare=prepare_document, progress=False)
    assert summary["units"] == 1 and chunker.standalone == ["fox-1"]
    assert [c["subtitle"] for c in read_jsonl(run / "chunks.jsonl")] == ["Fox hungry", "Hen escapes"]


@pytest.mark.parametrize("mutate,message", [
    (lambda r: r.pop("sentences"), r"line 1 \(uid 'u'\): sentences: Field required"),
    (lambda r: r.update(sentences=[[5, 3]]), r"sentence 1 \[5, 3\] is empty, reversed"),
    (lambda r: r["annotation"]["step3"]["segments"].append({"from_idx": 1, "to_idx": 9}), r"segment 2 \[1, 9\]"),
    (lambda r: r.update(sentences=[[0, 500]]), r"past the end of the text"),
])
def test_malformed_records_stop_with_the_line_and_uid(tmp_path: Path, mutate, message: str) -> None:
    rec = _record("u", "One. Two.", [(0, 4), (5, 9)], [{"subtitle": "x", "from_idx": 1, "to_idx": 2}], source=None)
    mutate(rec)
    with pytest.raises(ImportError_, match=message):
        read_records(_write(tmp_path / "ann.jsonl", [rec]))


def test_first_difference() -> None:
    assert first_difference("abcdef", "abcxef") == 3
    assert first_difference("abc", "abc") == 3
    assert first_difference("", "x") == 0


@pytest.mark.shared_data
def test_the_shared_teacher_annotations_import_whole(shared_data: Path, tmp_path: Path) -> None:
    """All strong-teacher units land on current units, none partial, every segment kept."""
    from litseg.annotation.entry import run_annotate

    from hydra import compose, initialize_config_dir

    ann = shared_data / "teacher" / "litseg_teacher_units.jsonl"
    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
        cfg = compose("annotate", overrides=["method=imported", f"method.annotations={ann}", "print_table=0",
                                             "view=false"])
    summary = run_annotate(cfg, tmp_path / "run")
    records = read_records(ann)
    # Every record lands on current units that it covers whole (one record may cover several
    # units when today's structure splits what the annotator saw as one), none partly covered.
    assert summary["import"]["partial_units"] == [] and summary["units_failed"] == 0
    assert summary["units"] >= len(records)
    from litseg.utils.jsonl import read_jsonl

    diags = read_jsonl(tmp_path / "run" / "diagnostics.jsonl")
    assert {u for d in diags for u in d["imported_from"]} == {r.uid for r in records}
    assert summary["fallbacks"] == {"none": summary["units"]}
