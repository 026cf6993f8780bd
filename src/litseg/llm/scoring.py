"""Reading scores, not text, out of a causal language model (the Meta-Chunking baselines).

* :meth:`CausalLMScorer.token_losses`: the loss (negative log-likelihood, nats) of every token of
  a text given a prefix.
* :meth:`CausalLMScorer.piece_losses`: the mean token loss of each piece of a sequence (a sentence
  of a unit) given the pieces before it, inside a bounded context. Long sequences are scored in
  windows of about ``window_tokens`` tokens, each preceded by the last ``context_tokens`` tokens
  before it, so the cost grows linearly with the length of the unit.
* :meth:`CausalLMScorer.answer_probabilities`: the probability that the reply to a chat prompt
  starts with each of a few candidate answers (one forward pass when every answer is one token).

A scorer wraps a :class:`~litseg.llm.transformers_backend.TransformersChatModel` and reads the
weights the backend loads and caches (``.loaded``), so a local model directory, a GGUF file and
the embedded SmolLM2 default all work, and a scorer and a chat model on the same files share one
copy in memory. torch is imported inside the methods only.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from litseg.llm.base import ChatModelError
from litseg.segmentation.types import NamedTokenizer
from litseg.llm.embedded import build_embedded_chat_model
from litseg.llm.transformers_backend import TransformersChatModel


@dataclass(slots=True)
class ScoreUsage:
    """Work done by a scorer: forward passes, tokens fed through the model, seconds spent."""

    calls: int = 0
    tokens: int = 0
    seconds: float = 0.0

    def copy(self) -> ScoreUsage:
        return ScoreUsage(self.calls, self.tokens, self.seconds)

    def since(self, earlier: ScoreUsage) -> ScoreUsage:
        return ScoreUsage(self.calls - earlier.calls, self.tokens - earlier.tokens,
                          self.seconds - earlier.seconds)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class CausalLMScorer:
    """``CausalLMScorer.load()`` (the embedded model) or ``CausalLMScorer.load("/models/dir")``."""

    def __init__(self, chat_model: Any) -> None:
        if not hasattr(chat_model, "loaded"):
            raise TypeError("CausalLMScorer needs a local transformers model (TransformersChatModel); "
                            f"got {type(chat_model).__name__}")
        self.chat_model = chat_model
        self.usage = ScoreUsage()

    @classmethod
    def load(cls, model: str | None = None, **settings: Any) -> CausalLMScorer:
        """A scorer on a local model directory (``gguf_file=`` for a GGUF inside it), or on the
        embedded SmolLM2 when ``model`` is None. ``settings`` are the transformers backend's
        (dtype, device, num_threads, model_id, ...); nothing is loaded before the first score."""
        settings = {k: v for k, v in settings.items() if v is not None}
        if model is None:
            return cls(build_embedded_chat_model(**settings))
        return cls(TransformersChatModel(str(model), **settings))

    # ------------------------------------------------------------------ model access
    def identity(self) -> dict[str, Any]:
        return dict(self.chat_model.identity())

    @property
    def tokenizer(self) -> Any:
        return self.chat_model.loaded.tokenizer

    def encode(self, text: str) -> list[int]:
        if not text:
            return []
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def count_tokens(self, text: str) -> int:
        return len(self.encode(text))

    def chunk_tokenizer(self) -> NamedTokenizer:
        return NamedTokenizer(self.chat_model.chunk_tokenizer().name, self.count_tokens)

    def start_ids(self) -> list[int]:
        """What precedes a text scored without any prefix, so that its first token gets a loss:
        the tokenizer's beginning-of-sequence token, else its end-of-sequence token (the document
        separator of GPT-style training)."""
        tok = self.tokenizer
        for token_id in (tok.bos_token_id, tok.eos_token_id):
            if token_id is not None:
                return [int(token_id)]
        return []

    def max_positions(self) -> int | None:
        return self.chat_model.context_length()

    def _forward_tail(self, ids: list[int], keep: int) -> Any:
        """Log-probabilities (float32, on the CPU) at the last ``keep`` positions of ``ids``."""
        import torch

        loaded = self.chat_model.loaded
        keep = max(1, min(keep, len(ids)))
        inputs = torch.tensor([ids], dtype=torch.long, device=loaded.device)
        start = time.perf_counter()
        with loaded.generate_lock, torch.inference_mode():
            try:
                # Only the positions that are read get the vocabulary projection (the costly part).
                logits = loaded.model(input_ids=inputs, logits_to_keep=keep).logits
            except TypeError:  # an architecture without logits_to_keep
                logits = loaded.model(input_ids=inputs).logits
            logprobs = logits[0, -keep:].float().log_softmax(-1).cpu()
        self.usage.calls += 1
        self.usage.tokens += len(ids)
        self.usage.seconds += time.perf_counter() - start
        return logprobs

    # ------------------------------------------------------------------ token losses
    def token_losses(self, text: str, prefix: str = "") -> list[float]:
        """Loss of each token of ``text`` given the start token and ``prefix``."""
        target = self.encode(text)
        if not target:
            return []
        return self._losses(self.start_ids() + self.encode(prefix), target)

    def _losses(self, context: list[int], target: list[int]) -> list[float]:
        ids = context + target
        limit = self.max_positions()
        if limit is not None and len(ids) > limit:
            raise ChatModelError(f"scorer: {len(ids)} tokens exceed the model's {limit} positions")
        scored = len(target) if context else len(target) - 1  # the very first token has no prediction
        if scored <= 0:
            return [math.nan] * len(target)
        logprobs = self._forward_tail(ids, scored + 1)[:-1]  # the last position predicts past the end
        import torch

        picked = torch.tensor(target[len(target) - scored:], dtype=torch.long)
        losses = (-logprobs.gather(1, picked[:, None])[:, 0]).tolist()
        return [math.nan] * (len(target) - scored) + losses

    def piece_losses(self, pieces: Sequence[str], *, leads: Sequence[str] | None = None,
                     context_tokens: int = 256, window_tokens: int = 1024) -> list[float]:
        """Mean token loss of each piece given the pieces before it.

        ``leads[i]`` (e.g. a line break) is fed to the model before piece ``i`` without being scored.
        Pieces are taken in windows of at most ``window_tokens`` tokens (at least one piece); each
        window is preceded by the last ``context_tokens`` tokens before it (the start token before
        the first piece). A piece thus sees between ``context_tokens`` and about
        ``context_tokens + window_tokens`` tokens of what precedes it. A piece without tokens
        gets NaN.
        """
        if context_tokens < 0 or window_tokens < 1:
            raise ValueError(f"scorer: context_tokens must be >= 0 and window_tokens >= 1, got "
                             f"{context_tokens} and {window_tokens}")
        if leads is not None and len(leads) != len(pieces):
            raise ValueError(f"scorer: {len(leads)} leads for {len(pieces)} pieces")
        lead_ids = [self.encode(x) for x in leads] if leads is not None else [[] for _ in pieces]
        piece_ids = [self.encode(p) for p in pieces]
        limit = self.max_positions()
        history: list[int] = self.start_ids()
        out: list[float] = []
        i, n = 0, len(pieces)
        while i < n:
            j, size = i, 0
            while j < n and (j == i or size + len(lead_ids[j]) + len(piece_ids[j]) <= window_tokens):
                size += len(lead_ids[j]) + len(piece_ids[j])
                j += 1
            context = (history[-context_tokens:] if context_tokens else []) or self.start_ids()
            body: list[int] = []
            scored: list[tuple[int, int]] = []  # (start, end) of each piece's tokens inside body
            for k in range(i, j):
                body += lead_ids[k]
                scored.append((len(body), len(body) + len(piece_ids[k])))
                body += piece_ids[k]
            if limit is not None and len(context) + len(body) > limit:
                # Only a single overlong piece gets here: give up context first, then its tail.
                room = limit - len(body)
                context = context[len(context) - room:] if room > 0 else []
                body = body[: limit - len(context)]
            losses = self._losses(context, body) if body else []
            for s, e in scored:
                part = [x for x in losses[s:e] if not math.isnan(x)]
                out.append(sum(part) / len(part) if part else math.nan)
            history = (history + body)[-max(context_tokens, 1):]
            i = j
        return out

    # ------------------------------------------------------------------ answer probabilities
    def prompt_ids(self, prompt: str | Sequence[dict[str, str]]) -> list[int]:
        """Token ids of a plain prompt, or of chat messages through the chat template with the
        assistant turn opened."""
        if isinstance(prompt, str):
            return self.start_ids() + self.encode(prompt)
        kwargs = dict(getattr(self.chat_model.config, "chat_template_kwargs", {}) or {})
        ids = self.tokenizer.apply_chat_template(list(prompt), add_generation_prompt=True, tokenize=True,
                                                 return_dict=True, **kwargs)
        return list(ids["input_ids"])

    def answer_probabilities(self, prompt: str | Sequence[dict[str, str]], answers: Sequence[str]) -> list[float]:
        """Probability that the reply to ``prompt`` begins with each answer (product of its tokens'
        probabilities; a one-token answer costs nothing beyond the single shared forward pass)."""
        if not answers:
            raise ValueError("scorer: give at least one candidate answer")
        answer_ids = [self.encode(a) for a in answers]
        if any(not a for a in answer_ids):
            raise ValueError(f"scorer: every candidate answer needs at least one token, got {list(answers)!r}")
        ids = self.prompt_ids(prompt)
        if all(len(a) == 1 for a in answer_ids):
            logprobs = self._forward_tail(ids, 1)[0]
            return [math.exp(float(logprobs[a[0]])) for a in answer_ids]
        out = []
        for a in answer_ids:
            logprobs = self._forward_tail(ids + a, len(a) + 1)[:-1]
            out.append(math.exp(sum(float(logprobs[k, t]) for k, t in enumerate(a))))
        return out
