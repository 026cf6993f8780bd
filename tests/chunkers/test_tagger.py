"""LitSeg-Tagger (method=litseg_tagger): blocks from the boundary nets, subtitles from the writer,
the output contract of every chunker, and failures that never look like success."""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from litseg.chunkers.groups import WriterPrompt  # noqa: E402
from litseg.chunkers.tagger import LitSegTaggerChunker, clean_subtitle, subtitle_key  # noqa: E402
from litseg.chunkers.tagger_model import BoundaryNet, ContextNet, NetSettings, TaggerNets, save_nets  # noqa: E402
from litseg.llm.base import Completion  # noqa: E402
from litseg.llm.testing import ScriptedChatModel  # noqa: E402
from tests.doc_strategies import make_doc  # noqa: E402

DIM = 8
PROMPT = WriterPrompt(name="tagger_writer", version="t", schema="subtitle_line", system="Name the passage.",
                      user="{block}", block_head_words=20, block_tail_words=5)
STORY = " ".join(f"Ilse counts the {w} crates on the quay and calls to the ferryman." for w in
                 ("red", "blue", "green", "grey", "black", "white", "old", "new", "wet", "dry", "tall", "low"))


class HashEmbedder:
    """Deterministic unit vectors from a hash of the text (no model to load)."""

    dimension = DIM

    def encode(self, texts):
        rows = []
        for t in texts:
            seed = int(hashlib.sha256(t.encode()).hexdigest()[:8], 16)
            v = np.random.default_rng(seed).normal(size=DIM)
            rows.append(v / np.linalg.norm(v))
        return np.asarray(rows, dtype=np.float32).reshape(len(texts), DIM)


@pytest.fixture
def tagger_dir(tmp_path, monkeypatch):
    monkeypatch.setattr("litseg.chunkers.tagger.load_embedder", lambda model=None, **kw: HashEmbedder())
    settings = NetSettings(hidden=8, layers=1, cue_buckets=64, cue_dim=4, ensemble=1, threshold=-50.0,
                           min_block=2, max_context=0, context_mean=[0.0] * 12, context_std=[1.0] * 12)
    torch.manual_seed(0)
    nets = TaggerNets(settings, [BoundaryNet(DIM + 10, settings)], ContextNet())
    folder = tmp_path / "tagger"
    meta = {"name": "tiny", "encoder": "default", "nets": save_nets(nets, folder), "digest": "x"}
    (folder / "tagger.json").write_text(json.dumps(meta))
    return folder


def chunker(folder, llm, **over):
    options = dict(name="litseg_tagger", model=str(folder), threshold=None, min_block=None, max_context=None,
                   max_subtitle_tokens=20, distinct_subtitles=True, batch_units=4, context_position="auto")
    options.update(over)
    return LitSegTaggerChunker(llm, PROMPT, **options)


def test_blocks_cover_the_unit_in_order_with_exact_spans(tagger_dir):
    doc = make_doc(STORY)
    unit = doc.units[0]
    llm = ScriptedChatModel(lambda r: f"Block of {len(r.messages[1]['content'].split())} words", cycle=True)
    result = chunker(tagger_dir, llm).chunk_unit(doc, unit)
    assert result.error is None
    ranges = [(c.from_idx, c.to_idx) for c in result.chunks]
    assert ranges[0][0] == 1 and ranges[-1][1] == unit.n_sentences
    assert all(b + 1 == c for (_, b), (c, _) in zip(ranges, ranges[1:]))
    assert all(b - a + 1 >= 2 for a, b in ranges)  # min_block of the tagger
    for c in result.chunks:
        assert c.main_text == doc.text[c.main_spans[0][0]:c.main_spans[-1][1]]
    assert result.diagnostics["n_blocks"] == len(result.chunks) >= 2  # threshold -50: cuts wherever allowed
    assert result.diagnostics["model_seconds"] >= result.diagnostics["read_seconds"] > 0


def test_a_threshold_above_every_score_keeps_the_unit_whole(tagger_dir):
    doc = make_doc(STORY)
    result = chunker(tagger_dir, ScriptedChatModel(["Ilse counts crates"], cycle=True), threshold=1e6).chunk_unit(
        doc, doc.units[0])
    assert [(c.from_idx, c.to_idx) for c in result.chunks] == [(1, doc.units[0].n_sentences)]


def test_a_repeated_subtitle_is_asked_again_until_it_differs(tagger_dir):
    doc = make_doc(STORY)
    asked = []

    def answer(request):
        asked.append(request.temperature)
        # greedy: one name for every block; sampled: a name that depends on the block, as a model's would
        block = request.messages[1]["content"]
        return ("Ilse calls the ferryman" if request.temperature == 0
                else f"Ilse counts {hashlib.sha256(block.encode()).hexdigest()[:6]} crates")

    result = chunker(tagger_dir, ScriptedChatModel(answer)).chunk_unit(doc, doc.units[0])
    subtitles = [c.subtitle for c in result.chunks]
    assert len({subtitle_key(s) for s in subtitles}) == len(subtitles)  # no two alike
    assert subtitles[0] == "Ilse calls the ferryman"
    assert any(t > 0 for t in asked) and result.diagnostics["rewritten_subtitles"] >= 1


def test_a_writer_that_cannot_be_reached_fails_the_units_with_no_chunks(tagger_dir):
    doc = make_doc(STORY)
    down = Completion(text="", error="connection refused", error_kind="unavailable")
    result = chunker(tagger_dir, ScriptedChatModel([down], cycle=True)).chunk_unit(doc, doc.units[0])
    assert result.chunks == [] and result.error and result.diagnostics["unreachable"]


def test_writer_answers_replayed_from_the_cache_are_counted_with_their_old_seconds(tagger_dir):
    # A replayed answer carries the seconds of the run that asked it; the diagnostics say how many
    # there were, so a speed measurement can leave the unit out instead of mixing two machines' time.
    doc = make_doc(STORY)
    replayed = Completion(text="Ilse counts crates", seconds=9.0, from_cache=True)
    result = chunker(tagger_dir, ScriptedChatModel([replayed], cycle=True), distinct_subtitles=False).chunk_unit(
        doc, doc.units[0])
    d = result.diagnostics
    assert d["replayed_answers"] == d["n_blocks"] >= 2
    assert d["writer_seconds"] == pytest.approx(9.0 * d["n_blocks"])
    fresh = chunker(tagger_dir, ScriptedChatModel(["Ilse counts crates"], cycle=True)).chunk_unit(doc, doc.units[0])
    assert fresh.diagnostics["replayed_answers"] == 0


def test_the_writer_reply_becomes_a_one_line_subtitle():
    assert clean_subtitle('  "Ilse counts the crates"\nand more') == "Ilse counts the crates"
    assert clean_subtitle("x" * 500) == "x" * 200
    assert subtitle_key("Ilse  Counts") == subtitle_key("ilse counts")


def test_a_folder_without_a_tagger_names_the_shipped_ones(tmp_path):
    from litseg.errors import SetupError

    with pytest.raises(SetupError, match="tagger"):
        chunker(tmp_path, ScriptedChatModel(["x"]))
