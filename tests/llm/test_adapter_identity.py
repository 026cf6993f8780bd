"""A shipped adapter enters cache and run identities by its name under src/litseg/models, not by
this checkout's path: a run resumed from another checkout (or an installed package) is the same
setup. Adapters of one's own keep their path; every adapter carries the digest of its weights."""

from __future__ import annotations

from litseg.llm.base import adapter_identity
from litseg.models import MODELS_DIR


def test_shipped_adapters_and_the_writer_inside_a_shipped_tagger_go_by_name() -> None:
    first = adapter_identity(str(MODELS_DIR / "litseg-lite-smollm2-135m"))
    writer = adapter_identity(str(MODELS_DIR / "litseg-tagger-minilm-smollm2" / "writer"))
    assert first["adapter"] == "litseg-lite-smollm2-135m" and first["adapter_sha256"]
    assert writer["adapter"] == "litseg-tagger-minilm-smollm2/writer" and writer["adapter_sha256"]


def test_an_adapter_of_ones_own_keeps_its_path(tmp_path) -> None:
    folder = tmp_path / "adapter"
    folder.mkdir()
    (folder / "adapter_model.safetensors").write_bytes(b"weights")
    ident = adapter_identity(str(folder))
    assert ident["adapter"] == str(folder) and ident["adapter_sha256"]
