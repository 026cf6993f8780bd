"""Model paths every backend and the trainer share: ``tiny`` and ``embedded`` made into directories
that ``from_pretrained`` loads.

They live in the LLM layer (not in training) because evaluating a trained student resolves its
base model the same way the trainer did, and the evaluation must not import the trainer.
"""

from __future__ import annotations

from pathlib import Path

from litseg.llm.embedded import embedded_model_path
from litseg.llm.gguf import converted_dir, load_gguf_converted
from litseg.llm.tiny_model import tiny_causal_lm_dir


def local_model_path(path: str) -> str:
    """A directory (or hub id) for ``model.path``: ``tiny`` and ``embedded`` resolved, a local path
    with ``~`` expanded, anything else (a hub id) as given."""
    if path == "tiny":
        return str(tiny_causal_lm_dir())
    if path == "embedded":
        return str(embedded_model_dir())
    return str(Path(path).expanduser()) if Path(path).expanduser().exists() else path


def embedded_model_dir() -> Path:
    """The embedded SmolLM2 GGUF, dequantized to a safetensors directory (made once, then reused)."""
    directory, gguf_file = embedded_model_path()
    target = converted_dir(directory, gguf_file, "converted")
    if not (target / "config.json").is_file():
        import torch  # heavy, optional: only the first conversion needs it

        load_gguf_converted(directory, gguf_file, torch.float32)
    return target
