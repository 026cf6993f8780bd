"""Whether a stage changed its trainable tensors, under DeepSpeed too (litseg.training.params).

No DeepSpeed here: ZeRO-3 is stood in for as it looks from outside, parameters whose tensor is an
empty placeholder with ``ds_*`` attributes, and a ``deepspeed.zero.GatheredParameters`` that puts
the full tensor back while inside.
"""

from __future__ import annotations

import sys
import types
from contextlib import contextmanager

import pytest

torch = pytest.importorskip("torch")

from litseg.training.params import changed_tensors, trainable_snapshot  # noqa: E402


class Zero3:
    """A stand-in for ZeRO-3's partitioning of a module's parameters (one process: one shard)."""

    def __init__(self) -> None:
        self.shards: dict[int, torch.Tensor] = {}

    def partition(self, module: torch.nn.Module) -> None:
        for i, p in enumerate(module.parameters()):
            self.shards[i] = p.data.clone()
            p.ds_id, p.ds_shape, p.ds_numel = i, tuple(p.shape), p.numel()
            p.data = torch.empty(0, dtype=p.dtype)

    def step(self, module: torch.nn.Module, name: str, delta: float) -> None:
        """An optimizer step on one parameter's shard."""
        p = dict(module.named_parameters())[name]
        self.shards[p.ds_id] += delta

    def module(self) -> types.ModuleType:
        shards = self.shards

        @contextmanager
        def gathered_parameters(params, modifier_rank=None):
            assert modifier_rank is None  # read-only: no rank writes back
            for p in params:
                p.data = shards[p.ds_id].clone()
            try:
                yield
            finally:
                for p in params:
                    p.data = torch.empty(0, dtype=p.dtype)

        return types.SimpleNamespace(zero=types.SimpleNamespace(GatheredParameters=gathered_parameters))


def lora_like() -> torch.nn.Module:
    torch.manual_seed(0)
    net = torch.nn.Module()
    net.base = torch.nn.Linear(8, 8)
    net.lora_A = torch.nn.Linear(8, 2, bias=False)
    net.lora_B = torch.nn.Linear(2, 8, bias=False)
    net.base.requires_grad_(False)
    return net


@pytest.fixture
def zero3(monkeypatch) -> Zero3:
    stand_in = Zero3()
    monkeypatch.setitem(sys.modules, "deepspeed", stand_in.module())
    return stand_in


def test_zero3_placeholders_are_gathered_before_and_after(zero3):
    net = lora_like()
    zero3.partition(net)
    before = trainable_snapshot(net)
    assert before["lora_A.weight"].shape == (2, 8)  # the full tensor, not the empty placeholder
    assert changed_tensors(before, net)["changed_tensors"] == 0
    zero3.step(net, "lora_B.weight", 0.5)
    change = changed_tensors(before, net)
    assert change["trainable_tensors"] == 2 and change["changed_tensors"] == 1
    assert change["abs_delta"] == pytest.approx(0.5 * 16)


def test_a_snapshot_taken_before_deepspeed_partitioned_the_model_still_compares(zero3):
    # The model loaded whole (zero.Init off), the engine partitioned it during train(): the stage
    # once crashed here, subtracting an empty placeholder from the full snapshot.
    net = lora_like()
    before = trainable_snapshot(net)
    zero3.partition(net)
    zero3.step(net, "lora_A.weight", -0.25)
    assert changed_tensors(before, net)["changed_tensors"] == 1


def test_a_weight_only_cast_to_bf16_did_not_change():
    # ZeRO-2/3 with bf16 casts the module (fp32 LoRA included) and keeps fp32 master weights: a
    # lora_A the optimizer never moved differs from its fp32 snapshot by rounding only, and every
    # adapter then counted as trained, so TRAINED NOTHING could never fire.
    net = lora_like()
    before = trainable_snapshot(net)
    net.to(torch.bfloat16)
    assert changed_tensors(before, net)["changed_tensors"] == 0
    with torch.no_grad():
        net.lora_B.weight += 1.0
    change = changed_tensors(before, net)
    assert change["changed_tensors"] == 1 and change["abs_delta"] == pytest.approx(16.0, rel=1e-2)
