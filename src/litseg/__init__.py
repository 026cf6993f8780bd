"""litseg: narrative-aware segmentation of literary texts for RAG."""

__version__ = "0.1.0"
