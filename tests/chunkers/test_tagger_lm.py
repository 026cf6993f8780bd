"""LitSeg-Tagger's LM sentence features (litseg.chunkers.tagger_lm): one pass per unit, every token
counted for its own sentence, the same features at training and at run time, and nets that refuse
to score without the features they were trained on."""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from litseg.chunkers.tagger_lm import (  # noqa: E402
    ALONE_FEATURES,
    SURPRISAL_ROWS,
    LMNorm,
    hidden_groups,
    load_sentence_lm,
    next_token_surprisal,
    unit_text,
)
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


@pytest.fixture(scope="module")
def full_reader():
    """The same tiny model with both optional readings: last-token states at layer 2, and alone."""
    return load_sentence_lm("tiny", [1, 2], [2], alone=True)


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


@pytest.mark.parametrize("rows, tokens", [(1, 2 * SURPRISAL_ROWS + 7), (3, 40), (2, 1)])
def test_surprisal_in_slices_equals_the_negative_log_softmax_of_each_next_token(rows, tokens):
    """The slices (``SURPRISAL_ROWS`` positions at a time, across the rows of a batch) give what the
    whole normalised copy gives, from bfloat16 logits as the model returns them."""
    g = torch.Generator().manual_seed(rows * 1000 + tokens)
    logits = (4 * torch.randn(rows, tokens, 97, generator=g)).to(torch.bfloat16)
    ids = torch.randint(0, 97, (rows, tokens), generator=g)
    expected = -torch.log_softmax(logits.float(), -1)[:, :-1].gather(2, ids[:, 1:, None])[..., 0]
    got = next_token_surprisal(logits, ids)
    assert got.shape == (rows, tokens - 1) and got.dtype == torch.float32
    assert torch.allclose(got, expected, atol=1e-5)


def test_a_layer_the_model_does_not_have_is_refused():
    with pytest.raises(ValueError, match="lm_layers"):
        load_sentence_lm("tiny", [7])
    with pytest.raises(ValueError, match="lm_last_layers"):
        load_sentence_lm("tiny", [1], [9])


def test_the_optional_readings_add_last_token_states_and_the_context_gain(reader, full_reader):
    plain, full = reader.features(SENTENCES, PARA), full_reader.features(SENTENCES, PARA)
    size = full_reader.model.config.hidden_size
    assert full.shape == (4, 3 * size + ALONE_FEATURES + 2) == (4, full_reader.width)
    # the first reading is unchanged: layer means first, the surprisal in the unit last
    assert torch.allclose(full[:, : 2 * size], plain[:, : 2 * size], atol=1e-4)
    assert torch.allclose(full[:, -2:], plain[:, -2:], atol=1e-4)
    # the last sentence's last token is the unit's last token: its layer-2 state is the last-token group
    text, _ = unit_text(SENTENCES, PARA)
    ids = full_reader.tokenizer(text, return_tensors="pt")["input_ids"]
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        state = full_reader.model(ids, output_hidden_states=True).hidden_states[2][0, -1].float()
    assert torch.allclose(full[3, 2 * size: 3 * size], state, atol=1e-3)
    # alone: surprisal of each sentence's opening read on its own, and the gain over the unit's reading
    alone = full_reader.alone_surprisal(SENTENCES)
    assert full[:, -6].tolist() == pytest.approx([a for a, _ in alone], abs=1e-4)
    assert full[:, -5].tolist() == pytest.approx([b for _, b in alone], abs=1e-4)
    assert torch.allclose(full[:, -3], full[:, -5] - full[:, -1], atol=1e-4)  # opening: alone minus in the unit
    assert all(a > 0 for a, _ in alone)  # every token after the start token is scored
    assert full_reader.features([], []).shape == (0, full_reader.width)


def test_a_sentence_read_alone_does_not_depend_on_the_sentences_batched_with_it(full_reader):
    batched = full_reader.alone_surprisal(SENTENCES)
    for i, sentence in enumerate(SENTENCES):
        # bfloat16 with padding moves the figures in their third digit at most
        assert full_reader.alone_surprisal([sentence])[0] == pytest.approx(batched[i], abs=0.05)


def test_the_hidden_groups_follow_the_readings_and_a_width_that_does_not_fit_is_refused():
    assert hidden_groups(2 * 64 + 2, 2, 0, False) == [(0, 128)]
    assert hidden_groups(3 * 64 + ALONE_FEATURES + 2, 2, 1, True) == [(0, 128), (128, 192)]
    with pytest.raises(ValueError, match="do not fit"):
        hidden_groups(3 * 64 + 2, 2, 1, True)


def test_a_tagger_json_written_before_the_optional_readings_loads_as_the_first_reading():
    old = {"lm_model": "embedded", "lm_layers": [8, 16, 24], "lm_dim": 3 * 576 + 2}  # the shipped v2 keys
    settings = NetSettings(**old)
    assert (settings.lm_last_layers, settings.lm_alone) == ([], False)
    assert settings.lm_groups() == [(0, 3 * 576)]
    assert input_width(384, settings) == 384 + 10 + 3 * 576 + 2 + 1


def lm_nets(reader) -> TaggerNets:
    settings = NetSettings(hidden=8, layers=1, cue_buckets=64, cue_dim=4, ensemble=1, threshold=-50.0, min_block=2,
                           max_context=0, context_mean=[0.0] * 12, context_std=[1.0] * 12, lm_model="tiny",
                           lm_layers=reader.layers, lm_dim=reader.width, lm_last_layers=reader.last_layers,
                           lm_alone=reader.alone)
    torch.manual_seed(0)
    norm = LMNorm.fit([reader.features(SENTENCES, PARA)])
    net = BoundaryNet(input_width(DIM, settings), settings).eval()  # no dropout: scores compared below
    return TaggerNets(settings, [net], ContextNet(), norm)


@pytest.fixture(params=["first reading", "both optional readings"])
def any_reader(request, reader, full_reader):
    return reader if request.param == "first reading" else full_reader


def test_nets_trained_with_lm_features_keep_their_statistics_and_refuse_to_score_without(tmp_path, any_reader):
    reader = any_reader
    nets = lm_nets(reader)
    settings = save_nets(nets, tmp_path)
    loaded = load_nets(tmp_path, settings, DIM)
    emb = torch.tensor(HashEmbedder().encode(SENTENCES))
    lm = reader.features(SENTENCES, PARA)
    assert torch.equal(loaded.lm_norm.mean, nets.lm_norm.mean)
    assert loaded.scores(SENTENCES, PARA, emb, lm) == pytest.approx(nets.scores(SENTENCES, PARA, emb, lm))
    with pytest.raises(ValueError, match="trained with LM"):
        loaded.scores(SENTENCES, PARA, emb)


def test_the_chunker_reads_the_lm_of_its_nets_and_keeps_the_output_contract(tmp_path, monkeypatch, any_reader):
    reader = any_reader
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
