"""Decoding knobs a backend sets itself, so that a model's or a server's defaults never do.

The same request must decode the same way through every backend and in TRL's GRPO rollouts:
greedy at temperature 0, else temperature and top-p as asked, and nothing more (no repetition
penalty, no top-k, no min-p). Two places would add their own preferences:

* transformers fills every generation setting a call leaves unset from the model's
  ``generation_config.json`` (Qwen2.5-Instruct: ``repetition_penalty`` 1.05, ``top_k`` 20,
  ``top_p`` 0.8); :func:`neutral_generation_config` keeps only the special tokens of it;
* an OpenAI-compatible server such as ``vllm serve`` applies the same file to every field a
  request does not send; :data:`NEUTRAL_SAMPLING` is what the OpenAI backend sends to switch them
  off (vLLM's and SGLang's names; -1 is "no top-k" for both and for the llama.cpp server).

The vLLM backend sets the same three fields on its ``SamplingParams``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

#: Request fields that turn a server's generation defaults off (vLLM, SGLang).
NEUTRAL_SAMPLING: dict[str, float | int] = {"top_k": -1, "min_p": 0.0, "repetition_penalty": 1.0}

#: generation_config.json entries that cannot change what the transformers backend decodes: special
#: tokens, the length limit (every request sets max_new_tokens) and the sampling knobs every
#: request sets itself (greedy decoding ignores them).
_INERT_GENERATION_KEYS = frozenset({
    "bos_token_id", "eos_token_id", "pad_token_id", "decoder_start_token_id", "transformers_version",
    "_from_model_config", "do_sample", "temperature", "top_p", "top_k", "max_length", "max_new_tokens",
    "use_cache", "num_beams", "num_return_sequences"})


def neutral_generation_config(source: Any) -> Any:
    """A ``GenerationConfig`` with only the special tokens of ``source`` (a model's own)."""
    from transformers import GenerationConfig

    tokens = ("bos_token_id", "eos_token_id", "pad_token_id", "decoder_start_token_id")
    return GenerationConfig(**{k: getattr(source, k, None) for k in tokens})


def generation_preferences(model_dir: str | Path) -> list[str]:
    """The decoding preferences a model folder's ``generation_config.json`` sets, which the
    transformers backend applied before it dropped them (empty: none, or no such file)."""
    path = Path(model_dir).expanduser() / "generation_config.json"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    return sorted(k for k in data if k not in _INERT_GENERATION_KEYS) if isinstance(data, dict) else []
