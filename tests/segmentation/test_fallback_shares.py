"""The unit fallback by name (``method.fallback``: the paper's whole unit, or word-capped pieces)
and the fallback shares every evaluation row reports (issue 11, item 6)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from litseg.chunkers.litseg_lite import LitSegLiteChunker
from litseg.llm.base import Completion
from litseg.llm.testing import ScriptedChatModel
from litseg.segmentation.preprocess import prepare_document
from litseg.segmentation.runner import fallback_category, segment_with_retries
from litseg.segmentation.schema import LiteAnswer
from litseg.segmentation.types import Document
from litseg.segmentation.validation import validate_segments
from litseg.testing.configs import prompt_config
from tests.conftest import REPO
from tests.rag.test_rag_pipeline import CHUNKERS, eval_cfg, run, synthetic_benchmark

N = 10
WORDS = [5] * N
MESSAGES = [{"role": "user", "content": "[1] ... [10] ..."}]
PROMPT = prompt_config("litseg_lite")


def ask_with(*replies: str):
    answers = iter(replies)
    return lambda messages: Completion(text=next(answers))


def lite_json(*ranges: tuple[int, int]) -> str:
    return json.dumps({"step1": {"step_1_events": "e"}, "step2": {"step_2_threads": "t"},
                       "step3": {"segments": [{"subtitle": "s", "from_idx": a, "to_idx": b} for a, b in ranges]}})


# ------------------------------------------------------------------------------- the runner
@pytest.mark.parametrize("fallback,spans", [("whole_unit", [(1, 10)]), ("pieces", [(1, 4), (5, 8), (9, 10)])])
def test_an_unreadable_answer_takes_the_named_unit_fallback(fallback: str, spans: list) -> None:
    out = segment_with_retries(ask_with("sorry", "no"), MESSAGES, n=N, answer_model=LiteAnswer,
                               sentence_words=WORDS, max_fallback_words=20, max_retries=1, fallback=fallback)
    d = out.diagnostics
    assert [s.span for s in out.segments] == spans and validate_segments(out.segments, N) == []
    assert (d.fallback, d.unit_fallback) == ("whole_unit", fallback)
    assert fallback_category(d.to_dict()) == fallback


@pytest.mark.parametrize("fallback,n_segments", [("whole_unit", 1), ("pieces", 3)])
def test_an_answer_without_usable_ranges_takes_it_too(fallback: str, n_segments: int) -> None:
    out = segment_with_retries(ask_with(lite_json((20, 30))), MESSAGES, n=N, answer_model=LiteAnswer,
                               sentence_words=WORDS, max_fallback_words=20, max_retries=0, fallback=fallback)
    assert len(out.segments) == n_segments and out.diagnostics.unit_fallback == fallback


def test_a_repaired_answer_is_not_a_unit_fallback() -> None:
    out = segment_with_retries(ask_with(lite_json((1, 6))), MESSAGES, n=N, answer_model=LiteAnswer,
                               sentence_words=WORDS, max_fallback_words=20, max_retries=0, fallback="whole_unit")
    assert [s.span for s in out.segments] == [(1, 10)]
    assert (out.diagnostics.fallback, out.diagnostics.unit_fallback) == ("repair", None)
    assert fallback_category(out.diagnostics.to_dict()) == "repair"


def test_unknown_fallback_is_refused() -> None:
    with pytest.raises(ValueError, match="fallback must be one of"):
        segment_with_retries(ask_with(lite_json((1, 10))), MESSAGES, n=N, answer_model=LiteAnswer,
                             sentence_words=WORDS, max_fallback_words=20, fallback="chunks", max_retries=2)


def test_fallback_categories_read_old_and_new_diagnostics() -> None:
    assert fallback_category({"fallback": "none"}) == "none"
    assert fallback_category({"fallback": "whole_unit"}) == "pieces"  # written before unit_fallback existed
    assert fallback_category({"fallback": "whole_unit", "unit_fallback": "whole_unit"}) == "whole_unit"
    assert fallback_category({"fallback": "window_end"}) == "window_end"


# ------------------------------------------------------------------------------ the chunkers
@pytest.fixture
def doc(tmp_path: Path) -> Document:
    body = " ".join(f"The keeper lit lamp number {i} and watched the sea." for i in range(1, 31))
    path = tmp_path / "lamps.md"
    path.write_text(f"# Lamps\n\n## One\n\n{body}\n", encoding="utf-8")
    return prepare_document(path)


def test_shipped_method_configs_keep_an_unusable_unit_whole(doc: Document) -> None:
    from litseg.chunkers.build import build_chunker_from_config

    for name in ("litseg", "litseg_lite"):
        assert OmegaConf.load(REPO / "conf" / "method" / f"{name}.yaml").fallback == "whole_unit"
    method = {**OmegaConf.to_container(OmegaConf.load(REPO / "conf" / "method" / "litseg_lite.yaml")),
              "fallback_max_words": 20, "max_retries": 0}
    unit = doc.units[0]
    whole = build_chunker_from_config(method, llm={"backend": "scripted", "answers": ["nope"]},
                                      prompt=PROMPT).chunk_unit(doc, unit)
    assert len(whole.chunks) == 1 and whole.chunks[0].main_ids == list(range(1, unit.n_sentences + 1))
    assert whole.diagnostics["unit_fallback"] == "whole_unit"
    pieces = build_chunker_from_config({**method, "fallback": "pieces"}, llm={"backend": "scripted", "answers": ["nope"]},
                                       prompt=PROMPT).chunk_unit(doc, unit)
    assert len(pieces.chunks) > 1 and pieces.diagnostics["unit_fallback"] == "pieces"


def test_a_unit_that_raises_follows_the_fallback_too(doc: Document) -> None:
    def boom(request):
        raise RuntimeError("replay miss")

    unit = doc.units[0]
    res = LitSegLiteChunker(ScriptedChatModel(boom), PROMPT, fallback="whole_unit",
                            fallback_max_words=20).chunk_unit(doc, unit)
    assert res.error and len(res.chunks) == 1 and fallback_category(res.diagnostics) == "whole_unit"
    res = LitSegLiteChunker(ScriptedChatModel(boom), PROMPT, fallback="pieces",
                            fallback_max_words=20).chunk_unit(doc, unit)
    assert len(res.chunks) > 1 and fallback_category(res.diagnostics) == "pieces"


# ------------------------------------------------------------------------------ the report
def scripted_lite(fallback: str) -> dict:
    """A LitSeg-Lite chunker entry whose model answers the first unit, then nothing readable."""
    replies = [lite_json((1, 2), (3, 4)), "{broken", "{broken", "{broken", "{broken", "{broken"]
    return {**OmegaConf.to_container(OmegaConf.load(REPO / "conf" / "method" / "litseg_lite.yaml")),
            "max_retries": 0, "fallback": fallback, "fallback_max_words": 20, "workers": 1,
            "llm": {"backend": "scripted", "answers": replies}, "prompt": PROMPT}


def test_every_report_row_shows_its_fallback_shares(tmp_path: Path) -> None:
    from litseg.rag.evaluation.sources import benchmark_sources, read_books
    from litseg.segmentation.preprocess import prepare_document
    from litseg.rag.report import FALLBACK_HEADER, main_table

    cfg = eval_cfg(chunkers={"recursive": CHUNKERS["recursive"], "lite_whole": scripted_lite("whole_unit"),
                             "lite_pieces": scripted_lite("pieces")})
    res = run(tmp_path, cfg)
    by_label = {r.label: r for r in res.results}
    units = sum(len(d.units) for d in read_books(benchmark_sources(synthetic_benchmark(), prepare_document)).values())
    assert units >= 2
    whole = by_label["lite_whole"].summary["fallbacks"]
    # the first unit's answer left sentences out (repaired), the others had none readable
    assert whole["units"] == units and whole["counts"] == {"repair": 1, "whole_unit": units - 1}
    assert whole["shares"] == {"repair": pytest.approx(1 / units), "pieces": 0.0,
                               "whole_unit": pytest.approx((units - 1) / units)}
    pieces = by_label["lite_pieces"].summary["fallbacks"]
    assert pieces["counts"] == {"repair": 1, "pieces": units - 1}
    assert by_label["recursive"].summary["fallbacks"] is None
    # whole units are one chunk each; pieces are more
    lite_chunks = {k: by_label[k].summary["chunks"]["n_chunks"] for k in ("lite_whole", "lite_pieces")}
    assert lite_chunks["lite_whole"] < lite_chunks["lite_pieces"]
    head, rows = main_table(res)
    col = head.index(FALLBACK_HEADER)
    cells = {row[0]: row[col] for row in rows}
    assert cells["recursive"] == "–"
    first, rest = f"{100 / units:.0f}%", f"{100 * (units - 1) / units:.0f}%"
    assert cells["lite_whole"] == f"{first} / 0% / {rest}" and cells["lite_pieces"] == f"{first} / {rest} / 0%"
    csv_head = (tmp_path / "results.csv").read_text().splitlines()[0]
    assert "fallback_whole_unit_share" in csv_head and "fallback_pieces_share" in csv_head
    assert FALLBACK_HEADER in (tmp_path / "results.md").read_text()


def test_annotate_run_folders_bring_their_fallbacks(tmp_path: Path) -> None:
    from functools import partial

    from litseg.chunkers.build import build_chunker
    from litseg.annotation.annotate import annotate
    from litseg.rag.evaluation.run import export_texts

    bench = synthetic_benchmark()
    texts = export_texts(bench, tmp_path / "texts")
    run_dir = tmp_path / "lite_run"
    llm = ScriptedChatModel(["{broken"], cycle=True)
    chunker = build_chunker("litseg_lite", llm=llm, prompt=PROMPT, max_retries=0, fallback="whole_unit")
    annotate(inputs=sorted(texts), chunker=chunker, out_dir=run_dir, prepare=partial(prepare_document, max_words=2000),
             progress=False)
    n_units = len((run_dir / "diagnostics.jsonl").read_text().splitlines())
    res = run(tmp_path / "out", eval_cfg(chunkers={"annotated": {"chunks": str(run_dir)}}), benchmark=bench)
    fb = res.results[0].summary["fallbacks"]
    assert fb["units"] == n_units > 0 and fb["shares"]["whole_unit"] == 1.0
