"""Contents lists: their entries read, and aligned in order with short blocks of the body."""

from __future__ import annotations

import re
import unicodedata
from bisect import bisect_left
from collections import Counter
from dataclasses import dataclass

from litseg.segmentation.structure.headings import (
    FOOTNOTE_MARK,
    ILLUSTRATION,
    clean,
    heading_case,
    mostly_upper,
    apparatus_reason,
)
from litseg.segmentation.structure.numbers import ORDINALS, parse_number
from litseg.segmentation.structure.patterns import KW_ALT, LISTY_PAGE
from litseg.segmentation.structure.records import Block, Heading
from litseg.segmentation.structure.thresholds import LIST_BREAK_WORDS
from litseg.segmentation.types import NEVER_INDEXED


@dataclass(slots=True)
class Entry:
    """One line of a contents list."""

    title: str
    key: str  # normalised title
    main: str  # normalised title without subtitle or author column (before "--", "(")
    short: str  # normalised title before its first comma, colon or semicolon
    indent: int
    raw: str  # normalised line with its number ("i am content")
    number: int | None  # the value of its number, when it has one
    numbered: bool  # opened with a number or a keyword and a number ("CHAPTER I.", "i.", "12")
    label: bool  # nothing but a number label ("FIRST STORY", "The Second Voice", "II.")
    reason: str | None  # apparatus (preface, index, ...) or None


_ENTRY_KW_NUM = re.compile(rf"(?:{KW_ALT})\s+(?P<num>(?:the\s+)?[\w-]+)[.:]?(?=\s|$)\s*", re.I)
_ENTRY_NUM = re.compile(r"(?P<num>[IVXLCDM]+|[ivxlcdm]+|\d{1,3})[.):]?(?=\s|$)\s*")
_ENTRY_LEADER = re.compile(r"(?:\s*[.\u00b7\u2026]){3,}.*$")
_ENTRY_PAGE = re.compile(r"\s+(?:\d{1,4}|[ivxlcdm]{1,6}|_?[Ff]rontispiece_?)\s*$")
_SPLIT_FIELDS = re.compile(r"\s{2,}|\t")
_MAIN_CUT = re.compile(r"\s*(?:--|[\u2014\u2013(\[])\s*")
_SHORT_CUT = re.compile(r"\s*(?:--|[\u2014\u2013:;,(\[])\s*")
_NORM_DROP = re.compile(r"[^\w ]+")
_APOS = re.compile(r"['\u2019\u2018`]")
_STOPWORDS = frozenset({"the", "a", "an", "of", "to", "in", "on", "and"})
_SENTENCE = re.compile(r"[a-z][.!?][\"'\u201d\u2019)]?\s+[\"'\u201c\u2018(]?[A-Z]")


def norm(s: str) -> str:
    """Lower case, accents, apostrophes, footnote marks and punctuation dropped."""
    s = _APOS.sub("", FOOTNOTE_MARK.sub(" ", s).lower())
    if not s.isascii():
        s = "".join(c for c in unicodedata.normalize("NFKD", s) if not unicodedata.combining(c))
    return " ".join(_NORM_DROP.sub(" ", s).replace("_", " ").split())


def _ordinal_noun(key: str) -> str | None:
    """``first story`` -> ``story``, ``the second voice`` -> ``voice``: an ordinal and at most
    one more word (else None)."""
    words = key.split()
    if words[:1] == ["the"]:
        words = words[1:]
    if words and len(words) <= 2 and words[0] in ORDINALS:
        return words[1] if len(words) == 2 else ""
    return None


def _mark_ordinal_labels(entries: list[Entry]) -> None:
    """Entries that only count (``FIRST STORY``, ``SECOND STORY``) are labels of the parts of
    the entry above them - when they come as a series; ``Twelfth Night`` alone is a title."""
    series = Counter(n for e in entries if (n := _ordinal_noun(e.key)) is not None)
    for e in entries:
        n = _ordinal_noun(e.key)
        if n is not None and series[n] >= 2:
            e.label = e.numbered = True
            e.reason = None


def _listed_as_numbered(entries: list[Entry]) -> None:
    """An entry the contents numbers in the run of its neighbours (``I. Introduction``, ``II.
    The Quay``) is a chapter whatever its word: it names no front or back matter (unless it is
    an index, a list or the like: :data:`~litseg.segmentation.types.NEVER_INDEXED`)."""
    numbered = [e for e in entries if e.number is not None and not e.label]
    for k, e in enumerate(numbered):
        prev = numbered[k - 1].number if k else None
        nxt = numbered[k + 1].number if k + 1 < len(numbered) else None
        if e.reason is not None and e.reason not in NEVER_INDEXED and (prev == e.number - 1 or nxt == e.number + 1):
            e.reason = None


def parse_entry(line: str) -> Entry | None:
    """A contents line as an entry: indentation, leading number, title (page numbers, dot
    leaders and author columns dropped). None for blank lines and ``PAGE`` headers."""
    expanded = line.expandtabs(4).rstrip()
    body = expanded.lstrip()
    if not body:
        return None
    indent = len(expanded) - len(body)
    m = ILLUSTRATION.fullmatch(body)
    s = (m.group(1) if m else body).replace("**", "").replace("__", "")
    s = _ENTRY_PAGE.sub("", _ENTRY_LEADER.sub("", s)).strip()
    if not s or s.lower() in ("page", "pages", "contents", "contents:", "[illustration]"):
        return None
    numbered = False
    number = None
    raw = norm(clean(_SPLIT_FIELDS.split(s, maxsplit=1)[0]))
    m = _ENTRY_KW_NUM.match(s) or _ENTRY_NUM.match(s)
    if m:
        value = parse_number(m.group("num"))
        if value is None or (value is not False and value <= 400):
            numbered = True
            number = value if isinstance(value, int) else None
            s = s[m.end():]
    title = clean(_SPLIT_FIELDS.split(s.strip(), maxsplit=1)[0]).strip(" .:;,\u2014\u2013-") if s.strip() else ""
    key = norm(title)
    label = numbered and not key
    main = norm(_MAIN_CUT.split(title, maxsplit=1)[0]) if title else ""
    short = norm(_SHORT_CUT.split(title, maxsplit=1)[0]) if title else ""
    reason = apparatus_reason(title) if title and not label else None
    return Entry(title=title, key=key, main=main or key, short=short or main or key, indent=indent,
                 raw=raw, number=number,
                 numbered=numbered or label,
                 label=label, reason=reason)


def parse_contents(text: str, blocks: list[Block], cands: list[Heading],
                   book_title: str = "") -> tuple[list[Entry], int] | None:
    """Entries of the first contents list and the index of the first block after it (the
    book's title printed again after the list is not an entry)."""
    toc = next((h for h in cands if h.family == "apparatus" and h.reason == "contents"), None)
    if toc is None:
        return None
    # another apparatus heading ends the list, unless it is one of its lines ("INDEX ... 463")
    others = {h.block for h in cands if h.family == "apparatus" and h.block != toc.block
              and not (_ENTRY_PAGE.search(blocks[h.block].first) or _ENTRY_LEADER.search(blocks[h.block].first))}
    # a real heading (text follows it) is the body's first, not an entry
    real = {h.block for h in cands if h.real and h.block > toc.block and h.family != "apparatus"}
    others.update(real)
    cands_real = real.__contains__
    entries: list[Entry] = []
    seen: set[str] = set()
    if toc.rest_words:  # the list glued under its heading
        for ln in text[toc.end:blocks[toc.block].end].splitlines():
            e = parse_entry(ln)
            if e:
                entries.append(e)
                seen.update((e.key, e.main, e.short))
    j = toc.last_block + 1
    lines_seen = 0
    gap = 0  # widest gap between the list's blocks so far
    while j < len(blocks) and lines_seen < 1500:
        b = blocks[j]
        if j in others and entries and (b.blank_before > gap or cands_real(j)):
            break  # ILLUSTRATIONS, PREFACE ... set apart from the list: the list is over
        if entries:
            gap = max(gap, b.blank_before)
        if b.prose and b.n_words >= LIST_BREAK_WORDS and _SENTENCE.search(text, b.start, b.end):
            break  # running text
        line_start = max(text.rfind("\n", 0, b.start), text.rfind("\r", 0, b.start)) + 1
        lines = _join_wrapped_entries(text[line_start:b.end].splitlines())
        parsed = [e for e in map(parse_entry, lines) if e and e.key]
        if (b.n_lines <= 2 and parsed and all(e.key in seen for e in parsed)
                and not any(_ENTRY_PAGE.search(ln) for ln in lines)):
            break  # an entry seen again, without its page number: the body has begun
        for e in parsed:
            entries.append(e)
            seen.update((e.key, e.main, e.short))
        lines_seen += b.n_lines
        j += 1
    book = norm(book_title)
    while entries and book and entries[-1].key == book:
        entries.pop()
    _mark_ordinal_labels(entries)
    _listed_as_numbered(entries)
    return entries, j


_ENTRY_OPENS_NUMBERED = re.compile(rf"\s*(?:(?:{KW_ALT})\s+)?(?:[IVXLCDM]+|[ivxlcdm]+|\d+)[.):]?\s", re.I)


def _join_wrapped_entries(lines: list[str]) -> list[str]:
    """Entries wrapped over several lines in a list with page numbers: a deeper-indented line
    that does not open with a number continues the entry above until a page number ends it
    (``III How the Lantern Came Back to the Quay`` / ``in the End   65``). A line that
    introduces sub-entries (``THE THREE VOICES:--``) is not continued."""
    if len(lines) < 2 or not any(LISTY_PAGE.search(ln) for ln in lines):
        return lines
    out: list[str] = []
    indent = 0
    open_entry = False
    for ln in lines:
        body = ln.expandtabs(4)
        ind = len(body) - len(body.lstrip())
        if (open_entry and out and ind > indent and body.strip()
                and not _ENTRY_OPENS_NUMBERED.match(body)):
            out[-1] = out[-1].rstrip() + " " + body.strip()
        else:
            out.append(ln)
            indent = ind
        tail = out[-1].rstrip()
        open_entry = bool(tail) and not LISTY_PAGE.search(tail) and not tail.endswith((":", "\u2014", "-"))
    return out


def _entry_match(bk: str, e: Entry, caps: bool = False) -> bool:
    """Does a block's normalised text ``bk`` name the entry? Exactly, by its main title, with
    words added before or after (``Ford o' Kabul River``, ``THE ADVENTURES OF OLIVER TWIST``;
    anywhere in an upper-case title), or with one word in four misprinted."""
    if bk == e.key or bk == e.main or bk == e.short:
        return True
    ek = e.main  # partial matches use the title without its subtitle or author column
    if " " in ek and (bk.startswith(ek + " ") or bk.endswith(" " + ek)
                      or caps and f" {ek} " in f" {bk} "):
        return True
    if " " in bk and len(bk) >= 8 and ek.startswith(bk + " "):
        return True
    if bk.count(" ") >= 2 and ek.endswith(" " + bk):
        return True  # "In the Church at Stratford-on-Avon" / "THE CHURCH AT STRATFORD-ON-AVON."
    bw, ew = bk.split(), ek.split()
    # a misprint in one word of four ("Soldier an; Sailor Too" / "Soldier an' Salor Too")
    return len(bw) == len(ew) >= 3 and sum(a == b for a, b in zip(bw, ew)) >= 0.75 * len(ew)


def _significant(words: list[str]) -> str:
    return next((w for w in words if w not in _STOPWORDS), words[0])


def align_contents(text: str, blocks: list[Block], entries: list[Entry], from_block: int,
                   taken: set[int], word_for_word: set[int] | None = None) -> list[tuple[int, int]]:
    """``(entry index, block index)`` pairs: the longest in-order alignment of the entries with
    short blocks of the body (each entry and block used once; the earliest block wins)."""
    by_key: dict[str, set[int]] = {}
    by_first: dict[str, set[int]] = {}
    by_last: dict[str, set[int]] = {}
    by_raw: dict[str, set[int]] = {}
    for ei, e in enumerate(entries):
        if not e.key:
            continue
        if word_for_word is None or ei in word_for_word:
            by_raw.setdefault(e.raw, set()).add(ei)
        words = e.key.split()
        by_key.setdefault(e.key, set()).add(ei)
        by_key.setdefault(e.main, set()).add(ei)
        by_key.setdefault(e.short, set()).add(ei)
        by_first.setdefault(_significant(words), set()).add(ei)
        by_last.setdefault(words[-1], set()).add(ei)
    pairs: list[tuple[int, int]] = []
    for bi in range(from_block, len(blocks)):
        b = blocks[bi]
        if b.n_lines > 3 or b.n_words > 24:
            # a title glued to the text under it names its entry word for word
            if len(b.first) <= 60 and heading_case(b.first):
                bk = norm(clean(b.first))
                pairs.extend((bi, ei) for ei in sorted(by_key.get(bk, ()), reverse=True))
            continue
        if bi in taken:  # a numbered heading names an entry only word for word ("I AM CONTENT.")
            pairs.extend((bi, ei) for ei in sorted(by_raw.get(norm(clean(b.first)), ()), reverse=True))
            continue
        keys = {norm(clean(b.first))}
        if b.n_lines > 1:
            keys.add(norm(" ".join(text[b.start:b.end].split())))
        raw = text[b.start:b.end]
        columns = "    " in raw.strip()  # a cast list or table row, not a title: exact matches only
        caps = not columns and mostly_upper(raw)
        hits: set[int] = set()
        for bk in keys:
            if not bk:
                continue
            if columns:
                hits.update(by_key.get(bk, set()))
                continue
            words = bk.split()
            pool = by_key.get(bk, set()) | by_first.get(_significant(words), set()) | by_last.get(words[-1], set())
            if caps and len(words) > 2:
                pool = pool | {ei for w in words for ei in by_first.get(w, ())}
            hits.update(ei for ei in pool if _entry_match(bk, entries[ei], caps))
        pairs.extend((bi, ei) for ei in sorted(hits, reverse=True))
    # longest increasing subsequence of entry indices along the blocks
    tails: list[int] = []
    tail_pair: list[int] = []
    prev = [-1] * len(pairs)
    for pi, (_bi, ei) in enumerate(pairs):
        k = bisect_left(tails, ei)
        if k < len(tails) and tails[k] == ei:
            continue  # this entry already ends a chain as long, at an earlier block
        if k == len(tails):
            tails.append(ei)
            tail_pair.append(pi)
        else:
            tails[k] = ei
            tail_pair[k] = pi
        prev[pi] = tail_pair[k - 1] if k else -1
    out: list[tuple[int, int]] = []
    pi = tail_pair[-1] if tail_pair else -1
    while pi >= 0:
        bi, ei = pairs[pi]
        out.append((ei, bi))
        pi = prev[pi]
    return out[::-1]
