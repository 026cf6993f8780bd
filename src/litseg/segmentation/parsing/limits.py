"""The bounds on the work one reply may cost (docs/robustness.md measures them)."""

from __future__ import annotations


#: Characters of a reply that are read; the rest is ignored (with a note).
MAX_REPLY_CHARS = 1_000_000
MAX_CANDIDATES = 64  # JSON values fitted per reply
MAX_MENDS = 16  # stretches handed to json_repair per reply
MAX_MEND_CHARS = 200_000  # characters handed to json_repair per reply, all stretches together
MAX_MEND_DEPTH = 32  # deeper bracket nesting is not mended (answers nest 5 deep)
MAX_INT_DIGITS = 100  # longer JSON integers are read as unusable values
MAX_INDEX_TEXT = 64  # an index written as text is at most this long
MAX_RANGE_EXPANSION = 10_000  # "3-5" in context_idx expands; without n, longer ranges are dropped
MAX_EXPANDED_INDICES = 100_000  # indices produced by range expansion per reply
MAX_NOTE_KINDS = 40  # distinct notes kept; further ones are counted
MAX_MALFORMED = 20  # SEGMENT_MALFORMED errors listed one by one; further ones are counted
