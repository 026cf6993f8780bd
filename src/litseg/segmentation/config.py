"""The typed ``preprocess`` group (conf/preprocess): how a book is cut into units and sentences.

It lives with the preprocessing that reads it (:func:`~litseg.segmentation.preprocess.prepare_document`);
:func:`default_preprocess` gives ``conf/preprocess/default.yaml`` typed, the settings annotate.py
reads books with by default, for library callers (adapters, notebooks, tests).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from litseg.utils.config import config_schema, from_dict, shipped_option


@dataclass
class AutoWordsConfig:
    """``preprocess.auto``: how ``max_words: auto`` sizes units to the chat model's window."""

    fallback_words: int
    context_margin: float
    estimate_margin: float
    min_words: int


@config_schema("preprocess", entry="annotate", default_option="default")
@dataclass
class PreprocessConfig:
    """conf/preprocess/default.yaml (auto.yaml composes it)."""

    max_words: int | Literal["auto"]
    auto: AutoWordsConfig
    max_sentence_words: int
    keep_front_matter: bool
    index_matter: bool

    def fixed_words(self) -> int:
        """``max_words`` as a number: a run resolves ``auto`` first (litseg.annotation.word_cap)."""
        if self.max_words == "auto":
            raise ValueError("preprocess.max_words=auto must be resolved to a number first "
                             "(litseg.annotation.word_cap.resolve_word_cap), or give max_words")
        return self.max_words


def default_preprocess() -> PreprocessConfig:
    """``conf/preprocess/default.yaml`` typed, the one home of those values (a new object each call)."""
    return from_dict(PreprocessConfig, shipped_option("preprocess", "default"), "preprocess")
