"""Imports every built-in chunker module so that its ``@register`` runs."""

# Non-LLM baselines and the dynamic-merge wrapper (heavy libraries load lazily inside them).
import litseg.chunkers.merge  # noqa: F401,E402
import litseg.chunkers.recursive  # noqa: F401,E402
import litseg.chunkers.semantic  # noqa: F401,E402
import litseg.chunkers.token  # noqa: F401,E402

# LLM chunkers (the model is built by the caller and passed in; nothing heavy imports here).
import litseg.chunkers.litseg_lite  # noqa: F401,E402
import litseg.chunkers.litseg  # noqa: F401,E402
import litseg.chunkers.lumber  # noqa: F401,E402
import litseg.chunkers.margin  # noqa: F401,E402
import litseg.chunkers.perplexity  # noqa: F401,E402

# Segmentations made elsewhere, replayed through validation and repair (annotate.py method=imported).
import litseg.annotation.importing  # noqa: F401,E402
