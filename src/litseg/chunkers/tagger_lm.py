"""Sentence features from a small causal LM for LitSeg-Tagger's boundary nets (torch, transformers).

One forward pass over a whole unit: each sentence gets the mean of its tokens' hidden states at a
few layers, and two surprisal figures (the mean negative log-probability of its tokens, and of its
first five: a sentence that opens something new is hard to predict from what came before). The
model reads left to right, so a sentence's features know the story up to it: the reading that a
sentence encoder, which embeds each sentence alone, cannot give the boundary nets.

Training (litseg.training.tagger) and inference (litseg.chunkers.tagger) call the same
:meth:`SentenceLM.features`, so the nets see at run time exactly what they were trained on.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from litseg.llm.embedded import embedded_model_path
from litseg.llm.gguf import load_gguf_converted
from litseg.llm.tiny_model import tiny_causal_lm_dir

#: Tokens read at most per unit (SmolLM2 reads 8,192; a unit at annotate's cap is about 4,000):
#: sentences past it get zero hidden states and zero surprisal.
MAX_TOKENS = 8000
#: Surprisal of a sentence's opening: its first tokens.
OPENING_TOKENS = 5


def unit_text(texts: Sequence[str], para: Sequence[bool]) -> tuple[str, list[int]]:
    """The unit as the LM reads it (each sentence on one line of spacing, a line break where a
    paragraph starts) and the end offset of every sentence in it."""
    text, ends = "", []
    for i, sentence in enumerate(texts):
        if i:
            text += "\n" if para[i] else " "
        text += " ".join(sentence.split())
        ends.append(len(text))
    return text, ends


@dataclass
class SentenceLM:
    """A causal LM (weights and tokenizer) and the layers whose hidden states are kept."""

    model: Any
    tokenizer: Any
    layers: list[int]

    @property
    def width(self) -> int:
        """Features per sentence: the layers' hidden states, then two surprisal figures."""
        return len(self.layers) * int(self.model.config.hidden_size) + 2

    def features(self, texts: Sequence[str], para: Sequence[bool]) -> torch.Tensor:
        """``[n, width]`` float32 features of the unit's ``n`` sentences."""
        n = len(texts)
        out = torch.zeros(n, self.width)
        if n == 0:
            return out
        text, ends = unit_text(texts, para)
        enc = self.tokenizer(text, return_offsets_mapping=True, return_tensors="pt")
        ids = enc["input_ids"][:, :MAX_TOKENS]
        offsets = enc["offset_mapping"][0][:MAX_TOKENS].tolist()
        with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=ids.device.type == "cpu"):
            result = self.model(ids, output_hidden_states=True)
        logp = torch.log_softmax(result.logits[0].float(), -1)
        nll = torch.zeros(ids.shape[1])
        nll[1:] = -logp[:-1].gather(1, ids[0, 1:, None])[:, 0]
        hidden = torch.cat([result.hidden_states[layer][0].float() for layer in self.layers], 1)
        # a token belongs to the sentence whose end is the first at or after the token's last character
        owner = torch.tensor([bisect.bisect_left(ends, max(0, end - 1)) for _, end in offsets])
        for i in range(n):
            mine = owner == i
            if not bool(mine.any()):
                continue
            out[i, :-2] = hidden[mine].mean(0)
            surprisal = nll[mine]
            out[i, -2] = surprisal.mean()
            out[i, -1] = surprisal[:OPENING_TOKENS].mean()
        return out


def load_sentence_lm(spec: str, layers: Sequence[int]) -> SentenceLM:
    """``spec``: ``embedded`` (the packaged SmolLM2-135M-Instruct, no adapter), ``tiny`` (a tiny
    random model, for tests) or a local model folder."""
    if spec == "embedded":
        model, tokenizer = load_gguf_converted(*embedded_model_path(), dtype=torch.bfloat16)
    else:
        from transformers import AutoModelForCausalLM, AutoTokenizer  # lazy: heavy, only this path

        folder = tiny_causal_lm_dir() if spec == "tiny" else Path(spec).expanduser()
        model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.bfloat16)
        tokenizer = AutoTokenizer.from_pretrained(folder)
    depth = int(model.config.num_hidden_layers)
    bad = [layer for layer in layers if not 0 <= int(layer) <= depth]
    if bad or not layers:
        raise ValueError(f"lm_layers {list(layers)}: each must be a hidden-state layer of {spec!r} (0..{depth})")
    return SentenceLM(model.eval(), tokenizer, [int(layer) for layer in layers])


@dataclass
class LMNorm:
    """Per-feature mean and spread of the LM features over the training units (an LM's hidden
    states have a few dimensions hundreds of times larger than the rest)."""

    mean: torch.Tensor
    std: torch.Tensor

    @classmethod
    def fit(cls, rows: Sequence[torch.Tensor]) -> LMNorm:
        stacked = torch.cat(list(rows))
        return cls(stacked.mean(0), stacked.std(0) + 1e-3)

    def apply(self, features: torch.Tensor) -> torch.Tensor:
        return (features - self.mean) / self.std
