"""The readable views of a run (view.html and the terminal tables): the pieces of a unit split by
the word cap say which part they are, sizes are named in the record's own words, and a run
without a model shows no model counters."""

from __future__ import annotations

import json
import re
from pathlib import Path

from hydra import compose, initialize_config_dir
from rich.console import Console

from litseg.annotation.entry import run_annotate, summary_table
from litseg.annotation.store import CHUNKS, LEDGER
from litseg.utils.jsonl import read_jsonl
from litseg.annotation.view import chunk_table, render_html, size_label, unit_parts
from tests.conftest import REPO
from tests.teacher_fakes import write_book


def _recursive_run(tmp_path: Path, *overrides: str) -> Path:
    book = write_book(tmp_path / "tale.md", "A Tale", chapters=2, sentences=30)
    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base=None):
        cfg = compose("annotate", overrides=["method=recursive", "method.chunk_size=400", f"input={book}",
                                             "print_table=0", "export.enabled=false", *overrides])
    run_annotate(cfg, tmp_path / "run")
    return tmp_path / "run"


def _text(renderable: object) -> str:
    console = Console(width=200, record=True)
    console.print(renderable)
    return console.export_text()


def test_pieces_of_a_split_unit_say_part_k_of_n_in_the_view_and_the_table(tmp_path: Path) -> None:
    run = _recursive_run(tmp_path, "preprocess=default", "preprocess.max_words=250")
    ledger = read_jsonl(run / LEDGER)
    pieces = [r for r in ledger if r.get("cut")]
    assert pieces and {r["cut"]["parts"] for r in pieces} == {2}  # 30 sentences of 16 words: two pieces each
    page = (run / "view.html").read_text(encoding="utf-8")
    for k in (1, 2):
        assert page.count(f"Chapter 1 (part {k} of 2)") == 2  # the contents entry and the heading
    chunks = read_jsonl(run / CHUNKS)
    table = _text(chunk_table(chunks, parts=unit_parts(ledger)))
    assert "Chapter 1 (part 1 of 2)" in table and "Chapter 2 (part 2 of 2)" in table


def test_sizes_are_words_for_every_chunker_and_tokens_only_with_a_named_tokenizer(tmp_path: Path) -> None:
    run = _recursive_run(tmp_path)
    chunks = read_jsonl(run / CHUNKS)
    assert all(c["n_words"] == len(c["text"].split()) and c["n_tokens"] is None for c in chunks)
    page = (run / "view.html").read_text(encoding="utf-8")
    assert re.findall(r"&middot; (\d+) words</div>", page) == [str(c["n_words"]) for c in chunks]
    assert " tokens" not in page.replace("tokens=", "")  # the unit meta line names model tokens
    table = _text(chunk_table(chunks))
    assert "words" in table and "tokens" not in table
    counted = {**chunks[0], "n_tokens": 51, "tokenizer": "tok-x"}
    assert size_label(counted) == f"{counted['n_words']} words, 51 tokens (tok-x)"
    assert "tokens: tok-x" in _text(chunk_table([counted])) and "51" in _text(chunk_table([counted]))
    assert "51 tokens (tok-x)" in render_html("t", [counted], [])


def test_a_run_without_a_model_shows_one_model_row_not_ten_zeros(tmp_path: Path) -> None:
    run = _recursive_run(tmp_path)
    summary = json.loads((run / "run_summary.json").read_text())
    shown = _text(summary_table(summary))
    assert "model calls" in shown and "prompt tokens" not in shown and "per 1k words" not in shown
    with_calls = {**summary, "calls": 3, "prompt_tokens": 900}
    assert "prompt tokens" in _text(summary_table(with_calls))
