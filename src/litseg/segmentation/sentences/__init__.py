"""Sentence splitting for literary text, with exact character offsets.

A rule-based splitter tuned on fiction, verse and drama (see docs/sentences.md for the labelled
comparison with pysbd, syntok, blingfire, Punkt and sentencex that chose it). It works in three
layers, all on the original characters, so offsets need no mapping back:

1. **Blocks.** A blank line (any mix of ``\\n``, ``\\r\\n`` and bare ``\\r``) always ends a
   sentence; so does a page or paragraph separator (``\\f``, ``\\u2029``).
2. **Lines.** A single line break is *not* a boundary (hard-wrapped prose, verse), except around
   heading-like lines, which stand alone as one "sentence": Markdown headings (``## ACT I``),
   whole-line emphasis (``**HAMLET**``, ``_Exit_``), short all-capital lines (``CHAPTER I``,
   ``HAMLET.``, ``THE GOLDEN BIRD``) and short lines opening with a heading word and a number
   (``Chapter 1``, ``Book the First``). A block of one short line without end punctuation
   (``I. The Period``, ``Captain Silver``) is also kept whole.
3. **Punctuation.** ``. ! ? …``, ellipses (also ``. . .``), followed by closing quotes or
   brackets, end a sentence when whitespace and then a non-lowercase character follow, unless the
   period closes an abbreviation (``Mr.``, ``St.``, initials like ``G. J.``, ``i.e.``), the next
   word is a capitalised speech tag after ``!``/``?`` and a closing quote (``"Sorry!" I said.``),
   or an ellipsis runs on into ``I``. ``.--`` and ``--"`` before a capital are boundaries too.

``max_words`` caps sentence length: longer ones are cut greedily at ``;``/``:``/dashes, then
commas or line breaks, then any space, so that no "sentence" can hold a page.

The package: ``splitter`` (the entry points), ``lines`` (layers 1 and 2), ``punctuation`` and
``speech`` (layer 3), ``wordcap`` (``max_words``) and ``chars`` (the character classes they share).
"""

from __future__ import annotations

from litseg.segmentation.sentences.splitter import iter_runs, split_sentences, split_spans

__all__ = ["iter_runs", "split_sentences", "split_spans"]
