"""Did a stage change its trainable tensors? Snapshots that also hold under DeepSpeed.

Two things make a naive before/after comparison wrong on GPUs:

* **ZeRO-3** keeps each parameter in shards across the processes; outside a forward or backward
  pass the module's tensor is an empty placeholder whose real shape is in ``ds_shape`` (and
  ``ds_id``, ``ds_numel``, ``ds_tensor`` describe the shard). Reading one means gathering it
  with ``deepspeed.zero.GatheredParameters``, a collective call that every process must make.
  Comparing placeholders finds nothing changed; comparing a full tensor taken before DeepSpeed
  partitioned the model with a placeholder after it fails outright.
* **bf16 under ZeRO-2/3**: the engine casts the module (fp32 LoRA weights included) to bf16 and
  keeps fp32 master weights in the optimizer. A weight the optimizer never moved then differs
  from its fp32 snapshot by rounding alone, so every ``lora_A`` would count as changed. Each
  snapshot is compared in the dtype the parameter has afterwards.

Parameters are gathered in groups of at most :data:`GATHER_ELEMENTS` elements, so a full
fine-tuning snapshot never needs the whole model on one GPU at once.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

#: Elements gathered at once under ZeRO-3 (256 M: half a GiB in bf16).
GATHER_ELEMENTS = 2**28


def is_partitioned(param: Any) -> bool:
    """A ZeRO-3 parameter (its data lives in shards; the tensor itself is a placeholder)."""
    return hasattr(param, "ds_id")


def _numel(param: Any) -> int:
    return int(getattr(param, "ds_numel", None) or param.numel())


def _groups(named: list[tuple[str, Any]]) -> Iterator[list[tuple[str, Any]]]:
    group: list[tuple[str, Any]] = []
    size = 0
    for item in named:
        if group and size + _numel(item[1]) > GATHER_ELEMENTS:
            yield group
            group, size = [], 0
        group.append(item)
        size += _numel(item[1])
    if group:
        yield group


@contextmanager
def gathered(params: list[Any]) -> Iterator[None]:
    """The full tensors of ``params`` while inside (read only); a no-op without ZeRO-3."""
    if not any(is_partitioned(p) for p in params):
        yield
        return
    import deepspeed

    with deepspeed.zero.GatheredParameters(params, modifier_rank=None):
        yield


def _trainable(model: Any, names: set[str] | None = None) -> list[tuple[str, Any]]:
    return [(n, p) for n, p in model.named_parameters()
            if (p.requires_grad if names is None else n in names)]


def trainable_snapshot(model: Any) -> dict[str, Any]:
    """A CPU copy of every trainable tensor, in its own dtype (gathered under ZeRO-3)."""
    snapshot: dict[str, Any] = {}
    for group in _groups(_trainable(model)):
        with gathered([p for _, p in group]):
            for name, param in group:
                snapshot[name] = param.detach().cpu().clone()
    return snapshot


def changed_tensors(before: dict[str, Any], model: Any) -> dict[str, Any]:
    """How many of the snapshot's tensors changed: ``trainable_tensors``, ``changed_tensors`` and
    ``abs_delta`` (the summed absolute change, in float32), each tensor compared in the dtype it
    has now (gathered under ZeRO-3)."""
    import torch

    changed = 0
    delta = 0.0
    for group in _groups(_trainable(model, set(before))):
        with gathered([p for _, p in group]):
            for name, param in group:
                after = param.detach().cpu()
                old = before[name].to(after.dtype)
                if old.shape != after.shape:
                    raise RuntimeError(f"{name}: shape {tuple(after.shape)} after training, "
                                       f"{tuple(old.shape)} before; the parameter was not gathered")
                if not torch.equal(after, old):
                    changed += 1
                    delta += float((after.float() - old.float()).abs().sum())
    return {"trainable_tensors": len(before), "changed_tensors": changed, "abs_delta": delta}
