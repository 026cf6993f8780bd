"""Corpus annotation (annotate.py / litseg.annotation): inputs, resumability, failures, sharded
export with its manifest, and the run store's crash recovery."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from omegaconf import DictConfig, OmegaConf, open_dict

from litseg.annotation.annotate import unit_key
from litseg.annotation.entry import run_annotate
from litseg.annotation.export import TABLES, export_features, export_runs, iter_export_rows
from litseg.annotation.export import main as export_main
from litseg.annotation.sources import parse_dataset_spec
from litseg.annotation.store import CHUNKS, LEDGER, SENTENCES, RunDirLocked, RunStore
from litseg.utils.jsonl import read_jsonl
from litseg.testing.configs import preprocess_config
from litseg.segmentation.preprocess import prepare_document
from tests.conftest import REPO
from tests.teacher_fakes import write_book, write_corpus

FAKE_LLM = {"backend": "tests.teacher_fakes:make_teacher_model"}


def compose_cfg(*overrides: str, llm: dict[str, Any] | None = None) -> DictConfig:
    from hydra import compose, initialize_config_dir

    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base=None):
        cfg = compose("annotate", overrides=["method=litseg", "print_table=0", "view=false", *overrides])
    with open_dict(cfg):
        cfg.llm = OmegaConf.create(llm or FAKE_LLM)
    return cfg


def chunk_set(run: Path) -> set[tuple[Any, ...]]:
    return {(c["book_id"], c["unit_id"], c["from_idx"], c["to_idx"], c["subtitle"], c["text"])
            for c in read_jsonl(run / CHUNKS)}


@pytest.fixture()
def corpus(tmp_path: Path) -> Path:
    return write_corpus(tmp_path / "corpus", books=3, chapters=2, sentences=8)


def test_corpus_run_is_idempotent_and_skips_finished_books(corpus: Path, tmp_path: Path) -> None:
    cfg = compose_cfg(f"input={corpus}")
    first = run_annotate(cfg, tmp_path / "run")
    assert (first["books"], first["units"], first["units_failed"], first["calls"]) == (3, 6, 0, 18)
    assert first["chunks"] == first["chunks_total_in_dir"] == 12
    assert first["in_dir"]["prompt_tokens"] == first["prompt_tokens"] > 0
    assert first["per_1k_words"]["calls"] == pytest.approx(18 * 1000 / first["source_words"], abs=0.1)
    before = chunk_set(tmp_path / "run")
    ledger_before = (tmp_path / "run" / LEDGER).read_bytes()

    second = run_annotate(cfg, tmp_path / "run")
    assert (second["books"], second["books_skipped"], second["units"], second["units_skipped"]) == (0, 3, 0, 6)
    assert second["calls"] == 0 and second["chunks_total_in_dir"] == 12
    assert chunk_set(tmp_path / "run") == before and (tmp_path / "run" / LEDGER).read_bytes() == ledger_before

    # A new book in the corpus: only its units run.
    write_book(corpus / "book_04.md", "Book 4", chapters=1, sentences=6)
    third = run_annotate(cfg, tmp_path / "run")
    assert (third["books"], third["books_skipped"], third["units"]) == (1, 3, 1)
    assert third["units_total_in_dir"] == 7


def test_unit_key_covers_text_sentences_and_configuration(corpus: Path) -> None:
    doc = prepare_document(corpus / "book_01.md")
    unit = doc.units[0]
    key = unit_key(doc, unit, {"name": "litseg", "prompt": "teacher-v1"})
    assert key != unit_key(doc, unit, {"name": "litseg", "prompt": "teacher-v2"})
    coarser = prepare_document(corpus / "book_01.md", preprocess_config(max_sentence_words=8))
    assert len(coarser.units[0].sentences) != len(unit.sentences)
    assert key != unit_key(coarser, coarser.units[0], {"name": "litseg", "prompt": "teacher-v1"})
    assert key == unit_key(prepare_document(corpus / "book_01.md"), unit, {"prompt": "teacher-v1", "name": "litseg"})


def test_a_failing_unit_is_recorded_counted_and_retried_next_time(corpus: Path, tmp_path: Path) -> None:
    bad = "In chapter 2 of Book 2"
    failing = compose_cfg(f"input={corpus}", "method.workers=1",
                          llm={**FAKE_LLM, "raise_on": bad})
    summary = run_annotate(failing, tmp_path / "run")
    assert (summary["units"], summary["units_failed"], summary["failures_file"]) == (5, 1, "failures.jsonl")
    failures = read_jsonl(tmp_path / "run" / "failures.jsonl")
    assert len(failures) == 1 and failures[0]["book_id"] == "book-02" and "scripted failure" in failures[0]["error"]
    assert summary["chunks_total_in_dir"] == 10  # the failed unit is not committed
    assert len(read_jsonl(tmp_path / "run" / "books.jsonl")) == 2  # nor is its book finished

    fixed = run_annotate(compose_cfg(f"input={corpus}"), tmp_path / "run")
    assert (fixed["units"], fixed["units_skipped"], fixed["units_failed"]) == (1, 5, 0)
    assert fixed["books_skipped"] == 2 and fixed["chunks_total_in_dir"] == 12


def test_annotate_exits_1_when_something_failed(tmp_path: Path) -> None:
    corpus = write_corpus(tmp_path / "corpus", books=1, chapters=1)
    (corpus / "broken.txt").write_bytes(b"\x00\x01\x02" * 100)
    proc = subprocess.run(
        [sys.executable, "annotate.py", "method=recursive", f"input={corpus}", f"hydra.run.dir={tmp_path / 'run'}",
         "print_table=0"],
        cwd=REPO, capture_output=True, text=True, timeout=180,
        env={**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": os.pathsep.join([str(REPO / "src"), str(REPO)])})
    assert proc.returncode == 1, proc.stderr[-2000:]
    summary = json.loads((tmp_path / "run" / "run_summary.json").read_text())
    assert summary["books"] == 1 and summary["books_failed"][0]["path"].endswith("broken.txt")
    assert summary["units"] == 1 and (tmp_path / "run" / "dataset" / "manifest.json").exists()


def test_every_input_is_accounted_for_and_skipped_ones_give_exit_code_4(tmp_path: Path) -> None:
    """A folder with a book, an empty file, a PDF and a PDF named .txt: the book is chunked, the
    others are listed as skipped with why, and annotate.py exits with INPUTS_SKIPPED_EXIT."""
    from litseg.run_result import INPUTS_SKIPPED_EXIT

    corpus = write_corpus(tmp_path / "corpus", books=1, chapters=1)
    (corpus / "empty.txt").write_text("  \n")
    (corpus / "paper.pdf").write_bytes(b"%PDF-1.4\n1 0 obj << /Type /Catalog >> endobj\ntrailer\n")
    (corpus / "saved-as.txt").write_bytes(b"%PDF-1.7\n% plain ASCII\n")
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": os.pathsep.join([str(REPO / "src"), str(REPO)])}
    proc = subprocess.run(
        [sys.executable, "annotate.py", "method=recursive", f"input={corpus}", f"hydra.run.dir={tmp_path / 'run'}",
         "print_table=0"], cwd=REPO, capture_output=True, text=True, timeout=180, env=env)
    assert proc.returncode == INPUTS_SKIPPED_EXIT == 4, proc.stderr[-2000:]
    summary = json.loads((tmp_path / "run" / "run_summary.json").read_text())
    outcomes = {Path(row["path"]).name: (row["outcome"], row.get("why")) for row in summary["inputs"]}
    assert outcomes == {"book_01.md": ("chunked", None), "empty.txt": ("skipped", "empty file"),
                        "paper.pdf": ("skipped", "unsupported format (PDF)"),
                        "saved-as.txt": ("skipped", "unsupported format (PDF)")}
    assert summary["inputs_skipped"] == 3 and summary["books_failed"] == [] and summary["units"] == 1
    assert "skipped: " + str(corpus / "paper.pdf") + " (unsupported format (PDF))" in proc.stdout
    # Rerun: the book is done; it still counts as chunked (by the earlier run), the others as skipped.
    again = run_annotate(compose_cfg(f"input={corpus}", "method=recursive"), tmp_path / "run")
    assert [r["outcome"] for r in again["inputs"]].count("chunked") == 1 and again["inputs_skipped"] == 3


def test_export_is_sharded_loadable_and_described_by_its_manifest(corpus: Path, tmp_path: Path) -> None:
    datasets = pytest.importorskip("datasets")
    cfg = compose_cfg(f"input={corpus}", "export.shard_rows=5", "export.parquet=true")
    summary = run_annotate(cfg, tmp_path / "run")
    out = tmp_path / "run" / "dataset"
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["method"] == "litseg" and manifest["prompt_versions"]["version"] == "teacher-v1"
    assert manifest["model"]["backend"] == "scripted" and manifest["git_commit"] == summary["git_commit"]
    assert manifest["config"]["method"]["name"] == "litseg"
    n_sentences = len(read_jsonl(tmp_path / "run" / SENTENCES))
    assert manifest["counts"] == {"books": 3, "units": 6, "chunks": 12, "sentences": n_sentences,
                                  "fallbacks": {"none": 6}, "units_failed_last_run": 0, "books_failed_last_run": 0}
    assert manifest["accounting"]["calls"] == 18
    chunk_files = manifest["tables"]["chunks"]["files"]
    assert [Path(f).name for f in chunk_files if f.endswith(".jsonl")] == [
        "train-00000-of-00003.jsonl", "train-00001-of-00003.jsonl", "train-00002-of-00003.jsonl"]
    assert all((out / f).exists() for f in chunk_files)

    # Three ways to load it, all giving the same rows in the same (book, unit) order.
    by_card = datasets.load_dataset(str(out), "chunks", split="train")
    by_json = datasets.load_dataset("json", data_files=str(out / "chunks" / "*.jsonl"), split="train",
                                    features=export_features("chunks"))
    by_parquet = datasets.load_dataset("parquet", data_files=str(out / "chunks" / "*.parquet"), split="train")
    assert len(by_card) == len(by_json) == len(by_parquet) == 12
    assert by_card["chunk_id"] == by_json["chunk_id"] == by_parquet["chunk_id"]
    assert by_card["chunk_id"] == sorted(by_card["chunk_id"])
    rows = list(iter_export_rows(out))
    assert rows[0]["main_spans"] == [list(s) for s in by_card[0]["main_spans"]]
    units = datasets.load_dataset(str(out), "units", split="train")
    assert len(units) == 6 and units[0]["segments"][0]["from_idx"] == 1
    assert by_card["matter"] == [""] * 12 and units["matter"] == [""] * 6  # chapters, no preface
    assert json.loads(units[0]["stages"])["stage1"]["status"] == "ok"
    docs = datasets.load_dataset(str(out), "documents", split="train")
    assert sorted(docs["book_id"]) == ["book-01", "book-02", "book-03"]


def test_export_merges_run_directories_of_a_sharded_corpus(corpus: Path, tmp_path: Path) -> None:
    runs = []
    for i in range(2):
        summary = run_annotate(compose_cfg(f"input={corpus}", f"shard={i}/2"), tmp_path / f"shard{i}")
        runs.append((tmp_path / f"shard{i}", summary))
    books = [{d["book_id"] for d in read_jsonl(run / "documents.jsonl")} for run, _ in runs]
    assert not books[0] & books[1] and books[0] | books[1] == {"book-01", "book-02", "book-03"}
    manifest = export_runs([r for r, _ in runs], tmp_path / "merged", tables=["chunks", "units"])
    assert manifest["counts"]["units"] == 6 and manifest["counts"]["chunks"] == 12
    whole = run_annotate(compose_cfg(f"input={corpus}"), tmp_path / "whole")
    assert whole["chunks"] == 12
    merged = [json.dumps(r, sort_keys=True) for r in iter_export_rows(tmp_path / "merged")]
    single = [json.dumps(r, sort_keys=True) for r in iter_export_rows(tmp_path / "whole" / "dataset")]
    assert merged == single
    # The same through the command line.
    assert export_main([*(str(r) for r, _ in runs), "--out", str(tmp_path / "cli"), "--tables", "chunks"]) == 0
    assert [json.dumps(r, sort_keys=True) for r in iter_export_rows(tmp_path / "cli")] == single
    assert export_main([str(tmp_path / "nothing-here")]) == 2
    with pytest.raises(FileNotFoundError):
        export_runs([tmp_path / "nothing-here"])


@pytest.mark.parametrize("form", ["save_to_disk", "jsonl", "hf_dir"])
def test_dataset_inputs(form: str, tmp_path: Path) -> None:
    datasets = pytest.importorskip("datasets")
    chapters = ["## Chapter 1\n\n" + " ".join(f"Row {r} sentence {i} is here." for i in range(1, 8)) +
                "\n\n## Chapter 2\n\n" + " ".join(f"Row {r} line {i} goes on." for i in range(1, 7)) for r in range(3)]
    table = datasets.Dataset.from_dict({"id": ["a-1", "b-2", "c-3"], "title": ["A", "B", "C"], "body": chapters})
    if form == "save_to_disk":
        table.save_to_disk(str(tmp_path / "ds"))
        spec = f"dataset:{tmp_path / 'ds'}::body"
    elif form == "jsonl":
        table.to_json(str(tmp_path / "rows.jsonl"))
        spec = f"dataset:{tmp_path / 'rows.jsonl'}:train:body"
    else:
        (tmp_path / "hub").mkdir()
        table.to_json(str(tmp_path / "hub" / "data.jsonl"))
        spec = f"hf:{tmp_path / 'hub'}:train:body"
    summary = run_annotate(compose_cfg(f"input='{spec}'"), tmp_path / "run")
    assert (summary["books"], summary["units"], summary["units_failed"]) == (3, 6, 0)
    docs = {d["book_id"]: d for d in read_jsonl(tmp_path / "run" / "documents.jsonl")}
    assert sorted(docs) == ["a-1", "b-2", "c-3"] and docs["b-2"]["title"] == "B"
    # The decoded text is kept beside the outputs, and every chunk's spans point into it.
    text = Path(docs["b-2"]["text_file"]).read_text(encoding="utf-8")
    for c in read_jsonl(tmp_path / "run" / CHUNKS):
        if c["book_id"] == "b-2":
            assert c["main_text"] == "".join(text[s:e] for s, e in c["main_spans"])
    again = run_annotate(compose_cfg(f"input='{spec}'"), tmp_path / "run")
    assert again["books_skipped"] == 3 and again["units"] == 0


def test_dataset_spec_syntax_and_errors(tmp_path: Path) -> None:
    spec = parse_dataset_spec("hf:user/books:validation:content")
    assert (spec.kind, spec.name, spec.split, spec.text_column) == ("hf", "user/books", "validation", "content")
    assert parse_dataset_spec("dataset:/data/x").text_column == "text"
    with pytest.raises(ValueError, match="name the dataset"):
        parse_dataset_spec("hf:")
    datasets = pytest.importorskip("datasets")
    datasets.Dataset.from_dict({"content": ["x"]}).save_to_disk(str(tmp_path / "ds"))
    with pytest.raises(ValueError, match="no text column 'text'"):
        run_annotate(compose_cfg(f"input='dataset:{tmp_path / 'ds'}'"), tmp_path / "run")


def test_same_file_names_in_two_folders_get_distinct_stable_ids(tmp_path: Path) -> None:
    write_book(tmp_path / "corpus" / "a" / "tale.md", "Tale A", chapters=1)
    write_book(tmp_path / "corpus" / "b" / "tale.md", "Tale B", chapters=1)
    cfg = compose_cfg(f"input={tmp_path / 'corpus'}")
    run_annotate(cfg, tmp_path / "run")
    ids = sorted(d["book_id"] for d in read_jsonl(tmp_path / "run" / "documents.jsonl"))
    assert len(ids) == 2 and ids[0] == "tale" and ids[1].startswith("tale-")
    (tmp_path / "run" / "books.jsonl").unlink()  # force re-reading the books: ids must not change
    again = run_annotate(cfg, tmp_path / "run")
    assert again["units"] == 0 and again["units_skipped"] == 2
    assert sorted(d["book_id"] for d in read_jsonl(tmp_path / "run" / "documents.jsonl")) == ids


def test_litseg_lite_path_still_works(corpus: Path, tmp_path: Path) -> None:
    cfg = compose_cfg(f"input={corpus}", "method=litseg_lite", "prompt=litseg_lite")  # the paper's Lite prompt
    summary = run_annotate(cfg, tmp_path / "run")
    assert (summary["method"], summary["units"], summary["calls"], summary["retries"]) == ("litseg_lite", 6, 6, 0)
    assert summary["chunks"] == 12 and summary["prompt_versions"]["version"] == "lite-v1"


def test_a_batch_that_breaks_is_finished_unit_by_unit(corpus: Path, tmp_path: Path) -> None:
    """A request that breaks its batch fails only its own unit; the other units finish."""
    cfg = compose_cfg(f"input={corpus}", "method=litseg_lite", "prompt=litseg_lite_compact",
                      llm={**FAKE_LLM, "raise_on": "In chapter 1 of Book 3"})
    summary = run_annotate(cfg, tmp_path / "run")
    assert (summary["units"], summary["units_failed"]) == (5, 1)


# ---------------------------------------------------------------------------------------------
# the run store

def _commit(store: RunStore, key: str, n: int = 2) -> None:
    store.commit_unit(key, [{"chunk_id": f"{key}:{i}", "text": "x" * 50} for i in range(n)],
                      [{"idx": i} for i in range(n)], {"book_id": "b", "unit_id": key, "n_chunks": n})


def test_store_cuts_off_a_unit_killed_mid_commit(tmp_path: Path) -> None:
    with RunStore(tmp_path) as store:
        _commit(store, "u1")
        _commit(store, "u2")
    good = {name: (tmp_path / name).read_bytes() for name in (CHUNKS, SENTENCES, LEDGER)}
    # A third unit died after its chunks and half its sentences, with a torn ledger line.
    with (tmp_path / CHUNKS).open("ab") as f:
        f.write(b'{"chunk_id": "u3:0", "unit_key": "u3"}\n{"chunk_id": "u3:1", "unit')
    with (tmp_path / SENTENCES).open("ab") as f:
        f.write(b'{"idx": 0, "unit_key": "u3"}\n')
    with (tmp_path / LEDGER).open("ab") as f:
        f.write(b'{"key": "u3", "book_id": "b", "offs')
    store = RunStore(tmp_path).open()
    assert set(store.done) == {"u1", "u2"} and store.recovered
    assert {name: (tmp_path / name).read_bytes() for name in good} == good
    _commit(store, "u3")
    store.close()
    reopened = RunStore(tmp_path).open()
    assert set(reopened.done) == {"u1", "u2", "u3"} and not reopened.recovered
    assert [c["chunk_id"] for c in reopened.chunks()] == ["u1:0", "u1:1", "u2:0", "u2:1", "u3:0", "u3:1"]
    reopened.close()


def test_store_cleans_ledgers_without_offsets(tmp_path: Path) -> None:
    (tmp_path / CHUNKS).write_text('{"unit_key": "old", "chunk_id": "a"}\n{"unit_key": "lost", "chunk_id": "b"}\n')
    (tmp_path / LEDGER).write_text('{"key": "old", "book_id": "b"}\n')
    with RunStore(tmp_path) as store:
        assert [c["chunk_id"] for c in store.chunks()] == ["a"] and store.is_done("old")


def test_one_writer_per_run_directory(tmp_path: Path) -> None:
    with RunStore(tmp_path):
        with pytest.raises(RunDirLocked, match="another process"):
            RunStore(tmp_path).open()
    with RunStore(tmp_path) as again:  # released on close
        assert not again.done


def test_export_types_hold_when_the_first_shard_has_only_empty_lists(corpus: Path, tmp_path: Path) -> None:
    """JSON type inference would read an all-empty list column as null and then refuse the
    next shard; the declared features keep every shard loadable."""
    datasets = pytest.importorskip("datasets")
    run_annotate(compose_cfg(f"input={corpus}", "export.shard_rows=1"), tmp_path / "run")
    out = tmp_path / "run" / "dataset"
    first = next(iter_export_rows(out))
    assert first["context_ids"] == [] and first["context_spans"] == [] and first["metadata"] == "{}"
    for table in TABLES:
        loaded = datasets.load_dataset(str(out), table, split="train")
        assert set(loaded.column_names) == set(export_features(table))
    chunks = datasets.load_dataset("json", data_files=str(out / "chunks" / "*.jsonl"), split="train",
                                   features=export_features("chunks"))
    assert len(chunks) == 12 and any(c for c in chunks["context_spans"])


def test_two_runs_exports_load_their_own_rows_through_one_datasets_cache(tmp_path: Path) -> None:
    """``load_dataset(RUN/dataset, "chunks")`` in one process with one cache: each export gives its
    own rows, and a run resumed with more books gives the new rows (the card's digest keys the cache)."""
    datasets = pytest.importorskip("datasets")
    cache = str(tmp_path / "hf_cache")
    small = write_corpus(tmp_path / "small", books=1, chapters=1, sentences=6)
    large = write_corpus(tmp_path / "large", books=2, chapters=2, sentences=6)
    expected = {}
    for name, corpus in (("first", small), ("second", large)):
        run_annotate(compose_cfg(f"input={corpus}", "method=recursive"), tmp_path / name)
        expected[name] = [c["chunk_id"] for c in read_jsonl(tmp_path / name / CHUNKS)]
    assert len(expected["first"]) != len(expected["second"])

    def loaded(name: str) -> list[str]:
        return datasets.load_dataset(str(tmp_path / name / "dataset"), "chunks", split="train",
                                     cache_dir=cache)["chunk_id"]

    assert sorted(loaded("first")) == sorted(expected["first"])
    assert sorted(loaded("second")) == sorted(expected["second"])
    assert sorted(loaded("first")) == sorted(expected["first"])
    write_book(small / "book_09.md", "Book 9", chapters=1, sentences=6)
    run_annotate(compose_cfg(f"input={small}", "method=recursive"), tmp_path / "first")
    grown = [c["chunk_id"] for c in read_jsonl(tmp_path / "first" / CHUNKS)]
    assert len(grown) > len(expected["first"]) and sorted(loaded("first")) == sorted(grown)
