"""LLM-judged context relevance and answer accuracy, in the style of RAGAS' NVIDIA metrics.

Each metric has two differently worded judge templates (``conf/prompt/rag_judge.yaml``). Each
template asks for a rating of 0, 1 or 2; a question's score is the mean of the ratings it got,
divided by the top rating, so it lies in [0, 1]. When one template yields no readable rating
the other one alone gives the score (a partial failure); when neither does, the score is None
(a failure). Both kinds are counted and reported with the mean, which averages the questions
that have a score.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from litseg.chunkers.groups import PromptPair, RagJudgePrompt
from litseg.llm.base import ChatModel, ChatRequest
from litseg.rag.replies import MISSING, json_field

METRICS = ("context_relevance", "answer_accuracy")


@dataclass(slots=True)
class JudgeScore:
    score: float | None
    ratings: list[int | None]
    errors: list[str | None] = field(default_factory=list)

    @property
    def failed(self) -> bool:
        return self.score is None

    @property
    def partial(self) -> bool:
        return self.score is not None and any(r is None for r in self.ratings)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


_DIGIT = re.compile(r"(?<![\d.])(\d)(?![\d.])")


def parse_rating(text: str, allowed: Sequence[int] = (0, 1, 2)) -> int | None:
    """The rating in a judge reply: ``{"rating": n}`` (possibly inside other text), else a lone
    allowed digit when it is the only one in the reply. None when neither is found."""
    allowed_set = set(allowed)
    t = text.strip()
    rating = json_field(t, "rating")
    if rating is not MISSING:
        try:
            value = int(rating)
        except (TypeError, ValueError):
            return None
        return value if value in allowed_set and float(rating) == value else None
    m = re.search(r'"?rating"?\s*[:=]\s*"?(\d)', t, flags=re.IGNORECASE)
    if m:
        value = int(m.group(1))
        return value if value in allowed_set else None
    digits = [int(d) for d in _DIGIT.findall(t)]
    if len(digits) == 1 and digits[0] in allowed_set:
        return digits[0]
    return None


def rating_schema(allowed: Sequence[int]) -> dict[str, Any]:
    return {"type": "object", "properties": {"rating": {"type": "integer", "enum": list(allowed)}},
            "required": ["rating"], "additionalProperties": False}


class RagJudge:
    """Scores contexts and answers with an LLM judge (any backend of the LLM layer)."""

    # max_tokens, batch_size and constrained default to conf/evaluate.yaml's `judge` values (a test checks).
    def __init__(self, llm: ChatModel, prompt: RagJudgePrompt, *, max_tokens: int = 24,
                 max_context_chars: int | None = None, batch_size: int = 8, constrained: bool = True) -> None:
        if not isinstance(prompt, RagJudgePrompt):
            raise ValueError(f"judge prompt {getattr(prompt, 'name', prompt)!r} is no RAG judge prompt (with "
                             f"templates under {' and '.join(METRICS)}; conf/prompt/rag_judge.yaml)")
        for metric in METRICS:
            if not self._templates(prompt, metric):
                raise ValueError(f"judge prompt needs a list of templates under {metric!r}")
        self.llm = llm
        self.prompt = prompt
        self.ratings = list(prompt.ratings)
        if min(self.ratings) != 0 or len(self.ratings) < 2:
            raise ValueError(f"judge ratings must start at 0 and have at least two values, got {self.ratings}")
        self.top = max(self.ratings)
        self.max_tokens = max_tokens
        self.max_context_chars = max_context_chars
        self.batch_size = batch_size
        self.schema = rating_schema(self.ratings) if constrained else None

    @staticmethod
    def _templates(prompt: RagJudgePrompt, metric: str) -> list[PromptPair]:
        """The templates of one of METRICS (each a field of the judge prompt)."""
        return list(getattr(prompt, metric))

    def _request(self, template: PromptPair, **values: str) -> ChatRequest:
        return ChatRequest(messages=[{"role": "system", "content": template.system.format(**values).strip()},
                                     {"role": "user", "content": template.user.format(**values).strip()}],
                           json_schema=self.schema, max_tokens=self.max_tokens, temperature=0.0)

    def _run(self, metric: str, values: list[dict[str, str]], progress: bool) -> list[JudgeScore]:
        return self.rate(self._templates(self.prompt, metric), values, progress=progress, desc=f"judge {metric}")

    def rate(self, templates: Sequence[PromptPair], values: list[dict[str, str]], *,
             progress: bool = False, desc: str = "judge") -> list[JudgeScore]:
        """Ask every template about every item of ``values`` (the template fields); one score per
        item: the mean of its readable ratings over the top rating, or None."""
        from tqdm.auto import tqdm

        templates = list(templates)
        requests = [self._request(t, **v) for v in values for t in templates]
        completions = []
        for s in tqdm(range(0, len(requests), self.batch_size), desc=desc, unit="batch",
                      disable=not progress, dynamic_ncols=True):
            batch = requests[s:s + self.batch_size]
            got = self.llm.chat_batch(batch)
            if len(got) != len(batch):
                raise RuntimeError(f"judge backend returned {len(got)} answers for {len(batch)} requests")
            completions.extend(got)
        out = []
        k = len(templates)
        for i in range(len(values)):
            ratings: list[int | None] = []
            errors: list[str | None] = []
            for c in completions[i * k:(i + 1) * k]:
                r = None if c.error else parse_rating(c.text, self.ratings)
                ratings.append(r)
                errors.append(c.error or (None if r is not None else f"no rating in {c.text[:80]!r}"))
            got_r = [r for r in ratings if r is not None]
            score = sum(got_r) / len(got_r) / self.top if got_r else None
            out.append(JudgeScore(score, ratings, errors))
        return out

    def context_relevance(self, questions: Sequence[str], contexts: Sequence[str], progress: bool = False
                          ) -> list[JudgeScore]:
        if len(questions) != len(contexts):
            raise ValueError("one context per question")
        # The evaluation passes contexts already filled to its one budget (litseg.rag.context_budget);
        # max_context_chars (off by default) is a limit for use on its own.
        values = [{"question": q, "context": c if self.max_context_chars is None else c[: self.max_context_chars]}
                  for q, c in zip(questions, contexts)]
        return self._run("context_relevance", values, progress)

    def answer_accuracy(self, questions: Sequence[str], answers: Sequence[str],
                        references: Sequence[Sequence[str]], progress: bool = False) -> list[JudgeScore]:
        if not len(questions) == len(answers) == len(references):
            raise ValueError("questions, answers and references differ in length")
        values = [{"question": q, "answer": a or "(no answer)", "references": "\n".join(f"- {r}" for r in refs)}
                  for q, a, refs in zip(questions, answers, references)]
        return self._run("answer_accuracy", values, progress)


def summarize(scores: Sequence[JudgeScore]) -> dict[str, Any]:
    """Mean over scored questions, with the failure counts that belong beside it."""
    got = [s.score for s in scores if s.score is not None]
    n = len(scores)
    calls = sum(len(s.ratings) for s in scores)
    failed_calls = sum(1 for s in scores for r in s.ratings if r is None)
    return {"mean": sum(got) / len(got) if got else None, "n": n, "n_scored": len(got),
            "failures": n - len(got), "failure_rate": (n - len(got)) / n if n else 0.0,
            "partial": sum(1 for s in scores if s.partial),
            "call_failure_rate": failed_calls / calls if calls else 0.0}
