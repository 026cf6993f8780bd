"""GGUF files for the transformers backend: their tokenizer, and a dequantized copy kept once.

transformers dequantizes a GGUF on every load (seconds for the embedded 135M model); the copy
saved here as safetensors under ``$LITSEG_CACHE_DIR/converted`` (or ``~/.cache/litseg``) loads in
well under a second. Copies are keyed by the file's path, size and modification time and the
transformers version.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)


def litseg_cache_dir() -> Path:
    """Where litseg keeps derived files (converted weights, tiny test models)."""
    env = os.environ.get("LITSEG_CACHE_DIR")
    if env:
        return Path(env).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "litseg"


def _gguf_fingerprint(path: Path) -> str:
    stat = path.stat()
    import transformers

    raw = f"{path.resolve()}|{stat.st_size}|{stat.st_mtime_ns}|{transformers.__version__}"
    return hashlib.sha256(raw.encode()).hexdigest()[:16]


def converted_dir(model_dir: str, gguf_file: str, kind: str) -> Path:
    gguf_path = Path(model_dir) / gguf_file
    return litseg_cache_dir() / kind / f"{gguf_path.stem}-{_gguf_fingerprint(gguf_path)}"


def _save_atomically(target: Path, *savables: Any) -> None:
    """Write ``savables`` (things with save_pretrained) into ``target``, all or nothing."""
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=target.name + ".", dir=target.parent))
        for item in savables:
            item.save_pretrained(tmp)
        try:
            os.rename(tmp, target)  # atomic: a parallel process either wins or finds it done
        except OSError:
            shutil.rmtree(tmp, ignore_errors=True)
    except OSError as exc:
        log.warning("could not keep a converted copy in %s (%s); the next load reads the GGUF again",
                    target, exc)


def gguf_tokenizer(model_dir: str, gguf_file: str) -> Any:
    """The tokenizer (with chat template) stored in a GGUF file, cached as tokenizer.json files.

    Building it from the GGUF vocabulary takes seconds; the cached copy loads in milliseconds.
    """
    from transformers import AutoTokenizer

    for kind in ("converted", "tokenizers"):
        cached = converted_dir(model_dir, gguf_file, kind)
        if (cached / "tokenizer_config.json").is_file():
            try:
                return AutoTokenizer.from_pretrained(cached)
            except Exception as exc:
                log.warning("cached tokenizer %s unreadable (%s); reading the GGUF again", cached, exc)
    tokenizer = AutoTokenizer.from_pretrained(model_dir, gguf_file=gguf_file)
    _save_atomically(converted_dir(model_dir, gguf_file, "tokenizers"), tokenizer)
    return tokenizer


def load_gguf_converted(model_dir: str, gguf_file: str, dtype: Any) -> tuple[Any, Any]:
    """Model and tokenizer of a GGUF, from the safetensors copy when one exists (else made now)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    target = converted_dir(model_dir, gguf_file, "converted")
    if (target / "config.json").is_file():
        try:
            return (AutoModelForCausalLM.from_pretrained(target, dtype=dtype),
                    AutoTokenizer.from_pretrained(target))
        except Exception as exc:  # a damaged copy must not block the GGUF itself
            log.warning("converted copy %s unreadable (%s); reading the GGUF again", target, exc)
    tokenizer = gguf_tokenizer(model_dir, gguf_file)
    # Kept in float32, the precision dequantization yields; the requested dtype is applied after.
    quantized = AutoModelForCausalLM.from_pretrained(model_dir, gguf_file=gguf_file, dtype=torch.float32)
    # The GGUF-loaded model refuses save_pretrained (it still says "quantized"); its weights are
    # plain tensors, so move them into a fresh model of the same architecture.
    config = quantized.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    model.load_state_dict(quantized.state_dict(), strict=True)
    model.generation_config = quantized.generation_config
    del quantized
    _save_atomically(target, model, tokenizer)
    return model.to(dtype), tokenizer
