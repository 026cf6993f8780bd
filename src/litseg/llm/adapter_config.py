"""The ``llm`` config that runs a trained student: its base model with its LoRA adapter.

Inference paths (``train.py`` leaves ``adapter/``: peft's files, the tokenizer, and
``litseg_adapter.json`` naming the base model, prompt and schema it was trained for):

* transformers backend: ``python annotate.py method=litseg_lite llm=transformers llm.model=BASE
  llm.adapter=RUN/adapter input=...``; the embedded model as base: ``llm=embedded llm.adapter=RUN/adapter``.
* vLLM: ``llm=vllm llm.model=BASE llm.adapter=RUN/adapter llm.max_lora_rank=R``.
* OpenAI-compatible servers: serve it, e.g. ``vllm serve BASE --enable-lora --lora-modules
  litseg=RUN/adapter``, then ``llm=openai llm.model=litseg``.

It lives in the LLM layer because both the trainer (its own evaluation) and the RAG evaluation
(students as chunkers) build it, and those two never import each other.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


def inference_llm_config(model_path: str, adapter_dir: str | Path | None, *, backend: str = "transformers",
                         embedded: bool = False, lora_rank: int | None = None, cache: bool = False,
                         **settings: Any) -> dict[str, Any]:
    """An ``llm`` config (for :func:`~litseg.llm.factory.build_llm`) that runs the student.

    ``embedded`` uses the embedded GGUF as base (the model the adapter was trained on when
    ``model.path=embedded``). The response cache is off by default: the adapter directory's path
    stays the same when it is retrained, so cached answers could belong to older weights.
    """
    adapter = str(adapter_dir) if adapter_dir is not None else None
    if backend == "vllm":
        config: dict[str, Any] = {"backend": "vllm", "model": model_path, "adapter": adapter}
        if lora_rank:
            config["max_lora_rank"] = max(8, int(lora_rank))
    elif backend == "transformers":
        config = {"backend": "embedded"} if embedded else {"backend": "transformers", "model": model_path}
        config["adapter"] = adapter
    else:
        raise ValueError(f"no inference recipe for backend {backend!r} (transformers | vllm; "
                         "for a server see litseg.llm.adapter_config)")
    config.update(settings)
    if cache:
        config["cache"] = {"enabled": True}  # the rest from the backend's conf/llm file
    return config
