"""The typed settings of evaluate.py (litseg.rag.config): defaults read from the YAML only, partial
configs from Python completed from conf/evaluate.yaml, method configs composed by Hydra, and the
plug-in registries of the evaluation (benchmarks, vector stores)."""

from __future__ import annotations

import csv
import dataclasses
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from omegaconf import OmegaConf

from litseg.rag.config import (
    DEFAULT_CONF_DIR,
    EvaluateConfig,
    RetrievalConfig,
    SuiteConfig,
    complete_config,
    evaluate_config,
    method_config,
    python_suite,
)
from litseg.rag.results import EvalSettings
from litseg.utils.config import ConfigError, from_dict


def _evaluate_yaml() -> dict:
    with initialize_config_dir(config_dir=str(DEFAULT_CONF_DIR), version_base="1.3"):
        cfg = compose(config_name="evaluate")
    return OmegaConf.to_container(cfg, resolve=True)  # type: ignore[return-value]


def _drift(typed: object, path: str = "") -> list[str]:
    """Fields whose dataclass default differs from the typed YAML value (recursively)."""
    out = []
    for f in dataclasses.fields(typed):  # type: ignore[arg-type]
        value = getattr(typed, f.name)
        if dataclasses.is_dataclass(value):
            out += _drift(value, f"{path}{f.name}.")
        elif f.default is not dataclasses.MISSING and f.default != value and f.name != "prompt":
            out.append(f"{path}{f.name}: code {f.default!r} vs YAML {value!r}")
    return out


def test_the_whole_evaluate_yaml_is_typed_and_defaults_in_code_equal_it() -> None:
    data = _evaluate_yaml()
    typed = from_dict(EvaluateConfig, data)
    assert typed.generation.max_tokens == 48 and typed.generation.batch_size == 8 and typed.judge.batch_size == 8
    assert not _drift(typed.retrieval), _drift(typed.retrieval)
    # EvalSettings() (the scoring settings tests build by hand) equals the YAML's metrics section
    assert EvalSettings.from_config(typed.metrics, typed.progress) == EvalSettings()
    from litseg.rag.context_budget import ContextBudget

    assert ContextBudget.from_config(typed.answer_context) == ContextBudget()
    # so do the generator's and the judge's own defaults (the class used on its own)
    import inspect

    from litseg.rag.generate import AnswerGenerator
    from litseg.rag.judge import RagJudge

    gen = inspect.signature(AnswerGenerator).parameters
    assert (gen["max_tokens"].default, gen["batch_size"].default) == (typed.generation.max_tokens,
                                                                     typed.generation.batch_size)
    judge = inspect.signature(RagJudge).parameters
    assert (judge["max_tokens"].default, judge["batch_size"].default, judge["constrained"].default) == (
        typed.judge.max_tokens, typed.judge.batch_size, typed.judge.constrained)


def test_a_partial_config_is_completed_from_the_yaml_and_a_misspelt_key_fails() -> None:
    c = evaluate_config({"suite": {"name": "x", "objective": "f1"}, "generation": {"enabled": True}})
    assert c.generation.enabled and c.generation.max_tokens == 48 and c.generation.batch_size == 8
    assert c.judge.batch_size == 8 and c.answer_context.text == c.metrics.index_text
    assert c.objective.metric == "f1" and c.generation.llm is not None
    # a group given inside a section replaces the default one, it is not merged into it
    own = complete_config({"suite": {"name": "x"}, "generation": {"llm": {"backend": "openai", "model": "m"}}})
    assert own["generation"]["llm"] == {"backend": "openai", "model": "m"}
    with pytest.raises(ConfigError, match="generation.max_tokenz"):
        evaluate_config({"suite": {"name": "x"}, "generation": {"max_tokenz": 3}})
    with pytest.raises(ConfigError, match="retrieval.mode"):
        evaluate_config({"suite": {"name": "x"}, "retrieval": {"mode": "telepathy"}})


def test_chunkers_entries_need_a_chunker_a_file_or_a_base_row() -> None:
    with pytest.raises(ConfigError, match="chunkers.mine"):
        evaluate_config({"suite": {"name": "x"}, "chunkers": {"mine": {"chunk_size": 3}}})
    c = evaluate_config({"suite": {"name": "x"}, "chunkers": {"a": {"name": "token"}, "b": {"chunks": "f.jsonl"},
                                                              "c": {"from": "a", "merge": {"target": 9}}, "d": None}})
    assert set(c.chunkers) == {"a", "b", "c", "d"}  # type: ignore[arg-type]


def test_method_config_is_composed_by_hydra_also_inside_a_running_app() -> None:
    lumber = method_config("lumberchunker")
    assert lumber["name"] == "lumberchunker" and isinstance(lumber["template"], dict)  # /prompt@template
    with initialize_config_dir(config_dir=str(DEFAULT_CONF_DIR), version_base="1.3"):
        outer = GlobalHydra.instance().hydra
        assert method_config("token")["name"] == "token"
        assert GlobalHydra.instance().hydra is outer  # the app's own state is back
        compose(config_name="evaluate")
    with pytest.raises(ValueError, match="unknown chunker"):
        method_config("no_such_method")



def test_composing_another_folder_inside_a_running_app_is_refused(tmp_path: Path) -> None:
    """Inside an app, compose reads the app's configs: another folder would be read silently wrong."""
    (tmp_path / "method").mkdir()
    (tmp_path / "method" / "token.yaml").write_text("name: token\n", encoding="utf-8")
    with initialize_config_dir(config_dir=str(DEFAULT_CONF_DIR), version_base="1.3"):
        with pytest.raises(RuntimeError, match="inside a running Hydra app"):
            method_config("token", tmp_path)
    assert method_config("token", tmp_path) == {"name": "token"}  # no app running: that folder


# ------------------------------------------------------------------------------- registries
def test_vector_stores_are_built_by_name_through_the_registry() -> None:
    from litseg.rag.config import StoreConfig, retrieval_part
    from litseg.rag.stores import STORES, VectorStore, build_store
    from litseg.utils.registry import UnknownPluginError

    assert {"qdrant", "qdrant_embedded", "qdrant_server"} <= set(STORES.names())
    store = build_store(retrieval_part(StoreConfig, "store", {"backend": "qdrant_embedded"}))
    try:
        assert isinstance(store, VectorStore) and store.location == ":memory:"
    finally:
        store.close()
    with pytest.raises(ValueError, match="http"):
        build_store(retrieval_part(StoreConfig, "store", {"backend": "qdrant_server", "location": ":memory:"}))
    with pytest.raises(UnknownPluginError, match="qdrant_embedded"):
        build_store(retrieval_part(StoreConfig, "store", {"backend": "faiss_in_my_dreams"}))
    server = from_dict(RetrievalConfig, _retrieval("qdrant_server"), "retrieval")
    assert server.store.backend == "qdrant_server"


def _retrieval(option: str) -> dict:
    with initialize_config_dir(config_dir=str(DEFAULT_CONF_DIR), version_base="1.3"):
        cfg = compose(config_name="evaluate", overrides=[f"retrieval={option}"])
    return OmegaConf.to_container(cfg.retrieval, resolve=False)  # type: ignore[return-value]


def test_benchmarks_are_registered_by_name_with_their_path_arguments(tmp_path: Path) -> None:
    from litseg.rag.benchmarks import BENCHMARKS
    from litseg.rag.evaluation.run import load_suite

    assert {"fairytaleqa", "gutenqa", "literaryqa", "narrativeqa"} <= set(BENCHMARKS.names())
    assert BENCHMARKS.get("gutenqa").path_args == ("questions", "paragraphs")  # type: ignore[attr-defined]
    with pytest.raises(FileNotFoundError, match="path="):
        load_suite({"name": "s", "loader": "fairytaleqa", "args": {"path": str(tmp_path / "absent")}})
    with pytest.raises(ValueError, match="unknown benchmark"):
        load_suite({"name": "s", "loader": "quizbowl", "args": {}})


def test_a_suite_maps_the_columns_of_its_question_table(tmp_path: Path) -> None:
    """A suite YAML with a `columns:` mapping loads through the QA-table loader."""
    from litseg.rag.evaluation.run import load_suite

    table = tmp_path / "quiz.csv"
    with table.open("w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(["story", "q", "gold_a", "gold_b", "body"])
        w.writerow(["s1", "Who came?", "Ann", "ann", "Ann came home."])
        w.writerow(["s1", "Where?", "home", "", "Ann came home."])
        w.writerow(["s2", "What?", "a cat", "", "There was a cat."])
    suite_yaml = tmp_path / "quiz.yaml"
    suite_yaml.write_text(f"""
name: quiz
loader: narrativeqa
args:
  path: {table}
  name: quiz
  columns:
    book_id: story
    question: q
    answers: [gold_a, gold_b]
    split: null
    text: body
max_books: 1
max_questions: null
answer_style: phrase
objective: f1
""", encoding="utf-8")
    suite = OmegaConf.to_container(OmegaConf.load(suite_yaml), resolve=True)
    bench = load_suite(suite)  # type: ignore[arg-type]
    assert bench.name == "quiz" and [b.book_id for b in bench.books] == ["s1"]
    assert [q.answers for q in bench.questions] == [["Ann", "ann"], ["home"]]
    assert bench.books[0].load_text() == "Ann came home."
    bad = dict(suite)  # type: ignore[arg-type]
    bad["args"] = {**bad["args"], "columns": {"book": "story"}}
    with pytest.raises(ConfigError, match="suite.args.columns.book"):
        load_suite(bad)  # type: ignore[arg-type]


def test_a_suite_file_writes_every_key_and_a_python_suite_leaves_the_rest_unset() -> None:
    """SuiteConfig has no defaults (each conf/suite file is the one home of its values); a suite
    written in Python names what it sets and python_suite leaves the rest unset."""
    with pytest.raises(ConfigError, match=r"missing setting\(s\) suite\.loader, suite\.args"):
        from_dict(SuiteConfig, {"name": "mine"}, "suite")
    suite = from_dict(SuiteConfig, python_suite({"name": "mine", "max_books": 2}), "suite")
    assert suite == SuiteConfig(name="mine", loader=None, args={}, max_books=2, max_questions=None,
                                answer_style="", objective=None)
    assert evaluate_config({"suite": {"name": "mine"}}).suite == dataclasses.replace(suite, max_books=None)
