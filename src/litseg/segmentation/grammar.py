"""A decoding grammar that makes an answer's main ranges cover the unit, in order, by construction.

JSON Schema can bound each index to 1..N, but it cannot relate one segment to the next, so a small
model decoding under it may stop short of the last sentence, skip or repeat ranges, or, once it has
reached N, keep writing ``N..N`` blocks until the token budget runs out (SmolLM2-135M does exactly
that). :func:`coverage_grammar` writes an EBNF grammar (xgrammar's dialect) for the compact answer
``{"chapter_title": ..., "segments": [{"subtitle", "from_idx", "to_idx", "context_idx"}, ...]}``
in which segment ``k`` must start at the sentence after the previous segment's end, and the array
must close right after the segment that ends at N. What the model still decides: where to cut,
every subtitle, the title and the context indices. The answer then goes through the same
validation as any other (the grammar is a decoding aid, not a bypass), and the format is the one
the student was trained on (compact JSON, ``", "`` and ``": "`` separators).

Every end from a block's start to N stays allowed. An index is decoded one digit token at a time,
so a grammar that allowed only some ends (say, only before a paragraph start) would trap the
model: having written "1" for an intended 11 that is not allowed, it must go on to 110 when the
unit has 110 sentences, and the whole unit becomes one block (seen on several FairytaleQA units
of 100 sentences or more). Rules about where cuts may fall are applied after decoding instead
(:mod:`litseg.segmentation.snapping`).

The grammar grows with N^2 / 2 alternatives (about 190 KB of text for 150 sentences, compiled by
xgrammar in about 0.1 s); beyond :data:`MAX_SENTENCES` none is built and decoding falls back to the
JSON Schema alone.
"""

from __future__ import annotations

#: The answer schemas whose shape the grammar writes, and whether a block's range comes before its
#: subtitle (conf/prompt/litseg_lite_compact.yaml: subtitle first; litseg_lite_range_first.yaml:
#: range first, so the subtitle is written about the sentences already chosen).
RANGE_FIRST = {"segments": False, "segments_range_first": True}
#: No grammar above this many sentences (quadratic size); the JSON Schema still applies.
MAX_SENTENCES = 600

# Text fields: any character but a quote, a backslash or a control character, repeated as a
# character class. (A rule with an escape alternative, repeated {m,n} times, made xgrammar's token
# mask cost about 50 ms a token; the class costs well under 1 ms. A subtitle needing a quote uses ')
_TEXT = r'[^"\\\x00-\x1f]'


def _lit(text: str) -> str:
    """``text`` as an EBNF string literal."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _more_indices(max_context: int, n: int) -> str:
    """The rest of a context list: unbounded when the bound is the unit's size anyway (a bounded
    repetition of a rule is slow to mask in xgrammar), else at most ``max_context`` items."""
    item = '(", " idx)'
    return f"{item}*" if max_context >= n else f"{item}{{0,{max_context - 1}}}"


def coverage_grammar(n_sentences: int, *, title_chars: int, subtitle_chars: int, max_context: int,
                     range_first: bool = False) -> str | None:
    """The EBNF grammar of a covering, ordered compact answer for a unit of ``n_sentences``
    sentences (None above :data:`MAX_SENTENCES`). ``title_chars`` / ``subtitle_chars`` bound the
    text fields (a subtitle has at least one character), ``max_context`` the context indices of a
    block; ``range_first`` writes each block's range and context before its subtitle."""
    n = int(n_sentences)
    if n < 1 or n > MAX_SENTENCES:
        return None
    rules = [
        "root ::= " + _lit('{"chapter_title": ') + " title " + _lit(', "segments": [') + " seg1 " + _lit("]}"),
        f'title ::= "\\"" {_TEXT}{{0,{int(title_chars)}}} "\\""',
        f'sub ::= "\\"" {_TEXT}{{1,{int(subtitle_chars)}}} "\\""',
        "idx ::= " + " | ".join(f'"{i}"' for i in range(1, n + 1)),
        'ctx ::= "[]"' + (f' | "[" idx {_more_indices(int(max_context), n)} "]"' if max_context > 0 else ""),
    ]
    if range_first:
        close = _lit(', "context_idx": ') + " ctx " + _lit(', "subtitle": ') + " sub " + _lit("}")
    else:
        close = _lit(', "context_idx": ') + " ctx " + _lit("}")
    for k in range(1, n + 1):
        opening = (_lit(f'{{"from_idx": {k}, "to_idx": ') if range_first else
                   _lit('{"subtitle": ') + " sub " + _lit(f', "from_idx": {k}, "to_idx": '))
        rules.append(f"seg{k} ::= {opening} end{k}")
        # A block ends at any sentence from its start on (see the module's note on digit traps).
        rules.append(f"end{k} ::= " + " | ".join(f'"{j}" next{j}' for j in range(k, n + 1)))
    for j in range(1, n + 1):
        rules.append(f"next{j} ::= {close}" + (" " + _lit(", ") + f" seg{j + 1}" if j < n else ""))
    return "\n".join(rules) + "\n"
