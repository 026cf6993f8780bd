"""The vLLM adapter, driven against a stand-in ``vllm`` package (CI has no GPU and no vLLM).

The stand-in is written to a temporary folder and put first on ``sys.path``, so it is what
``import vllm`` finds, in this process and in the replica processes that data parallelism spawns.
It records every ``LLM(...)`` and ``LLM.chat(...)`` call and answers with JSON that says what it
was given (the user text, the visible GPUs, whether decoding was constrained).
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from pathlib import Path

import pytest

from litseg.llm.base import ChatRequest
from litseg.llm.vllm_backend import VLLMChatModel, structured_output_kwargs

FAKE_INIT = '''
"""Stand-in for vllm: records calls, answers deterministically."""
import json
import os

from vllm.sampling_params import SamplingParams

CALLS = []       # ("init", kwargs) and ("chat", {...}) in call order
INSTANCES = []


class CompletionOutput:
    def __init__(self, text, token_ids, finish_reason):
        self.text = text
        self.token_ids = token_ids
        self.finish_reason = finish_reason


class RequestOutput:
    def __init__(self, prompt_token_ids, outputs, num_cached_tokens):
        self.prompt_token_ids = prompt_token_ids
        self.outputs = outputs
        if num_cached_tokens is not None:
            self.num_cached_tokens = num_cached_tokens


class _Tokenizer:
    def encode(self, text, add_special_tokens=True):
        return text.split()

    def apply_chat_template(self, messages, tokenize=True, add_generation_prompt=False, **kwargs):
        words = [w for m in messages for w in ("<|" + m["role"] + "|>", *m["content"].split())]
        return words + (["<|assistant|>"] if add_generation_prompt else [])


class EngineDeadError(Exception):
    """Named as vLLM's (vllm.v1.engine.exceptions): the engine core process died."""


class _EngineCore:
    def shutdown(self):
        CALLS.append(("shutdown", {}))


class _Engine:
    def __init__(self):
        self.engine_core = _EngineCore()


class LLM:
    def __init__(self, **kwargs):
        if kwargs.get("model") == "broken-model":
            raise OSError("weights not found: broken-model")
        self.kwargs = kwargs
        self.llm_engine = _Engine()
        CALLS.append(("init", kwargs))
        INSTANCES.append(self)

    def get_tokenizer(self):
        return _Tokenizer()

    def chat(self, messages, sampling_params=None, use_tqdm=True, lora_request=None,
             chat_template_kwargs=None, **extra):
        CALLS.append(("chat", {"messages": messages, "sampling_params": sampling_params, "use_tqdm": use_tqdm,
                               "lora_request": lora_request, "chat_template_kwargs": chat_template_kwargs,
                               "extra": extra}))
        params = sampling_params if isinstance(sampling_params, list) else [sampling_params] * len(messages)
        outputs = []
        for conversation, sp in zip(messages, params):
            user = conversation[-1]["content"]
            if "CRASH" in user:
                os._exit(3)  # a replica process dying mid-batch
            if "TOO_LONG" in user:
                raise ValueError("prompt is longer than max_model_len")
            if "ENGINE_DEAD" in user:
                raise EngineDeadError("EngineCore encountered an issue. See stack trace (above) for the root cause.")
            if "CUDA_OOM" in user:
                import torch
                raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
            constrained = sp.structured_outputs is not None or sp.guided_decoding is not None
            text = json.dumps({"echo": user, "devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
                               "constrained": constrained})
            words = sum(len(m["content"].split()) for m in conversation)
            finish = "length" if sp.max_tokens < 8 else "stop"
            outputs.append(RequestOutput(list(range(words)), [CompletionOutput(text, list(range(5)), finish)],
                                         CACHED_TOKENS))
        return outputs


CACHED_TOKENS = __CACHED__
'''

FAKE_SAMPLING_NEW = '''
class StructuredOutputsParams:
    def __init__(self, json=None, regex=None):
        self.json = json
        self.regex = regex


class SamplingParams:
    def __init__(self, max_tokens=16, temperature=1.0, top_p=1.0, seed=None, stop=None,
                 structured_outputs=None, top_k=0, min_p=0.0, repetition_penalty=1.0):
        self.max_tokens, self.temperature, self.top_p = max_tokens, temperature, top_p
        self.top_k, self.min_p, self.repetition_penalty = top_k, min_p, repetition_penalty
        self.seed, self.stop = seed, stop
        self.structured_outputs = structured_outputs
        self.guided_decoding = None
'''

FAKE_SAMPLING_OLD = '''
class GuidedDecodingParams:
    def __init__(self, json=None, regex=None):
        self.json = json
        self.regex = regex


class SamplingParams:
    def __init__(self, max_tokens=16, temperature=1.0, top_p=1.0, seed=None, stop=None, guided_decoding=None,
                 top_k=0, min_p=0.0, repetition_penalty=1.0):
        self.max_tokens, self.temperature, self.top_p = max_tokens, temperature, top_p
        self.top_k, self.min_p, self.repetition_penalty = top_k, min_p, repetition_penalty
        self.seed, self.stop = seed, stop
        self.guided_decoding = guided_decoding
        self.structured_outputs = None
'''

FAKE_SAMPLING_NONE = FAKE_SAMPLING_OLD.replace("guided_decoding=None,", "").replace(
    "self.guided_decoding = guided_decoding", "self.guided_decoding = None").replace(
    "class GuidedDecodingParams", "class _Unrelated")

FAKE_LORA = '''
class LoRARequest:
    def __init__(self, lora_name, lora_int_id, lora_path):
        self.lora_name, self.lora_int_id, self.lora_path = lora_name, lora_int_id, lora_path
'''

SCHEMA = {"type": "object", "properties": {"boundary": {"type": "integer"}}, "required": ["boundary"],
          "additionalProperties": False}


def _write_fake(root: Path, sampling: str, cached: str) -> Path:
    pkg = root / "vllm"
    (pkg / "lora").mkdir(parents=True)
    (pkg / "__init__.py").write_text(FAKE_INIT.replace("__CACHED__", cached))
    (pkg / "sampling_params.py").write_text(sampling)
    (pkg / "lora" / "__init__.py").write_text("")
    (pkg / "lora" / "request.py").write_text(FAKE_LORA)
    return root


def _install(monkeypatch: pytest.MonkeyPatch, root: Path):
    for name in [m for m in sys.modules if m == "vllm" or m.startswith("vllm.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.syspath_prepend(str(root))
    import vllm

    assert Path(vllm.__file__).is_relative_to(root), "the stand-in must shadow any real vllm"
    return vllm


@pytest.fixture
def fake_vllm(tmp_path, monkeypatch):
    """Recent API (StructuredOutputsParams), reports num_cached_tokens."""
    return _install(monkeypatch, _write_fake(tmp_path, FAKE_SAMPLING_NEW, "3"))


@pytest.fixture
def fake_vllm_old(tmp_path, monkeypatch):
    """Older API (GuidedDecodingParams), no num_cached_tokens attribute."""
    return _install(monkeypatch, _write_fake(tmp_path, FAKE_SAMPLING_OLD, "None"))


def _req(text: str, schema: dict | None = None, **kw) -> ChatRequest:
    return ChatRequest(messages=[{"role": "system", "content": "You segment fiction."},
                                 {"role": "user", "content": text}], json_schema=schema, **kw)


def _chat_calls(vllm) -> list[dict]:
    return [c for kind, c in vllm.CALLS if kind == "chat"]


def test_importing_litseg_llm_does_not_import_vllm():
    code = ("import sys, litseg.llm, litseg.llm.base, litseg.llm.vllm_backend, litseg.llm.openai_backend; "
            "print('vllm' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_engine_gets_configured_arguments_once_and_lazily(fake_vllm):
    model = VLLMChatModel("org/teacher-7b", tensor_parallel_size=2, gpu_memory_utilization=0.85,
                          max_model_len=16384, dtype="bfloat16", revision="abc123",
                          adapter="/adapters/litseg", max_lora_rank=32,
                          engine_kwargs={"swap_space": 8})
    assert fake_vllm.INSTANCES == []  # building the backend loads nothing
    model.chat_batch([_req("one")])
    model.chat_batch([_req("two")])
    inits = [c for kind, c in fake_vllm.CALLS if kind == "init"]
    assert len(inits) == 1
    assert inits[0] == {
        "model": "org/teacher-7b", "dtype": "bfloat16", "tensor_parallel_size": 2,
        "gpu_memory_utilization": 0.85, "enable_prefix_caching": True, "enforce_eager": False,
        "trust_remote_code": False, "seed": 0, "revision": "abc123", "max_model_len": 16384,
        "enable_lora": True, "max_lora_rank": 32, "swap_space": 8,
    }


def test_batch_is_one_chat_call_with_per_request_params_in_order(fake_vllm):
    model = VLLMChatModel("m", chat_template_kwargs={"enable_thinking": False})
    reqs = [_req(f"unit {i}", max_tokens=100 + i, temperature=0.1 * i, seed=i, stop=["</s>"]) for i in range(5)]
    out = model.chat_batch(reqs)

    calls = _chat_calls(fake_vllm)
    assert len(calls) == 1
    call = calls[0]
    assert [conv[-1]["content"] for conv in call["messages"]] == [f"unit {i}" for i in range(5)]
    assert [sp.max_tokens for sp in call["sampling_params"]] == [100, 101, 102, 103, 104]
    assert [sp.seed for sp in call["sampling_params"]] == [0, 1, 2, 3, 4]
    assert call["sampling_params"][2].temperature == pytest.approx(0.2)
    assert call["sampling_params"][0].stop == ["</s>"]
    assert call["use_tqdm"] is False
    assert call["chat_template_kwargs"] == {"enable_thinking": False}
    assert call["lora_request"] is None
    assert [json.loads(c.text)["echo"] for c in out] == [f"unit {i}" for i in range(5)]
    assert all(c.error is None and c.model == "m" for c in out)


def test_token_accounting_from_request_output(fake_vllm):
    out = VLLMChatModel("m").chat_batch([_req("three words here"), _req("x", max_tokens=4)])
    # prompt ids: one per word of the conversation (system prompt has 3 words)
    assert out[0].prompt_tokens == 3 + 3
    assert out[0].completion_tokens == 5
    assert out[0].cached_tokens == 3
    assert out[0].finish_reason == "stop"
    assert out[1].finish_reason == "length"
    assert all(c.seconds > 0 for c in out)


def test_schema_routes_to_structured_outputs_in_recent_vllm(fake_vllm):
    VLLMChatModel("m").chat_batch([_req("constrained", SCHEMA), _req("free")])
    params = _chat_calls(fake_vllm)[0]["sampling_params"]
    assert isinstance(params[0].structured_outputs, fake_vllm.sampling_params.StructuredOutputsParams)
    assert params[0].structured_outputs.json == SCHEMA
    assert params[1].structured_outputs is None


def test_schema_routes_to_guided_decoding_in_older_vllm(fake_vllm_old):
    out = VLLMChatModel("m").chat_batch([_req("constrained", SCHEMA), _req("free")])
    params = _chat_calls(fake_vllm_old)[0]["sampling_params"]
    assert params[0].guided_decoding.json == SCHEMA
    assert params[1].guided_decoding is None
    assert [json.loads(c.text)["constrained"] for c in out] == [True, False]
    assert out[0].cached_tokens == 0  # this version reports no num_cached_tokens


def test_schema_left_unconstrained_when_switched_off(fake_vllm):
    VLLMChatModel("m", constrained_decoding=False).chat_batch([_req("x", SCHEMA)])
    assert _chat_calls(fake_vllm)[0]["sampling_params"][0].structured_outputs is None


def test_vllm_without_any_structured_api_warns_and_decodes_freely(tmp_path, monkeypatch, caplog):
    vllm = _install(monkeypatch, _write_fake(tmp_path, FAKE_SAMPLING_NONE, "None"))
    monkeypatch.setattr("litseg.llm.vllm_backend._warned_no_structured_outputs", False)
    with caplog.at_level(logging.WARNING, logger="litseg.llm.vllm_backend"):
        assert structured_output_kwargs(SCHEMA) == {}
        out = VLLMChatModel("m").chat_batch([_req("x", SCHEMA)])
    assert json.loads(out[0].text)["constrained"] is False
    assert "unconstrained" in caplog.text
    assert len(_chat_calls(vllm)) == 1


def test_lora_adapter_is_sent_with_every_batch(fake_vllm):
    model = VLLMChatModel("base", adapter="/ckpt/student-lora", adapter_name="student")
    model.chat_batch([_req("a"), _req("b")])
    lora = _chat_calls(fake_vllm)[0]["lora_request"]
    assert (lora.lora_name, lora.lora_int_id, lora.lora_path) == ("student", 1, "/ckpt/student-lora")
    assert model.identity()["adapter"] == "/ckpt/student-lora"


def test_identity_names_the_weights_not_the_hardware_layout():
    a = VLLMChatModel("m", tensor_parallel_size=1, gpu_memory_utilization=0.9)
    b = VLLMChatModel("m", tensor_parallel_size=4, gpu_memory_utilization=0.5, data_parallel_size=2)
    c = VLLMChatModel("m", quantization="awq")
    assert a.identity() == b.identity()
    assert a.identity() != c.identity()
    assert a.identity()["backend"] == "vllm"
    local = VLLMChatModel("/models/qwen-7b", model_id="Qwen/Qwen2.5-7B-Instruct")
    assert local.identity()["model"] == "Qwen/Qwen2.5-7B-Instruct"


def test_failed_batch_falls_back_to_single_requests(fake_vllm, caplog):
    with caplog.at_level(logging.WARNING, logger="litseg.llm.vllm_backend"):
        out = VLLMChatModel("m").chat_batch([_req("fine 1"), _req("TOO_LONG unit"), _req("fine 2")])
    assert [c.error is None for c in out] == [True, False, True]
    assert "max_model_len" in out[1].error and out[1].finish_reason == "error" and out[1].text == ""
    assert json.loads(out[2].text)["echo"] == "fine 2"
    assert len(_chat_calls(fake_vllm)) == 1 + 3  # the batch, then one call per request
    assert "one by one" in caplog.text


def test_max_batch_size_splits_calls_and_keeps_order(fake_vllm):
    out = VLLMChatModel("m", max_batch_size=2).chat_batch([_req(f"u{i}") for i in range(5)])
    assert [len(c["messages"]) for c in _chat_calls(fake_vllm)] == [2, 2, 1]
    assert [json.loads(c.text)["echo"] for c in out] == [f"u{i}" for i in range(5)]


def test_count_tokens_uses_the_engine_tokenizer_once_loaded(fake_vllm):
    model = VLLMChatModel("m")
    assert model.count_tokens("a b c d e f g h") == 3  # heuristic: no engine loaded for counting
    model.chat(_req("load"))
    assert model.count_tokens("a b c d e f g h") == 8
    # system: role + 3 words, user: role + 1 word, then the generation prompt
    assert model.count_prompt_tokens(_req("hello").messages) == 4 + 2 + 1


def test_missing_vllm_gives_a_clear_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "vllm", None)  # makes `import vllm` raise ImportError
    with pytest.raises(RuntimeError, match="pip install 'litseg\\[vllm\\]'"):
        VLLMChatModel("m").chat(_req("x"))


def test_bad_settings_are_rejected_early():
    with pytest.raises(TypeError, match="engine_kwargs"):
        VLLMChatModel("m", tensor_parallel=2)
    with pytest.raises(ValueError, match="gpu_memory_utilization"):
        VLLMChatModel("m", gpu_memory_utilization=1.5)
    with pytest.raises(ValueError, match="data_parallel_size"):
        VLLMChatModel("m", data_parallel_size=0)


def test_data_parallel_replicas_pin_gpus_and_keep_order(fake_vllm, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "4,5,6,7")
    model = VLLMChatModel("m", data_parallel_size=2, tensor_parallel_size=2, replica_start_timeout_s=60)
    try:
        out = model.chat_batch([_req(f"u{i}") for i in range(5)])
        again = model.chat_batch([_req("late")])
    finally:
        model.close()
    answers = [json.loads(c.text) for c in out]
    assert [a["echo"] for a in answers] == [f"u{i}" for i in range(5)]
    # contiguous shards: the first replica (GPUs 4,5) gets the first requests
    assert [a["devices"] for a in answers] == ["4,5", "4,5", "6,7", "6,7", "6,7"]
    assert json.loads(again[0].text)["echo"] == "late"
    assert fake_vllm.INSTANCES == []  # the engines live in the replicas, not here


def test_dead_replica_fails_its_shard_and_is_replaced(fake_vllm, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")
    model = VLLMChatModel("m", data_parallel_size=2, replica_start_timeout_s=60)
    try:
        out = model.chat_batch([_req("fine"), _req("CRASH now")])
        after = model.chat_batch([_req("a"), _req("b")])
    finally:
        model.close()
    assert out[1].error is not None and "died" in out[1].error and out[1].text == ""
    assert [json.loads(c.text)["echo"] for c in after] == ["a", "b"]


def test_data_parallel_needs_enough_gpus(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")
    with pytest.raises(ValueError, match="needs 4 GPUs"):
        VLLMChatModel("m", data_parallel_size=2, tensor_parallel_size=2).chat(_req("x"))


def test_replica_that_cannot_start_is_reported(fake_vllm, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")
    model = VLLMChatModel("broken-model", data_parallel_size=2, replica_start_timeout_s=60)
    with pytest.raises(RuntimeError, match="could not start.*weights not found"):
        model.chat(_req("x"))
    model.close()



def test_conf_llm_vllm_builds_through_the_factory(fake_vllm, repo_root):
    from omegaconf import OmegaConf

    from litseg.llm.factory import build_llm

    cfg = OmegaConf.load(repo_root / "conf" / "llm" / "vllm.yaml")
    cfg.cache.enabled = False
    cfg.adapter = "/ckpt/lite"
    model = build_llm(cfg)
    assert isinstance(model, VLLMChatModel)
    out = model.chat_batch([_req("a", SCHEMA), _req("b")])
    assert [c.error for c in out] == [None, None]
    init = next(c for kind, c in fake_vllm.CALLS if kind == "init")
    assert init["model"] == "Qwen/Qwen2.5-7B-Instruct" and init["enable_prefix_caching"] is True
    assert init["enable_lora"] is True
    assert _chat_calls(fake_vllm)[0]["lora_request"].lora_path == "/ckpt/lite"


# ---------------------------------------------------------------------- the GPU path's failures
def test_a_dead_engine_leaves_every_request_unanswered_not_failed(fake_vllm):
    model = VLLMChatModel("m")
    out = model.chat_batch([_req("fine"), _req("ENGINE_DEAD now"), _req("fine too")])
    # No request was answered, none is a plain error a chunker would answer with a fallback, and the
    # dead engine is not asked again one request at a time.
    assert [c.error_kind for c in out] == ["unavailable"] * 3
    assert all(c.text == "" and "EngineDeadError" in c.error for c in out)
    assert len(_chat_calls(fake_vllm)) == 1
    # The dead engine is shut down; the next batch gets a fresh one.
    assert ("shutdown", {}) in fake_vllm.CALLS
    again = model.chat_batch([_req("later")])
    assert again[0].error is None and len(fake_vllm.INSTANCES) == 2


def test_cuda_running_out_of_memory_is_an_unavailable_engine(fake_vllm):
    out = VLLMChatModel("m").chat_batch([_req("CUDA_OOM here")])
    assert out[0].error_kind == "unavailable" and "OutOfMemoryError" in out[0].error
    # A request the engine refused stays a plain error (the runner retries it, then falls back).
    (too_long,) = VLLMChatModel("m").chat_batch([_req("TOO_LONG unit")])
    assert too_long.error is not None and too_long.error_kind is None


def test_a_replica_that_died_leaves_its_shard_unavailable(fake_vllm, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")
    model = VLLMChatModel("m", data_parallel_size=2, replica_start_timeout_s=60)
    try:
        out = model.chat_batch([_req("fine"), _req("CRASH now")])
    finally:
        model.close()
    assert out[0].error_kind is None and out[1].error_kind == "unavailable"


def test_a_chunker_fails_the_unit_a_dead_engine_left_unanswered(fake_vllm, tmp_path):
    from litseg.chunkers.litseg_lite import LitSegLiteChunker
    from litseg.segmentation.preprocess import prepare_document
    from litseg.testing.configs import prompt_config

    tale = tmp_path / "tale.txt"
    tale.write_text("CHAPTER I\n\nAnna reached the mill at ENGINE_DEAD dawn. The river was high. She crossed the "
                    "bridge.\n\nNobody answered. She went home again.\n", encoding="utf-8")
    doc = prepare_document(tale)
    prompt = prompt_config("litseg_lite")
    result = LitSegLiteChunker(VLLMChatModel("m"), prompt).chunk_unit(doc, doc.units[0])
    assert result.error is not None and result.error.startswith("model unreachable: ")
    assert result.chunks == []  # no whole-unit fallback that a rerun would skip as done


def test_close_shuts_the_engine_down(fake_vllm):
    model = VLLMChatModel("m")
    model.chat_batch([_req("a")])
    model.close()
    assert ("shutdown", {}) in fake_vllm.CALLS and model._llm is None


def test_decoding_switches_the_models_own_defaults_off(fake_vllm):
    VLLMChatModel("m").chat_batch([_req("a", temperature=0.7, top_p=0.9)])
    sp = _chat_calls(fake_vllm)[0]["sampling_params"][0]
    assert (sp.temperature, sp.top_p) == (0.7, 0.9)
    assert (sp.top_k, sp.min_p, sp.repetition_penalty) == (-1, 0.0, 1.0)


def test_a_retrained_adapter_is_another_model_for_the_cache(tmp_path):
    adapter = tmp_path / "adapter"
    adapter.mkdir()
    (adapter / "adapter_config.json").write_text("{}")
    (adapter / "adapter_model.safetensors").write_bytes(b"first weights")
    before = VLLMChatModel("base", adapter=str(adapter)).identity()
    (adapter / "adapter_model.safetensors").write_bytes(b"retrained weights")
    after = VLLMChatModel("base", adapter=str(adapter)).identity()
    assert before["adapter"] == after["adapter"] == str(adapter)
    assert before["adapter_sha256"] and before["adapter_sha256"] != after["adapter_sha256"]
