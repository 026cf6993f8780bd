"""The trained LoRA adapter: save it, merge it, and point any LLM backend at it.

A run leaves ``adapter/`` (peft's ``adapter_config.json`` + ``adapter_model.safetensors``, the
tokenizer, and ``litseg_adapter.json`` naming the base model, prompt and schema it was trained
for). Inference paths:

* transformers backend: ``python annotate.py method=litseg_lite llm=transformers llm.model=BASE
  llm.adapter=RUN/adapter input=...`` (peft applies it; ``merge_adapter`` folds it in).
* embedded model as base: ``llm=embedded llm.adapter=RUN/adapter``.
* vLLM: ``llm=vllm llm.model=BASE llm.adapter=RUN/adapter llm.max_lora_rank=R`` (a
  ``LoRARequest`` on every request).
* OpenAI-compatible servers: serve it, e.g. ``vllm serve BASE --enable-lora --lora-modules
  litseg=RUN/adapter``, then ``llm=openai llm.model=litseg``; or serve ``merged/`` (from
  :func:`merge_adapter`) as a plain model to any server.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from litseg.errors import SetupError

METADATA = "litseg_adapter.json"


def save_adapter(source: Any, tokenizer: Any, target: str | Path, metadata: dict[str, Any], *,
                 main: bool = True) -> Path:
    """Write the adapter (or, for full fine-tuning, the model) with tokenizer and metadata.

    ``source`` is a trainer (its ``save_model`` gathers sharded weights, so every process must
    call this; only the main one writes) or a model with ``save_pretrained``.
    """
    out = Path(target)
    tmp = out.with_name(out.name + ".partial")
    if main:
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
    if hasattr(source, "save_model"):
        source.save_model(str(tmp))  # saves the processing class (tokenizer) too
        source.accelerator.wait_for_everyone()
    elif main:
        source.save_pretrained(str(tmp))
    if not main:
        return out
    _check_weights_written(tmp)
    if tokenizer is not None:
        tokenizer.save_pretrained(str(tmp))
    (tmp / METADATA).write_text(json.dumps(metadata, indent=2, default=str) + "\n", encoding="utf-8")
    shutil.rmtree(out, ignore_errors=True)
    tmp.rename(out)  # a reader never sees a half-written adapter
    return out


#: What a saved adapter (or, for full fine-tuning, a saved model) holds its weights in.
WEIGHT_FILES = ("adapter_model.*", "model*.safetensors", "pytorch_model*.bin")


def _check_weights_written(folder: Path) -> None:
    """A trainer that could not gather ZeRO-3 weights saves a DeepSpeed checkpoint instead of the
    adapter and only logs a warning; the stage would then leave an adapter folder without weights."""
    if not any(any(folder.glob(pattern)) for pattern in WEIGHT_FILES):
        raise SetupError(f"the trainer wrote no weights into {folder} (under DeepSpeed ZeRO-3 the accelerate config "
                         "needs zero3_save_16bit_model: true, as conf/accelerate/zero3.yaml has); rerun into the "
                         "same run directory once fixed: training resumes from the last checkpoint")


def adapter_metadata(adapter_dir: str | Path) -> dict[str, Any]:
    path = Path(adapter_dir) / METADATA
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}


def is_adapter(path: str | Path) -> bool:
    return (Path(path) / "adapter_config.json").is_file()


def merge_adapter(base_model: str | Path, adapter_dir: str | Path, target: str | Path, *,
                  dtype: str = "float32") -> Path:
    """Fold the LoRA into the base weights and save a plain model directory (tokenizer included)."""
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    base = AutoModelForCausalLM.from_pretrained(str(base_model), dtype=getattr(torch, dtype))
    merged = PeftModel.from_pretrained(base, str(adapter_dir)).merge_and_unload()
    out = Path(target)
    out.mkdir(parents=True, exist_ok=True)
    merged.save_pretrained(str(out))
    tokenizer_source = adapter_dir if (Path(adapter_dir) / "tokenizer_config.json").is_file() else base_model
    AutoTokenizer.from_pretrained(str(tokenizer_source)).save_pretrained(str(out))
    meta = adapter_metadata(adapter_dir)
    (out / METADATA).write_text(json.dumps({**meta, "merged_from": str(adapter_dir)}, indent=2) + "\n")
    return out
