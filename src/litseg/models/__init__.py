"""Models shipped inside the package: LoRA adapters with their model cards.

``shipped_adapter(name)`` gives the folder of a shipped adapter; an ``adapter:`` setting of an LLM
backend may name one instead of a path (``llm=student`` uses ``litseg-lite-smollm2-135m``).
"""

from __future__ import annotations

import hashlib
from pathlib import Path

MODELS_DIR = Path(__file__).resolve().parent

#: The LitSeg-Lite student distilled on the CPU from the strong-teacher annotations (README.md there).
STUDENT = "litseg-lite-smollm2-135m"


def shipped_adapters() -> list[str]:
    return sorted(p.name for p in MODELS_DIR.iterdir() if (p / "adapter_config.json").is_file())


def shipped_adapter(name: str) -> Path:
    path = MODELS_DIR / name
    if not (path / "adapter_config.json").is_file():
        raise FileNotFoundError(f"no shipped adapter {name!r}; shipped: {', '.join(shipped_adapters()) or 'none'}")
    return path


def resolve_adapter(value: str) -> str:
    """A path to an adapter folder: ``value`` itself when it exists, else a shipped adapter's folder."""
    path = Path(value).expanduser()
    if path.exists():
        return str(path)
    if (MODELS_DIR / value / "adapter_config.json").is_file():  # a shipped adapter, or one inside a shipped model
        return str(MODELS_DIR / value)
    return value  # the backend reports it as missing, naming the value


def adapter_digest(path: str | Path) -> str | None:
    """SHA-256 of an adapter's weights (so a retrained adapter at the same path is another model)."""
    folder = Path(path)
    files = sorted(folder.glob("adapter_model.*")) if folder.is_dir() else []
    if not files:
        return None
    h = hashlib.sha256()
    for f in files:
        h.update(f.read_bytes())
    return h.hexdigest()[:16]


def weights_digest(folder: Path) -> str:
    """SHA-256 of every ``*.safetensors`` file under ``folder`` with its relative path (a tagger's
    identity in run fingerprints: other weights in the same folder are another model)."""
    h = hashlib.sha256()
    for path in sorted(folder.rglob("*.safetensors")):
        h.update(path.relative_to(folder).as_posix().encode())
        h.update(path.read_bytes())
    return h.hexdigest()[:16]
