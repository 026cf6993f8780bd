"""Sentence splitting: labelled literary cases, zero-loss properties, the word cap, speed."""

from __future__ import annotations

import json
import re
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from litseg.segmentation.sentences import chars, lines, wordcap
from litseg.segmentation.sentences import iter_runs, split_sentences, split_spans
from tests.conftest import REPO, shared_data_dir, shared_dir
from tests.sentence_cases import load_cases

CASES_PATH = REPO / "tests" / "data" / "sentence_cases.jsonl"
# Book excerpts are read from ../shared/data (the files hold only their source and offsets).
SHARED_DATA = shared_dir() / "data" if shared_dir() is not None else None
CASES = load_cases(CASES_PATH, SHARED_DATA)
DIALOGUE_PATH = REPO / "tests" / "data" / "dialogue_cases.jsonl"
DIALOGUE = load_cases(DIALOGUE_PATH, SHARED_DATA)
needs_shared = pytest.mark.skipif(SHARED_DATA is None, reason="the book excerpts of the labelled sets "
                                  "are read from ../shared/data (LITSEG_SHARED_DIR)")

# Cases the rules get wrong on purpose rather than by accident (see docs/sentences.md).
KNOWN_FAILURES = {
    "treasure_contents_wrapped": "a contents entry wrapped onto a second all-capital line is "
    "read as two headings",
    "chekhov_i_wonder_i_hear": "'I hear his voice,' after a quote: neither a verb of speaking nor "
    "clause-final, so read as a new sentence",
    "w_i_yell_i_ask": "a verb of speaking followed by an object phrase ('Mum demands the second "
    "I walk in', 'I ask the ceiling') is read as a new sentence",
}


def check_invariants(text: str, start: int, end: int, spans: list[tuple[int, int]],
                     max_words: int | None = None) -> None:
    prev_end = start
    for s, e in spans:
        assert prev_end <= s < e <= end, (spans, start, end)
        assert not text[s].isspace() and not text[e - 1].isspace()
        if max_words is not None:
            assert len(text[s:e].split()) <= max_words
        prev_end = e
    covered = set()
    for s, e in spans:
        covered.update(range(s, e))
    missing = [i for i in range(start, end) if not text[i].isspace() and i not in covered]
    assert not missing, f"characters lost at {missing[:10]}"


# ----------------------------------------------------------------------------- labelled cases


def test_no_book_text_is_committed() -> None:
    # a case from a Project Gutenberg text names its source and offsets; only cases written for
    # litseg and FairytaleQA rows carry their text
    for path in (CASES_PATH, DIALOGUE_PATH):
        for line in path.read_text(encoding="utf-8").splitlines():
            case = json.loads(line)
            own = case["source"] == "written for litseg" or case["source"].startswith("fairytaleqa:")
            assert ("text" in case) == own, case["id"]


@needs_shared
def test_case_file_is_well_formed() -> None:
    assert len(CASES) >= 60
    assert len({c["id"] for c in CASES}) == len(CASES)
    assert sum(c["split"] == "heldout" for c in CASES) >= 20
    for c in CASES:
        # the expected sentences are exact, ordered pieces of the excerpt that lose nothing
        pos = 0
        spans = []
        for sent in c["sentences"]:
            i = c["text"].index(sent, pos)
            spans.append((i, i + len(sent)))
            pos = i + len(sent)
        check_invariants(c["text"], 0, len(c["text"]), spans)
        assert "gutenberg" not in c["text"].lower()


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_labelled_case(case: dict) -> None:
    if case["id"] in KNOWN_FAILURES:
        pytest.xfail(KNOWN_FAILURES[case["id"]])
    assert split_sentences(case["text"]) == case["sentences"]


@pytest.mark.parametrize("case", DIALOGUE, ids=[c["id"] for c in DIALOGUE])
def test_dialogue_case(case: dict) -> None:
    if case["id"] in KNOWN_FAILURES:
        pytest.xfail(KNOWN_FAILURES[case["id"]])
    assert split_sentences(case["text"]) == case["sentences"]


def _boundaries(text: str, starts: list[int]) -> set[int]:
    """Sentence starts counted in non-whitespace characters (as benchmarks/sentences.py does)."""
    return {len("".join(text[:i].split())) for i in starts} - {0}


def _boundary_f1(cases: list[dict]) -> float:
    tp = fp = fn = 0
    for c in cases:
        gold, pos = [], 0
        for sent in c["sentences"]:
            pos = c["text"].index(sent, pos)
            gold.append(pos)
            pos += len(sent)
        g = _boundaries(c["text"], gold)
        p = _boundaries(c["text"], [s for s, _ in split_spans(c["text"])])
        tp, fp, fn = tp + len(g & p), fp + len(p - g), fn + len(g - p)
    return 2 * tp / (2 * tp + fp + fn)


@needs_shared
def test_dialogue_set_is_labelled_and_split_well() -> None:
    assert len(DIALOGUE) >= 50 and len({c["id"] for c in DIALOGUE}) == len(DIALOGUE)
    assert sum(c["split"] == "heldout" for c in DIALOGUE) >= 20
    for c in DIALOGUE:
        pos = 0
        spans = []
        for sent in c["sentences"]:
            i = c["text"].index(sent, pos)
            spans.append((i, i + len(sent)))
            pos = i + len(sent)
        check_invariants(c["text"], 0, len(c["text"]), spans)
    assert _boundary_f1(DIALOGUE) >= 0.95
    assert _boundary_f1([c for c in DIALOGUE if c["split"] == "heldout"]) >= 0.95
    assert _boundary_f1(CASES) >= 0.998  # the literary set keeps its score


def test_known_failures_still_fail() -> None:
    # when a rule change fixes one, move it out of KNOWN_FAILURES (and the docs)
    for case in CASES + DIALOGUE:
        if case["id"] in KNOWN_FAILURES:
            assert split_sentences(case["text"]) != case["sentences"], case["id"]


@needs_shared
def test_every_category_is_covered() -> None:
    cats = {c["category"] for c in CASES}
    assert {"dialogue", "speech_tag", "abbreviation", "ellipsis_dash", "verse", "play", "heading",
            "hard_wrap", "line_endings", "long_sentence", "quote_interior"} <= cats
    assert any("\r" in c["text"] and "\n" not in c["text"] for c in CASES)  # bare \r
    assert any("\r\n" in c["text"] for c in CASES)


# ----------------------------------------------------------------------------- behaviour


@pytest.mark.parametrize("eol", ["\n", "\r\n", "\r"])
def test_blank_line_is_a_boundary_single_break_is_not(eol: str) -> None:
    text = eol.join(["It was a dark night and", "the wind blew", "", "CHAPTER II", "",
                     "\u201cStop!\u201d she cried. \u201cWho goes", "there?\u201d", "",
                     "\u201cA friend\u201d"])
    assert [re.sub(r"\s+", " ", s) for s in split_sentences(text)] == [
        "It was a dark night and the wind blew", "CHAPTER II", "\u201cStop!\u201d she cried.",
        "\u201cWho goes there?\u201d", "\u201cA friend\u201d"]


def test_heading_without_blank_line_and_speaker_lines() -> None:
    text = "CHAPTER I\nThe sun rose.\n**KEEPER**  \nLight the lamp, or leave it dark,\nthat is the choice.\n"
    assert split_sentences(text) == ["CHAPTER I", "The sun rose.", "**KEEPER**",
                                     "Light the lamp, or leave it dark,\nthat is the choice."]


def test_abbreviations_initials_and_speech_tags() -> None:
    text = ("Mr. and Mrs. Smith met Dr. J. R. Jones at St. Paul's. They talked, i.e. argued. "
            "\u201cNo!\u201d I said. \u201cNever!\u201d The Captain laughed. \u201cWhy?\u201d "
            "The mother said nothing.")
    assert split_sentences(text) == [
        "Mr. and Mrs. Smith met Dr. J. R. Jones at St. Paul's.", "They talked, i.e. argued.",
        "\u201cNo!\u201d I said.", "\u201cNever!\u201d The Captain laughed.", "\u201cWhy?\u201d",
        "The mother said nothing."]


@pytest.mark.parametrize("text, expected", [
    ('"Daniels! Peterson! Foster! Get back!" he bellowed.',
     ['"Daniels! Peterson! Foster!', 'Get back!" he bellowed.']),
    ("\u201cLucy! Lucy!\u201d she called. \u201cCome!\u201d",
     ["\u201cLucy! Lucy!\u201d she called.", "\u201cCome!\u201d"]),
    ("and shouted: 'Forbes! Forbes! Forbes!' until he came.", None),
    ("Holla! Bernardo!", ["Holla!", "Bernardo!"]),  # a play's speech, no quotation marks
    ('"Oh! My dear Richard!" I remonstrated.', ['"Oh!', 'My dear Richard!" I remonstrated.']),
])
def test_shout_lists_inside_a_quotation_are_one_sentence(text: str, expected: list[str] | None) -> None:
    assert split_sentences(text) == (expected or [text])


@pytest.mark.parametrize("text, n", [
    ('"We\'ll never remember it in exams ..." Pete said, not convincingly.', 1),
    ("\u201cI am going...\u201d Tobias began sullenly.", 1),
    ('"Can they come over?" I ask.', 1),
    ('"Owwww!" I howled.', 1),
    ('"Knows what?" Ben yawned.', 1),
    ('"Seen a ghost?" Lute greeted.', 1),
    ("\u201cYes... certainly...\u201d Maren hurriedly assented.", 1),
    ('"...beg you..." Maren stammered and ceased speaking.', 1),
    ('"Is that your brother?" She nodded.', 2),
    ('"Well?" He shrugged.', 2),
    ('"Stop!" It worked.', 2),
    ('"Where?" Nothing moved.', 2),
    ('"What are you doing here?" And I said nothing.', 2),
    ('"Work..." He went back to his paper.', 2),
    ('"Bye!" You won\'t mention it.', 2),
])
def test_speech_tags_after_quotes(text: str, n: int) -> None:
    assert len(split_sentences(text)) == n, split_sentences(text)


@pytest.mark.parametrize("text, expected", [
    ("Nobody told us how to get from A to B. I knew the way.",
     ["Nobody told us how to get from A to B.", "I knew the way."]),
    ("My report said I was a B. Mr. Okafor wrote it.", ["My report said I was a B.", "Mr. Okafor wrote it."]),
    ("It was Plan B. Then I left.", ["It was Plan B.", "Then I left."]),
    ("It was filed under the letter A. You will find it there.",
     ["It was filed under the letter A.", "You will find it there."]),
    ("Dr. J. R. Jones met G. J. Utterson and M. Racine.", None),
    ("The crates were marked D. I. C.; but the last was G.", None),
    ("He said he could not do it WOULDN'T. Now, Fred is good.", ["He said he could not do it WOULDN'T.", "Now, Fred is good."]),
])
def test_single_capital_letters(text: str, expected: list[str] | None) -> None:
    assert split_sentences(text) == (expected or [text])


def test_a_title_number_opening_a_block_stays_with_its_title() -> None:
    assert split_sentences("V. A Morning Adventure") == ["V. A Morning Adventure"]
    assert split_sentences("I. The Harbour\n\nIt was late.") == ["I. The Harbour", "It was late."]


def test_offsets_are_into_the_whole_text() -> None:
    text = "Prefix. One here. Two there. Suffix."
    start, end = text.index("One"), text.index(" Suffix")
    assert split_spans(text, start, end) == [(8, 17), (18, 28)]
    assert split_sentences(text, start, end) == ["One here.", "Two there."]


def test_empty_and_blank_ranges() -> None:
    assert split_spans("") == []
    assert split_spans(" \r\n\t\u2029 ") == []
    assert split_spans("abc", 1, 1) == []


@pytest.mark.parametrize("kwargs, exc", [
    ({"start": -1}, ValueError), ({"start": 5, "end": 2}, ValueError), ({"end": 99}, ValueError),
    ({"start": 1.0}, TypeError), ({"max_words": 0}, ValueError), ({"max_words": "3"}, ValueError),
])
def test_bad_arguments_are_rejected(kwargs: dict, exc: type) -> None:
    with pytest.raises(exc):
        split_spans("Some text here. More.", **kwargs)


def test_text_must_be_a_string() -> None:
    with pytest.raises(TypeError):
        split_spans(b"bytes")  # type: ignore[arg-type]


def test_iter_runs_marks_headings_atomic() -> None:
    text = "BOOK ONE\n\nI. The Harbour\n\nIt was the calmest of nights. It was the coldest."
    runs = [(text[s:e], atomic) for s, e, atomic in iter_runs(text)]
    assert runs == [("BOOK ONE", True), ("I. The Harbour", True),
                    ("It was the calmest of nights. It was the coldest.", False)]


# ----------------------------------------------------------------------------- word cap

LONG = ("Storms came in off the sea every night; fishers were told not to row out past the point "
        "without lashing their nets; the keeper in the tower by night was a net-maker on the quay "
        "by day, and, being known by his fellow fishers, gladly lent them his boat and rowed "
        "away--the ferry was held up by seven gulls, and the pilot counted three of them: after "
        "which the ferry crossed in peace.")


def test_word_cap_cuts_at_clause_boundaries() -> None:
    pieces = split_sentences(LONG, max_words=25)
    assert len(pieces) > 1 and all(len(p.split()) <= 25 for p in pieces)
    assert pieces[0].endswith("their nets;")  # the furthest clause mark within the cap
    assert all(p[-1] in ";:,-." for p in pieces)  # every cut after a clause mark
    assert "".join("".join(p.split()) for p in pieces) == "".join(LONG.split())
    assert split_sentences(LONG) == [LONG]  # no cap by default


def test_word_cap_falls_back_to_spaces_and_line_breaks() -> None:
    verse = "\n".join(["and on and on the river ran"] * 10)
    pieces = split_sentences(verse, max_words=8)
    assert all(len(p.split()) <= 8 for p in pieces)
    assert all(p.endswith("ran") for p in pieces[:-1])  # line breaks beat plain spaces
    words = " ".join(["word"] * 50)
    assert [len(p.split()) for p in split_sentences(words, max_words=7)] == [7] * 7 + [1]
    assert split_sentences("one", max_words=1) == ["one"]


# ----------------------------------------------------------------------------- properties

LITERARY_TOKENS = [
    "Mr.", "Mrs.", "St.", "J.", "I", "I.", "i.e.", "etc.", "word", "The", "said", "cried", "he",
    "CHAPTER", "IV", "HAMLET.", "**BERNARDO**", "_Exit_", "#", "##", ".", "...", ". . .", "\u2026",
    "!", "?", "!\u201d", "?\u201d", ".\u201d", "\u201c", "\u2018", "\u2019", '"', "'", "--",
    "\u2014", ".--", "(", ")", "[", "]", ",", ";", ":", "1.", "28", " ", "  ", "\t", "\n", "\r",
    "\r\n", "\n\n", "\r\r", "\r\n\r\n", "\u2029", "\f", "\u00a0", "\u2028", "\x85", "\v",
]
literary_text = st.lists(st.sampled_from(LITERARY_TOKENS), max_size=60).map("".join)
any_text = st.one_of(st.text(max_size=200), literary_text,
                     st.text(alphabet=st.sampled_from(list(".!?\"'\u201d \r\n\tAaI-")),
                             max_size=120))


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=any_text, data=st.data())
def test_spans_cover_every_character_exactly_once(text: str, data: st.DataObject) -> None:
    start = data.draw(st.integers(0, len(text)))
    end = data.draw(st.integers(start, len(text)))
    spans = split_spans(text, start, end)
    check_invariants(text, start, end, spans)
    # only text[start:end] is read: the same split as on the slice, shifted
    assert spans == [(s + start, e + start) for s, e in split_spans(text[start:end])]


def test_horizontal_space_class_is_every_space_but_breaks() -> None:
    breaks = set("\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029")
    spaces = {ch for ch in map(chr, range(0x3100)) if ch.isspace()} - breaks
    assert {ch for ch in map(chr, range(0x3100)) if re.fullmatch(f"[{chars.HWS_CHARS}]", ch)} == spaces
    assert {ch for ch in map(chr, range(0x3100)) if re.fullmatch(chars.HWS, ch)} == spaces


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=any_text)
def test_heading_prefilter_changes_no_run(text: str) -> None:
    # blocks without a heading-like line skip the line-by-line test: same runs either way
    fast = list(iter_runs(text))
    original = lines._HEADING_CANDIDATE
    lines._HEADING_CANDIDATE = re.compile(r"[\s\S]")  # every block takes the slow path
    try:
        assert list(iter_runs(text)) == fast
    finally:
        lines._HEADING_CANDIDATE = original


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=any_text, max_words=st.integers(1, 12))
def test_word_cap_short_sentences_skip_the_count(text: str, max_words: int) -> None:
    # the length test before counting words changes nothing
    assert split_spans(text, max_words=max_words) == [
        piece for span in split_spans(text) for piece in wordcap.cap_words(text, span, max_words)]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=any_text, max_words=st.integers(1, 12))
def test_word_cap_keeps_every_character(text: str, max_words: int) -> None:
    spans = split_spans(text, max_words=max_words)
    check_invariants(text, 0, len(text), spans, max_words=max_words)
    # capping only cuts sentences, it never moves an uncapped boundary
    uncapped = split_spans(text)
    starts = {s for s, _ in spans}
    assert {s for s, _ in uncapped} <= starts


# ----------------------------------------------------------------------------- real books


@pytest.mark.shared_data
def test_zero_loss_and_bounded_sentences_on_shared_books() -> None:
    root = shared_data_dir() / "texts"
    paths = sorted(root.glob("*/*.txt"))[:12] + sorted(root.glob("shakespeare_markdown/*/*.md"))[:3]
    assert paths, f"no texts under {root}"
    for path in paths:
        text = path.read_bytes().decode("utf-8-sig")
        spans = split_spans(text, max_words=150)
        check_invariants(text, 0, len(text), spans, max_words=150)


@pytest.mark.slow
def test_speed_well_over_one_megabyte_per_second() -> None:
    body = "\n\n".join(c["text"] for c in CASES)
    text = (body + "\n\n") * max(1, 2_000_000 // len(body))
    n_bytes = len(text.encode("utf-8"))
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        split_spans(text)
        best = min(best, time.perf_counter() - t0)
    assert n_bytes / 1e6 / best > 1.5, f"{n_bytes / 1e6 / best:.2f} MB/s"
