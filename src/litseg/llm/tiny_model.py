"""Tiny random-weight causal LMs with the real SmolLM2 tokenizer: ``model.path: tiny`` (smoke
runs of train.py, ``llm.model: tiny`` of the other entries) and fast tests.

``tiny_causal_lm_dir()`` returns a directory that ``AutoModelForCausalLM.from_pretrained`` and
``TransformersChatModel`` load like any model: a two-layer Llama of hidden size 32 (about 1.6 M
parameters, nearly all in the embedding) with the embedded model's tokenizer and chat template.
Its answers are noise, but prompts, token counts, chat templates, constrained decoding, LoRA and
training loops all run on it in milliseconds.

The directory is built once per settings and kept under ``$LITSEG_TINY_MODEL_DIR`` (default: the
temp dir), named by a hash of the settings and the transformers version; building it is atomic,
so parallel test workers may race for it safely.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import threading
from pathlib import Path
from typing import Any

from litseg.llm.embedded import embedded_model_path
from litseg.llm.gguf import gguf_tokenizer

_BUILT: dict[str, Path] = {}
_LOCK = threading.Lock()


def tiny_models_root() -> Path:
    env = os.environ.get("LITSEG_TINY_MODEL_DIR")
    return Path(env).expanduser() if env else Path(tempfile.gettempdir()) / "litseg-tiny-models"


def tiny_causal_lm_dir(*, hidden_size: int = 32, num_layers: int = 2, num_heads: int = 4,
                       num_kv_heads: int = 2, max_positions: int = 8192, seed: int = 0,
                       root: str | os.PathLike[str] | None = None) -> Path:
    """Directory of a tiny random Llama with the embedded SmolLM2 tokenizer (built if needed)."""
    import transformers  # heavy, optional: only building a tiny model needs it

    if hidden_size % num_heads or num_heads % num_kv_heads:
        raise ValueError("hidden_size must divide by num_heads, and num_heads by num_kv_heads")
    directory, gguf_file = embedded_model_path()
    settings: dict[str, Any] = {
        "hidden_size": hidden_size, "num_layers": num_layers, "num_heads": num_heads,
        "num_kv_heads": num_kv_heads, "max_positions": max_positions, "seed": seed,
        "tokenizer": gguf_file, "transformers": transformers.__version__, "format": 1,
    }
    digest = hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest()[:12]
    base = Path(root).expanduser() if root is not None else tiny_models_root()
    target = base / f"tiny-llama-h{hidden_size}-l{num_layers}-{digest}"
    with _LOCK:
        if str(target) in _BUILT:
            return target
        if not (target / "config.json").is_file():
            _build(target, directory, gguf_file, settings)
        _BUILT[str(target)] = target
        return target


def _build(target: Path, gguf_dir: str, gguf_file: str, settings: dict[str, Any]) -> None:
    import torch
    from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM

    tokenizer = gguf_tokenizer(gguf_dir, gguf_file)
    hidden = settings["hidden_size"]
    config = LlamaConfig(
        vocab_size=len(tokenizer), hidden_size=hidden, intermediate_size=2 * hidden,
        num_hidden_layers=settings["num_layers"], num_attention_heads=settings["num_heads"],
        num_key_value_heads=settings["num_kv_heads"], max_position_embeddings=settings["max_positions"],
        tie_word_embeddings=True, bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id,
    )
    # Seed a private generator state so building the model leaves the caller's RNG untouched.
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(settings["seed"])
        model = LlamaForCausalLM(config)
    model.generation_config = GenerationConfig(
        bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=target.name + ".", dir=target.parent))
    try:
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        (tmp / "litseg_tiny_model.json").write_text(json.dumps(settings, indent=1, sort_keys=True))
        os.rename(tmp, target)
    except OSError:
        if not (target / "config.json").is_file():
            raise
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
