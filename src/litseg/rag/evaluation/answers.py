"""Generation and judging on the sampled questions: every chunker's ranking packed into the same
character budget, answered by the generator and rated by the judge."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

from litseg.rag.benchmarks.records import Benchmark
from litseg.rag.evaluation.components import Components
from litseg.rag.results import EvalSettings
from litseg.segmentation.types import Chunk
from litseg.rag.context_budget import ContextBudget, summarize_packs
from litseg.rag.generate import AnswerInput
from litseg.rag.judge import summarize
from litseg.rag.metrics import GENERATION_METRICS


def generate_and_judge(rows: list[dict[str, Any]], rankings: Mapping[str, list[Any]], chunks: Sequence[Chunk],
                       bench: Benchmark, comp: Components, settings: EvalSettings, qids: set[str]
                       ) -> dict[str, Any]:
    titles: defaultdict[str, str] = defaultdict(str, {b.book_id: b.title for b in bench.books})
    chosen = [r for r in rows if r["qid"] in qids]
    # One character budget for every chunker; generator and judge read the same passages.
    budget = comp.context_budget if comp.context_budget is not None else ContextBudget()
    packs = {r["qid"]: budget.pack_ranking(rankings.get(r["qid"], []), chunks) for r in chosen}
    for r in chosen:
        r.update(packs[r["qid"]].row_fields())

    def refs(qid: str) -> list[str]:
        return packs[qid].passages

    out: dict[str, Any] = {"n_questions": len(chosen), "context": summarize_packs(list(packs.values()), budget)}
    answers: dict[str, str] = {}
    if comp.generator is not None:
        items = [AnswerInput(r["qid"], titles[r["book_id"]], r["question"], refs(r["qid"])) for r in chosen]
        generated = comp.generator.answer(items, progress=settings.progress)
        failed = 0
        for r, g in zip(chosen, generated):
            r["answer"] = g.text
            r["answer_error"] = g.error
            failed += g.error is not None
            answers[r["qid"]] = g.text
            for m, fn in GENERATION_METRICS.items():
                r[m] = None if g.error else fn(g.text, r["answers"])
        out["generation_failures"] = failed
        out["generation_failure_rate"] = failed / len(chosen) if chosen else 0.0
        out["completion_tokens"] = sum(g.completion_tokens for g in generated)
    if comp.judge is not None:
        ctx = ["\n\n".join(refs(r["qid"])) for r in chosen]
        cr = comp.judge.context_relevance([r["question"] for r in chosen], ctx, progress=settings.progress)
        for r, s in zip(chosen, cr):
            r["context_relevance"] = s.score
            r["context_relevance_ratings"] = s.ratings
        out["context_relevance"] = summarize(cr)
        if comp.generator is not None:
            with_answer = [r for r in chosen if r.get("answer_error") is None]
            aa = comp.judge.answer_accuracy([r["question"] for r in with_answer], [r["answer"] for r in with_answer],
                                            [r["answers"] for r in with_answer], progress=settings.progress)
            for r, s in zip(with_answer, aa):
                r["answer_accuracy"] = s.score
                r["answer_accuracy_ratings"] = s.ratings
            out["answer_accuracy"] = summarize(aa)
            out["answer_accuracy"]["not_judged_no_answer"] = len(chosen) - len(with_answer)
    return out
