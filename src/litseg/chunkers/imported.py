"""``method=imported``: segmentations made elsewhere, replayed through validation and repair.

The chunker lives in :mod:`litseg.annotation.importing` (it reads the annotation run's records);
this module types its config section (conf/method/imported.yaml) and registers it lazily, so the
chunker registry finds it without importing the annotation package up front.
"""

from __future__ import annotations

from dataclasses import dataclass

from litseg.chunkers.base import CHUNKERS, MethodConfig, register_config


@dataclass(kw_only=True)
class ImportedConfig(MethodConfig):
    """conf/method/imported.yaml."""

    annotations: str | None  # JSONL of records; required when the chunker is built
    source_root: str | None
    origin: str
    fallback_max_words: int
    context_position: str


CHUNKERS.register_lazy("imported", "litseg.annotation.importing:make_imported")
register_config("imported", ImportedConfig)
