"""Sentence features from a small causal LM for LitSeg-Tagger's boundary nets (torch, transformers).

One forward pass over a whole unit: each sentence gets the mean of its tokens' hidden states at a
few layers, and two surprisal figures (the mean negative log-probability of its tokens, and of its
first five: a sentence that opens something new is hard to predict from what came before). The
model reads left to right, so a sentence's features know the story up to it: the reading that a
sentence encoder, which embeds each sentence alone, cannot give the boundary nets.

Two optional readings of the same model (off in the first LM-reading tagger, so it still loads):

* ``last_layers``: the hidden states of each sentence's last token at these layers. The mean of a
  sentence's tokens blurs where it ends up; its last token is where the model has read all of it.
* ``alone``: every sentence's opening is also read on its own (a batched second pass of short
  sequences), and its surprisal there is set against the same tokens' surprisal in the unit: the
  *context gain*. A sentence
  the story so far makes no easier to predict than it is alone is a likely start of something new,
  whatever its own wording costs (a rare name is surprising anywhere; only the gain says whether
  the story prepared it).

Training (litseg.training.tagger) and inference (litseg.chunkers.tagger) call the same
:meth:`SentenceLM.features`, so the nets see at run time exactly what they were trained on.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass, field
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
#: Tokens of a sentence read in the ``alone`` pass: its opening, where a new scene or speaker shows
#: (a sentence's first 24 tokens cost less than half of reading all of it, which on one core would
#: slow the tagger by about a third). The gain compares the same opening tokens in the unit.
ALONE_TOKENS = 24
#: Sentences per batch of the ``alone`` pass.
ALONE_BATCH = 32
#: Positions of logits turned into surprisal at a time. A unit's logits over SmolLM2's 49,152-word
#: vocabulary are about half a gigabyte in float32 per 2,500 tokens; converted and normalised whole,
#: they raised the reading's peak memory by about 840 MB on a 2,400-word unit (and cost a few per
#: cent of its time).
SURPRISAL_ROWS = 256
#: Features of the ``alone`` reading per sentence: surprisal alone (all tokens, opening), and the
#: context gain (alone minus in the unit; all tokens, opening).
ALONE_FEATURES = 4


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


def next_token_surprisal(logits: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    """``[m, t-1]`` surprisal of tokens ``1..t-1`` of each row of ``ids [m, t]`` given the tokens
    before them (``logits [m, t, vocab]``, any float dtype): ``logsumexp(logits) - logit(token)`` in
    float32, which is ``-log_softmax(...)[token]`` without the full normalised copy, a few hundred
    positions at a time."""
    m, t = ids.shape
    flat = logits.reshape(m * t, logits.shape[-1])  # a view: the model's logits are contiguous
    # position j of a row is scored against token j+1; a row's last position has none (scored
    # against token 0 and dropped below)
    following = torch.cat([ids[:, 1:], torch.zeros(m, 1, dtype=ids.dtype)], 1).reshape(-1, 1)
    out = torch.empty(m * t)
    for a in range(0, m * t, SURPRISAL_ROWS):
        rows = flat[a:a + SURPRISAL_ROWS].float()
        out[a:a + SURPRISAL_ROWS] = torch.logsumexp(rows, -1) - rows.gather(1, following[a:a + SURPRISAL_ROWS])[:, 0]
    return out.view(m, t)[:, :-1]


def hidden_groups(lm_dim: int, layers: int, last_layers: int, alone: bool) -> list[tuple[int, int]]:
    """Column ranges of the hidden-state groups in a feature row of width ``lm_dim`` (see
    :meth:`SentenceLM.features`): the layer means, then the last-token states when there are any."""
    hidden_cols = lm_dim - 2 - (ALONE_FEATURES if alone else 0)
    if layers <= 0 or hidden_cols <= 0 or hidden_cols % (layers + last_layers):
        raise ValueError(f"{lm_dim} LM features per sentence do not fit {layers} mean layers, {last_layers} "
                         f"last-token layers{' and the alone reading' if alone else ''}")
    size = hidden_cols // (layers + last_layers)
    groups = [(0, layers * size)]
    if last_layers:
        groups.append((layers * size, hidden_cols))
    return groups


@dataclass
class SentenceLM:
    """A causal LM (weights and tokenizer), the layers whose hidden states are kept, and the optional
    readings (module docstring)."""

    model: Any
    tokenizer: Any
    layers: list[int]
    last_layers: list[int] = field(default_factory=list)
    alone: bool = False

    @property
    def width(self) -> int:
        """Features per sentence: the layers' mean hidden states, the last-token states, the alone
        reading's four figures, then the two surprisal figures in the unit (always last)."""
        size = int(self.model.config.hidden_size)
        return (len(self.layers) + len(self.last_layers)) * size + (ALONE_FEATURES if self.alone else 0) + 2

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
        nll = torch.zeros(ids.shape[1])
        nll[1:] = next_token_surprisal(result.logits, ids)[0]
        hidden = torch.cat([result.hidden_states[layer][0].float() for layer in self.layers], 1)
        last = (torch.cat([result.hidden_states[layer][0].float() for layer in self.last_layers], 1)
                if self.last_layers else None)
        mean_cols = hidden.shape[1]
        last_cols = 0 if last is None else last.shape[1]
        alone = self.alone_surprisal(texts) if self.alone else None
        # a token belongs to the sentence whose end is the first at or after the token's last character
        owner = torch.tensor([bisect.bisect_left(ends, max(0, end - 1)) for _, end in offsets])
        for i in range(n):
            mine = owner == i
            if not bool(mine.any()):
                continue
            out[i, :mean_cols] = hidden[mine].mean(0)
            if last is not None:
                out[i, mean_cols:mean_cols + last_cols] = last[mine.nonzero()[-1, 0]]
            surprisal = nll[mine]
            whole, opening = surprisal.mean(), surprisal[:OPENING_TOKENS].mean()
            out[i, -2], out[i, -1] = whole, opening
            if alone is not None:
                alone_whole, alone_opening = alone[i]
                in_unit = surprisal[:ALONE_TOKENS].mean()
                out[i, -6:-2] = torch.tensor([alone_whole, alone_opening, alone_whole - in_unit, alone_opening - opening])
        return out

    def alone_surprisal(self, texts: Sequence[str]) -> list[tuple[float, float]]:
        """Each sentence's opening (its first ``ALONE_TOKENS`` tokens) read on its own, after the
        end-of-text token as a document would start: the mean surprisal of those tokens and of the
        first five, batched by length."""
        start = self.tokenizer.eos_token_id if self.tokenizer.eos_token_id is not None else self.tokenizer.bos_token_id
        rows = [self.tokenizer(" " + " ".join(t.split()), add_special_tokens=False)["input_ids"][:ALONE_TOKENS]
                for t in texts]
        rows = [([start] if start is not None else []) + r for r in rows]
        out: list[tuple[float, float]] = [(0.0, 0.0)] * len(rows)
        order = sorted(range(len(rows)), key=lambda i: len(rows[i]))
        for at in range(0, len(order), ALONE_BATCH):
            batch = order[at:at + ALONE_BATCH]
            width = max(len(rows[i]) for i in batch)
            ids = torch.zeros(len(batch), width, dtype=torch.long)
            mask = torch.zeros(len(batch), width, dtype=torch.long)
            for k, i in enumerate(batch):
                ids[k, : len(rows[i])] = torch.tensor(rows[i])
                mask[k, : len(rows[i])] = 1
            with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=ids.device.type == "cpu"):
                logits = self.model(ids, attention_mask=mask).logits
            nll = next_token_surprisal(logits, ids)  # [b, width-1]: token t+1 given the rest
            for k, i in enumerate(batch):
                # every token after the start token is scored (without one, the sentence's first is not)
                scored = nll[k, : len(rows[i]) - 1]
                if scored.numel() == 0:
                    continue
                out[i] = (float(scored.mean()), float(scored[:OPENING_TOKENS].mean()))
        return out


def load_sentence_lm(spec: str, layers: Sequence[int], last_layers: Sequence[int] = (),
                     alone: bool = False) -> SentenceLM:
    """``spec``: ``embedded`` (the packaged SmolLM2-135M-Instruct, no adapter), ``tiny`` (a tiny
    random model, for tests) or a local model folder; ``last_layers`` and ``alone``: the optional
    readings (module docstring)."""
    if spec == "embedded":
        model, tokenizer = load_gguf_converted(*embedded_model_path(), dtype=torch.bfloat16)
    else:
        from transformers import AutoModelForCausalLM, AutoTokenizer  # lazy: heavy, only this path

        folder = tiny_causal_lm_dir() if spec == "tiny" else Path(spec).expanduser()
        model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.bfloat16)
        tokenizer = AutoTokenizer.from_pretrained(folder)
    depth = int(model.config.num_hidden_layers)
    bad = [layer for layer in [*layers, *last_layers] if not 0 <= int(layer) <= depth]
    if bad or not layers:
        raise ValueError(f"lm_layers {list(layers)}, lm_last_layers {list(last_layers)}: each must be a "
                         f"hidden-state layer of {spec!r} (0..{depth}), and lm_layers not empty")
    return SentenceLM(model.eval(), tokenizer, [int(layer) for layer in layers], [int(layer) for layer in last_layers],
                      bool(alone))


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
