"""The zero-loss property: whatever the model says, every sentence of the unit reaches a chunk.

Random units (random sentences, whitespace, CRLF, unicode, surrounding text) meet random and
adversarial model replies (valid answers, broken ranges, garbage context, odd encodings, wrong
shapes, truncation, JSON-ish noise). After parse -> validate -> repair -> build_chunks, and also
through the full retry loop with a scripted model, the chunks must:

* cover every sentence of the unit with the union of their main ranges;
* carry main text equal to the document at their spans (and the spans of their sentences);
* contain the text of every context span in their reconstructed text.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from litseg.llm.base import Completion
from litseg.segmentation.parsing import parse_answer
from litseg.segmentation.reconstruct import build_chunks
from litseg.segmentation.repair import repair_segments, whole_unit_segments
from litseg.segmentation.runner import segment_with_retries
from litseg.segmentation.schema import SCHEMAS, LiteAnswer, Segment, Stage3Answer
from litseg.segmentation.types import Chunk, Document, Sentence, Unit
from litseg.segmentation.validation import validate_segments

MAX_WORDS = 12
SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# ------------------------------------------------------------------------------------------
# Random units

sentence_text = st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=24)
separator = st.sampled_from(["", " ", "  ", "\n", "\r\n", "\r\n\r\n", "\t", "\u3000", "\n\n   ", "\u2028"])
surrounding = st.text(max_size=12) | st.sampled_from(["CHAPTER I\r\n\r\n", "\u00c9PISODE II\n\n", "***\n"])


@st.composite
def unit_documents(draw: st.DrawFn, max_sentences: int = 30) -> tuple[Document, Unit]:
    n = draw(st.integers(1, max_sentences))
    sentences = draw(st.lists(sentence_text, min_size=n, max_size=n))
    seps = draw(st.lists(separator, min_size=n, max_size=n))
    text = draw(surrounding)
    spans: list[tuple[int, int]] = []
    for sentence, sep in zip(sentences, seps, strict=True):
        spans.append((len(text), len(text) + len(sentence)))
        text += sentence + sep
    text += draw(surrounding)
    doc = Document(book_id="book", text=text)
    unit = Unit(book_id="book", unit_id="u1", index=0, start=spans[0][0], end=spans[-1][1], title="U",
                sentences=[Sentence(i + 1, s, e) for i, (s, e) in enumerate(spans)])
    doc.units.append(unit)
    return doc, unit


def sentence_words(doc: Document, unit: Unit) -> list[int]:
    return [len(doc.sentence_text(s).split()) for s in unit.sentences]


# ------------------------------------------------------------------------------------------
# Random and adversarial model replies


def encoded_index(bound: int) -> st.SearchStrategy[Any]:
    k = st.integers(-3, bound + 3)
    return st.one_of(k, k.map(str), k.map(float), k.map(lambda i: f"[{i}]"), st.just("x"), st.none())


def context_value(bound: int) -> st.SearchStrategy[Any]:
    k = st.integers(-3, bound + 3)
    return st.one_of(
        st.lists(st.one_of(k, k.map(str), st.just("junk")), max_size=6),
        st.none(), k,
        st.lists(k, max_size=4).map(lambda xs: ", ".join(map(str, xs))),
        st.tuples(k, k).map(lambda ab: f"{ab[0]}-{ab[1]}"),
    )


@st.composite
def segment_dicts(draw: st.DrawFn, bound: int) -> dict[str, Any]:
    seg: dict[str, Any] = {"subtitle": draw(st.text(max_size=8))}
    for key in ("from_idx", "to_idx"):
        if draw(st.integers(0, 19)):  # occasionally leave a bound out
            seg[key] = draw(encoded_index(bound))
    if draw(st.booleans()):
        seg["context_idx"] = draw(context_value(bound))
    return seg


@st.composite
def plausible_segments(draw: st.DrawFn, bound: int) -> list[dict[str, Any]]:
    """A near-valid partition, then perturbed: gaps, overlaps, swaps, off-by-one ends."""
    cuts = sorted(draw(st.sets(st.integers(2, max(2, bound)), max_size=6)))
    starts = [1] + [c for c in cuts if c <= bound]
    perturb = draw(st.booleans())
    segs = []
    for i, a in enumerate(starts):
        b = starts[i + 1] - 1 if i + 1 < len(starts) else bound
        ctx = draw(st.lists(st.integers(1, bound), max_size=2))
        if perturb:
            a += draw(st.sampled_from([0, 0, 0, 1, -1, 2]))
            b += draw(st.sampled_from([0, 0, 0, 1, -1, 3]))
            if draw(st.integers(0, 9)) == 0:
                a, b = b, a
            ctx += draw(st.lists(st.integers(-1, bound + 2), max_size=3))
        segs.append({"subtitle": f"part {i}", "from_idx": a, "to_idx": b, "context_idx": ctx})
    return segs


@st.composite
def model_replies(draw: st.DrawFn, bound: int) -> str:
    segments = draw(plausible_segments(bound) | st.lists(segment_dicts(bound), max_size=8))
    step3 = {"chapter_title": "t", "step_3_turning_points": [], "segments": segments}
    shape = draw(st.sampled_from(["lite", "flat", "bare", "stage3", "wrapped"]))
    value: Any = {
        "lite": {"step1": {"step_1_events": "e"}, "step2": {"step_2_threads": "t"}, "step3": step3},
        "flat": {"step_1_events": "e", **step3},
        "bare": segments,
        "stage3": step3,
        "wrapped": {"answer": step3},
    }[shape]
    text = json.dumps(value, ensure_ascii=draw(st.booleans()))
    if draw(st.booleans()):
        text = text.replace('"', "'") if draw(st.booleans()) else text.replace("]", ",]", 1)
    if draw(st.integers(0, 4)) == 0:
        text = text[: draw(st.integers(len(text) // 3, len(text)))]  # cut at the token limit
    wrapper = draw(st.sampled_from(["{}", "```json\n{}\n```", "Here it is: {} Done.", "<think>{{}}</think>{}"]))
    return wrapper.replace("{}", text, 1) if wrapper.count("{}") == 1 else wrapper.replace("{}", text)


json_ish = st.text(alphabet='{}[]",:\'0123456789 -.\nnulltrueabc_idxsegmentsfromto', max_size=200)
any_reply = st.one_of(json_ish, st.text(max_size=80))


# ------------------------------------------------------------------------------------------
# The property


def assert_zero_loss(doc: Document, unit: Unit, chunks: list[Chunk]) -> None:
    n = unit.n_sentences
    assert chunks, "a unit with sentences must give at least one chunk"
    covered: set[int] = set()
    for chunk in chunks:
        sent = unit.sentences
        assert chunk.main_ids == list(range(chunk.from_idx, chunk.to_idx + 1))
        assert chunk.main_spans == [(sent[chunk.from_idx - 1].start, sent[chunk.to_idx - 1].end)]
        assert chunk.main_text == "".join(doc.text[s:e] for s, e in chunk.main_spans)
        for idx in chunk.main_ids:
            s = sent[idx - 1]
            assert chunk.start <= s.start and s.end <= chunk.end
        assert chunk.main_text in chunk.text
        assert not set(chunk.context_ids) & set(chunk.main_ids)
        assert chunk.context_spans == [(sent[i - 1].start, sent[i - 1].end) for i in chunk.context_ids]
        for s, e in chunk.context_spans:
            assert doc.text[s:e] in chunk.text
        covered.update(chunk.main_ids)
    assert covered == set(range(1, n + 1))
    assert len({c.chunk_id for c in chunks}) == len(chunks)


def chunks_from_reply(doc: Document, unit: Unit, text: str, model: type = LiteAnswer) -> list[Chunk]:
    n = unit.n_sentences
    words = sentence_words(doc, unit)
    result = parse_answer(text, model)
    if result.value is None:
        event("unreadable reply: whole unit")
        segments = whole_unit_segments(n, words, MAX_WORDS)
    else:
        segments, repairs = repair_segments(result.segments, n, sentence_words=words, max_words=MAX_WORDS)
        event("valid as given" if not repairs else
              f"repaired ({'whole unit' if repairs[-1].kind.value == 'whole_unit' else 'fixed'})")
    assert validate_segments(segments, n) == []
    return build_chunks(doc, unit, segments, method="prop")


@SETTINGS
@given(st.data(), unit_documents())
def test_zero_loss_for_model_like_replies(data: st.DataObject, unit_doc: tuple[Document, Unit]) -> None:
    doc, unit = unit_doc
    reply = data.draw(model_replies(unit.n_sentences))
    assert_zero_loss(doc, unit, chunks_from_reply(doc, unit, reply))


@SETTINGS
@given(any_reply, unit_documents(max_sentences=12))
def test_zero_loss_for_noise(reply: str, unit_doc: tuple[Document, Unit]) -> None:
    doc, unit = unit_doc
    for model in (LiteAnswer, Stage3Answer):
        assert_zero_loss(doc, unit, chunks_from_reply(doc, unit, reply, model))


@SETTINGS
@given(st.data(), unit_documents())
def test_zero_loss_for_direct_segment_lists(data: st.DataObject, unit_doc: tuple[Document, Unit]) -> None:
    doc, unit = unit_doc
    n = unit.n_sentences
    k = st.integers(-4, n + 4)
    segments = data.draw(st.lists(st.builds(
        lambda a, b, ctx: Segment(from_idx=a, to_idx=b, context_idx=ctx), k, k, st.lists(k, max_size=5)),
        max_size=10))
    position = data.draw(st.sampled_from(["auto", "before", "after"]))
    repaired, _ = repair_segments(segments, n, sentence_words=sentence_words(doc, unit), max_words=MAX_WORDS)
    assert validate_segments(repaired, n) == []
    assert_zero_loss(doc, unit, build_chunks(doc, unit, repaired, method="prop", context_position=position))


@SETTINGS
@given(st.data(), unit_documents())
def test_zero_loss_through_the_retry_loop(data: st.DataObject, unit_doc: tuple[Document, Unit]) -> None:
    doc, unit = unit_doc
    n = unit.n_sentences
    reply = model_replies(n) | any_reply
    script = data.draw(st.lists(st.one_of(reply.map(lambda t: Completion(text=t)),
                                          st.just(Completion(text="", error="backend down"))),
                                min_size=3, max_size=3))
    calls: list[int] = []

    def ask(messages: list[dict[str, str]]) -> Completion:
        calls.append(len(messages))
        return script[len(calls) - 1]

    schema = data.draw(st.sampled_from(["lite", "stage3", "lite_no_theory", "lite_no_turning_points"]))
    out = segment_with_retries(ask, [{"role": "user", "content": "go"}], n=n, answer_model=SCHEMAS[schema],
                               sentence_words=sentence_words(doc, unit), max_fallback_words=MAX_WORDS,
                               max_retries=2)
    event(f"fallback={out.diagnostics.fallback} tries={out.diagnostics.tries}")
    assert validate_segments(out.segments, n) == []
    assert out.diagnostics.tries == len(calls) <= 3
    assert out.diagnostics.fallback in ("none", "repair", "whole_unit")
    json.dumps(out.diagnostics.to_dict())
    assert_zero_loss(doc, unit, build_chunks(doc, unit, out.segments, method="prop"))
