"""Training the reading half of LitSeg-Tagger: the boundary scorer and the context scorer.

``python train.py +experiment=tagger`` runs two stages: ``boundary`` (here) and ``sft`` (the
writer of subtitles, a LoRA of the chat model trained by TRL on the teacher's blocks,
:mod:`litseg.training.writer_data`). The boundary stage:

1. reads the teacher units of every split (``data.split``: books, never chapters, are held out)
   and embeds their sentences with the frozen sentence encoder (cached in the stage folder, so a
   rerun or a resumed run does not pay again);
2. trains ``stage.boundary.seeds`` boundary nets (an ensemble: their scores are averaged) with
   binary cross-entropy on "a block starts here", teacher cuts weighted up and their neighbours
   labelled softly (one sentence either side is a near miss, not a false cut); each net's state
   is saved after every epoch, so a killed run continues where it stopped;
3. picks the decoding threshold on the validation books: by default the one at which the nets cut
   as often as the teacher does there (``threshold_rule: match_count``), so the threshold is set by
   how much the teacher cuts, not by the tolerance of the agreement score;
4. trains the context scorer on (block, earlier sentence) pairs and turns it on only at a
   threshold whose validation precision reaches ``context_min_precision`` (else it stays off and
   the record says so);
5. writes the nets and their settings to ``stages/boundary/model`` with the validation scores.
"""

from __future__ import annotations

import hashlib
import json
import logging
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from litseg.chunkers.tagger_model import (
    BoundaryNet,
    ContextNet,
    NetSettings,
    TaggerNets,
    context_candidates,
    context_pair_features,
    cue_tensor,
    save_nets,
    sentence_features,
)
from litseg.chunkers.tagger import encoder_text
from litseg.chunkers.tagger_lm import ALONE_FEATURES, LMNorm, load_sentence_lm
from litseg.embeddings import load_embedder
from litseg.segmentation.agreement import micro_boundary_f1
from litseg.segmentation.cut_decoding import blocks_from_cuts, decode_cuts
from litseg.training.config import BoundarySettings
from litseg.training.data import DataReport, TeacherUnit, teacher_units_by_split

log = logging.getLogger(__name__)


@dataclass
class EncodedUnit:
    """A teacher unit ready for the nets: sentence texts, paragraph starts, embeddings, cuts."""

    unit: TeacherUnit
    features: Any  # torch [n, d]
    cues: Any  # torch [n, k]
    embeddings: Any  # torch [n, dim]
    target: Any  # torch [n]: 1 where a teacher block starts
    cuts: list[int] = field(default_factory=list)
    lm: Any = None  # torch [n, lm_dim]: the raw LM sentence features (nets trained with an LM)


def cache_counts(units: Sequence[TeacherUnit], missing: Sequence[TeacherUnit]) -> dict[str, int]:
    """Units (distinct keys) a feature cache lacked and so were computed here, and those it held."""
    computed = len({u.key for u in missing})
    return {"computed": computed, "cached": len({u.key for u in units}) - computed}


def embed_units(units: Sequence[TeacherUnit], encoder: str, cache: Path,
                record: dict[str, Any] | None = None) -> dict[str, Any]:
    """Sentence embeddings of every unit (unit key -> float32 array), cached in ``cache``; ``record``
    gets how many units were embedded here and how many came from the cache."""
    stored = _load_npz(cache)
    missing = [u for u in units if u.key not in stored]
    if record is not None:
        record.update(cache_counts(units, missing))
    if missing:
        embedder = load_embedder(None if encoder == "default" else encoder)
        t0 = time.perf_counter()
        flat = [encoder_text(t) for u in missing for t in u.sentences]
        vectors = embedder.encode(flat)
        log.info("embedded %d sentences of %d units in %.0f s", len(flat), len(missing), time.perf_counter() - t0)
        at = 0
        for u in missing:
            stored[u.key] = vectors[at:at + u.n_sentences]
            at += u.n_sentences
        _save_npz(stored, cache)
    return {u.key: stored[u.key] for u in units}


def lm_units(units: Sequence[TeacherUnit], spec: str, layers: Sequence[int], cache: Path,
             last_layers: Sequence[int] = (), alone: bool = False, record: dict[str, Any] | None = None) -> dict[str, Any]:
    """LM sentence features of every unit (unit key -> float16 array, the hidden states' precision
    in bfloat16 and half the disk), cached in ``cache`` and saved every 25 units, so a killed run
    resumes where it stopped (reading every unit takes about 3 s per 2,000 words of one core).
    ``record`` gets how many units were read here, in how many seconds, and how many came from the cache."""
    import numpy as np

    stored = _load_npz(cache)
    missing = [u for u in units if u.key not in stored]
    started = time.perf_counter()
    if record is not None:
        record.update(cache_counts(units, missing))
    if missing:
        reader = load_sentence_lm(spec, layers, last_layers, alone)
        t0 = time.perf_counter()
        for i, u in enumerate(missing, 1):
            para = u.paragraph_starts or [False] * u.n_sentences
            stored[u.key] = reader.features(u.sentences, para).numpy().astype(np.float16)
            if i % 25 == 0 or i == len(missing):
                _save_npz(stored, cache)
                log.info("LM features: %d of %d units (%.0f s)", i, len(missing), time.perf_counter() - t0)
    if record is not None:
        record["seconds"] = round(time.perf_counter() - started, 3)
    return {u.key: stored[u.key] for u in units}


def _load_npz(cache: Path) -> dict[str, Any]:
    """A unit-keyed array cache (empty when there is none yet)."""
    import numpy as np

    if not cache.is_file():
        return {}
    with np.load(cache) as data:
        return {k: data[k] for k in data.files}


def _save_npz(arrays: dict[str, Any], cache: Path) -> None:
    """Written whole to a temporary file first, so a kill never leaves half a cache."""
    import numpy as np

    cache.parent.mkdir(parents=True, exist_ok=True)
    tmp = cache.with_suffix(".tmp.npz")
    np.savez(tmp, **arrays)
    tmp.replace(cache)


def encode(units: Sequence[TeacherUnit], vectors: dict[str, Any], buckets: int, lm: dict[str, Any] | None = None,
           norm: LMNorm | None = None, lm_groups: Sequence[tuple[int, int]] | None = None) -> list[EncodedUnit]:
    """The units as the boundary nets read them; ``lm``, ``norm`` and ``lm_groups``: LM features,
    their training statistics and hidden-state groups (:meth:`NetSettings.lm_groups`), for nets
    trained with an LM."""
    import torch

    out = []
    for u in units:
        emb = torch.tensor(vectors[u.key])
        para = u.paragraph_starts or [False] * u.n_sentences
        target = torch.zeros(u.n_sentences)
        cuts = sorted({int(s["from_idx"]) for s in u.segments if int(s["from_idx"]) > 1})
        for c in cuts:
            target[c - 1] = 1.0
        raw = None if lm is None else torch.tensor(lm[u.key]).float()
        features = sentence_features(u.sentences, para, emb, None if raw is None or norm is None else norm.apply(raw),
                                     lm_groups)
        out.append(EncodedUnit(u, features, cue_tensor(u.sentences, buckets), emb, target, cuts, raw))
    return out


def padded_batch(units: Sequence[EncodedUnit]) -> tuple[Any, Any, Any, Any, Any]:
    """Features, cues, lengths, targets and the loss mask of several units, padded to the longest.
    The mask leaves out padding and each unit's first sentence (a block always starts there)."""
    import torch

    lengths = torch.tensor([u.features.shape[0] for u in units])
    n = int(lengths.max())
    width = max(u.cues.shape[1] for u in units)
    x = torch.zeros(len(units), n, units[0].features.shape[1])
    cues = torch.zeros(len(units), n, width, dtype=torch.long)
    y = torch.zeros(len(units), n)
    mask = torch.zeros(len(units), n)
    for i, u in enumerate(units):
        k = u.features.shape[0]
        x[i, :k], cues[i, :k, : u.cues.shape[1]], y[i, :k] = u.features, u.cues, u.target
        mask[i, 1:k] = 1.0
    return x, cues, lengths, y, mask


def _soft_target(target: Any, neighbour: float) -> Any:
    """1 at a teacher cut, ``neighbour`` one sentence either side of one (a near miss), else 0."""
    import torch

    near = torch.zeros_like(target)
    near[..., 1:] += target[..., :-1]
    near[..., :-1] += target[..., 1:]
    return torch.maximum(target, neighbour * (near > 0).float())


def train_boundary_net(train: Sequence[EncodedUnit], s: BoundarySettings, net_settings: NetSettings, seed: int,
                       checkpoint: Path) -> BoundaryNet:
    """One boundary net, trained on batches of units; resumable: its state and epoch are saved after
    every epoch."""
    import torch
    from torch import nn

    torch.manual_seed(seed)
    rng = random.Random(seed)
    net = BoundaryNet(train[0].features.shape[1], net_settings)
    opt = torch.optim.AdamW(net.parameters(), lr=s.learning_rate, weight_decay=s.weight_decay)
    start = 0
    if checkpoint.is_file():
        state = torch.load(checkpoint, weights_only=False)
        net.load_state_dict(state["net"])
        opt.load_state_dict(state["opt"])
        start = int(state["epoch"]) + 1
        rng.setstate(state["rng"])
        log.info("boundary net %d resumes after epoch %d", seed, start)
    usable = [u for u in train if u.features.shape[0] > 1]
    order = list(range(len(usable)))
    for epoch in range(start, s.epochs):
        net.train()
        rng.shuffle(order)
        total = 0.0
        for at in range(0, len(order), s.batch_units):
            x, cues, lengths, y, mask = padded_batch([usable[i] for i in order[at:at + s.batch_units]])
            logits = net(x, cues, lengths)
            weight = (1 + (s.positive_weight - 1) * y) * mask
            loss = (nn.functional.binary_cross_entropy_with_logits(
                logits, _soft_target(y, s.neighbour_label), reduction="none") * weight).sum() / mask.sum()
            opt.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(net.parameters(), 1.0)
            opt.step()
            total += loss.item()
        log.info("boundary net %d epoch %d: loss %.4f", seed, epoch, total / max(1, len(order) // s.batch_units))
        torch.save({"net": net.state_dict(), "opt": opt.state_dict(), "epoch": epoch, "rng": rng.getstate()},
                   checkpoint)
    return net.eval()


def unit_scores(nets: TaggerNets, units: Sequence[EncodedUnit]) -> list[list[float]]:
    """The nets' block-start scores of every unit (computed once, decoded at many thresholds)."""
    return [nets.scores(u.unit.sentences, u.unit.paragraph_starts or [False] * u.unit.n_sentences, u.embeddings,
                        u.lm) for u in units]


def score_cuts(scores: Sequence[Sequence[float]], units: Sequence[EncodedUnit], threshold: float,
               min_block: int) -> dict[str, Any]:
    """Agreement with the teacher's cuts on ``units`` (within one sentence, and exact) of the cuts
    decoded from ``scores`` (one list per unit) at ``threshold``."""
    pairs = []
    for u, unit_score in zip(units, scores, strict=True):
        cuts = decode_cuts(unit_score, threshold=threshold, min_block=min_block)
        blocks = [{"from_idx": a, "to_idx": b} for a, b in blocks_from_cuts(cuts, u.unit.n_sentences)]
        pairs.append((blocks, list(u.unit.segments)))
    near, exact = micro_boundary_f1(pairs, tolerance=1), micro_boundary_f1(pairs, tolerance=0)
    return {"threshold": threshold, "f1": near.f1, "precision": near.precision, "recall": near.recall,
            "exact_f1": exact.f1, "matched": near.matched, "predicted": near.predicted, "reference": near.reference}


#: Decoding thresholds tried: a fine grid, since with steps of 0.25 the count the ``match_count``
#: rule matches could miss the teacher's by 10 %.
THRESHOLD_GRID = [round(-2.0 + 0.025 * k, 3) for k in range(161)]


def pick_threshold(scores: Sequence[Sequence[float]], units: Sequence[EncodedUnit], rule: str,
                   min_block: int) -> dict[str, Any]:
    """The threshold ``rule`` picks for the cuts decoded from ``scores`` on ``units``: ``match_count``
    (as many cuts as the teacher) or ``best_f1``; with the scores at every candidate."""
    tried = [score_cuts(scores, units, t, min_block) for t in THRESHOLD_GRID]
    if rule == "best_f1":
        best = max(tried, key=lambda r: (r["f1"], -abs(r["predicted"] - r["reference"])))
    elif rule == "match_count":
        best = min(tried, key=lambda r: (abs(r["predicted"] - r["reference"]), -r["f1"]))
    else:
        raise ValueError(f"stage.boundary.threshold_rule: match_count or best_f1, got {rule!r}")
    return {"chosen": best, "tried": tried, "rule": rule}


def choose_threshold(nets: TaggerNets, validation: Sequence[EncodedUnit], s: BoundarySettings) -> dict[str, Any]:
    """The decoding threshold chosen on the validation books, with the scores at every candidate."""
    return pick_threshold(unit_scores(nets, validation), validation, s.threshold_rule, s.min_block)


def net_settings_for(s: BoundarySettings, ensemble: int) -> NetSettings:
    """The nets' shapes and decoding rule from the stage's settings (``ensemble`` nets averaged)."""
    lm = s.lm_model != "none"
    return NetSettings(cue_buckets=s.cue_buckets, cue_dim=s.cue_dim, hidden=s.hidden, layers=s.layers,
                       dropout=s.dropout, ensemble=ensemble, min_block=s.min_block,
                       lm_model=s.lm_model if lm else "none", lm_layers=list(s.lm_layers) if lm else [],
                       lm_last_layers=list(s.lm_last_layers) if lm else [], lm_alone=bool(s.lm_alone) and lm)


def context_pairs(units: Sequence[EncodedUnit]) -> tuple[Any, Any, list[tuple[int, int, int]]]:
    """Features and labels of every (teacher block, earlier non-adjacent sentence) pair."""
    import torch

    rows, labels, where = [], [], []
    for ui, u in enumerate(units):
        para = u.unit.paragraph_starts or [False] * u.unit.n_sentences
        for bi, seg in enumerate(u.unit.segments):
            block = (int(seg["from_idx"]), int(seg["to_idx"]))
            candidates = context_candidates(block)
            if not candidates:
                continue
            rows.append(context_pair_features(u.unit.sentences, para, u.embeddings, block, candidates))
            gold = set(seg.get("context_idx") or [])
            labels.extend(float(j in gold) for j in candidates)
            where.extend((ui, bi, j) for j in candidates)
    if not rows:
        return torch.zeros(0, 12), torch.zeros(0), []
    return torch.cat(rows), torch.tensor(labels), where


def train_context(train: Sequence[EncodedUnit], validation: Sequence[EncodedUnit], s: BoundarySettings,
                  net_settings: NetSettings, seed: int = 0) -> tuple[ContextNet, dict[str, Any]]:
    """The context scorer and the threshold it runs at (1.0, i.e. off, when none is precise enough)."""
    import torch
    from torch import nn

    torch.manual_seed(seed)
    x, y, _ = context_pairs(train)
    net = ContextNet()
    if len(y) == 0 or float(y.sum()) == 0:
        net_settings.context_mean, net_settings.context_std = [0.0] * 12, [1.0] * 12
        net_settings.context_threshold, net_settings.max_context = 1.0, 0
        return net, {"pairs": 0, "on": False, "why": "no teacher context in the training units"}
    mean, std = x.mean(0), x.std(0) + 1e-6
    net_settings.context_mean, net_settings.context_std = mean.tolist(), std.tolist()
    opt = torch.optim.Adam(net.parameters(), lr=3e-3)
    positive = torch.tensor(float((len(y) - y.sum()) / y.sum()) ** 0.5)
    for _ in range(s.context_epochs):
        loss = nn.functional.binary_cross_entropy_with_logits(net((x - mean) / std), y, pos_weight=positive)
        opt.zero_grad()
        loss.backward()
        opt.step()
    report = context_thresholds(net.eval(), validation, mean, std, s.max_context)
    good = [r for r in report if r["picked"] and r["precision"] >= s.context_min_precision]
    chosen = max(good, key=lambda r: r["recall"]) if good else None
    net_settings.max_context = s.max_context if chosen else 0
    net_settings.context_threshold = chosen["threshold"] if chosen else 1.0
    return net, {"pairs": int(len(y)), "positives": int(y.sum()), "validation": report, "on": chosen is not None,
                 "chosen": chosen, "min_precision": s.context_min_precision}


def context_thresholds(net: Any, validation: Sequence[EncodedUnit], mean: Any, std: Any, k: int) -> list[dict[str, Any]]:
    """Precision and recall of the top-``k`` context picks per block at a range of thresholds."""
    import torch

    x, y, where = context_pairs(validation)
    if len(y) == 0:
        return []
    with torch.no_grad():
        p = torch.sigmoid(net((x - mean) / std)).tolist()
    by_block: dict[tuple[int, int], list[tuple[float, float]]] = {}
    for prob, label, (ui, bi, _) in zip(p, y.tolist(), where):
        by_block.setdefault((ui, bi), []).append((prob, label))
    gold = float(y.sum())
    out = []
    for threshold in (0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9):
        hit = picked = 0.0
        for items in by_block.values():
            for prob, label in sorted(items, reverse=True)[:k]:
                if prob > threshold:
                    picked += 1
                    hit += label
        out.append({"threshold": threshold, "picked": int(picked), "precision": hit / picked if picked else 0.0,
                    "recall": hit / gold if gold else 0.0})
    return out


def reading_columns(base: Any, s: Any, width: int) -> list[int] | None:
    """The columns of LM features read with ``base``'s readings (``width`` per sentence, laid out as
    :meth:`litseg.chunkers.tagger_lm.SentenceLM.features` writes them) that reading with ``s``'s
    fewer optional readings keeps; None when both read the same. Readings can only be left out:
    ``s`` may drop the last-token states or the context gain, never add one ``base`` lacks."""
    if (list(s.lm_last_layers), bool(s.lm_alone)) == (list(base.lm_last_layers), bool(base.lm_alone)):
        return None
    if (s.lm_last_layers and list(s.lm_last_layers) != list(base.lm_last_layers)) or (s.lm_alone and not base.lm_alone):
        raise ValueError("a reading can only leave out LM readings the features were read with")
    means, lasts = len(base.lm_layers), len(base.lm_last_layers)
    alone = ALONE_FEATURES if base.lm_alone else 0
    size = (width - 2 - alone) // (means + lasts)
    columns = list(range(means * size))
    if s.lm_last_layers:
        columns += range(means * size, (means + lasts) * size)
    if s.lm_alone:
        columns += range((means + lasts) * size, (means + lasts) * size + alone)
    return columns + [width - 2, width - 1]


def lm_cache(stage_dir: Path, s: Any) -> Path:
    """The stage folder's LM feature cache for ``s``'s model, layers and readings."""
    key = f"{s.lm_model}|{list(s.lm_layers)}"
    if s.lm_last_layers or s.lm_alone:  # the optional readings; without them the key (and cache) is the first one's
        key += f"|last={list(s.lm_last_layers)}|alone={bool(s.lm_alone)}"
    return stage_dir / f"lm-{hashlib.sha256(key.encode()).hexdigest()[:8]}.npz"


def take_from_wider_cache(units: Sequence[TeacherUnit], s: BoundarySettings, cache: Path) -> int:
    """Fill ``cache`` from the cache of the same readings plus the context gain, where the stage
    folder has one: the features without the context gain are its columns, so nets trained without
    it (``lm_alone: false``, the faster reading) reuse hours of LM reading instead of repeating
    them. Returns how many units were taken."""
    if s.lm_alone:
        return 0
    wider_settings = replace(s, lm_alone=True)
    wider_path = lm_cache(cache.parent, wider_settings)
    if not wider_path.is_file():
        return 0
    stored, wider = _load_npz(cache), _load_npz(wider_path)
    taken = [u.key for u in units if u.key not in stored and u.key in wider]
    if not taken:
        return 0
    columns = reading_columns(wider_settings, s, next(iter(wider.values())).shape[1])
    for key in taken:
        stored[key] = wider[key][:, columns]
    _save_npz(stored, cache)
    log.info("LM features of %d units taken from %s (the same readings with the context gain)", len(taken), wider_path.name)
    return len(taken)


def unit_features(units: Sequence[TeacherUnit], s: BoundarySettings, stage_dir: Path,
                  record: dict[str, Any] | None = None) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """Sentence embeddings and (when ``s.lm_model`` is not ``none``) raw LM features of every unit,
    read from and added to the stage folder's caches (benchmarks/tagger_ablation.py reads them too).
    ``record`` gets, per kind of feature, how many units were computed here and how many were cached
    (a stage that found its LM features cached took minutes, not hours: its time says so only with this)."""
    record = {} if record is None else record
    # the caches are keyed by what made them, so another encoder or LM in the same run folder never reads these
    cache = stage_dir / f"embeddings-{hashlib.sha256(s.encoder.encode()).hexdigest()[:8]}.npz"
    vectors = embed_units(units, s.encoder, cache, record.setdefault("embeddings", {}))
    if s.lm_model == "none":
        return vectors, None
    cache = lm_cache(stage_dir, s)
    taken = take_from_wider_cache(units, s, cache)
    lm = lm_units(units, s.lm_model, s.lm_layers, cache, s.lm_last_layers, s.lm_alone, record.setdefault("lm", {}))
    if taken:
        record["lm"]["from_wider_cache"] = taken
    return vectors, lm


def train_tagger_nets(units: dict[str, list[TeacherUnit]], s: BoundarySettings, stage_dir: Path) -> dict[str, Any]:
    """The boundary stage: nets trained, threshold and context chosen on validation, files written."""
    net_settings = net_settings_for(s, ensemble=s.seeds)
    if not units.get("train"):
        raise ValueError("the boundary stage has no training unit (data.runs / data.split)")
    features: dict[str, Any] = {}
    vectors, lm = unit_features([u for split in units.values() for u in split], s, stage_dir, features)
    norm = None
    if lm is not None:
        norm = LMNorm.fit([torch_rows(lm[u.key]) for u in units["train"]])
        net_settings.lm_dim = int(norm.mean.shape[0])
    groups = net_settings.lm_groups() if lm is not None else None
    train = encode(units["train"], vectors, s.cue_buckets, lm, norm, groups)
    chosen_on = "validation"
    if not units.get("validation"):
        # a run without validation books (a one-book smoke run) chooses on what it trained on, and says so
        log.warning("boundary stage: no validation books; the threshold is chosen on the training units")
        chosen_on = "train"
    validation = encode(units[chosen_on], vectors, s.cue_buckets, lm, norm, groups)
    boundary = [train_boundary_net(train, s, net_settings, seed, stage_dir / f"net-{seed}.pt")
                for seed in range(s.seeds)]
    context, context_report = train_context(train, validation, s, net_settings)
    nets = TaggerNets(net_settings, boundary, context, norm)
    threshold = choose_threshold(nets, validation, s)
    net_settings.threshold = threshold["chosen"]["threshold"]
    settings = save_nets(nets, stage_dir / "model")
    record = {"settings": settings, "encoder": s.encoder, "threshold": threshold, "context": context_report,
              "units": {k: len(v) for k, v in units.items()}, "validation": threshold["chosen"],
              "chosen_on": chosen_on, "features": features}
    (stage_dir / "model" / "training.json").write_text(json.dumps(record, indent=1, default=str) + "\n")
    return record


def torch_rows(array: Any) -> Any:
    import torch

    return torch.tensor(array).float()


def run_boundary_stage(plan: Any, stage_dir: Path) -> dict[str, Any]:
    """The ``boundary`` stage of ``train.py``: the teacher units of the run's data, by split, through
    :func:`train_tagger_nets`; the stage record says which tensors training changed."""
    tc = plan.tc
    started = time.time()
    report = DataReport(schema="boundary", prompt_version=tc.prompt.version)
    units = teacher_units_by_split(tc.data, plan.runs, report)
    stage_dir.mkdir(parents=True, exist_ok=True)
    record = train_tagger_nets(units, tc.stage.boundary, stage_dir)
    record.update(seconds=round(time.time() - started, 3), data=report.to_dict(),
                  params=changed_tensors(stage_dir / "model", record["settings"]))
    return record


def changed_tensors(model_dir: Path, settings: dict[str, Any]) -> dict[str, int]:
    """How many tensors of the saved nets differ from a freshly initialised net of the same shape
    (a boundary stage that trained nothing would leave them at their initial values)."""
    import torch
    from safetensors.torch import load_file

    saved = load_file(str(model_dir / "boundary.safetensors"))
    total = changed = 0
    for k in range(int(settings["ensemble"])):
        torch.manual_seed(k)
        fresh = BoundaryNet(next(t for n, t in saved.items() if n.startswith(f"{k}.inp.1.weight")).shape[1]
                            - int(settings["cue_dim"]), NetSettings(**settings)).state_dict()
        for name, t in fresh.items():
            total += 1
            changed += int(not torch.equal(t, saved[f"{k}.{name}"]))
    return {"trainable_tensors": total, "changed_tensors": changed}
