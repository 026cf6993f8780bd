"""Rerankers: reorder the first ``top_n`` retrieved candidates of each question.

* ``none`` keeps the fused ranking (the default: no cross-encoder ships with litseg);
* ``cross_encoder``: a sentence-transformers CrossEncoder from a local model directory;
* ``llm``: an LLM answers yes or no to "does this passage help answer the question?"
  (``conf/prompt/rag_rerank.yaml``) for each candidate; yes before no; a candidate whose reply
  cannot be read goes after the answered ones, and the failures are counted.

Candidates after ``top_n`` follow in their retrieval order. Ties go by retrieval rank.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from litseg.chunkers.groups import RagRerankPrompt
from litseg.llm.base import ChatModel, ChatRequest, Completion
from litseg.rag.replies import MISSING, json_field
from litseg.rag.retrieve import Retrieved
from litseg.rag.config import RerankConfig, retrieval_part


class Reranker:
    name = "none"

    def __init__(self, top_n: int = 20) -> None:
        if top_n < 1:
            raise ValueError(f"rerank top_n must be >= 1, got {top_n}")
        self.top_n = top_n
        self.failures = 0
        self.calls = 0

    def rerank_many(self, queries: Sequence[str], candidates: Sequence[list[Retrieved]],
                    texts: Sequence[str], progress: bool = False) -> list[list[Retrieved]]:
        """``texts[c.position]`` is the text of candidate ``c``."""
        return [list(c) for c in candidates]

    def _apply(self, ranking: list[Retrieved], scores: Sequence[float | None]) -> list[Retrieved]:
        head, tail = ranking[: self.top_n], ranking[self.top_n:]
        keyed = []
        for rank, (cand, s) in enumerate(zip(head, scores)):
            keyed.append((s is None, -(s if s is not None else 0.0), rank, replace(cand, rerank_score=s)))
        keyed.sort(key=lambda k: k[:3])
        return [k[3] for k in keyed] + tail

    def identity(self) -> dict[str, Any]:
        return {"name": self.name, "top_n": self.top_n}


class CrossEncoderReranker(Reranker):
    name = "cross_encoder"

    def __init__(self, model: str, *, top_n: int = 20, batch_size: int = 32, max_length: int | None = 512,
                 device: str | None = None) -> None:
        super().__init__(top_n)
        path = Path(model).expanduser()
        if not path.is_dir():
            raise FileNotFoundError(f"cross-encoder {model!r} is not a local directory; models are never "
                                    "downloaded here - give the folder of a sentence-transformers CrossEncoder")
        from sentence_transformers import CrossEncoder

        self.model_path = str(path.resolve())
        self.batch_size = batch_size
        self.model = CrossEncoder(self.model_path, max_length=max_length, device=device or "cpu",
                                  local_files_only=True)

    def rerank_many(self, queries: Sequence[str], candidates: Sequence[list[Retrieved]],
                    texts: Sequence[str], progress: bool = False) -> list[list[Retrieved]]:
        from tqdm.auto import tqdm

        out = []
        for q, ranking in tqdm(list(zip(queries, candidates)), desc="rerank", unit="q", disable=not progress,
                               dynamic_ncols=True):
            head = ranking[: self.top_n]
            if not head:
                out.append([])
                continue
            scores = self.model.predict([(q, texts[c.position]) for c in head], batch_size=self.batch_size,
                                        show_progress_bar=False)
            self.calls += len(head)
            out.append(self._apply(ranking, [float(s) for s in scores]))
        return out

    def identity(self) -> dict[str, Any]:
        return {**super().identity(), "model": self.model_path}


_WORD = re.compile(r"[A-Za-z]+")


def parse_yes_no(text: str, yes: str = "yes", no: str = "no") -> bool | None:
    """The verdict in a reranker reply: ``{"relevant": "yes"|"no"}`` (possibly inside other text),
    else a reply whose first word is yes or no, else the only one of the two words it contains.
    None when none of these reads."""
    t = text.strip()
    verdict = json_field(t, "relevant")
    if verdict is not MISSING:
        v = str(verdict).strip().lower()
        return True if v == yes.lower() else False if v == no.lower() else None
    words = [w.lower() for w in _WORD.findall(t)]
    if words and words[0] in (yes.lower(), no.lower()):
        return words[0] == yes.lower()
    found = {w for w in words if w in (yes.lower(), no.lower())}
    if len(found) == 1:
        return found.pop() == yes.lower()
    return None


class LLMReranker(Reranker):
    """Pointwise yes/no relevance of the first ``top_n`` candidates, asked through the LLM layer
    (any backend; the response cache applies) with ``conf/prompt/rag_rerank.yaml``: a candidate
    scores 1 for yes and 0 for no, so the yes candidates come first, each group in retrieval
    order. An unreadable reply (or a failed request) gives no score: the candidate follows the
    answered ones and the failure is counted."""

    name = "llm"

    def __init__(self, llm: ChatModel, prompt: RagRerankPrompt, *, top_n: int = 20, max_chars: int = 4000,
                 batch_size: int = 16, max_tokens: int = 12, constrained: bool = True) -> None:
        super().__init__(top_n)
        if not isinstance(prompt, RagRerankPrompt):
            raise ValueError(f"reranker prompt {getattr(prompt, 'name', prompt)!r} is no reranker prompt (with "
                             "yes_answer and no_answer; expected conf/prompt/rag_rerank.yaml or one like it)")
        if max_chars < 1 or batch_size < 1 or max_tokens < 1:
            raise ValueError("rerank max_chars, batch_size and max_tokens must be >= 1")
        self.llm = llm
        self.prompt = prompt
        self.yes, self.no = prompt.yes_answer, prompt.no_answer
        if self.yes.lower() == self.no.lower():
            raise ValueError("reranker prompt: yes_answer and no_answer must differ")
        self.max_chars = max_chars
        self.batch_size = batch_size
        self.max_tokens = max_tokens
        self.schema = ({"type": "object", "properties": {"relevant": {"type": "string", "enum": [self.yes, self.no]}},
                        "required": ["relevant"], "additionalProperties": False} if constrained else None)

    def request(self, question: str, passage: str) -> ChatRequest:
        values = {"question": question, "passage": passage[: self.max_chars]}
        return ChatRequest(messages=[{"role": "system", "content": self.prompt.system.format(**values).strip()},
                                     {"role": "user", "content": self.prompt.user.format(**values).strip()}],
                           json_schema=self.schema, max_tokens=self.max_tokens, temperature=0.0)

    def rerank_many(self, queries: Sequence[str], candidates: Sequence[list[Retrieved]],
                    texts: Sequence[str], progress: bool = False) -> list[list[Retrieved]]:
        from tqdm.auto import tqdm

        pairs = [(qi, c) for qi, ranking in enumerate(candidates) for c in ranking[: self.top_n]]
        requests = [self.request(queries[qi], texts[c.position]) for qi, c in pairs]
        completions: list[Completion] = []
        for s in tqdm(range(0, len(requests), self.batch_size), desc="rerank (llm)", unit="batch",
                      disable=not progress, dynamic_ncols=True):
            batch = requests[s:s + self.batch_size]
            got = self.llm.chat_batch(batch)
            if len(got) != len(batch):
                raise RuntimeError(f"reranker backend returned {len(got)} answers for {len(batch)} requests")
            completions.extend(got)
        self.calls += len(completions)
        by_q: dict[int, list[float | None]] = {}
        for (qi, _), c in zip(pairs, completions):
            verdict = None if c.error else parse_yes_no(c.text, self.yes, self.no)
            self.failures += verdict is None
            by_q.setdefault(qi, []).append(None if verdict is None else float(verdict))
        return [self._apply(list(r), by_q.get(qi, [])) for qi, r in enumerate(candidates)]

    def identity(self) -> dict[str, Any]:
        ident = getattr(self.llm, "identity", None)
        return {**super().identity(), "prompt": self.prompt.version,
                "model": ident() if callable(ident) else getattr(self.llm, "name", None),
                "calls": self.calls, "failures": self.failures}


def build_reranker(cfg: "RerankConfig | Mapping[str, Any] | None", *, llm_factory: Any = None,
                   prompt: RagRerankPrompt | None = None) -> Reranker:
    """From the ``retrieval.rerank`` config: ``kind`` (none | cross_encoder | llm), ``top_n``,
    ``model`` (cross-encoder directory), ``batch_size``, ``max_chars`` (llm: passage characters
    shown); a mapping takes the YAML's defaults. ``llm_factory()`` builds the model for
    ``kind: llm`` (the judge model) and ``prompt`` is the reranker prompt
    (``conf/prompt/rag_rerank.yaml``; default: ``cfg.prompt``)."""
    cfg = retrieval_part(RerankConfig, "rerank", cfg)
    prompt = prompt if prompt is not None else cfg.prompt
    if cfg.kind == "none":
        return Reranker(cfg.top_n)
    if cfg.kind == "cross_encoder":
        if not cfg.model:
            raise ValueError("retrieval.rerank.kind=cross_encoder needs retrieval.rerank.model (a local directory)")
        return CrossEncoderReranker(cfg.model, top_n=cfg.top_n, batch_size=cfg.batch_size, max_length=cfg.max_length,
                                    device=cfg.device)
    if llm_factory is None or prompt is None:
        raise ValueError("retrieval.rerank.kind=llm needs an llm config and the rag_rerank prompt "
                         "(retrieval.rerank.prompt)")
    return LLMReranker(llm_factory(), prompt, top_n=cfg.top_n, max_chars=cfg.max_chars, batch_size=cfg.batch_size,
                       constrained=cfg.constrained)
