"""The punctuation layer: a run of ordinary lines split at sentence-final punctuation, unless an
abbreviation, an initial, a speech tag or a shout list says otherwise.
"""

from __future__ import annotations

import re

from litseg.segmentation.sentences.chars import (
    CLOSERS,
    DASHES,
    HWS,
    LB,
    LINE_BREAK,
    Q,
    QUOTE_SET,
    T,
    TERMINALS,
)
from litseg.segmentation.sentences.lines import MAX_TITLE_WORDS, strip_span
from litseg.segmentation.sentences.speech import is_speech_tag


# A sentence end: a terminal (or a spaced ellipsis ". . ." that may wrap a line), then any run of
# further terminals and closers, optionally dashes; or dashes closed by a quote ("this--" "We...").
_END = re.compile(
    rf"[{T}\-\u2013\u2014\u2015]"
    rf"(?:(?<=[{T}])(?:(?<=\.)(?:{HWS}*(?:{LB}{HWS}*)?\.){{2,}})?"
    rf"[{re.escape(TERMINALS + CLOSERS)}]*(?P<dash>{DASHES})?"
    rf"|(?<=-)-+[{Q}]+|(?<=[\u2014\u2015])[\u2014\u2015]*[{Q}]+|(?<=\u2013)[{Q}]+)"
)
_SPACED_DOTS = re.compile(r"\.\s+\.")

# Periods after these words do not end a sentence (checked without the period; also in capitals,
# as in the speaker label "MRS. HIGGINS."). Not "No" (a digit follows "No. 5", and "No. I won't"
# is two sentences) nor "Mar" (an abbreviated speaker, "Mar. Peace, break thee off").
_ABBREVIATIONS = frozenset(
    """Mr Mrs Ms Messrs Mme Mlle Mons Dr Drs St Ste Mt Ft Capt Cpt Col Gen Maj Lt Lieut Sgt Cmdr
    Comdr Adm Rev Revd Hon Prof Gov Sen Supt Insp Bros vs viz cf Vol vol pp Fig fig Chap ch
    approx Ave Jan Feb Apr Aug Sept Oct Nov Dec al""".split()
)
# After a single capital letter and a period: another initial, or a word that opens sentences
# but never follows an initial in a name (pronouns, articles, conjunctions, titles).
_INITIAL_AHEAD = re.compile(r"\s+[A-Z]\.")
_SENTENCE_OPENER_AHEAD = re.compile(
    r"\s+(?:I|A|An|The|He|She|It|We|They|You|His|Her|Its|Our|Their|My|Your|This|That|These|"
    r"Those|There|Then|Here|Now|But|And|Or|So|Yet|If|When|While|As|At|In|On|Of|To|For|With|By|"
    r"From|After|Before|What|Who|Why|How|Where|Which|No|Not|Yes)(?=[\s,;:!?])"
    r"|\s+(?:Mr|Mrs|Ms|Dr|Messrs|Mme|Mlle|Capt|Rev|Prof|Sir|Lady|Lord)\b"
)
_DOTTED_ABBREV = re.compile(r"(?:[A-Za-z]\.)+[A-Za-z]$")
_ROMAN_OR_NUMBER = re.compile(r"(?:[IVXLCDM]+|\d+)$")


# Shout lists: a one-word exclamation ("Peterson!") and a chain of them before a "!".
_ONE_WORD_BANG = re.compile(r"[^\W\d_][\w\u2019'-]*!(?![\w!?])")
_BANG_CHAIN = re.compile(r"(?:[^\W\d_][\w\u2019'-]*!\s+)*[^\W\d_][\w\u2019'-]*")
_OPENING_QUOTES = "\"'\u201c\u2018\u00ab"


def split_run(text: str, r_start: int, r_end: int, out: list[tuple[int, int]]) -> None:
    """Split a run of ordinary lines at sentence-final punctuation."""
    sent_start = r_start
    for m in _END.finditer(text, r_start, r_end):
        m_start, p = m.start(), m.end()
        if m_start <= sent_start:
            # nothing before it in this sentence (a leading "... Doubtful it stood"); sent_start
            # always sits on a non-space character, so this test suffices
            continue
        dash = m.group("dash")
        if dash is not None and p < r_end and not text[p].isspace():
            # ".--She joined them": a boundary right after the dash when a capital follows
            if not _starts_sentence(text[p]):
                continue
            out.append((sent_start, p))
            sent_start = p
            continue
        if p < r_end and not text[p].isspace():
            continue  # "end.Next", "U.S.A", "--Halloa": no space, no boundary
        q = p
        while q < r_end and text[q].isspace():
            q += 1
        if q >= r_end:
            break
        nxt = text[q]
        if nxt.islower() or nxt.isdigit():
            continue  # "Oh!" said Lydia / "No. 5": the sentence runs on
        if _is_boundary(text, sent_start, m_start, p, q, r_start, r_end, m.group()):
            out.append((sent_start, p))  # both ends already sit on non-space characters
            sent_start = q
    s, e = strip_span(text, sent_start, r_end)
    if e > s:
        out.append((s, e))


def _starts_sentence(ch: str) -> bool:
    return ch.isupper() or ch in "\"'\u201c\u2018\u00ab([_*"


def _is_boundary(text: str, sent_start: int, m_start: int, p: int, q: int, r_start: int,
                 r_end: int, end_text: str) -> bool:
    nxt = text[q]
    if nxt.islower() or nxt.isdigit() or nxt in ",;:" or nxt in TERMINALS:
        return False
    if nxt in "\"'\u201c\u2018\u00ab([{_*\u2014-":
        # look past opening quotes and brackets: "' (when she thought it over" runs on
        k = q
        while k < r_end and (text[k] in "\"'\u201c\u2018\u00ab([{_*\u2014-" or text[k].isspace()):
            k += 1
        if k < r_end and text[k].islower():
            return False
    elif nxt in CLOSERS or nxt in "\u201d\u2019":
        return False
    first = end_text[0]
    has_quote = len(end_text) > 1 and not QUOTE_SET.isdisjoint(end_text)
    if first == "." and end_text.rstrip(CLOSERS) == "." and not has_quote:
        if _period_is_abbreviation(text, sent_start, m_start, r_start, r_end):
            return False
    is_ellipsis = first == "\u2026" or end_text.startswith("..") or bool(
        _SPACED_DOTS.match(end_text))
    if is_ellipsis and not has_quote and nxt == "I" and (q + 1 >= r_end or not text[q + 1].isalpha()):
        return False  # "And here... I am again": an ellipsis runs on into "I"
    if has_quote and nxt.isupper() and (is_ellipsis or "!" in end_text or "?" in end_text
                                        or "-" in end_text or "\u2014" in end_text):
        if is_speech_tag(text, q, r_end):
            return False
    if end_text == "!" and _in_shout_list(text, sent_start, m_start, q, r_end):
        return False
    return True


def _in_shout_list(text: str, sent_start: int, bang: int, q: int, r_end: int) -> bool:
    """``"Daniels! Peterson! Foster!"``: one-word exclamations in a row inside one quotation.

    True when everything between the opening quote and the ``!`` at ``bang`` is one-word
    exclamations and the next word after ``q`` is one too. A speech without quotation marks (a
    play's ``Holla! Bernardo!``) is left to the ordinary rule.
    """
    m = _ONE_WORD_BANG.match(text, q, r_end)
    if not m:
        return False
    k = bang
    while k > sent_start:
        ch = text[k - 1]
        if not (ch.isalnum() or ch in "!-" or ch.isspace()
                or (ch in "'\u2019" and k - 2 >= sent_start and text[k - 2].isalnum())):
            break
        k -= 1
    # the quotation mark that opens the list: not an apostrophe or a closing quote after a word
    if k <= sent_start or text[k - 1] not in _OPENING_QUOTES or (
            k - 2 >= sent_start and text[k - 2].isalnum()):
        return False
    return _BANG_CHAIN.fullmatch(text, k, bang) is not None


def _period_is_abbreviation(text: str, sent_start: int, dot: int, run_start: int,
                            run_end: int) -> bool:
    """Whether the period at ``dot`` closes an abbreviation, an initial or a title number."""
    k = dot
    while k > sent_start and (text[k - 1].isalpha() or text[k - 1] == "."):
        k -= 1
    word = text[k:dot]
    if not word:
        # a number or roman numeral opening the block: "I. The Period", "28. IN THE CAMP"
        k2 = dot
        while k2 > sent_start and text[k2 - 1].isdigit():
            k2 -= 1
        return k2 < dot and k2 == run_start
    if word in _ABBREVIATIONS or (word.isupper() and word.capitalize() in _ABBREVIATIONS):
        return True
    if len(word) == 1 and word.isupper() and not (k == run_start and _ROMAN_OR_NUMBER.match(word)):
        # an initial ("G. J. Utterson", "S. Place", "D. I. C."), not a letter that ends a
        # sentence ("from A to B. I knew", "the letter A. You have", "a B. Mr. Okafor"); a
        # numeral opening the run ("V. A Morning Adventure") is a title number, tested below
        if word != "I":
            return not _SENTENCE_OPENER_AHEAD.match(text, dot + 1, run_end)
        if _INITIAL_AHEAD.match(text, dot + 1, run_end):
            return True
    if _DOTTED_ABBREV.match(word):
        return True  # "i.e", "e.g", "U.S"
    if k == run_start and _ROMAN_OR_NUMBER.match(word):
        # a numbered title opening the run ("XI. The Mail"); "I." only before a short title
        return word != "I" or _line_is_short_title(text, dot, run_end)
    return False


def _line_is_short_title(text: str, dot: int, run_end: int) -> bool:
    """``I. The Period`` at the start of a block: a numbered title, not the pronoun."""
    m = LINE_BREAK.search(text, dot, run_end)
    line_end = m.start() if m else run_end
    rest = text[dot + 1:line_end].strip()
    return 0 < len(rest.split()) <= MAX_TITLE_WORDS and rest[-1] not in TERMINALS
