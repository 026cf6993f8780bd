"""A LitSeg-Tagger folder with tiny random nets over the packaged MiniLM, for tests that run the
tagger end to end without a trained one (its cuts are whatever random weights give; the output
contract, validation and failure handling are what such tests check)."""

from __future__ import annotations

import json
from pathlib import Path


def tiny_tagger_dir(folder: str | Path, *, dimension: int = 384, threshold: float = -50.0) -> Path:
    """Write ``tagger.json`` and random nets sized for sentence vectors of ``dimension`` (MiniLM's
    384 by default, the encoder the folder names). A very low threshold cuts at every allowed gap."""
    import torch

    # lazy, like torch above: tagger_model imports torch
    from litseg.chunkers.tagger_model import BoundaryNet, ContextNet, NetSettings, TaggerNets, save_nets

    folder = Path(folder)
    settings = NetSettings(hidden=8, layers=1, cue_buckets=64, cue_dim=4, ensemble=1, threshold=threshold,
                           min_block=2, max_context=0, context_mean=[0.0] * 12, context_std=[1.0] * 12)
    torch.manual_seed(0)
    nets = TaggerNets(settings, [BoundaryNet(dimension + 10, settings)], ContextNet())
    meta = {"name": "tiny-tagger", "encoder": "default", "nets": save_nets(nets, folder), "digest": "tiny"}
    (folder / "tagger.json").write_text(json.dumps(meta), encoding="utf-8")
    return folder
