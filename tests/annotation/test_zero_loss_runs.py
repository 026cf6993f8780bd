"""The zero-loss property end to end: ``run_annotate`` on a fuzzing model, then the files.

A small corpus is annotated by LitSeg-Lite and by the LitSeg teacher whose model answers every
request with an adversarial reply (tests/fuzz_replies.py: lone surrogates, over-long integers,
broken and deeply nested JSON, wrong shapes, ...), through the response cache. The run must end
with every unit committed (no unit fails on content), and what is on disk must keep the
contract: every sentence of every unit inside some chunk's main range, every main text equal to
the source at its span, every context span's text in its chunk, the exported dataset equal to
the run. A rerun replays the cached replies (``llm.cache.replay=true``), invalid ones included,
into a fresh folder and must give the same chunks.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from omegaconf import OmegaConf, open_dict

from litseg.annotation.entry import run_annotate
from litseg.annotation.export import iter_export_rows
from litseg.annotation.store import CHUNKS, DOCUMENTS, LEDGER, SENTENCES
from litseg.utils.jsonl import read_jsonl
from litseg.segmentation.preprocess import prepare_document
from tests.conftest import REPO
from tests.teacher_fakes import write_corpus

SEEDS = (0, 1, 2)
METHODS = ("litseg_lite", "litseg")
UNITS = 2 * 3  # books x chapters of the corpus below
# Each run asks at least once per unit (the teacher three times); counted by tests/segmentation/test_zero_loss.py.
RUN_REPLIES_MIN = len(SEEDS) * UNITS * (1 + 3)


def compose(method: str, corpus: Path, cache: Path, *, seed: int, replay: bool = False) -> Any:
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir

    prompt = "litseg" if method == "litseg" else "litseg_lite"
    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base=None):
        cfg = hydra_compose("annotate", overrides=[f"method={method}", f"prompt={prompt}", f"input={corpus}",
                                                   "print_table=0", "view=false"])
    with open_dict(cfg):
        cfg.llm = OmegaConf.create({"backend": "tests.fuzz_replies:make_fuzz_model", "seed": seed,
                                    "cache": {"enabled": True, "path": str(cache), "replay": replay, "timeout_s": 60}})
        cfg.method.workers = 1
    return cfg


def on_disk(run: Path) -> dict[tuple[str, str], tuple[str, str, int]]:
    """Check the run folder against its sources; return chunk id -> (unit key, main text, start)."""
    texts = {d["book_id"]: prepare_document(Path(d["source_path"])).text for d in read_jsonl(run / DOCUMENTS)}
    sentences: dict[str, list[dict[str, Any]]] = {}
    for s in read_jsonl(run / SENTENCES):
        assert s["text"] == texts[s["book_id"]][s["start"]:s["end"]]
        sentences.setdefault(s["unit_key"], []).append(s)
    chunks: dict[str, list[dict[str, Any]]] = {}
    for c in read_jsonl(run / CHUNKS):
        chunks.setdefault(c["unit_key"], []).append(c)
    ledger = read_jsonl(run / LEDGER)
    assert len(ledger) == UNITS and {row["key"] for row in ledger} == set(sentences) == set(chunks)
    out = {}
    for key, rows in chunks.items():
        sent = {s["idx"]: s for s in sentences[key]}
        covered: set[int] = set()
        for c in rows:
            text = texts[c["book_id"]]
            assert c["main_text"] == text[c["start"]:c["end"]] == "".join(text[a:b] for a, b in c["main_spans"])
            assert (c["start"], c["end"]) == (sent[c["from_idx"]]["start"], sent[c["to_idx"]]["end"])
            for a, b in c["context_spans"]:
                assert text[a:b] in c["text"]
            covered.update(c["main_ids"])
            out[(c["book_id"], c["chunk_id"])] = (key, c["main_text"], c["start"])
        assert covered == set(sent), f"unit {key}: sentences {sorted(set(sent) - covered)} in no chunk"
    return out


@pytest.mark.parametrize("method", METHODS)
def test_run_annotate_keeps_every_sentence_whatever_the_model_says(method: str, tmp_path: Path) -> None:
    corpus = write_corpus(tmp_path / "corpus", books=2, chapters=3, sentences=7)
    for seed in SEEDS:
        cache = tmp_path / f"cache-{seed}.sqlite"
        run = tmp_path / f"run-{method}-{seed}"
        summary = run_annotate(compose(method, corpus, cache, seed=seed), run)
        assert (summary["units"], summary["units_failed"], summary["books_failed"]) == (UNITS, 0, [])
        assert summary["calls"] >= UNITS * (3 if method == "litseg" else 1)
        assert summary["retries"] + summary["repairs"] > 0  # the replies were adversarial
        first = on_disk(run)
        exported = {(r["book_id"], r["chunk_id"]): (r["unit_key"], r["main_text"], r["start"])
                    for r in iter_export_rows(run / "dataset", "chunks")}
        assert exported == first
        # Resume: nothing left to do. Replay into a fresh folder: the same chunks.
        assert run_annotate(compose(method, corpus, cache, seed=seed), run)["units"] == 0
        replayed = tmp_path / f"replay-{method}-{seed}"
        again = run_annotate(compose(method, corpus, cache, seed=seed, replay=True), replayed)
        assert again["units_failed"] == 0 and on_disk(replayed) == first
