"""evaluate.py runs every chunker through the annotation run (issue 21): one run folder per chunker
under the run folder's chunker_runs/, read back as a run folder; a failed unit is a failure
(listed, exit code 1), a rerun resumes what was finished, and ``preprocess.max_words: auto``
gives each chunker its own unit cap."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from omegaconf import OmegaConf

from litseg.chunkers.base import Chunker, MergeOptions, MethodConfig, UnitResult, register
from litseg.chunkers.recursive import RecursiveChunker
from litseg.rag.benchmarks.records import Benchmark, BenchmarkBook, Evidence, Question
from litseg.rag.evaluation.run import CHUNKER_RUNS
from litseg.run_result import FAILED_EXIT
from litseg.segmentation.types import Document, Unit
from litseg.utils.jsonl import read_jsonl
from tests.conftest import REPO
from tests.rag.test_rag_pipeline import CHUNKERS, eval_cfg, run, synthetic_benchmark
from tests.segmentation.test_fallback_shares import PROMPT, lite_json

LITE = OmegaConf.to_container(OmegaConf.load(REPO / "conf" / "method" / "litseg_lite.yaml"))


def scripted_lite(answers: list[str], **llm: Any) -> dict[str, Any]:
    """A LitSeg-Lite entry whose model gives ``answers`` in turn, then cannot answer at all."""
    return {**LITE, "max_retries": 0, "fallback": "whole_unit", "workers": 1,
            "llm": {"backend": "scripted", "answers": answers, **llm}, "prompt": PROMPT}


def units_of(run_dir: Path) -> int:
    return sum(int(row["n_units"]) for row in read_jsonl(run_dir / "documents.jsonl"))


# ------------------------------------------------------------------------ failures
def test_a_unit_the_model_fails_is_a_failure_of_the_evaluation(tmp_path: Path) -> None:
    cfg = eval_cfg(chunkers={"recursive": CHUNKERS["recursive"], "lite": scripted_lite([lite_json((1, 6))])})
    res = run(tmp_path, cfg)
    lite_dir = tmp_path / CHUNKER_RUNS / "lite"
    units = units_of(lite_dir)
    assert units >= 2
    failed = res.meta["failed_chunkers"]
    assert list(failed) == ["lite"] and failed["lite"]["units_failed"] == units - 1
    assert failed["lite"]["run_dir"] == str(lite_dir)
    # the failed units have no chunks (never a fallback that looks like an answer) and are listed
    assert len(read_jsonl(lite_dir / "failures.jsonl")) == units - 1
    by_label = {r.label: r for r in res.results}
    assert by_label["lite"].summary["unit_failures"] == units - 1
    assert by_label["recursive"].summary["unit_failures"] == 0
    assert json.loads((tmp_path / "results.json").read_text())["meta"]["failed_chunkers"] == failed


def test_evaluate_exits_1_and_says_which_chunker_failed(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    from litseg.rag.evaluation import run as run_module

    from litseg.rag.config import complete_config

    # a whole config, as Hydra composes it for evaluate.py
    cfg = OmegaConf.create(complete_config(eval_cfg(chunkers={"lite": scripted_lite([lite_json((1, 6))])})))
    monkeypatch.setattr(run_module, "load_suite", lambda suite: synthetic_benchmark())
    result = run_module.evaluate_task(cfg, tmp_path)
    assert (result.exit_code, result.run_dir) == (FAILED_EXIT, tmp_path) and FAILED_EXIT == 1
    assert math.isnan(result.metric) and result.reason == "chunker(s) lite failed"
    assert list(result.summary["failed_chunkers"]) == ["lite"]
    err = capsys.readouterr().err
    assert "error: chunker lite failed:" in err and "failures.jsonl" in err and "hydra.run.dir" in err


def test_a_chunker_whose_every_unit_failed_is_reported_not_scored(tmp_path: Path) -> None:
    # the model's only answer goes to a unit of another chunker row: none is left for this one
    cfg = eval_cfg(chunkers={"recursive": CHUNKERS["recursive"], "lite": scripted_lite(["{broken"])})
    cfg["chunkers"]["lite"]["llm"]["answers"] = ["{broken"]
    cfg["chunkers"]["lite"]["max_retries"] = 1  # the retry finds the script used up: the unit fails
    res = run(tmp_path, cfg)
    units = units_of(tmp_path / CHUNKER_RUNS / "lite")
    assert res.meta["failed_chunkers"]["lite"]["units_failed"] == units
    assert [r.label for r in res.results] == ["recursive"]


# -------------------------------------------------------------------------- resume
@dataclass(kw_only=True)
class StoppingConfig(MethodConfig):
    # A plug-in without a conf/method YAML holds its defaults in its config class.
    stop_after: int | None = None
    merge: MergeOptions | None = None


CALLS: list[tuple[str, str]] = []


class StoppingChunker(Chunker):
    """The recursive chunker, counting its units; killed (KeyboardInterrupt) after ``stop_after``."""

    name = "stopping_test"

    def __init__(self, stop_after: int | None) -> None:
        self.stop_after, self.inner = stop_after, RecursiveChunker(chunk_size=250)

    def chunk_unit(self, doc: Document, unit: Unit) -> UnitResult:
        if self.stop_after is not None and len(CALLS) >= self.stop_after:
            raise KeyboardInterrupt  # as a kill would: no unit after this one is committed
        CALLS.append((doc.book_id, unit.unit_id))
        return self.inner.chunk_unit(doc, unit)

    def fingerprint(self) -> dict[str, Any]:
        return {"name": self.name}  # stop_after is not part of the setup: a rerun resumes


@register("stopping_test", config=StoppingConfig)
def build_stopping(config: StoppingConfig, groups: Any) -> Chunker:
    return StoppingChunker(config.stop_after)


def test_a_killed_evaluation_resumes_with_the_finished_units(tmp_path: Path) -> None:
    CALLS.clear()
    with pytest.raises(KeyboardInterrupt):
        run(tmp_path, eval_cfg(chunkers={"mine": {"name": "stopping_test", "stop_after": 1}}))
    assert len(CALLS) == 1
    done = list(CALLS)
    CALLS.clear()
    res = run(tmp_path, eval_cfg(chunkers={"mine": {"name": "stopping_test"}}))
    units = units_of(tmp_path / CHUNKER_RUNS / "mine")
    assert units > 1 and len(CALLS) == units - 1 and not set(CALLS) & set(done)
    summary = json.loads((tmp_path / CHUNKER_RUNS / "mine" / "run_summary.json").read_text())
    assert summary["units_skipped"] == 1 and summary["units_total_in_dir"] == units
    # the same chunks as a run that was never stopped
    CALLS.clear()
    fresh = run(tmp_path / "fresh", eval_cfg(chunkers={"mine": {"name": "stopping_test"}}))
    assert len(CALLS) == units and not res.meta["failed_chunkers"]
    assert [r.summary["metrics"] for r in res.results] == [r.summary["metrics"] for r in fresh.results]


def test_a_rerun_tries_the_failed_units_again_and_reuses_the_others(tmp_path: Path) -> None:
    first = run(tmp_path, eval_cfg(chunkers={"lite": scripted_lite([lite_json((1, 6))])}))
    failed = first.meta["failed_chunkers"]["lite"]["units_failed"]
    # the model is back: exactly the failed units are asked again (more answers would stay unused)
    again = run(tmp_path, eval_cfg(chunkers={"lite": scripted_lite([lite_json((1, 6))] * failed)}))
    assert not again.meta["failed_chunkers"] and again.results[0].summary["unit_failures"] == 0
    summary = json.loads((tmp_path / CHUNKER_RUNS / "lite" / "run_summary.json").read_text())
    assert summary["units"] == failed and summary["units_skipped"] == units_of(tmp_path / CHUNKER_RUNS / "lite") - failed


# --------------------------------------------------------------------- max_words: auto
def long_benchmark() -> Benchmark:
    """One story of about 1,200 words in six paragraphs, and a question on its fourth."""
    paragraphs = [" ".join(f"Tobin carried the lantern {k} past the mill number {p} before the storm came."
                           for k in range(20)) for p in range(6)]
    text = "\n\n".join(paragraphs)
    start = text.index(paragraphs[3])
    question = Question(qid="q", book_id="long", question="Where did Tobin carry the lantern?", answers=["the mill"],
                        evidence=[Evidence("span", start, start + len(paragraphs[3]))])
    return Benchmark(name="long", books=[BenchmarkBook(book_id="long", title="Long", text=text)], questions=[question])


def test_max_words_auto_gives_each_chunker_its_own_unit_cap(tmp_path: Path) -> None:
    lite = {**scripted_lite(["{broken"] * 40, context_window=2500), "max_new_tokens": 200}
    cfg = eval_cfg(chunkers={"recursive": CHUNKERS["recursive"], "lite": lite}, preprocess={"max_words": "auto"})
    res = run(tmp_path, cfg, benchmark=long_benchmark())
    caps = {r.label: r.summary["config"]["word_cap"] for r in res.results}
    assert caps["recursive"]["mode"] == "auto_fallback" and caps["recursive"]["max_words"] == 2000
    assert caps["lite"]["mode"] == "auto" and caps["lite"]["context_window"] == 2500
    assert 100 <= caps["lite"]["max_words"] < 1200
    runs = tmp_path / CHUNKER_RUNS
    assert units_of(runs / "recursive") == 1 and units_of(runs / "lite") >= 2  # the story cut under the cap
    setup = json.loads((runs / "lite" / "setup.json").read_text())
    assert setup["preprocess"]["max_words"] == caps["lite"]["max_words"]
    assert not res.meta["failed_chunkers"]
