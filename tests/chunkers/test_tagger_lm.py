"""LitSeg-Tagger's LM sentence features (litseg.chunkers.tagger_lm): one pass per unit, every token
counted for its own sentence, the same features at training and at run time, and nets that refuse
to score without the features they were trained on."""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from litseg.chunkers.tagger_lm import LMNorm, load_sentence_lm, unit_text  # noqa: E402
from litseg.chunkers.tagger_model import (  # noqa: E402
    BoundaryNet,
    ContextNet,
    NetSettings,
    TaggerNets,
    input_width,
    load_nets,
    save_nets,
)
from litseg.llm.testing import ScriptedChatModel  # noqa: E402
from tests.chunkers.test_tagger import DIM, STORY, HashEmbedder, chunker  # noqa: E402
from tests.doc_strategies import make_doc  # noqa: E402

SENTENCES = ["Ilse rows out at dawn.", "The  fog\nlifts slowly.", "Enter the ferryman, singing.", "Night falls."]
PARA = [True, False, True, False]


@pytest.fixture(scope="module")
def reader():
    return load_sentence_lm("tiny", [1, 2])


def test_the_unit_text_keeps_paragraphs_and_ends_every_sentence_where_it_ends():
    text, ends = unit_text(SENTENCES, PARA)
    assert text == "Ilse rows out at dawn. The fog lifts slowly.\nEnter the ferryman, singing. Night falls."
    assert [text[e - 1] for e in ends] == [".", ".", ".", "."]
    assert ends[-1] == len(text)


def test_every_sentence_gets_its_own_hidden_states_and_surprisal(reader):
    features = reader.features(SENTENCES, PARA)
    hidden = 2 * reader.model.config.hidden_size
    assert features.shape == (4, hidden + 2) == (4, reader.width)
    assert torch.isfinite(features).all()
    assert all(features[i, :hidden].abs().sum() > 0 for i in range(4))  # no sentence left without tokens
    assert len({tuple(features[i, :hidden].tolist()) for i in range(4)}) == 4
    assert (features[1:, -2:] > 0).all()  # a random model is surprised by every word after the first
    assert reader.features([], []).shape == (0, reader.width)


def test_a_layer_the_model_does_not_have_is_refused():
    with pytest.raises(ValueError, match="lm_layers"):
        load_sentence_lm("tiny", [7])


def lm_nets(reader) -> TaggerNets:
    settings = NetSettings(hidden=8, layers=1, cue_buckets=64, cue_dim=4, ensemble=1, threshold=-50.0, min_block=2,
                           max_context=0, context_mean=[0.0] * 12, context_std=[1.0] * 12, lm_model="tiny",
                           lm_layers=[1, 2], lm_dim=reader.width)
    torch.manual_seed(0)
    norm = LMNorm.fit([reader.features(SENTENCES, PARA)])
    net = BoundaryNet(input_width(DIM, settings), settings).eval()  # no dropout: scores compared below
    return TaggerNets(settings, [net], ContextNet(), norm)


def test_nets_trained_with_lm_features_keep_their_statistics_and_refuse_to_score_without(tmp_path, reader):
    nets = lm_nets(reader)
    settings = save_nets(nets, tmp_path)
    loaded = load_nets(tmp_path, settings, DIM)
    emb = torch.tensor(HashEmbedder().encode(SENTENCES))
    lm = reader.features(SENTENCES, PARA)
    assert torch.equal(loaded.lm_norm.mean, nets.lm_norm.mean)
    assert loaded.scores(SENTENCES, PARA, emb, lm) == pytest.approx(nets.scores(SENTENCES, PARA, emb, lm))
    with pytest.raises(ValueError, match="trained with LM"):
        loaded.scores(SENTENCES, PARA, emb)


def test_the_chunker_reads_the_lm_of_its_nets_and_keeps_the_output_contract(tmp_path, monkeypatch, reader):
    monkeypatch.setattr("litseg.chunkers.tagger.load_embedder", lambda model=None, **kw: HashEmbedder())
    folder = tmp_path / "tagger"
    meta = {"name": "tiny-lm", "encoder": "default", "nets": save_nets(lm_nets(reader), folder), "digest": "x"}
    (folder / "tagger.json").write_text(json.dumps(meta))
    doc = make_doc(STORY)
    unit = doc.units[0]
    result = chunker(folder, ScriptedChatModel(lambda r: "Ilse counts crates", cycle=True)).chunk_unit(doc, unit)
    assert result.error is None
    ranges = [(c.from_idx, c.to_idx) for c in result.chunks]
    assert ranges[0][0] == 1 and ranges[-1][1] == unit.n_sentences and len(ranges) >= 2
    assert all(b + 1 == c for (_, b), (c, _) in zip(ranges, ranges[1:]))
