from litseg.chunkers.base import Chunker, UnitResult, available, build_chunker, register

__all__ = ["Chunker", "UnitResult", "available", "build_chunker", "register"]
