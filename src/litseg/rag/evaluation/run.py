"""A whole evaluation from a config: the suite's benchmark, the chunkers, the shared components,
the scores and the report; :func:`evaluate_task` is what ``evaluate.py`` runs."""

from __future__ import annotations

import logging
import math
import random
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from litseg.annotation.entry import document_reader
from litseg.annotation.word_cap import resolve_word_cap
from litseg.rag.benchmarks import load_benchmark_from_args
from litseg.rag.config import (DATA_BASE_DIRS, DEFAULT_CONF_DIR, EvaluateConfig, SuiteConfig, complete_config,
                               evaluate_config, python_suite)
from litseg.rag.benchmarks.records import Benchmark, Question
from litseg.rag.evaluation.aggregate import pairwise_table
from litseg.rag.evaluation.components import Components, build_components, component_identity
from litseg.rag.results import ChunkerResult, EvalSettings, EvaluationResult
from litseg.rag.evaluation.scoring import evaluate_chunkset, questions_with_text
from litseg.rag.evaluation.sources import (ChunkerRuns, benchmark_sources, build_chunkset, read_books,
                                           resolve_chunkers)
from litseg.rag.stats import few_books_warning
from litseg.segmentation.types import Document
from litseg.utils.config import from_dict
from litseg.rag.ablations import find_student_runs, student_chunkers, write_ablation_table
from litseg.rag.derived_chunks import ChunkSetBuilder
from litseg.rag.report import main_table, markdown_table, write_report
from litseg.run_result import FAILED_EXIT, RunResult
from litseg.utils.task import start_task

log = logging.getLogger(__name__)

#: The folder of the run folder that holds one annotation run folder per chunker (chunks/ holds
#: the report's chunk files).
CHUNKER_RUNS = "chunker_runs"


def select_questions(bench: Benchmark, docs: Mapping[str, Document], max_questions: int | None, seed: int
                     ) -> list[Question]:
    qs = questions_with_text(bench, docs)
    if max_questions is not None and max_questions < len(qs):
        keep = set(random.Random(seed).sample(range(len(qs)), max_questions))
        qs = [q for i, q in enumerate(qs) if i in keep]
    return qs


def limit_books(bench: Benchmark, max_books: int | None) -> Benchmark:
    if max_books is None or max_books >= len(bench.books):
        return bench
    books = bench.books[:max_books]
    keep = {b.book_id for b in books}
    return Benchmark(name=bench.name, books=books, questions=[q for q in bench.questions if q.book_id in keep],
                     warnings=bench.warnings, meta={**bench.meta, "max_books": max_books})


def load_suite(suite: SuiteConfig | Mapping[str, Any], base_dirs: Sequence[Path] = DATA_BASE_DIRS) -> Benchmark:
    """The suite's benchmark: the registered loader ``suite.loader`` called with ``suite.args``
    (the loader says which of its arguments are paths: those are resolved against ``base_dirs``
    and must exist), then ``max_books`` applied."""
    if not isinstance(suite, SuiteConfig):  # a suite written in Python: what it leaves out is unset
        suite = from_dict(SuiteConfig, python_suite(suite), "suite")
    if not suite.loader:
        raise ValueError("the suite config needs `loader` (a registered benchmark: fairytaleqa, gutenqa, ...)")
    bench = load_benchmark_from_args(suite.loader, suite.args, base_dirs=base_dirs, suite_name=suite.name)
    return limit_books(bench, suite.max_books)


def generation_sample(questions: Sequence[Question], comp: Components, max_questions: int | None, seed: int
                      ) -> set[str]:
    """The qids answered and judged (the same seeded sample for every chunker); none without a
    generator or judge."""
    if comp.generator is None and comp.judge is None:
        return set()
    pool = [q.qid for q in questions]
    if max_questions is None or max_questions >= len(pool):
        return set(pool)
    return set(random.Random(seed + 1).sample(pool, max_questions))


def run_evaluation(cfg: Any, out_dir: Path | None = None, *, benchmark: Benchmark | None = None,
                   components: Components | None = None, conf_dir: Path = DEFAULT_CONF_DIR) -> EvaluationResult:
    """Run a whole evaluation from a config (composed, or a partial mapping completed from
    ``conf/evaluate.yaml``) and write its report to ``out_dir``. ``benchmark``/``components``
    replace what the config would build (tests pass small ones)."""
    t_start = time.perf_counter()
    c = from_dict(EvaluateConfig, complete_config(cfg, conf_dir))
    settings = EvalSettings.from_config(c.metrics, c.progress)
    bench = benchmark if benchmark is not None else load_suite(c.suite)
    for w in bench.warnings[:20]:
        log.warning("%s: %s", bench.name, w)
    students, chunkers = with_student_chunkers(c, conf_dir)
    specs = resolve_chunkers(chunkers, c.chunk_files, conf_dir)
    if c.preprocess is None:
        raise ValueError("no preprocess config: evaluate.yaml composes one (preprocess=default)")
    prep = c.preprocess
    # The books as every chunker's annotation run reads them (with max_words: auto, each chunker
    # works out its own cap; these use the cap of a chunker without a chat model).
    docs = read_books(benchmark_sources(bench, document_reader(prep, resolve_word_cap(prep))))
    questions = select_questions(bench, docs, c.suite.max_questions, settings.seed)
    if not questions:
        raise ValueError(f"{bench.name}: no questions on books with text")
    comp = components if components is not None else build_components(c)
    gen_qids = generation_sample(questions, comp, c.generation.max_questions, settings.seed)
    groups = {"llm": c.llm, "prompt": c.prompt, "feedback": c.feedback}
    try:
        with tempfile.TemporaryDirectory(prefix="litseg-chunks-") as scratch:
            # Each chunker's annotation run folder: under the run folder, where a rerun of the
            # same command resumes it; in a scratch folder for a run without one.
            runs = ChunkerRuns(Path(out_dir) / CHUNKER_RUNS if out_dir is not None else Path(scratch), prep, groups,
                               c.chunking.window_units, settings.progress)
            results, failed = _evaluate_specs(specs, bench, docs, questions, comp, settings, gen_qids, runs)
    finally:
        if components is None:
            comp.store.close()
    pair_metrics = list(c.pairwise_metrics or [f"mrr@{settings.mrr_k}", f"evidence@{settings.budgets[0]}"])
    pairwise = pairwise_table(results, pair_metrics, settings) if len(results) > 1 else []
    result = EvaluationResult(suite=c.suite.name or bench.name, benchmark=bench.summary(), results=results,
                              pairwise=pairwise, settings=settings, wall_seconds=time.perf_counter() - t_start,
                              meta={"components": component_identity(comp), "questions_evaluated": len(questions),
                                    "generation_questions": len(gen_qids), "books_prepared": len(docs),
                                    "units": sum(len(d.units) for d in docs.values()),
                                    "failed_chunkers": failed})
    if out_dir is not None:
        _write(result, students, c, Path(out_dir))
    return result


def _evaluate_specs(specs: Sequence[Any], bench: Benchmark, docs: Mapping[str, Document],
                    questions: Sequence[Question], comp: Components, settings: EvalSettings, gen_qids: set[str],
                    runs: ChunkerRuns) -> tuple[list[ChunkerResult], dict[str, Any]]:
    """The scored chunkers, and the chunkers whose annotation run failed in part (label -> failed
    units and books, run folder): scored on the chunks they have when they have any."""
    chunk_sets = ChunkSetBuilder(build_chunkset)  # a `+merge` row reuses its base row's chunks
    results: list[ChunkerResult] = []
    failed: dict[str, Any] = {}
    for spec in specs:
        log.info("evaluating %s (%s)", spec.label, spec.kind)
        cs = chunk_sets(spec, bench, docs, runs=runs)
        if cs.run_failures is not None:
            failed[spec.label] = cs.run_failures
            log.error("chunker %s: %d unit(s) and %d book(s) failed (listed in %s/failures.jsonl; a rerun of this "
                      "command tries them again)", spec.label, cs.run_failures["units_failed"],
                      cs.run_failures["books_failed"], cs.run_failures["run_dir"])
        if not cs.chunks:
            if cs.run_failures is not None:
                continue  # nothing to score; the run reports the chunker as failed
            raise ValueError(f"chunker {spec.label!r} produced no chunks")
        results.append(evaluate_chunkset(cs, bench, docs, questions, comp, settings, generation_qids=gen_qids))
    return results, failed


def _write(result: EvaluationResult, students: Any, c: EvaluateConfig, out_dir: Path) -> None:
    from dataclasses import asdict

    write_report(result, out_dir, c.report, logger_cfg=c.logger, config=asdict(c))
    if students is not None:
        write_ablation_table(students, result, out_dir, logger_cfg=c.logger)


def with_student_chunkers(c: EvaluateConfig, conf_dir: Path = DEFAULT_CONF_DIR) -> tuple[Any, Any]:
    """``(student runs, chunkers)``: with ``students=`` (train.py run or sweep folders) each
    finished run joins ``chunkers`` as a LitSeg-Lite entry with its own model, adapter and prompt
    (:mod:`litseg.rag.ablations`); without it, ``(None, chunkers)`` unchanged."""
    chunkers = c.chunkers
    if not c.students:
        return None, chunkers
    runs = find_student_runs(c.students)
    entries = student_chunkers(runs, method=c.student.method, backend=c.student.backend, llm=c.student.llm,
                               conf_dir=conf_dir)
    if isinstance(chunkers, (list, tuple)):
        return runs, [*chunkers, *({"label": k, **v} for k, v in entries.items())]
    return runs, {**dict(chunkers or {}), **entries}


def export_texts(bench: Benchmark, out_dir: Path) -> list[Path]:
    """Write each book's text to ``<out_dir>/<book_id>.txt`` exactly (no newline translation),
    so that ``annotate.py`` can chunk the very text the benchmark's spans refer to; its run
    folder then evaluates with ``+chunkers.NAME={chunks: RUN_DIR}``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for b in bench.books:
        if not b.has_text:
            continue
        p = out_dir / f"{b.book_id}.txt"
        with p.open("w", encoding="utf-8", newline="") as fh:
            fh.write(b.load_text())
        paths.append(p)
    return paths


def evaluate_task(cfg: Any, out_dir: Path | None = None) -> RunResult:
    """What ``evaluate.py`` runs: the evaluation (or the text export) in the task shell, a printed
    summary, and the objective for sweepers (NaN, with a warning, when the run did not produce it;
    NaN when a chunker's units or books failed, which is :data:`~litseg.run_result.FAILED_EXIT`)."""
    settings = evaluate_config(cfg)
    if settings.export_texts:
        return RunResult(metric=float(_export(settings)), run_dir=settings.export_texts)
    task = start_task("evaluate", cfg, out_dir, fallback="outputs/evaluate")
    result = run_evaluation(cfg, task.run_dir)
    head, rows = main_table(result)
    print(markdown_table(head, rows))
    few = few_books_warning(int(result.meta["books_prepared"]))
    if few:
        print(f"warning: {few}")
    print(f"wall time {result.wall_seconds:.0f} s; report: {task.run_dir / 'results.md'}")
    objective = settings.objective
    value = result.metric(objective.metric, objective.chunker) if objective.metric else math.nan
    if objective.metric and math.isnan(value):
        log.warning("objective %s was not computed in this run (no gold evidence, or generation/judge off); "
                    "returning NaN", objective.metric)
    failed = result.meta["failed_chunkers"]
    summary = {"failed_chunkers": failed}
    value = task.finish(summary, math.nan if failed else value)
    if not failed:
        return RunResult(metric=value, run_dir=task.run_dir, summary=summary)
    _report_failures(failed)
    return RunResult(metric=value, run_dir=task.run_dir, exit_code=FAILED_EXIT,
                     reason=f"chunker(s) {', '.join(failed)} failed", summary=summary)


def _report_failures(failed: Mapping[str, Any]) -> None:
    """What failed, on stderr: a chunker with failed units is no result to compare."""
    for label, why in failed.items():
        print(f"error: chunker {label} failed: {why['units_failed']} unit(s), {why['books_failed']} book(s) "
              f"(no chunks for them; errors in {why['run_dir']}/failures.jsonl); rerun this command with the same "
              "hydra.run.dir to try them again", file=sys.stderr, flush=True)


def _export(settings: EvaluateConfig) -> int:
    out = settings.export_texts
    bench = load_suite(settings.suite)
    paths = export_texts(bench, Path(out))
    print(f"wrote {len(paths)} book texts of {bench.name} to {out}; chunk them with\n"
          f"  python annotate.py input='{out}/*.txt' method=NAME hydra.run.dir=RUN\n"
          f"and evaluate with  python evaluate.py suite={settings.suite.name} '+chunkers.NAME={{chunks: RUN}}'")
    return len(paths)
