"""Lenient reading of model answers into the typed schemas.

Real models wrap their JSON in prose or Markdown fences, emit several objects, leave trailing
commas, use single quotes, stop mid-object at the token limit, write indices as strings or
floats, shape ``context_idx`` freely, swap ``from_idx``/``to_idx``, answer with a bare list of
segments or flatten the nested Lite answer. :func:`parse_answer` accepts all of that, and
records each leniency it applied as a note, so that a strict format check (``strict_ok``) stays
possible. Malformed JSON is mended with the ``json_repair`` library.

Every value is coerced by this module (the final model validation runs in pydantic's strict
mode), so nothing is converted silently: keys the schema does not know are noted (the answer is
then not ``strict_ok``), and so are duplicate keys and alias keys that collide with the real one.

Whatever the text, :func:`parse_answer` returns a :class:`ParseResult` and never raises, and its
work is bounded (docs/robustness.md measures it):

* a reply is read up to :data:`MAX_REPLY_CHARS` characters (1,000,000), the rest is noted as
  ignored; scanning, ``<think>`` removal and bracket matching are linear in the reply;
* at most :data:`_MAX_CANDIDATES` JSON values are fitted; bracketed prose such as an echoed
  ``[12] sentence`` never counts as one;
* ``json_repair`` (whose worst cases are super-linear) is given at most :data:`_MAX_MENDS`
  stretches of together :data:`_MAX_MEND_CHARS` characters, each nested at most
  :data:`_MAX_MEND_DEPTH` deep; bare keys are quoted before mending so that a value such as
  ``to_idx:-2`` keeps its sign;
* integers longer than :data:`_MAX_INT_DIGITS` digits (beyond Python's conversion limit, or
  simply no sentence index) are read as unusable values, never converted;
* a range such as ``"3-9"`` in ``context_idx`` is expanded only inside the unit when ``n`` is
  given (its out-of-unit ends are kept, so validation still reports them), and all expansions
  of a reply together produce at most :data:`_MAX_EXPANDED_INDICES` indices;
* strings are cleaned for storage (lone surrogates become U+FFFD, control characters are
  removed; :mod:`litseg.segmentation.textsafe`), with a note;
* notes and errors are capped in number, and values quoted in them are shortened.

The package: ``answer`` (:func:`parse_answer`), ``extract`` (JSON values found in the reply),
``fit`` (one value fitted to the model), ``values`` (scalars and index lists coerced),
``result`` (:class:`ParseResult` and the notes) and ``limits`` (the bounds above).
"""

from __future__ import annotations

from litseg.segmentation.parsing.answer import parse_answer
from litseg.segmentation.parsing.limits import MAX_REPLY_CHARS
from litseg.segmentation.parsing.result import ParseResult

__all__ = ["MAX_REPLY_CHARS", "ParseResult", "parse_answer"]
