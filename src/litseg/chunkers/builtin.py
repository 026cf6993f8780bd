"""Imports every built-in chunker module so that its ``@register`` runs."""

# Non-LLM baselines and the dynamic-merge wrapper (heavy libraries load lazily inside them).
import litseg.chunkers.merge  # noqa: F401,E402
import litseg.chunkers.recursive  # noqa: F401,E402
import litseg.chunkers.semantic  # noqa: F401,E402
import litseg.chunkers.token  # noqa: F401,E402
