"""The narratological reward: an LLM judge grades every predicted chunk (rubric in
``conf/prompt/judge.yaml``); see :mod:`litseg.training.rewards` for how scores, retries and a
failing judge are handled."""

from __future__ import annotations

import dataclasses
import json
import logging
import math
from collections import Counter, deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import json_repair

from litseg.chunkers.groups import JudgePrompt, PromptConfig
from litseg.errors import SetupError
from litseg.segmentation.parsing import parse_answer
from litseg.segmentation.schema import Segment, get_schema
from litseg.segmentation.validation import is_valid
from litseg.training.rewards.base import REWARDS, RewardContext, RewardFn, column, log_metric, completion_text
from litseg.llm.base import ChatRequest, Completion
from litseg.llm.factory import build_llm, llm_config_from
from litseg.utils.config import from_dict

log = logging.getLogger(__name__)


class JudgementError(ValueError):
    """A judge reply that cannot be read as the scores asked for."""


class JudgeUnavailableError(SetupError, RuntimeError):
    """Too many judgements failed over the recent reward calls: the run stops instead of going on
    with neutral judge scores (train.py prints the message as one line and exits with code 2)."""


def chunk_lines(segments: Sequence[Segment]) -> str:
    """The chunks as the judge prompt lists them, one line each."""
    lines = []
    for k, s in enumerate(segments, start=1):
        context = ", ".join(str(c) for c in s.context_idx)
        lines.append(f"Chunk {k} | subtitle: {json.dumps(s.subtitle, ensure_ascii=False)} | "
                     f"main: {s.from_idx}-{s.to_idx} | context: [{context}]")
    return "\n".join(lines)


def judge_json_schema(dimensions: Sequence[str], num_chunks: int) -> dict[str, Any]:
    """JSON Schema of the judge's answer: one list of ``num_chunks`` numbers per dimension."""
    item = {"type": "array", "items": {"type": "number"}, "minItems": num_chunks, "maxItems": num_chunks}
    return {"type": "object", "properties": {d: dict(item) for d in dimensions},
            "required": list(dimensions), "additionalProperties": False}


def _number(value: Any) -> float:
    if isinstance(value, bool):
        raise JudgementError(f"score {value!r} is not a number")
    if isinstance(value, (int, float)):
        number = float(value)
    elif isinstance(value, str):
        try:
            number = float(value.strip())
        except ValueError:
            raise JudgementError(f"score {value!r} is not a number") from None
    else:
        raise JudgementError(f"score {value!r} is not a number")
    if not math.isfinite(number):
        raise JudgementError(f"score {value!r} is not finite")
    return number


def parse_judgement(text: str, dimensions: Sequence[str], num_chunks: int) -> dict[str, list[float]]:
    """Scores per dimension (``num_chunks`` each) from the judge's reply; :class:`JudgementError` if unusable.

    Accepted: the requested object, possibly in a code fence or with prose around it (mended by
    ``json_repair``), or a list of ``num_chunks`` per-chunk objects keyed by dimension.
    """
    try:
        value = json.loads(text)
    except (json.JSONDecodeError, TypeError):
        start = min([i for i in (text.find("{"), text.find("[")) if i >= 0], default=-1)
        if start < 0:
            raise JudgementError("no JSON in the judge's reply") from None
        try:
            value = json_repair.loads(text[start:])
        except (ValueError, RecursionError) as exc:
            raise JudgementError(f"unreadable JSON: {exc}") from None
    if isinstance(value, list) and len(value) == num_chunks and all(isinstance(v, Mapping) for v in value):
        value = {d: [v.get(d) for v in value] for d in dimensions}
    if not isinstance(value, Mapping):
        raise JudgementError("the judge's reply is not a JSON object")
    out: dict[str, list[float]] = {}
    for d in dimensions:
        scores = value.get(d)
        if isinstance(scores, (int, float, str)) and num_chunks == 1:
            scores = [scores]
        if not isinstance(scores, list):
            raise JudgementError(f"{d}: missing or not a list")
        if len(scores) != num_chunks:
            raise JudgementError(f"{d}: {len(scores)} scores for {num_chunks} chunks")
        out[d] = [_number(s) for s in scores]
    return out


@dataclass
class JudgeRubric:
    """The rubric config (``conf/prompt/judge.yaml``) with its scoring numbers."""

    system: str
    user: str
    dimensions: list[str]
    scale_min: float = 1.0
    scale_max: float = 5.0
    context_penalty: float = 0.5
    context_bonus: float = 0.5
    version: str = ""
    #: Dimensions the context adjustments apply to (their scores may leave the scale by them).
    adjusted_dimensions: list[str] = field(default_factory=list)

    def bounds(self, dimension: str) -> tuple[float, float]:
        """The lowest and highest score ``dimension`` can take, adjustments included."""
        if dimension in self.adjusted_dimensions:
            return self.scale_min - self.context_penalty, self.scale_max + self.context_bonus
        return self.scale_min, self.scale_max

    @classmethod
    def from_config(cls, cfg: JudgePrompt) -> JudgeRubric:
        if not isinstance(cfg, JudgePrompt):
            raise ValueError(f"judge rubric {getattr(cfg, 'name', cfg)!r} is no judge prompt (with dimensions "
                             "and scoring; use conf/prompt/judge.yaml)")
        scoring = cfg.scoring
        system = cfg.system.format(**dataclasses.asdict(scoring))
        dimensions = list(cfg.dimensions)
        adjusted = list(scoring.adjusted_dimensions)
        unknown = sorted(set(adjusted) - set(dimensions))
        if unknown:
            raise ValueError(f"judge rubric: adjusted_dimensions {unknown} are not among the dimensions {dimensions}")
        return cls(system=system, user=cfg.user, dimensions=dimensions,
                   scale_min=float(scoring.scale_min), scale_max=float(scoring.scale_max),
                   context_penalty=scoring.context_penalty, context_bonus=scoring.context_bonus,
                   version=cfg.version, adjusted_dimensions=adjusted)

    def messages(self, chapter: str, segments: Sequence[Segment]) -> list[dict[str, str]]:
        user = self.user.format(chapter=chapter, chunks=chunk_lines(segments), num_chunks=len(segments))
        return [{"role": "system", "content": self.system}, {"role": "user", "content": user}]


#: The judge's answer budget grows with the chunks it grades: one score is a number, its separator
#: and whatever blank a server's model puts around it (Qwen's tokenizer spends a token per digit);
#: the rest is the braces and the dimension names. A fixed budget cut the reply for 35 or more
#: chunks, and a cut reply scored neutrally, so over-segmenting earned the neutral score.
TOKENS_PER_SCORE = 8
REPLY_OVERHEAD_TOKENS = 64


def reply_budget(num_dimensions: int, num_chunks: int) -> int:
    """``max_tokens`` for a judgement of ``num_chunks`` chunks on ``num_dimensions`` dimensions."""
    return REPLY_OVERHEAD_TOKENS + TOKENS_PER_SCORE * num_dimensions * num_chunks


CORRECTION = ("Your reply could not be used ({problem}). Answer again with the JSON object only: the keys "
              "{keys}, each a list of exactly {num_chunks} numbers between {low:g} and {high:g}.")


@dataclass
class JudgeStats:
    """Counters over the reward's lifetime (also logged per call through ``log_metric``)."""

    completions: int = 0
    unjudgeable: int = 0  # the student's answer had no readable segments, or not a valid segmentation
    requests: int = 0  # distinct judgements asked for
    calls: int = 0  # requests sent, retries included
    retries: int = 0
    failures: int = 0  # judgements still unreadable after the retries (scored neutrally)
    errors: Counter = field(default_factory=Counter)

    def to_dict(self) -> dict[str, Any]:
        return {"completions": self.completions, "unjudgeable": self.unjudgeable, "requests": self.requests,
                "calls": self.calls, "retries": self.retries, "failures": self.failures,
                "errors": dict(self.errors)}


class NarratologicalJudgeReward:
    """The LLM-judge reward. Call it like a reward function; it is one (``__name__`` included).

    ``llm`` is a :class:`~litseg.llm.base.ChatModel` or an llm config (built lazily with
    :func:`~litseg.llm.factory.build_llm`, so configs compose without loading anything).
    """

    def __init__(self, llm: Any, rubric: JudgePrompt | JudgeRubric, *, name: str = "judge",
                 max_retries: int = 2, neutral_score: float = 0.5, unjudgeable_score: float = 0.0,
                 clip: bool = True, temperature: float = 0.0,
                 constrained: bool = True, max_chunks: int = 64, max_failure_share: float | None = 0.5,
                 failure_window: int = 20, min_judgements: int = 8) -> None:
        self.__name__ = name
        self.name = name
        self._llm = llm
        self.rubric = rubric if isinstance(rubric, JudgeRubric) else JudgeRubric.from_config(rubric)
        if not 0.0 <= neutral_score <= 1.0:
            raise ValueError(f"neutral_score must lie in 0..1, got {neutral_score}")
        self.max_retries = max_retries
        self.neutral_score = neutral_score
        self.unjudgeable_score = unjudgeable_score
        self.clip = clip
        self.temperature = temperature
        self.constrained = constrained
        self.max_chunks = max_chunks
        if max_failure_share is not None and not 0.0 <= max_failure_share <= 1.0:
            raise ValueError(f"max_failure_share must lie in 0..1 (or be null), got {max_failure_share}")
        if failure_window < 1 or min_judgements < 1:
            raise ValueError("failure_window and min_judgements must be >= 1")
        self.max_failure_share = max_failure_share
        self.failure_window = failure_window
        self.min_judgements = min_judgements
        # (judgements asked, judgements failed, problems) of the most recent reward calls
        self._recent: deque[tuple[int, int, Counter]] = deque(maxlen=failure_window)
        self.stats = JudgeStats()

    @property
    def llm(self) -> Any:
        if not hasattr(self._llm, "chat_batch"):
            self._llm = build_llm(self._llm)
        return self._llm

    def check(self) -> None:
        """The judge model can answer (a server is up and serves this model name): checked by
        train.py before any model loads (:class:`~litseg.llm.base.ModelUnavailable` otherwise)."""
        self.llm.check()

    def identity(self) -> dict[str, Any]:
        """What a stage trained with this reward depends on: the judge model and the rubric."""
        return {"reward": self.name, "judge": self.llm.identity(), "rubric": self.rubric.version}

    # -- scoring
    def score(self, scores: Mapping[str, list[float]]) -> float:
        """Mean over dimensions per chunk, then over chunks, scaled so that the scale's ends are 0
        and 1. ``clip`` bounds each dimension to what the rubric allows it (the scale, widened by
        the context adjustments for the dimensions they apply to), so the adjustments still count
        at a top or bottom grade."""
        low, high = self.rubric.scale_min, self.rubric.scale_max
        bounds = {d: self.rubric.bounds(d) for d in self.rubric.dimensions}
        per_chunk = []
        k = len(next(iter(scores.values())))
        for i in range(k):
            values = [scores[d][i] for d in self.rubric.dimensions]
            if self.clip:
                values = [min(bounds[d][1], max(bounds[d][0], v)) for d, v in zip(self.rubric.dimensions, values)]
            per_chunk.append(sum(values) / len(values))
        mean = sum(per_chunk) / len(per_chunk)
        return (mean - low) / (high - low)

    def _request(self, messages: list[dict[str, str]], num_chunks: int, seed: int | None = None,
                 widen: int = 1) -> Any:
        schema = judge_json_schema(self.rubric.dimensions, num_chunks) if self.constrained else None
        budget = reply_budget(len(self.rubric.dimensions), num_chunks) * widen
        return ChatRequest(messages=messages, json_schema=schema, max_tokens=budget,
                           temperature=self.temperature, seed=seed)

    def _ask(self, requests: list[Any]) -> list[Any]:
        try:
            answers = self.llm.chat_batch(requests)
            if len(answers) != len(requests):
                raise RuntimeError(f"judge returned {len(answers)} answers for {len(requests)} requests")
            return answers
        except Exception as exc:  # noqa: BLE001 - a judge outage must not stop training
            log.warning("judge call failed for a batch of %d: %s: %s", len(requests), type(exc).__name__, exc)
            return [Completion(text="", finish_reason="error", error=f"{type(exc).__name__}: {exc}")
                    for _ in requests]

    def _pending(self, chapters: Sequence[str], answers: Sequence[list[Segment] | None],
                 rewards: list[float | None], counts: Counter) -> list[dict[str, Any]]:
        """The distinct judgements to ask for (identical (chapter, segmentation) pairs once); an
        answer without a judgeable segmentation gets ``unjudgeable_score`` at once."""
        pending: dict[str, dict[str, Any]] = {}
        for i, (chapter, segments) in enumerate(zip(chapters, answers)):
            if not segments or len(segments) > self.max_chunks:
                rewards[i] = self.unjudgeable_score
                counts["unjudgeable"] += 1
                continue
            messages = self.rubric.messages(chapter, segments)
            key = json.dumps(messages, ensure_ascii=False, sort_keys=True)
            if key not in pending:
                pending[key] = {"messages": messages, "k": len(segments), "members": [], "widen": 1}
            pending[key]["members"].append(i)
        return list(pending.values())

    def _settle(self, job: dict[str, Any], reply: Any, rewards: list[float | None], counts: Counter) -> bool:
        """Score ``job`` from ``reply`` (True), or note why not and prepare its next try (False)."""
        problem = reply.error
        if problem is None and reply.finish_reason == "length":
            # Cut at its budget: the same budget would cut it again.
            problem = f"reply cut at {reply.completion_tokens or 'its'} tokens"
            counts["cut_replies"] += 1
            job["widen"] *= 2
        elif problem is None:
            try:
                scores = parse_judgement(reply.text, self.rubric.dimensions, job["k"])
            except JudgementError as exc:
                problem = str(exc)
                counts["unreadable_replies"] += 1
            else:
                value = self.score(scores)
                for i in job["members"]:
                    rewards[i] = value
                return True
        else:
            counts["backend_errors"] += 1
        job["problem"] = problem.split(":")[0][:60]
        self.stats.errors[job["problem"]] += 1
        if reply.error is None and reply.text and reply.finish_reason != "length":
            # Show the model its unusable reply and what was wrong; this also gives the retry a
            # cache key of its own.
            note = CORRECTION.format(problem=problem, keys=", ".join(self.rubric.dimensions), num_chunks=job["k"],
                                     low=self.rubric.scale_min, high=self.rubric.scale_max)
            job["messages"] = [*job["messages"], {"role": "assistant", "content": reply.text},
                               {"role": "user", "content": note}]
        return False

    def judge(self, chapters: Sequence[str],
              answers: Sequence[list[Segment] | None]) -> tuple[list[float], dict[str, int]]:
        """Rewards for ``answers`` (None: no judgeable student answer) and this call's counters."""
        counts: Counter = Counter()
        rewards: list[float | None] = [None] * len(answers)
        todo = self._pending(chapters, answers, rewards, counts)
        counts["requests"] = len(todo)
        for attempt in range(self.max_retries + 1):
            if not todo:
                break
            if attempt:
                counts["retries"] += len(todo)
            requests = [self._request(job["messages"], job["k"], seed=attempt or None, widen=job["widen"])
                        for job in todo]
            counts["calls"] += len(requests)
            replies = self._ask(requests)
            todo = [job for job, reply in zip(todo, replies) if not self._settle(job, reply, rewards, counts)]
        for job in todo:
            counts["failures"] += 1
            counts["problem:" + str(job["problem"])] += 1  # set on every job left after a try
            for i in job["members"]:
                rewards[i] = self.neutral_score
        return [float(r) for r in rewards], dict(counts)

    def _check_failures(self, counts: Mapping[str, int]) -> None:
        """Raise :class:`JudgeUnavailableError` when the recent failure share is over the limit."""
        counts = Counter(counts)
        problems = Counter({k[len("problem:"):]: v for k, v in counts.items() if k.startswith("problem:")})
        self._recent.append((int(counts["requests"]), int(counts["failures"]), problems))
        if self.max_failure_share is None or self.max_failure_share >= 1.0:
            return
        asked = sum(r for r, _, _ in self._recent)
        failed = sum(f for _, f, _ in self._recent)
        if asked < self.min_judgements or failed <= self.max_failure_share * asked:
            return
        seen = sum((p for _, _, p in self._recent), Counter())
        common = "; ".join(f"{p!r} x{n}" for p, n in seen.most_common(3)) or "no reason recorded"
        raise JudgeUnavailableError(
            f"reward {self.name!r}: {failed} of {asked} judgements failed over the last {len(self._recent)} "
            f"reward call(s), more than the {self.max_failure_share:.0%} allowed "
            f"(rewards.{self.name}.params.max_failure_share); most frequent problems: {common}. "
            "Going on would train on neutral judge scores, i.e. on the format reward alone. Check the judge "
            f"model (judge_llm=...), or set rewards.{self.name}.params.max_failure_share=null to go on anyway.")

    def student_segments(self, text: str, schema: str, n_sentences: int) -> list[Segment] | None:
        """The segments of a student's answer when they form a valid segmentation of its unit
        (indices inside 1..n, every sentence covered: what the runner accepts), else None.

        Only whole answers are judged: with the judge's large weight, an answer graded on a few
        well-chosen chunks while it leaves sentences out (or points outside the unit) would earn
        more than the format reward's coverage share takes away, and the policy would learn to
        trade coverage for judge score."""
        parsed = parse_answer(text, get_schema(schema))
        if parsed.value is None or not parsed.segments or not is_valid(parsed.segments, n_sentences):
            return None
        return parsed.segments

    def __call__(self, completions: list[Any], **columns: Any) -> list[float]:
        n = len(completions)
        chapters = column(columns, "chapter", n)
        schemas = column(columns, "schema", n, default="lite")
        sizes = column(columns, "n_sentences", n)
        answers = [self.student_segments(completion_text(c), str(schema), int(size))
                   for c, schema, size in zip(completions, schemas, sizes)]
        rewards, judged = self.judge([str(c) for c in chapters], answers)
        counts = Counter(judged)
        self.stats.completions += n
        for key in ("unjudgeable", "requests", "calls", "retries", "failures"):
            setattr(self.stats, key, getattr(self.stats, key) + counts[key])
        for key in ("failures", "retries", "unjudgeable"):
            log_metric(columns, f"{self.name}/{key}", counts[key])
        self._check_failures(counts)
        return rewards


@REWARDS.register("judge")
def judge_factory(name: str, params: Mapping[str, Any], context: RewardContext) -> RewardFn:
    settings = dict(params)
    # An llm given in the reward's params is a composed section too, typed like judge_llm.
    own_llm = settings.pop("llm", None)
    llm = llm_config_from(own_llm, f"rewards.{name}.params.llm") if own_llm else context.judge_llm
    # A rubric given in the reward's params is a composed section, read here by its schema.
    own = settings.pop("rubric", None)
    rubric = from_dict(PromptConfig, own, f"rewards.{name}.params.rubric") if own else context.judge_rubric
    if not llm:
        raise ValueError(f"reward {name!r}: no judge llm config (set judge_llm=... or rewards.{name}.params.llm)")
    if not rubric:
        raise ValueError(f"reward {name!r}: no rubric (the judge group, conf/prompt/judge.yaml)")
    return NarratologicalJudgeReward(llm, rubric, name=name, **settings)
