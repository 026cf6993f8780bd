"""evaluate.py and its Hydra configs: composition of suites and chunker sets, the list form of
``chunkers``, sweeps, and runs on the shared FairytaleQA data (skipped without ../shared)."""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from tests.conftest import REPO, shared_data_dir

CONF = REPO / "conf"
FAST = ["retrieval.embedder.model=hashing", "progress=false", "metrics.n_resamples=200", "report.plots=false"]


def composed(*overrides: str):
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        return compose(config_name="evaluate", overrides=list(overrides))


def test_chunkers_compose_as_a_list_of_method_names_or_a_named_set() -> None:
    cfg = composed("chunkers=[recursive,semantic,litseg_lite]")
    assert list(cfg.chunkers) == ["recursive", "semantic", "litseg_lite"]
    # the parameters are those of conf/method/<name>.yaml, shared with annotate.py
    method_file = OmegaConf.load(CONF / "method" / "recursive.yaml")
    assert OmegaConf.to_container(cfg.chunkers.recursive) == OmegaConf.to_container(method_file)
    assert list(composed("chunkers=baselines").chunkers) == ["token", "recursive", "semantic"]
    assert list(composed().chunkers) == ["token", "recursive", "semantic"]
    cfg = composed("chunkers=[recursive]", "chunkers.recursive.chunk_size=500", "+chunkers.mine={chunks: run_dir}")
    assert cfg.chunkers.recursive.chunk_size == 500 and cfg.chunkers.mine.chunks == "run_dir"


def test_every_method_can_be_evaluated_by_name() -> None:
    from litseg.rag.config import NOT_CHUNKERS
    from litseg.rag.evaluation.sources import resolve_chunkers

    # A chunker is one module and one conf/method file: no conf/chunkers file mirrors a method
    # (register_method_chunkers makes each an option). `imported` replays the books its records
    # name; evaluate its run folder as a chunk file instead (+chunkers.NAME={chunks: RUN}).
    methods = sorted(p.stem for p in (CONF / "method").glob("*.yaml") if p.stem not in NOT_CHUNKERS)
    mirrors = [m for m in methods if (CONF / "chunkers" / f"{m}.yaml").is_file()
               and OmegaConf.load(CONF / "chunkers" / f"{m}.yaml").get("defaults") == [{"/method@_here_": m}]]
    assert not mirrors, f"conf/chunkers/<name>.yaml only repeats conf/method/<name>.yaml: delete {mirrors}"
    cfg = composed(f"chunkers=[{','.join(methods)}]")
    specs = resolve_chunkers(cfg.chunkers)
    assert [s.label for s in specs] == methods and all(s.kind == "method" for s in specs)
    assert [s.method["name"] for s in specs] == methods


@pytest.mark.parametrize("suite", sorted(p.stem for p in (CONF / "suite").glob("*.yaml")))
def test_suites_compose_and_name_a_loader(suite: str) -> None:
    from litseg.rag.benchmarks import BENCHMARKS
    from litseg.rag.results import EvalSettings, retrieval_metric_names

    cfg = composed(f"suite={suite}")
    assert cfg.suite.name == suite and cfg.suite.loader in BENCHMARKS
    known = set(retrieval_metric_names(EvalSettings())) | {"em", "f1", "rougeL", "meteor", "context_relevance",
                                                             "answer_accuracy"}
    assert cfg.objective.metric in known
    assert cfg.generation.prompt.name == "rag_answer" and cfg.judge.prompt.name == "rag_judge"
    assert cfg.suite.answer_style in cfg.generation.prompt.answer_styles


@pytest.mark.parametrize("group", ["retrieval", "logger", "chunkers"])
def test_group_options_compose(group: str) -> None:
    for option in sorted(p.stem for p in (CONF / group).glob("*.yaml")):
        if group == "chunkers":
            cfg = composed(f"chunkers={option}")
            assert len(cfg.chunkers) >= 1
        else:
            cfg = composed(f"{group}={option}")
            assert cfg[group] is not None


def test_shipped_configs_say_how_to_launch_them() -> None:
    files = [CONF / "evaluate.yaml", CONF / "prompt" / "rag_answer.yaml", CONF / "prompt" / "rag_judge.yaml"]
    for group in ("suite", "chunkers", "retrieval", "logger"):
        files += sorted((CONF / group).glob("*.yaml"))
    for f in files:
        head = [ln for ln in f.read_text(encoding="utf-8").splitlines()[:4] if not ln.startswith("# @package")]
        assert head and head[0].startswith("# "), f
        assert any("python " in ln for ln in head[:3]), f"{f}: first lines should show a command"


def test_rag_prompts_render() -> None:
    cfg = composed()
    ans = OmegaConf.to_container(cfg.generation.prompt, resolve=True)
    text = ans["system"].format(answer_style="x") + ans["user"].format(title="t", question="q", references="r")
    assert "{" not in text
    judge = OmegaConf.to_container(cfg.judge.prompt, resolve=True)
    for t in judge["context_relevance"]:
        assert '{"rating"' in t["system"].format(question="q", context="c")
    for t in judge["answer_accuracy"]:
        t["user"].format(question="q", answer="a", references="r")


def test_smoke_suite_runs_through_the_hydra_entry(tmp_path: Path) -> None:
    shared_data_dir()
    from litseg.rag.evaluation.run import evaluate_task

    cfg = composed("suite=smoke", "chunkers=[recursive,sections]", *FAST)
    result = evaluate_task(cfg, tmp_path)
    assert (result.exit_code, result.run_dir) == (0, tmp_path)
    value = result.metric
    data = json.loads((tmp_path / "results.json").read_text())
    assert [r["label"] for r in data["results"]] == ["recursive", "sections"]
    assert value == data["results"][0]["metrics"]["evidence@1500"]["estimate"]
    assert 0.0 < value <= 1.0
    sections = data["results"][1]
    assert sections["n_questions"] == 40 and sections["segment_quality"]["share_on_sentence_breaks"] == 1.0
    assert (tmp_path / "config.yaml").is_file() and (tmp_path / "per_question" / "sections.jsonl").is_file()
    # objective of a metric this run could not compute
    cfg = composed("suite=smoke", "chunkers=[sections]", "objective.metric=f1", *FAST)
    assert math.isnan(evaluate_task(cfg, tmp_path / "f1").metric)


def test_the_documented_smoke_check_loads_no_embedding_model_and_warns_of_few_books(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """The smoke command as docs/evaluation.md prints it: no embedding model is loaded, and the
    two books' intervals and p-values come with the few-books warning (terminal and results.md)."""
    shared_data_dir()
    import litseg.embeddings
    from litseg.rag.evaluation.run import evaluate_task
    from litseg.rag.report import metric_label

    doc = (REPO / "docs" / "evaluation.md").read_text(encoding="utf-8")
    [command] = re.findall(r"(?m)^python evaluate.py suite=smoke .*$", doc)
    overrides = [a.strip("'") for a in command.split()[2:]]
    assert "retrieval.embedder.model=hashing" in overrides

    def no_model(*args: object, **kwargs: object) -> None:
        raise AssertionError(f"the smoke check loaded an embedding model: {args}")

    monkeypatch.setattr(litseg.embeddings, "load_embedder", no_model)
    evaluate_task(composed(*overrides, "progress=false", "report.plots=false", "metrics.n_resamples=200"), tmp_path)
    printed = capsys.readouterr().out
    assert "warning: only 2 book(s) (fewer than 10)" in printed and "p-value can go below 0.5" in printed
    assert "**Warning: only 2 book(s)" in (tmp_path / "results.md").read_text(encoding="utf-8")
    assert metric_label("boundary_similarity") == "boundary similarity ↓ lower is better"
    assert metric_label("random_hit@1") == "random hit@1 (reference)" and metric_label("mrr@10") == "mrr@10"


def test_export_texts_for_annotate(tmp_path: Path) -> None:
    shared_data_dir()
    from litseg.rag.evaluation.run import evaluate_task

    cfg = composed("suite=smoke", f"export_texts={tmp_path / 'texts'}")
    assert evaluate_task(cfg, tmp_path).metric == 2.0
    assert len(list((tmp_path / "texts").glob("*.txt"))) == 2


@pytest.mark.slow
def test_evaluate_py_command_line_sweep(tmp_path: Path) -> None:
    shared_data_dir()
    out = subprocess.run(
        [sys.executable, "evaluate.py", "-m", "suite=smoke", "chunkers=[recursive]",
         "chunkers.recursive.chunk_size=600,1500", *FAST, f"hydra.sweep.dir={tmp_path}"],
        cwd=REPO, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    runs = sorted(tmp_path.glob("*/results.json"))
    assert len(runs) == 2
    sizes = [json.loads(p.read_text())["results"][0]["chunks"]["chars"]["max"] for p in runs]
    assert sizes[0] <= 600 < sizes[1] <= 1500
