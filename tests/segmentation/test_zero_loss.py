"""The zero-loss property: whatever the model says, every sentence of the unit reaches a chunk.

Random units (random sentences, whitespace, CRLF, unicode, surrounding text) meet random and
adversarial model replies (valid answers, broken ranges, garbage context, odd encodings, wrong
shapes, truncation, JSON-ish noise, and the widened generator of ``tests/fuzz_replies.py``:
booleans, objects, lists, NaN and over-long integers as indices, ``segments`` not a list,
entries that are not objects, alias and duplicate keys, several JSON objects, ``\\u`` escapes
with lone surrogates, deep nesting). The chunks must, on every path:

* cover every sentence of the unit with the union of their main ranges (at least once;
  overlapping main ranges are allowed);
* carry main text equal to the document at their spans (and the spans of their sentences);
* contain the text of every context span in their reconstructed text;

and no path may raise or leave text that cannot be written. The paths: parse -> validate ->
repair -> build_chunks (most replies, cheap), the retry loop with a scripted model, the
LitSeg-Lite and LitSeg chunkers on a scripted model, the run store (write, read back, export),
and ``run_annotate`` end to end (tests/annotation/test_zero_loss_runs.py). Replies per CI run: see
:data:`REPLIES_PER_RUN` (at least 10,000).
"""

from __future__ import annotations

import json
import random
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from litseg.chunkers.litseg import LitSegChunker
from litseg.chunkers.litseg_lite import LitSegLiteChunker
from litseg.llm.base import Completion
from litseg.annotation.annotate import sentence_rows, unit_key
from litseg.annotation.export import export_runs, iter_export_rows
from litseg.annotation.store import RunStore
from litseg.segmentation.parsing import parse_answer
from litseg.segmentation.reconstruct import build_chunks
from litseg.segmentation.repair import repair_segments, whole_unit_segments
from litseg.segmentation.runner import segment_with_retries
from litseg.segmentation.schema import SCHEMAS, LiteAnswer, Segment, Stage3Answer
from litseg.segmentation.types import Chunk, Document, Sentence, Unit
from litseg.segmentation.validation import validate_segments
from litseg.testing.configs import feedback_config, prompt_config
from tests.fuzz_replies import fuzz_reply, make_fuzz_model

MAX_WORDS = 12
SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# Replies per CI run, by path (examples x replies per example; the chunker paths ask up to 3
# times per unit and stage, counted at their minimum). tests/annotation/test_zero_loss_runs.py adds the
# replies of its run_annotate runs.
BULK_EXAMPLES, BULK_REPLIES = 260, 32
FUZZ_LOOP_EXAMPLES = 150
LITE_EXAMPLES, TEACHER_EXAMPLES, STORE_EXAMPLES = 150, 100, 40
REPLIES_PER_RUN = (
    200 + 2 * 200 + 3 * 200  # model-like replies, noise (two schemas), the retry loop
    + BULK_EXAMPLES * BULK_REPLIES  # fuzzed replies through parse -> validate -> repair -> build
    + 3 * FUZZ_LOOP_EXAMPLES  # fuzzed replies through the retry loop
    + LITE_EXAMPLES + 3 * TEACHER_EXAMPLES + STORE_EXAMPLES  # chunkers, store and export
)

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
    return st.one_of(k, k.map(str), k.map(float), k.map(lambda i: f"[{i}]"), st.just("x"), st.none(),
                     st.booleans(), k.map(lambda i: {"idx": i}), st.lists(k, max_size=2),
                     st.sampled_from([float("nan"), float("inf"), 10**40, "@@HUGE@@"]))


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
    seg: dict[str, Any] = {"subtitle": draw(st.text(max_size=8) | st.sampled_from(["@@ESC@@", "a@@ESC@@"]))}
    for key in ("from_idx", "to_idx"):
        if draw(st.integers(0, 19)):  # occasionally leave a bound out
            seg[key] = draw(encoded_index(bound))
    if draw(st.booleans()):
        seg["context_idx"] = draw(context_value(bound))
    if draw(st.integers(0, 9)) == 0:  # an alias beside or instead of the real key, or an unknown key
        alias, value = draw(st.sampled_from([("from", 1), ("start", 2), ("end", bound), ("title", "t"),
                                             ("confidence", 0.5)]))
        seg[alias] = value
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


ESCAPES = ["\\ud83d", "\\ud83d\\ude0", "\\udc00", "\\u0000", "\\u001b", "\\q"]
HUGE = "9" * 4400


@st.composite
def model_replies(draw: st.DrawFn, bound: int) -> str:
    entries = st.one_of(segment_dicts(bound), st.integers(), st.text(max_size=4), st.none(), st.lists(st.integers()))
    segments = draw(plausible_segments(bound) | st.lists(segment_dicts(bound), max_size=8)
                    | st.lists(entries, max_size=5) | st.sampled_from(["segs", 3, None, True, {}, "@@HUGE@@"]))
    step3 = {"chapter_title": "t", "step_3_turning_points": [], "segments": segments}
    shape = draw(st.sampled_from(["lite", "flat", "bare", "stage3", "wrapped"]))
    value: Any = {
        "lite": {"step1": {"step_1_events": "e"}, "step2": {"step_2_threads": "t"}, "step3": step3},
        "flat": {"step_1_events": "e", **step3},
        "bare": segments,
        "stage3": step3,
        "wrapped": {"answer": step3},
    }[shape]
    text = json.dumps(value, ensure_ascii=draw(st.booleans())).replace('"@@HUGE@@"', HUGE)
    while "@@ESC@@" in text:
        text = text.replace("@@ESC@@", draw(st.sampled_from(ESCAPES)), 1)
    if draw(st.booleans()):
        text = text.replace('"', "'") if draw(st.booleans()) else text.replace("]", ",]", 1)
    if draw(st.integers(0, 9)) == 0:
        text = text.replace('"to_idx": ', '"to_idx": 1, "to_idx": ', 1)  # duplicate key
    if draw(st.integers(0, 9)) == 0:
        depth = draw(st.sampled_from([5, 400, 2500]))
        text = "[" * depth + text + "]" * depth  # deep nesting
    if draw(st.integers(0, 9)) == 0:
        text = f"{text}\n{json.dumps(value)}"  # several JSON objects
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


def assert_writable(value: Any) -> None:
    """What a path hands on can be written as UTF-8 JSON as it is (no store-side repair needed)."""
    json.dumps(value, ensure_ascii=False, default=str).encode("utf-8")


def chunks_from_reply(doc: Document, unit: Unit, text: str, model: type = LiteAnswer) -> list[Chunk]:
    n = unit.n_sentences
    words = sentence_words(doc, unit)
    result = parse_answer(text, model, n=n)
    assert not any("internal parser error" in note for note in result.notes), result.notes
    assert_writable([result.to_dict(), result.value.model_dump() if result.value is not None else None])
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
                               max_retries=2, fallback="pieces")
    event(f"fallback={out.diagnostics.fallback} tries={out.diagnostics.tries}")
    assert validate_segments(out.segments, n) == []
    assert out.diagnostics.tries == len(calls) <= 3
    assert out.diagnostics.fallback in ("none", "repair", "whole_unit")
    json.dumps(out.diagnostics.to_dict())
    assert_zero_loss(doc, unit, build_chunks(doc, unit, out.segments, method="prop"))


# ------------------------------------------------------------------------------------------
# The widened generator, in bulk and through every path

# The fuzz generator draws from a plain random.Random seeded by hypothesis: drawing every choice
# through hypothesis would cost more than the replies themselves. A failure prints its seed.
seeds = st.integers(0, 2**32 - 1)
BULK_SCHEMAS = [SCHEMAS[k] for k in ("lite", "stage3", "lite_no_theory", "lite_no_turning_points", "segments")]


@settings(max_examples=BULK_EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seeds, unit_documents())
def test_zero_loss_for_fuzzed_replies(seed: int, unit_doc: tuple[Document, Unit]) -> None:
    rng = random.Random(seed)
    doc, unit = unit_doc
    for _ in range(BULK_REPLIES):
        reply = fuzz_reply(rng, unit.n_sentences)
        assert_zero_loss(doc, unit, chunks_from_reply(doc, unit, reply, rng.choice(BULK_SCHEMAS)))


@settings(max_examples=FUZZ_LOOP_EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seeds, unit_documents())
def test_zero_loss_through_the_retry_loop_for_fuzzed_replies(seed: int, unit_doc: tuple[Document, Unit]) -> None:
    rng = random.Random(seed)
    doc, unit = unit_doc
    n = unit.n_sentences
    script = [Completion(text=fuzz_reply(rng, n), finish_reason=rng.choice(["stop", "stop", "length"]))
              for _ in range(3)]
    calls: list[int] = []

    def ask(messages: list[dict[str, str]]) -> Completion:
        calls.append(len(messages))
        assert_writable(messages)  # a reply echoed back in the conversation can be sent and cached
        return script[len(calls) - 1]

    out = segment_with_retries(ask, [{"role": "user", "content": "go"}], n=n, answer_model=rng.choice(BULK_SCHEMAS),
                               sentence_words=sentence_words(doc, unit), max_fallback_words=MAX_WORDS, max_retries=2, fallback="pieces")
    assert validate_segments(out.segments, n) == []
    assert out.diagnostics.tries == len(calls) <= 3
    if out.diagnostics.tries < 3:
        assert out.diagnostics.attempts[-1].valid  # the loop stops early only on a valid answer
    assert_writable(out.diagnostics.to_dict())
    assert_zero_loss(doc, unit, build_chunks(doc, unit, out.segments, method="prop"))


LITE_PROMPT = prompt_config("litseg_lite")
TEACHER_PROMPT = prompt_config("litseg")
FEEDBACK = feedback_config()


def fuzz_model(rng: random.Random) -> Any:
    return make_fuzz_model(seed=rng.randrange(2**32))


@settings(max_examples=LITE_EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seeds, unit_documents(max_sentences=20))
def test_zero_loss_through_the_litseg_lite_chunker(seed: int, unit_doc: tuple[Document, Unit]) -> None:
    rng = random.Random(seed)
    doc, unit = unit_doc
    llm = fuzz_model(rng)
    chunker = LitSegLiteChunker(llm, LITE_PROMPT, feedback=FEEDBACK, max_retries=2, fallback_max_words=MAX_WORDS,
                                constrained=rng.random() < 0.5, workers=1)
    res = chunker.chunk_unit(doc, unit)
    assert res.error is None, res.error
    assert 1 <= len(llm.requests) <= 3
    assert_writable(res.diagnostics)
    assert_zero_loss(doc, unit, res.chunks)


@settings(max_examples=TEACHER_EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seeds, unit_documents(max_sentences=20))
def test_zero_loss_through_the_litseg_teacher(seed: int, unit_doc: tuple[Document, Unit]) -> None:
    rng = random.Random(seed)
    doc, unit = unit_doc
    llm = fuzz_model(rng)
    chunker = LitSegChunker(llm, TEACHER_PROMPT, feedback=FEEDBACK, max_retries=2, stage_max_retries=1,
                            fallback_max_words=MAX_WORDS, workers=1)
    res = chunker.chunk_unit(doc, unit)
    assert res.error is None, res.error
    assert 3 <= len(llm.requests) <= 2 * 2 + 3
    assert_writable(res.diagnostics)
    assert_zero_loss(doc, unit, res.chunks)


@settings(max_examples=STORE_EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seeds, st.lists(unit_documents(max_sentences=15), min_size=1, max_size=3))
def test_zero_loss_through_the_store_and_export(seed: int, books: list[tuple[Document, Unit]]) -> None:
    rng = random.Random(seed)
    chunker = LitSegLiteChunker(fuzz_model(rng), LITE_PROMPT, max_retries=0, fallback_max_words=MAX_WORDS, workers=1)
    with tempfile.TemporaryDirectory() as tmp:
        run = Path(tmp) / "run"
        written: dict[str, list[dict[str, Any]]] = {}
        with RunStore(run, durable=False) as store:
            for b, (doc, unit) in enumerate(books):
                doc.book_id = unit.book_id = f"book{b}"
                res = chunker.chunk_unit(doc, unit)
                key = unit_key(doc, unit, chunker.fingerprint())
                written[key] = [c.to_dict() for c in res.chunks]
                store.commit_unit(key, written[key], sentence_rows(doc, unit),
                                  {**res.diagnostics, "book_id": doc.book_id, "unit_id": unit.unit_id,
                                   "unit_index": 0, "n_chunks": len(res.chunks)})
        with RunStore(run, durable=False) as store:  # read back
            assert store.recovered == {} and len(store.done) == len(books)
            rows = store.chunks()
        export_runs([run], Path(tmp) / "export")
        exported = list(iter_export_rows(Path(tmp) / "export", "chunks"))
    docs = {doc.book_id: (doc, unit) for doc, unit in books}
    for key, chunks in written.items():
        back = [r for r in rows if r["unit_key"] == key]
        assert [{k: v for k, v in r.items() if k != "unit_key"} for r in back] == json.loads(json.dumps(chunks))
        doc, unit = docs[back[0]["book_id"]]
        assert_zero_loss(doc, unit, [Chunk.from_dict(r) for r in back])
    assert sorted((r["chunk_id"], r["main_text"], r["text"]) for r in exported) == sorted(
        (r["chunk_id"], r["main_text"], r["text"]) for r in rows)


def test_the_property_suite_pushes_ten_thousand_replies_per_run() -> None:
    from tests.annotation.test_zero_loss_runs import RUN_REPLIES_MIN

    assert REPLIES_PER_RUN + RUN_REPLIES_MIN >= 10_000
