from litseg.chunkers.base import Chunker, UnitResult, available, register
from litseg.chunkers.build import build_chunker

__all__ = ["Chunker", "UnitResult", "available", "build_chunker", "register"]
