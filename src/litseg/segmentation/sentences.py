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
"""

from __future__ import annotations

import re
from typing import Iterator

__all__ = ["iter_runs", "split_sentences", "split_spans"]

# Line breaks as str.splitlines() knows them; "\r\n" counts once.
_LB = r"(?:\r\n|\r(?!\n)|[\n\v\x85\u2028])"
# Horizontal whitespace: every whitespace character that is not a line or paragraph break.
_HWS = r"[^\S\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029]"
# The same set spelled out (a positive class scans several times faster than the negated one).
_HWS_CHARS = "\t\x1f \xa0\u1680\u2000-\u200a\u202f\u205f\u3000"
# The patterns scanned over whole texts open with one character class and dispatch on it with
# lookbehinds: Python's regex engine then skips ahead to candidates with a fast character-set
# search, which makes the scan several times quicker than a leading alternation.
# A blank line (two breaks with only horizontal space between) or a hard paragraph separator.
_PARA_BREAK = re.compile(
    r"[\n\r\v\x85\u2028\f\x1c\x1d\x1e\u2029]"
    r"(?:(?<=[\f\x1c\x1d\x1e\u2029])"
    rf"|(?<=\r)(?:\n|(?!\n))(?:{_HWS}*{_LB})+"  # "\r\n" is one break, never "\r" + "\n"
    rf"|(?<=[\n\v\x85\u2028])(?:{_HWS}*{_LB})+)"
)
_LINE_BREAK = re.compile(r"[\n\r\v\x85\u2028](?:(?<=\r)\n)?")

_CLOSERS = "\"'\u201d\u2019\u00bb\u203a)]}_*"
_TERMINALS = ".!?\u2026\u203c\u2047\u2048\u2049"
_QUOTES = "\"'\u201d\u2019\u00bb\u203a"
_DASHES = r"(?:-{2,}|[\u2014\u2015]+|\u2013)"
_QUOTE_SET = frozenset(_QUOTES)
_T = re.escape(_TERMINALS)
_Q = re.escape(_QUOTES)
# A sentence end: a terminal (or a spaced ellipsis ". . ." that may wrap a line), then any run of
# further terminals and closers, optionally dashes; or dashes closed by a quote ("this--" "We...").
_END = re.compile(
    rf"[{_T}\-\u2013\u2014\u2015]"
    rf"(?:(?<=[{_T}])(?:(?<=\.)(?:{_HWS}*(?:{_LB}{_HWS}*)?\.){{2,}})?"
    rf"[{re.escape(_TERMINALS + _CLOSERS)}]*(?P<dash>{_DASHES})?"
    rf"|(?<=-)-+[{_Q}]+|(?<=[\u2014\u2015])[\u2014\u2015]*[{_Q}]+|(?<=\u2013)[{_Q}]+)"
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

# A capitalised speech tag after a closing quote that ends in ``!``, ``?``, an ellipsis or a dash
# ("Sorry!" I say. / "No!" Jo cried / "I am doing..." Raskolnikov began). Two ways to be a tag:
# a verb of speaking or voicing (any inflection of the bases below) with what may follow it, or
# any verb-shaped word that closes the clause at once ("Owwww!" I howled. / "Can they?" I ask.),
# unless it is a silent gesture ("Is he?" She nodded. is two sentences).
def _verb_forms(spec: str) -> frozenset[str]:
    """Every inflection of each ``base[/irregular...]``: base, -s/-es/-ies, -ed/-d/-ied."""
    forms: set[str] = set()
    for entry in spec.split():
        base, *irregular = entry.split("/")
        forms.update(irregular)
        forms.add(base)
        if base.endswith("y") and base[-2:-1] not in ("a", "e", "o", "u"):
            forms.update((base[:-1] + "ies", base[:-1] + "ied"))
        elif base.endswith("e"):
            forms.update((base + "s", base + "d"))
        elif base.endswith(("s", "sh", "ch", "x", "z")):
            forms.update((base + "es", base + "ed"))
        else:
            forms.update((base + "s", base + "ed"))
    return frozenset(forms)


_SPEECH_VERBS = _verb_forms(
    """say/said ask cry reply answer exclaim shout whisper mutter murmur call add continue return
    observe remark repeat rejoin retort interrupt inquire enquire demand scream shriek sob/sobbed
    wail groan growl roar gasp sigh laugh think/thought begin/began resume urge plead protest
    insist echo/echoed stammer falter bellow yell snap/snapped sneer hiss howl yelp snarl grunt
    breathe mumble grumble complain explain agree admit announce declare suggest venture hazard
    query question interpose interject ejaculate remonstrate object confess concede prompt
    persist pursue entreat implore beg/begged warn order command chuckle giggle snort stutter
    splutter sputter blurt croak squeak squeal whimper moan trail finish conclude wonder muse
    ponder reflect assent"""
)
# Silent gestures: after a quote they start a sentence of their own.
_GESTURE_VERBS = _verb_forms(
    """nod/nodded shrug/shrugged smile grin/grinned frown wince blush flush pause hesitate wait
    stop/stopped turn look stare glance blink beam scowl pout swallow shiver tremble sit/sat
    stand/stood rise/rose/risen leave/left freeze/froze wave point lean/leant step/stepped
    walk move reach hand/handed take/took listen stagger cease start plunge dance comply
    fall/fell/fallen run/ran hurry rush come/came go/went enter retreat approach kneel/knelt bow
    be/am/is/are/was/were/been have/has/had do/does/did can could shall should will would may
    might must"""
)
_TAG = re.compile(
    r"(?P<subject>I|He|She|They|We|You|It"
    r"|(?:(?:The|A|An|Old|Young|Little|Poor|My|His|Her|Our|Their)\s+)?"
    r"[A-Z][\w\u2019'-]*(?:\s+[A-Z][\w\u2019'-]*)?)"
    r"(?:\s+(?P<adverb>\w+ly))?\s+"
    r"(?P<verb>[a-z]+)(?![\w\u2019]|['-]\w)"
    r"(?:(?P<punct>\s*[,.;:!?\u2014\u2013-])|\s+(?P<next>[\w\u2019']+))?"
)
# Words that may follow a verb of speaking in a tag; anything else ("that", "nothing", "he")
# reads as a new sentence ("The mother said nothing").
_TAG_FOLLOWERS = frozenset(
    """me him her us them you to in at with from into after again aloud as for on upon
    over across and out back up off""".split()
)
# Capitalised words that open sentences but never a tag's subject ("And I noted with joy").
_NEVER_A_SUBJECT = frozenset(
    """And But Or Nor So Yet If As At In On Of To For With By From After Before Then There Now
    Here What When Where Why How Which Not Yes No Oh Ah While Until Though Although Because
    Since Once Unless Whether Is Are Was Were Do Does Did Has Have Had Will Would Can Could
    Shall Should May Might Must""".split()
)
# Subjects of a tag whose verb is not one of speaking: people, not "It" or "Nothing".
_NOT_A_VERB = frozenset(
    """this his is was has does yes us thus always perhaps towards afterwards sometimes besides
    whereas unless less its hers ours yours theirs""".split()
)
_NOT_A_SPEAKER = frozenset(
    """It This That These Those Nothing Everything Something Anything Everyone Everybody Someone
    Somebody Nobody None Silence All Each Both Such Some Many Most Few""".split()
)

# Shout lists: a one-word exclamation ("Peterson!") and a chain of them before a "!".
_ONE_WORD_BANG = re.compile(r"[^\W\d_][\w\u2019'-]*!(?![\w!?])")
_BANG_CHAIN = re.compile(r"(?:[^\W\d_][\w\u2019'-]*!\s+)*[^\W\d_][\w\u2019'-]*")
_OPENING_QUOTES = "\"'\u201c\u2018\u00ab"

# Heading-like lines.
_HEADING_WORD = re.compile(
    r"(?:chapter|book|part|act|scene|canto|stave|volume|fit|letter|section|prologue|epilogue)"
    r"\s+(?:the\s+)?(?:[ivxlcdm]+\b|\d+|one|two|three|four|five|six|seven|eight|nine|ten|"
    r"eleven|twelve|first|second|third|fourth|fifth|sixth|seventh|eighth|ninth|tenth|last)",
    re.IGNORECASE,
)
# A line break followed by a line that might be heading-like (a superset of what
# _is_heading_line accepts: a Markdown or emphasis opener, a heading word and number, or no
# lowercase ASCII letter at all); blocks without one skip the line-by-line test.
_LB_CHARS = "\n\r\v\x85\u2028"
_HEADING_CANDIDATE = re.compile(
    rf"[{_LB_CHARS}](?:(?<=\r)\n)?[{_HWS_CHARS}]*(?:[#*_]|(?i:{_HEADING_WORD.pattern})"
    rf"|[^a-z{_LB_CHARS}]+(?:[{_LB_CHARS}]|\Z))"
)
_CONTINUATION_WORDS = frozenset(
    "A AN AND AS AT BUT BY FOR FROM IN INTO NOR NOT OF ON OR THAT THE THOSE TO WHICH WITH".split()
)
_INNER_STOP = re.compile(r"[.\u2026]\s")
_MAX_HEADING_WORDS = 12
_MAX_TITLE_WORDS = 10


def split_spans(
    text: str, start: int = 0, end: int | None = None, *, max_words: int | None = None
) -> list[tuple[int, int]]:
    """Sentence spans ``[(s, e), ...]`` inside ``text[start:end]``, offsets into ``text``.

    Spans are sorted, disjoint, stripped of surrounding whitespace and together cover every
    non-whitespace character of the range; only ``text[start:end]`` is read. With ``max_words``
    no span holds more than that many whitespace-separated words.
    """
    end = _check_range(text, start, end)
    if max_words is not None and (isinstance(max_words, bool) or not isinstance(max_words, int)
                                  or max_words < 1):
        raise ValueError(f"max_words must be None or an int >= 1, got {max_words!r}")

    spans: list[tuple[int, int]] = []
    for b_start, b_end in _blocks(text, start, end):
        for r_start, r_end, atomic in _block_runs(text, b_start, b_end):
            if atomic:
                spans.append((r_start, r_end))
            else:
                _split_run(text, r_start, r_end, spans)
    if max_words is not None:
        # n words need at least 2n - 1 characters: shorter spans skip the count altogether
        short = 2 * max_words
        capped: list[tuple[int, int]] = []
        for s, e in spans:
            if e - s <= short or len(text[s:e].split()) <= max_words:
                capped.append((s, e))
            else:
                capped.extend(_cap_words(text, (s, e), max_words))
        spans = capped
    return spans


def _check_range(text: str, start: int, end: int | None) -> int:
    """Validate the arguments; return the resolved ``end``."""
    if not isinstance(text, str):
        raise TypeError(f"text must be str, not {type(text).__name__}")
    end = len(text) if end is None else end
    for name, value in (("start", start), ("end", end)):
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"{name} must be an int, not {type(value).__name__}")
    if not 0 <= start <= end <= len(text):
        raise ValueError(f"need 0 <= start <= end <= len(text); got start={start}, end={end}, "
                         f"len(text)={len(text)}")
    return end


def split_sentences(
    text: str, start: int = 0, end: int | None = None, *, max_words: int | None = None
) -> list[str]:
    """The sentence strings of ``text[start:end]`` (see :func:`split_spans`)."""
    return [text[s:e] for s, e in split_spans(text, start, end, max_words=max_words)]


# --------------------------------------------------------------------------- blocks and lines


def _strip(text: str, s: int, e: int) -> tuple[int, int]:
    while s < e and text[s].isspace():
        s += 1
    while e > s and text[e - 1].isspace():
        e -= 1
    return s, e


def _blocks(text: str, start: int, end: int) -> Iterator[tuple[int, int]]:
    """Stripped, non-empty stretches between blank lines."""
    pos = start
    for m in _PARA_BREAK.finditer(text, start, end):
        s, e = _strip(text, pos, m.start())
        if e > s:
            yield s, e
        pos = m.end()
    s, e = _strip(text, pos, end)
    if e > s:
        yield s, e


def _is_heading_line(line: str) -> bool:
    """A line that stands alone: never joined to the text before or after it."""
    first = line[0]
    if first == "#":
        return line.lstrip("#")[:1].isspace() or line.lstrip("#") == ""
    if first in "*_" and len(line) > 2 and line[-1] == first:
        inner = line.strip("*_ \t")
        # "**HAMLET**", "_Exit_"; not "_de gustibus._", which ends a sentence begun above
        return (bool(inner) and not inner[0].islower() and "*" not in inner and "_" not in inner
                and _n_words(inner) <= _MAX_HEADING_WORDS)
    if line.isupper():
        # not a wrapped line of capitals ("... WARRANTY OR CONTRACT," / "... EXCEPT THOSE")
        last = line.rstrip(_CLOSERS).rsplit(None, 1)[-1] if line.rstrip(_CLOSERS) else ""
        if line[-1] in ",;-\u2013\u2014" or last in _CONTINUATION_WORDS:
            return False
        letters = sum(1 for ch in line if ch.isalpha())
        return letters >= 2 and _n_words(line) <= _MAX_HEADING_WORDS
    if first.isalpha() and _HEADING_WORD.match(line):
        return _n_words(line) <= _MAX_HEADING_WORDS and line[-1] not in ",;"
    return False


def _n_words(line: str) -> int:
    """Words with a letter or digit (dot leaders in a table of contents do not count)."""
    return sum(1 for w in line.split() if any(ch.isalnum() for ch in w))


def _is_title_block(line: str) -> bool:
    """A block of one short line without end punctuation (``I. The Period``, ``1``).

    Not a line of dialogue cut short (``Nora. No, I really can't--``): no dash or comma at the
    end, no ``!``/``?``, and a period inside only after a leading number or label.
    """
    core = line.rstrip(_CLOSERS + " \t")
    if (not core or core[-1] in _TERMINALS + ",;:-\u2013\u2014" or "!" in line or "?" in line
            or line[0] in _QUOTES + "\u201c\u2018"):
        return False
    first_word_end = len(line.split(None, 1)[0])  # the line is stripped
    if any(m.start() >= first_word_end for m in _INNER_STOP.finditer(line)):
        return False
    return _n_words(line) <= _MAX_TITLE_WORDS


def iter_runs(text: str, start: int = 0, end: int | None = None) -> Iterator[tuple[int, int, bool]]:
    """The structural layer alone: ``(start, end, atomic)`` stretches of ``text[start:end]``.

    Atomic stretches (headings, speaker labels, title lines) are whole sentences; the others are
    runs of ordinary lines that punctuation splits further. Exposed so that benchmarks can put a
    library splitter inside the same structure.
    """
    end = _check_range(text, start, end)
    for b_start, b_end in _blocks(text, start, end):
        yield from _block_runs(text, b_start, b_end)


def _block_runs(text: str, b_start: int, b_end: int) -> Iterator[tuple[int, int, bool]]:
    first_break = _LINE_BREAK.search(text, b_start, b_end)
    if first_break is None:
        line = text[b_start:b_end]
        yield b_start, b_end, _is_heading_line(line) or _is_title_block(line)
        return
    # Most blocks are plain prose: no later line could be a heading and the first is not one.
    s, e = _strip(text, b_start, first_break.start())
    if not _is_heading_line(text[s:e]) and not _HEADING_CANDIDATE.search(
            text, first_break.start(), b_end):
        yield b_start, b_end, False
        return

    lines: list[tuple[int, int]] = []
    pos = b_start
    for m in _LINE_BREAK.finditer(text, b_start, b_end):
        lines.append((pos, m.start()))
        pos = m.end()
    lines.append((pos, b_end))

    run_start = run_end = -1
    for s, e in lines:
        s, e = _strip(text, s, e)
        if e <= s:
            continue
        if _is_heading_line(text[s:e]):
            if run_start >= 0:
                yield run_start, run_end, False
                run_start = -1
            yield s, e, True
        else:
            if run_start < 0:
                run_start = s
            run_end = e
    if run_start >= 0:
        yield run_start, run_end, False


# --------------------------------------------------------------------------- punctuation


def _split_run(text: str, r_start: int, r_end: int, out: list[tuple[int, int]]) -> None:
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
    s, e = _strip(text, sent_start, r_end)
    if e > s:
        out.append((s, e))


def _starts_sentence(ch: str) -> bool:
    return ch.isupper() or ch in "\"'\u201c\u2018\u00ab([_*"


def _is_boundary(text: str, sent_start: int, m_start: int, p: int, q: int, r_start: int,
                 r_end: int, end_text: str) -> bool:
    nxt = text[q]
    if nxt.islower() or nxt.isdigit() or nxt in ",;:" or nxt in _TERMINALS:
        return False
    if nxt in "\"'\u201c\u2018\u00ab([{_*\u2014-":
        # look past opening quotes and brackets: "' (when she thought it over" runs on
        k = q
        while k < r_end and (text[k] in "\"'\u201c\u2018\u00ab([{_*\u2014-" or text[k].isspace()):
            k += 1
        if k < r_end and text[k].islower():
            return False
    elif nxt in _CLOSERS or nxt in "\u201d\u2019":
        return False
    first = end_text[0]
    has_quote = len(end_text) > 1 and not _QUOTE_SET.isdisjoint(end_text)
    if first == "." and end_text.rstrip(_CLOSERS) == "." and not has_quote:
        if _period_is_abbreviation(text, sent_start, m_start, r_start, r_end):
            return False
    is_ellipsis = first == "\u2026" or end_text.startswith("..") or bool(
        _SPACED_DOTS.match(end_text))
    if is_ellipsis and not has_quote and nxt == "I" and (q + 1 >= r_end or not text[q + 1].isalpha()):
        return False  # "And here... I am again": an ellipsis runs on into "I"
    if has_quote and nxt.isupper() and (is_ellipsis or "!" in end_text or "?" in end_text
                                        or "-" in end_text or "\u2014" in end_text):
        if _is_speech_tag(text, q, r_end):
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
    m = _LINE_BREAK.search(text, dot, run_end)
    line_end = m.start() if m else run_end
    rest = text[dot + 1:line_end].strip()
    return 0 < len(rest.split()) <= _MAX_TITLE_WORDS and rest[-1] not in _TERMINALS


def _is_speech_tag(text: str, q: int, r_end: int) -> bool:
    m = _TAG.match(text, q, min(r_end, q + 80))
    if not m:
        return False
    subject, verb, follower = m.group("subject"), m.group("verb"), m.group("next")
    words = subject.split()
    if words[0] in _NEVER_A_SUBJECT:
        return False
    if verb in _SPEECH_VERBS:
        if follower is None:
            return True
        return follower in _TAG_FOLLOWERS or (follower.endswith("ly") and len(follower) > 3)
    if (verb in _GESTURE_VERBS or verb in _NOT_A_VERB or words[0] in _NOT_A_SPEAKER
            or words[-1] in _NOT_A_SPEAKER or words[-1].endswith(("ing", "ly"))):
        return False
    # any other verb: "I ask." / "We lie." take any form; "He", "She" and names a form that
    # ends as verbs do ("Peterson howled", "Grandad grumbles")
    if subject not in ("I", "We", "They", "You") and not verb.endswith(("s", "ed")):
        return False
    # ... and only when the clause ends with it
    return follower is None or follower == "aloud"


# --------------------------------------------------------------------------- word cap

_TOKEN = re.compile(r"\S+")
_INNER_DASH = re.compile(rf"{_DASHES}(?=\w)")
_STRONG_END = re.compile(rf"(?:[;:]|{_DASHES})[{re.escape(_CLOSERS)}]*$")
_COMMA_END = re.compile(rf",[{re.escape(_CLOSERS)}]*$")


def _cap_words(text: str, span: tuple[int, int], max_words: int) -> list[tuple[int, int]]:
    """Cut an overlong sentence greedily at clause boundaries so no piece exceeds the cap."""
    s, e = span
    tokens = [(m.start(), m.end()) for m in _TOKEN.finditer(text, s, e)]
    if len(tokens) <= max_words:
        return [span]
    # Atoms: whitespace tokens, further cut after dashes inside a token ("summer--all").
    atoms: list[tuple[int, int, bool]] = []  # (start, end, starts a new word)
    for t_start, t_end in tokens:
        a = t_start
        for m in _INNER_DASH.finditer(text, t_start, t_end):
            if m.end() > a:
                atoms.append((a, m.end(), a == t_start))
                a = m.end()
        atoms.append((a, t_end, a == t_start))

    def rank(j: int) -> int:
        a_start, a_end, _ = atoms[j]
        piece = text[a_start:a_end]
        if _STRONG_END.search(piece):
            return 3
        if _COMMA_END.search(piece):
            return 2
        if j + 1 < len(atoms) and _LINE_BREAK.search(text, a_end, atoms[j + 1][0]):
            return 2
        return 0

    pieces: list[tuple[int, int]] = []
    first = 0
    while first < len(atoms):
        words = 0
        best_j, best_key = -1, (-1, -1)
        j = first
        while j < len(atoms):
            if j == first or atoms[j][2]:
                words += 1
            if words > max_words:
                break
            if j + 1 < len(atoms):
                key = (rank(j) if 2 * words >= max_words else -1, j)
                if key > best_key:
                    best_j, best_key = j, key
            j += 1
        if j >= len(atoms):
            pieces.append((atoms[first][0], atoms[-1][1]))
            break
        pieces.append((atoms[first][0], atoms[best_j][1]))
        first = best_j + 1
    return pieces
