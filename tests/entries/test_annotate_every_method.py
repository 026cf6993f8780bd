"""`annotate.py method=NAME` works for every shipped chunker, offline, with the same outputs.

Each method of conf/method/ is composed into the annotate config and run over a small book. LLM
chunkers get a scripted model that always answers nonsense, so what is checked is the wiring
and the fallbacks: every sentence still ends up in a chunk whose text is the source at its spans.
Model-scoring chunkers (perplexity, margin sampling) run on the tiny random model.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from omegaconf import OmegaConf, open_dict

from litseg.annotation.entry import run_annotate
from litseg.utils.jsonl import read_jsonl
from tests.conftest import REPO

# Methods that need a group choice besides the defaults of annotate.yaml.
EXTRA_OVERRIDES = {"litseg_tagger": ["prompt=tagger_writer"], "litseg_lite": ["prompt=litseg_lite_compact"]}
METHODS = sorted(p.stem for p in (REPO / "conf" / "method").glob("*.yaml"))
BOOK = """CHAPTER I

The lamp went out at nine. Mara lit it again and sat by the window, waiting for the boat.

"He is late," said her mother. "The fog is thick tonight."

CHAPTER II

Out on the water, Tobias cut the engine and listened. Somewhere a bell rang twice.

He turned the wheel towards the sound and hoped.
"""


def _annotations_for(book: Path, path: Path) -> Path:
    from litseg.testing.imported_records import write_whole_unit_records

    return write_whole_unit_records(book, path, uid_prefix="tiny", subtitle="all of it")


@pytest.mark.slow
@pytest.mark.parametrize("method", METHODS)
def test_annotate_runs_every_method(method: str, tmp_path: Path) -> None:
    from hydra import compose, initialize_config_dir

    book = tmp_path / "tiny.txt"
    book.write_text(BOOK, encoding="utf-8")
    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base=None):
        cfg = compose("annotate", overrides=[f"method={method}", f"input={book}", "print_table=0",
                                             "export.enabled=false", *EXTRA_OVERRIDES.get(method, [])])
    with open_dict(cfg):
        cfg.llm = OmegaConf.create({"backend": "scripted", "answers": ["no idea"], "cycle": True})
        if "model" in cfg.method and method in {"perplexity", "margin_sampling"}:
            from litseg.llm.tiny_model import tiny_causal_lm_dir

            cfg.method.model = str(tiny_causal_lm_dir())
        if method == "token":
            cfg.method.tokenizer = "whitespace"
        if method == "litseg_tagger":  # random nets over the packaged MiniLM: no trained tagger needed
            from litseg.testing.tiny_tagger import tiny_tagger_dir

            cfg.method.model = str(tiny_tagger_dir(tmp_path / "tagger"))
        if method == "imported":  # the books are the records' sources: one record per chapter
            cfg.method.annotations = str(_annotations_for(book, tmp_path / "ann.jsonl"))
    out = tmp_path / "run"
    summary = run_annotate(cfg, out)
    assert summary["units"] == 2 and summary["units_failed"] == 0
    text = book.read_text(encoding="utf-8")
    chunks = read_jsonl(out / "chunks.jsonl")
    sentences = read_jsonl(out / "sentences.jsonl")
    assert chunks and sentences and (out / "view.html").exists()
    for c in chunks:
        assert c["main_text"] == "".join(text[s:e] for s, e in c["main_spans"])
    covered = {(c["unit_id"], i) for c in chunks for i in c["main_ids"]}
    assert {(s["unit_id"], s["idx"]) for s in sentences} <= covered
