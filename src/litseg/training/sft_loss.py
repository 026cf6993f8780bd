"""An SFT loss that projects onto the vocabulary only where the answer is learned.

TRL's SFTTrainer scores every position through a chunked LM-head kernel; off Triton devices (a CPU)
it scores *all* positions, prompt included, with full-vocabulary entropy, although with
``completion_only_loss`` only the answer's tokens carry a label. For LitSeg-Lite the prompt (the
numbered chapter) is about seven times the answer, so on a CPU that head was about 30 % of a step.
Here the model's own forward gets ``logits_to_keep`` = the positions whose next token is trained,
and the loss is the usual token-mean cross-entropy over them (identical in value to TRL's ``nll``).
"""

from __future__ import annotations

from typing import Any

IGNORE = -100


def trained_positions(labels: Any) -> Any:
    """Positions ``p`` (over the batch) whose next token ``labels[:, p + 1]`` is trained."""
    return (labels[:, 1:] != IGNORE).any(dim=0).nonzero().squeeze(-1)


def selective_nll(model: Any, inputs: dict[str, Any], num_items_in_batch: Any = None) -> tuple[Any, dict[str, Any]]:
    """``(loss, stats)``: cross-entropy over the trained tokens, summed and divided by their count
    (``num_items_in_batch`` when the trainer counts over gradient-accumulation steps)."""
    import torch
    import torch.nn.functional as F

    labels = inputs["labels"]
    keep = trained_positions(labels)
    forward = {k: v for k, v in inputs.items() if k not in ("labels", "completion_mask", "assistant_masks")}
    if keep.numel() == 0:  # nothing to learn in this micro-batch: a differentiable zero
        keep = torch.zeros(1, dtype=torch.long, device=labels.device)
    out = model(**forward, logits_to_keep=keep, use_cache=False)
    targets = labels[:, 1:][:, keep]
    mask = targets != IGNORE
    logits = out.logits.float()[mask]
    gold = targets[mask]
    total = F.cross_entropy(logits, gold, reduction="sum") if gold.numel() else out.logits.sum() * 0.0
    count = mask.sum() if num_items_in_batch is None else num_items_in_batch
    loss = total / torch.as_tensor(count, device=total.device).clamp(min=1)
    with torch.no_grad():
        if gold.numel():
            logp = torch.log_softmax(logits, dim=-1)
            entropy = -(logp.exp() * logp).sum(-1).sum()
            correct = (logits.argmax(-1) == gold).sum()
        else:
            entropy = correct = torch.zeros((), device=total.device)
    return loss, {"n": mask.sum(), "entropy_sum": entropy, "correct": correct}


def selective_sft_trainer_class() -> type:
    """An ``SFTTrainer`` subclass using :func:`selective_nll` (built lazily: TRL is heavy)."""
    from trl import SFTTrainer

    class SelectiveHeadSFTTrainer(SFTTrainer):
        """SFTTrainer whose loss projects only the trained positions onto the vocabulary."""

        def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):  # noqa: ANN001
            if return_outputs or self.args.loss_type != "nll" or self.label_smoother is not None:
                return super().compute_loss(model, inputs, return_outputs=return_outputs,
                                            num_items_in_batch=num_items_in_batch)
            mode = "train" if self.model.training else "eval"
            loss, stats = selective_nll(model, inputs, num_items_in_batch)
            if self.args.average_tokens_across_devices and num_items_in_batch is not None:
                loss = loss * self.accelerator.num_processes
            n = self.accelerator.gather_for_metrics(stats["n"]).sum()
            ent = self.accelerator.gather_for_metrics(stats["entropy_sum"]).sum()
            hit = self.accelerator.gather_for_metrics(stats["correct"]).sum()
            self._metrics[mode]["entropy"].append((ent / n).item() if n > 0 else 0.0)
            self._metrics[mode]["mean_token_accuracy"].append((hit / n).item() if n > 0 else 0.0)
            if mode == "train" and "attention_mask" in inputs:
                self._total_train_tokens += int(self.accelerator.gather_for_metrics(inputs["attention_mask"].sum()).sum())
            self._metrics[mode]["num_tokens"] = [self._total_train_tokens]
            return loss

    return SelectiveHeadSFTTrainer
