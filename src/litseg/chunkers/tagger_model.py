"""The learnt parts of LitSeg-Tagger (``method=litseg_tagger``), in torch.

Two small networks read a unit's sentences through their MiniLM embeddings (the sentence encoder
the project already ships, frozen) and a few surface features:

* :class:`BoundaryNet` scores every sentence as the start of a new plot block: the features of each
  sentence (its embedding, paragraph start, dialogue marks, length, position, how far its meaning
  moves from the sentences just before) plus its opening words hashed into a small learnt table
  (cue words such as "next morning" or "enter"), read in both directions by a GRU over the whole
  unit. One pass per unit; cuts are then decoded from the scores without a fixed count
  (:func:`litseg.segmentation.cut_decoding.decode_cuts`).
* :class:`SentenceLM` (when the nets were trained with it, ``lm_model`` in ``tagger.json``) reads
  the whole unit once with a small causal LM (by default the embedded SmolLM2-135M, without any
  adapter) and gives every sentence the mean of its tokens' hidden states at a few layers, and how
  surprising its words are after what came before: a reading of the story so far that a sentence
  encoder, which sees one sentence at a time, does not have. Standardised with the training
  units' statistics (kept beside the nets), they join the features above.
* :class:`ContextNet` scores, for one block, each earlier sentence outside it as a context sentence
  (one the reader needs to follow the block): similarity to the block, distance, names shared with
  the block, paragraph start.

The files of a trained tagger (``boundary.safetensors``, ``context.safetensors`` and their settings
in ``tagger.json``) are written by :func:`save_nets` and read by :func:`load_nets`; the writer of
subtitles is a LoRA adapter of the chat model beside them (``writer/``).
"""

from __future__ import annotations

import math
import re
import zlib
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn

from litseg.chunkers.tagger_lm import LMNorm, hidden_groups

#: Changes whenever a feature changes: a model trained on other features refuses to load.
FEATURES_VERSION = "tagger-features-v2"

_OPENING_QUOTE = re.compile(r"^[\s_(\[*-]*[\"“‘']")
_WORD = re.compile(r"[a-z]+")
_NAME = re.compile(r"\b[A-Z][a-z]{2,}\b")
_SPACE = re.compile(r"\s+")


@dataclass
class NetSettings:
    """Shapes and decoding settings of a trained tagger (``tagger.json``'s ``nets``)."""

    features_version: str = FEATURES_VERSION
    cue_buckets: int = 2048
    cue_dim: int = 16
    hidden: int = 128
    layers: int = 2
    dropout: float = 0.2
    ensemble: int = 1  # boundary nets trained with different seeds; their scores are averaged
    threshold: float = 0.0  # a cut is worth making when its score exceeds this (tuned on validation)
    min_block: int = 2  # sentences per block at least (the decoder's only rule)
    context_threshold: float = 0.8  # probability above which a sentence becomes context
    max_context: int = 1  # context sentences per block at most
    context_mean: list[float] = field(default_factory=list)  # feature normalisation of ContextNet
    context_std: list[float] = field(default_factory=list)
    lm_model: str = "none"  # the causal LM read for sentence features: none | embedded | tiny | a folder
    lm_layers: list[int] = field(default_factory=list)  # its hidden-state layers averaged per sentence
    lm_dim: int = 0  # LM features per sentence (tagger_lm.SentenceLM.width); 0: none
    # the optional readings of tagger_lm (absent in a tagger.json written before them: off)
    lm_last_layers: list[int] = field(default_factory=list)  # last-token hidden states at these layers
    lm_alone: bool = False  # each sentence also read alone: its surprisal there and the context gain

    def lm_groups(self) -> list[tuple[int, int]]:
        """Column ranges of the LM features' hidden-state groups (each gets a :func:`moved` column)."""
        return hidden_groups(self.lm_dim, len(self.lm_layers), len(self.lm_last_layers), self.lm_alone)


def cue_ids(text: str, buckets: int) -> list[int]:
    """Hashed ids of a sentence's first one, two and three words (0 is padding)."""
    words = _WORD.findall(text.lower())[:3]
    keys = [f"{k}:{' '.join(words[:k])}" for k in range(1, len(words) + 1)]
    return [1 + zlib.crc32(key.encode()) % (buckets - 1) for key in keys] or [0]


def cue_tensor(texts: Sequence[str], buckets: int) -> torch.Tensor:
    ids = [cue_ids(t, buckets) for t in texts]
    width = max((len(i) for i in ids), default=1)
    return torch.tensor([i + [0] * (width - len(i)) for i in ids], dtype=torch.long).reshape(len(texts), width)


def moved(vectors: torch.Tensor, window: int = 3) -> torch.Tensor:
    """``[n, 1]``: at each sentence ``i``, the cosine between the sum of the ``window`` vectors
    before it and of those from it on (1 at the first sentence): how far meaning moves there."""
    n = vectors.shape[0]
    sums = torch.cumsum(torch.cat([torch.zeros(1, vectors.shape[1]), vectors]), 0)
    out = torch.ones(n, 1)
    for i in range(1, n):
        before = sums[i] - sums[max(0, i - window)]
        after = sums[min(n, i + window)] - sums[i]
        out[i, 0] = torch.nn.functional.cosine_similarity(before, after, dim=0)
    return out


def sentence_features(texts: Sequence[str], para: Sequence[bool], emb: torch.Tensor,
                      lm: torch.Tensor | None = None,
                      lm_groups: Sequence[tuple[int, int]] | None = None) -> torch.Tensor:
    """``[n, dim + 10 (+ lm_dim + groups)]``: the normalised embedding and the surface features of
    every sentence, then, given standardised LM features ``lm`` (:meth:`SentenceLM.features`, then
    :meth:`LMNorm.apply`), those and how far each group of their hidden states (``lm_groups``,
    :meth:`NetSettings.lm_groups`; default: every column but the last two) moves at each sentence."""
    n = len(texts)
    rows = []
    for i, t in enumerate(texts):
        words = len(t.split())
        stripped = t.strip()
        rows.append([float(bool(para[i])), float(i == 0), math.log1p(words) / 5, float(bool(_OPENING_QUOTE.match(t))),
                     float('"' in t or "“" in t), i / max(1, n - 1), float(stripped[-1:] in "?!"), math.log1p(n) / 6])
    surface = torch.tensor(rows, dtype=torch.float32).reshape(n, 8)
    previous = torch.cat([emb[:1], emb[:-1]])
    sim_previous = (emb * previous).sum(1, keepdim=True)
    base = torch.cat([emb, surface, sim_previous, moved(emb)], 1)
    if lm is None:
        return base
    groups = list(lm_groups) if lm_groups is not None else [(0, lm.shape[1] - 2)]
    shifts = [moved(torch.nn.functional.normalize(lm[:, a:b], dim=1)) for a, b in groups]
    return torch.cat([base, lm, *shifts], 1)


class BoundaryNet(nn.Module):
    """Per-sentence block-start scores (logits) of one unit."""

    def __init__(self, d_in: int, s: NetSettings) -> None:
        super().__init__()
        self.cue = nn.EmbeddingBag(s.cue_buckets, s.cue_dim, mode="sum", padding_idx=0)
        self.inp = nn.Sequential(nn.Dropout(s.dropout), nn.Linear(d_in + s.cue_dim, s.hidden), nn.GELU())
        self.rnn = nn.GRU(s.hidden, s.hidden, num_layers=s.layers, batch_first=True, bidirectional=True,
                          dropout=s.dropout if s.layers > 1 else 0.0)
        self.out = nn.Sequential(nn.Dropout(s.dropout), nn.Linear(2 * s.hidden, 1))

    def forward(self, features: torch.Tensor, cues: torch.Tensor, lengths: torch.Tensor | None = None) -> torch.Tensor:
        """Scores ``[n]`` of one unit (``features [n, d]``, ``cues [n, k]``), or ``[b, n]`` of a
        padded batch (``[b, n, d]``, ``[b, n, k]`` and the units' ``lengths``; padding scores 0)."""
        if features.dim() == 2:
            return self.forward(features.unsqueeze(0), cues.unsqueeze(0), torch.tensor([features.shape[0]]))[0]
        b, n, _ = features.shape
        z = torch.cat([features, self.cue(cues.reshape(b * n, -1)).reshape(b, n, -1)], 2)
        packed = nn.utils.rnn.pack_padded_sequence(self.inp(z), lengths.cpu(), batch_first=True, enforce_sorted=False)
        h, _ = self.rnn(packed)
        h, _ = nn.utils.rnn.pad_packed_sequence(h, batch_first=True, total_length=n)
        return self.out(h).squeeze(-1)


def names(text: str) -> set[str]:
    """Capitalised words of a sentence, its first word left out (capitalised anyway)."""
    found = _NAME.findall(text)
    return set(found[1:] if text.lstrip()[:1].isupper() and found and text.lstrip().startswith(found[0]) else found)


CONTEXT_FEATURES = 12


def context_pair_features(texts: Sequence[str], para: Sequence[bool], emb: torch.Tensor, block: tuple[int, int],
                          candidates: Sequence[int]) -> torch.Tensor:
    """``[len(candidates), 12]`` features of each candidate sentence (1-based) for ``block``."""
    a, b = block
    n = len(texts)
    members = emb[a - 1:b]
    centre = members.mean(0)
    block_names = set().union(*(names(t) for t in texts[a - 1:b]))
    rows = []
    for j in candidates:
        e = emb[j - 1]
        shared = len(block_names & names(texts[j - 1]))
        rows.append([float(torch.nn.functional.cosine_similarity(e, centre, dim=0)), float((members @ e).max()),
                     float(members[0] @ e), (a - j) / n, j / n, math.log1p(a - j), float(bool(para[j - 1])),
                     math.log1p(shared), float(shared > 0), math.log1p(len(texts[j - 1].split())) / 5,
                     float(j == 1), math.log1p(b - a + 1) / 4])
    return torch.tensor(rows, dtype=torch.float32).reshape(len(rows), CONTEXT_FEATURES)


class ContextNet(nn.Module):
    def __init__(self, hidden: int = 32) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(CONTEXT_FEATURES, hidden), nn.GELU(), nn.Linear(hidden, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x).squeeze(-1)


def context_candidates(block: tuple[int, int]) -> list[int]:
    """Sentences before the block that are not adjacent to it (the teacher's context is there)."""
    return list(range(1, block[0] - 1))


def input_width(embedding_dim: int, s: NetSettings) -> int:
    """Features per sentence that the boundary nets read (see :func:`sentence_features`)."""
    return embedding_dim + 10 + (s.lm_dim + len(s.lm_groups()) if s.lm_dim else 0)


@dataclass
class TaggerNets:
    settings: NetSettings
    boundary: list[BoundaryNet]
    context: ContextNet
    lm_norm: LMNorm | None = None  # the LM features' training statistics (nets trained with an LM)

    def scores(self, texts: Sequence[str], para: Sequence[bool], emb: torch.Tensor,
               lm: torch.Tensor | None = None) -> list[float]:
        """Block-start scores of the unit's sentences; ``lm``: their raw LM features
        (:meth:`SentenceLM.features`), required exactly when the nets were trained with them."""
        if (lm is None) != (self.lm_norm is None):
            raise ValueError("these boundary nets were trained " + ("with" if self.lm_norm is not None else "without")
                             + " LM sentence features; give them " + ("the same" if self.lm_norm is not None else "none"))
        x = sentence_features(texts, para, emb, None if lm is None else self.lm_norm.apply(lm),  # type: ignore[union-attr]
                              self.settings.lm_groups() if lm is not None else None)
        cues = cue_tensor(texts, self.settings.cue_buckets)
        with torch.no_grad():
            return torch.stack([net(x, cues) for net in self.boundary]).mean(0).tolist()

    def context_for(self, texts: Sequence[str], para: Sequence[bool], emb: torch.Tensor,
                    block: tuple[int, int]) -> list[int]:
        """The block's context sentences: the best candidates above the threshold, in text order."""
        s = self.settings
        candidates = context_candidates(block)
        if not candidates or s.max_context <= 0:
            return []
        x = context_pair_features(texts, para, emb, block, candidates)
        x = (x - torch.tensor(s.context_mean)) / torch.tensor(s.context_std)
        with torch.no_grad():
            p = torch.sigmoid(self.context(x)).tolist()
        ranked = sorted(zip(p, candidates), reverse=True)[: s.max_context]
        return sorted(j for prob, j in ranked if prob > s.context_threshold)


def save_nets(nets: TaggerNets, folder: Path) -> dict[str, Any]:
    """Write the nets' weights beside each other; returns the settings for ``tagger.json``."""
    from safetensors.torch import save_file

    folder.mkdir(parents=True, exist_ok=True)
    weights = {f"{k}.{name}": t.detach().contiguous() for k, net in enumerate(nets.boundary)
               for name, t in net.state_dict().items()}
    if nets.lm_norm is not None:
        weights.update({"lm_norm.mean": nets.lm_norm.mean.contiguous(), "lm_norm.std": nets.lm_norm.std.contiguous()})
    save_file(weights, str(folder / "boundary.safetensors"))
    save_file({k: t.detach().contiguous() for k, t in nets.context.state_dict().items()},
              str(folder / "context.safetensors"))
    return asdict(nets.settings)


def load_nets(folder: Path, settings: dict[str, Any], embedding_dim: int) -> TaggerNets:
    """The nets of a trained tagger folder; refuses features of another version."""
    from safetensors.torch import load_file

    s = NetSettings(**settings)
    if s.features_version != FEATURES_VERSION:
        raise ValueError(f"{folder}: tagger trained on features {s.features_version!r}, this litseg computes "
                         f"{FEATURES_VERSION!r}; retrain it (python train.py +experiment=tagger)")
    # ship_tagger stores the nets in float16 (half the package size); they always run in float32
    weights = {name: t.float() for name, t in load_file(str(folder / "boundary.safetensors")).items()}
    d_in = input_width(embedding_dim, s)
    boundary = []
    for k in range(s.ensemble):
        net = BoundaryNet(d_in, s)
        net.load_state_dict({name.split(".", 1)[1]: t for name, t in weights.items() if name.split(".", 1)[0] == str(k)})
        boundary.append(net.eval())
    context = ContextNet()
    context.load_state_dict(load_file(str(folder / "context.safetensors")))
    norm = LMNorm(weights["lm_norm.mean"], weights["lm_norm.std"]) if s.lm_dim else None
    return TaggerNets(s, boundary, context.eval(), norm)


def block_text(texts: Sequence[str], para: Sequence[bool], block: tuple[int, int], head_words: int,
               tail_words: int) -> str:
    """What the writer reads of a block: its sentences (a line break where a paragraph starts), the
    middle left out as "[...]" when the block is longer than ``head_words + tail_words`` words."""
    a, b = block
    parts = []
    for i in range(a, b + 1):
        t = _SPACE.sub(" ", texts[i - 1]).strip()
        parts.append(("\n" if parts and para[i - 1] else "") + t)
    text = " ".join(parts).replace(" \n", "\n")
    words = text.split(" ")
    if len(words) <= head_words + tail_words:
        return text
    return " ".join(words[:head_words]) + " [...] " + " ".join(words[len(words) - tail_words:])
