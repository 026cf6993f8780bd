"""Tiny random-weight causal LMs for fast tests; they live in :mod:`litseg.training.tiny_model`
(``model.path: tiny`` uses them in production smoke runs)."""

from litseg.training.tiny_model import tiny_causal_lm_dir, tiny_models_root

__all__ = ["tiny_causal_lm_dir", "tiny_models_root"]
