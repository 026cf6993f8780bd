"""Word counts and shares that decide what the structure analysis accepts."""

from __future__ import annotations


MIN_PROSE = 8  # words of body text that make a heading real (a contents entry has none)
MIN_CONTAINER_PROSE = 40  # an introduction under a PART heading this long becomes its own unit
MAX_FRONT_SHARE = 0.35  # a structure that leaves more of the book than this before its first
MAX_FRONT_WORDS = 5000  # heading (and more words than this) is probably a sub-structure
MAX_UNIT_SHARE = 0.6  # ... and so is one whose largest unit holds more than this share
# A paragraph of running text this long ends a contents, illustrations or cast list: lists are
# made of short lines and titles, not of sentences.
LIST_BREAK_WORDS = 25
# Unclaimed prose before the first heading is narrative (a unit) from this many words on; an
# epigraph, a dedication line or a copyright notice is shorter.
MIN_NARRATIVE_WORDS = 150
# A contents list is taken as the top level when at least this share of its titled entries is
# found, in order, in the body.
MIN_LISTED_SHARE = 0.5
