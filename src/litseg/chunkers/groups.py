"""Typed schemas of the annotate groups a chunker reads beside ``method``: ``prompt``, ``feedback``
and ``preprocess`` (the last typed in :mod:`litseg.segmentation.config`, where the preprocessing
reads it, and named here too). They live below the annotation layer, because the chunkers receive
them as these objects (built once, where the config is read).

The prompt group holds prompts of several shapes (single-pass segmentation prompts, the staged
teacher prompt, the baselines' templates, the judge's rubric, the RAG prompts); each shape has its
class, picked by the key only it has (``stages``, ``dimensions``, ``retry``...). Every field is
required: the YAML files hold the text and the values, the code no second copy.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from litseg.utils.config import config_schema


@config_schema("prompt", entry="annotate", default_option="litseg_lite")
@dataclass(kw_only=True)
class PromptConfig:
    """What every prompt has; ``__config_dispatch__`` picks the class of its shape."""

    name: str
    version: str  # part of the fingerprint: change it when the text changes

    @classmethod
    def __config_dispatch__(cls, data: Mapping[str, Any], where: str) -> type:
        for marker, shape in _SHAPES:
            if marker in data:
                return shape
        return SinglePassPrompt


@dataclass(kw_only=True)
class SinglePassPrompt(PromptConfig):
    """LitSeg-Lite and its ablations (conf/prompt/litseg_lite*.yaml, ablation_*.yaml, generic_semantic.yaml)."""

    schema: str  # the answer schema (litseg.segmentation.schema)
    system: str
    user: str
    length_hint: str
    paragraph_breaks: bool  # show the source's paragraph breaks as empty lines


@dataclass(kw_only=True)
class WriterPrompt(PromptConfig):
    """LitSeg-Tagger's writer (conf/prompt/tagger_writer.yaml): one subtitle line per block."""

    schema: str  # subtitle_line: the writer answers one line, no JSON
    system: str
    user: str
    block_head_words: int  # the block's first words the writer reads
    block_tail_words: int  # and its last; the middle of a longer block is shown as "[...]"


@dataclass
class PromptStage:
    name: str
    schema: str
    user: str


@dataclass(kw_only=True)
class StagedPrompt(PromptConfig):
    """The three-stage teacher (conf/prompt/litseg.yaml)."""

    system: str
    length_hint: str
    stages: list[PromptStage]


@dataclass
class JudgeScoring:
    scale_min: int
    scale_max: int
    front_matter_score: float
    context_penalty: float
    context_bonus: float
    adjusted_dimensions: list[str]


@dataclass(kw_only=True)
class JudgePrompt(PromptConfig):
    """The narratological judge's rubric (conf/prompt/judge.yaml)."""

    dimensions: list[str]
    scoring: JudgeScoring
    system: str
    user: str


@dataclass(kw_only=True)
class LumberPrompt(PromptConfig):
    """LumberChunker's template (conf/prompt/lumberchunker.yaml)."""

    system: str
    user: str
    retry: str


@dataclass(kw_only=True)
class MarginPrompt(PromptConfig):
    """The margin-sampling template (conf/prompt/margin_sampling.yaml)."""

    split_answer: str
    keep_answer: str
    system: str
    user: str


@dataclass(kw_only=True)
class RagAnswerPrompt(PromptConfig):
    """The RAG answering prompt (conf/prompt/rag_answer.yaml)."""

    system: str
    user: str
    reference: str
    separator: str
    no_references: str
    answer_styles: dict[str, str]


@dataclass
class PromptPair:
    system: str
    user: str


@dataclass(kw_only=True)
class RagJudgePrompt(PromptConfig):
    """The RAG judge's templates (conf/prompt/rag_judge.yaml)."""

    ratings: list[int]
    context_relevance: list[PromptPair]
    answer_accuracy: list[PromptPair]


@dataclass(kw_only=True)
class RagRerankPrompt(PromptConfig):
    """The LLM reranker's question (conf/prompt/rag_rerank.yaml)."""

    yes_answer: str
    no_answer: str
    system: str
    user: str


# The key only that shape has -> its class (a prompt with none of them is single-pass).
_SHAPES: tuple[tuple[str, type[PromptConfig]], ...] = (
    ("stages", StagedPrompt), ("dimensions", JudgePrompt), ("retry", LumberPrompt),
    ("split_answer", MarginPrompt), ("answer_styles", RagAnswerPrompt),
    ("context_relevance", RagJudgePrompt), ("yes_answer", RagRerankPrompt),
    ("block_head_words", WriterPrompt),
)


# ------------------------------------------------------------------------------ feedback
@config_schema("feedback", entry="annotate", default_option="default")
@dataclass(frozen=True)
class FeedbackConfig:
    """The retry message of the validate -> retry loop (str.format templates, conf/feedback)."""

    name: str
    version: str
    item: str  # rendered once per problem with {problem}
    user: str  # {problems} {last_index} {attempt} {max_attempts}


