"""The coverage grammar (litseg.segmentation.grammar) accepts exactly the covering, ordered answers."""

import json

import pytest

from litseg.segmentation.grammar import MAX_SENTENCES, coverage_grammar
from litseg.segmentation.parsing import parse_answer
from litseg.segmentation.schema import get_schema
from litseg.segmentation.validation import validate_segments

xgr = pytest.importorskip("xgrammar")


@pytest.fixture(scope="module")
def compiler():
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    # A byte-level BPE over single characters: every string is reachable, nothing to download.
    alphabet = [chr(c) for c in range(32, 127)]
    vocab = {ch: i for i, ch in enumerate(alphabet)}
    vocab["</s>"] = len(vocab)
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[], unk_token=None))
    tok.pre_tokenizer = pre_tokenizers.Split("", "isolated")
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="</s>")
    info = xgr.TokenizerInfo.from_huggingface(fast, vocab_size=len(vocab), stop_token_ids=[vocab["</s>"]])
    return xgr.GrammarCompiler(info, max_threads=1)


def accepts(compiler, n: int, text: str) -> bool:
    grammar = coverage_grammar(n, title_chars=40, subtitle_chars=40, max_context=3)
    matcher = xgr.GrammarMatcher(compiler.compile_grammar(grammar))
    return bool(matcher.accept_string(text))


def answer(ranges, context=None, title="A tale"):
    segs = [{"subtitle": f"Block {i}", "from_idx": a, "to_idx": b, "context_idx": (context or {}).get(i, [])}
            for i, (a, b) in enumerate(ranges)]
    return json.dumps({"chapter_title": title, "segments": segs}, separators=(", ", ": "))


def test_a_covering_ordered_answer_is_accepted_and_valid(compiler):
    text = answer([(1, 3), (4, 4), (5, 9)], {2: [1, 2]})
    assert accepts(compiler, 9, text)
    parsed = parse_answer(text, get_schema("segments"))
    assert not [i for i in validate_segments(parsed.value.segments, 9) if i.blocking]


@pytest.mark.parametrize("ranges", [
    [(1, 3), (5, 9)],          # a gap
    [(1, 3), (3, 9)],          # an overlap
    [(2, 9)],                  # not starting at 1
    [(1, 3), (4, 8)],          # stopping short of N (the array cannot close)
    [(1, 9), (9, 9)],          # going on after N
    [(1, 4), (5, 10)],         # beyond N
])
def test_gaps_overlaps_short_and_long_answers_cannot_be_decoded(compiler, ranges):
    assert not accepts(compiler, 9, answer(ranges))


def test_text_bounds_and_context_count_are_enforced(compiler):
    long_title = answer([(1, 9)], title="x" * 41)
    too_much_context = answer([(1, 4), (5, 9)], {1: [1, 2, 3, 4]})
    empty_subtitle = answer([(1, 9)]).replace('"Block 0"', '""')
    assert accepts(compiler, 9, answer([(1, 9)], title="x" * 40))
    for text in (long_title, too_much_context, empty_subtitle):
        assert not accepts(compiler, 9, text)


def test_no_grammar_beyond_the_size_limit_and_none_for_an_empty_unit():
    assert coverage_grammar(MAX_SENTENCES + 1, title_chars=1, subtitle_chars=1, max_context=1) is None
    assert coverage_grammar(0, title_chars=1, subtitle_chars=1, max_context=1) is None
    assert "seg600 ::=" in coverage_grammar(MAX_SENTENCES, title_chars=1, subtitle_chars=1, max_context=1)


@pytest.mark.parametrize("ranges", [
    [(1, 1), (2, 110)],                # a one-digit end in a unit of three-digit indices
    [(1, 11), (12, 110)],              # "11" may close although "110" continues it
    [(1, 9), (10, 10), (11, 109), (110, 110)],
])
def test_any_end_can_be_closed_so_digits_never_trap_the_model(compiler, ranges):
    # An index is decoded digit by digit: if "11" could not close a block, a model that wrote
    # "1", "1" would be forced on to "110" and the unit would become one block.
    assert accepts(compiler, 110, answer(ranges))


def test_range_first_answers_are_accepted_and_read_back_as_the_same_blocks(compiler):
    """The range-first grammar writes range and context before the subtitle, and keeps coverage."""
    segs = [{"from_idx": 1, "to_idx": 3, "context_idx": [], "subtitle": "Ana leaves the mill"},
            {"from_idx": 4, "to_idx": 9, "context_idx": [2], "subtitle": "Ana meets the ferryman"}]
    text = json.dumps({"chapter_title": "A tale", "segments": segs}, separators=(", ", ": "))
    grammar = coverage_grammar(9, title_chars=40, subtitle_chars=40, max_context=3, range_first=True)
    matcher = xgr.GrammarMatcher(compiler.compile_grammar(grammar))
    assert matcher.accept_string(text)
    # the subtitle-first order of the same blocks is not this grammar's answer, nor is a gap
    assert not accepts_range_first(compiler, answer([(1, 3), (4, 9)]))
    assert not accepts_range_first(compiler, text.replace('"from_idx": 4', '"from_idx": 5'))
    parsed = parse_answer(text, get_schema("segments_range_first"))
    assert parsed.strict_ok
    assert [(s.from_idx, s.to_idx, s.context_idx, s.subtitle) for s in parsed.segments] == [
        (1, 3, [], "Ana leaves the mill"), (4, 9, [2], "Ana meets the ferryman")]
    assert not [i for i in validate_segments(parsed.segments, 9) if i.blocking]


def accepts_range_first(compiler, text: str) -> bool:
    grammar = coverage_grammar(9, title_chars=40, subtitle_chars=40, max_context=3, range_first=True)
    return bool(xgr.GrammarMatcher(compiler.compile_grammar(grammar)).accept_string(text))
