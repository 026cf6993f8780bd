"""Local chat backend on Hugging Face transformers (``llm=transformers``, ``llm=embedded``).

* Loads a model directory, or a GGUF file inside it (``gguf_file=``; transformers dequantizes it
  with the ``gguf`` package). A dequantized GGUF is saved once as safetensors under
  ``$LITSEG_CACHE_DIR/converted`` (or ``~/.cache/litseg``), so later processes load it in well
  under a second instead of re-reading the GGUF; ``convert_gguf=False`` turns that off.
* An optional LoRA adapter (``adapter=``) is applied with peft, imported only then.
* The prompt is the tokenizer's chat template; decoding is greedy at temperature 0 and sampled
  (with ``seed``) above it, with nothing else: the model's own ``generation_config.json``
  preferences (Qwen2.5: ``repetition_penalty`` 1.05, ``top_k`` 20) are dropped at load, since
  transformers would fill every knob a request leaves unset from them, and answers here would
  then differ from TRL's rollouts, vLLM and a server given the same request. A model folder
  whose file sets such preferences carries ``generation_defaults: ignored`` in its identity.
* A request with ``json_schema`` is decoded under a grammar compiled by xgrammar, so the answer is
  JSON of that schema unless ``max_tokens`` cuts it (then ``finish_reason == "length"``). If the
  grammar cannot be built the request is generated without it and a warning is logged.
* Loaded weights are shared by every instance in the process with the same settings.
* Nothing is loaded before the first call that needs the weights, so :meth:`identity` is cheap
  (the replay cache uses that to answer without ever loading the model).
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections import OrderedDict
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from litseg.llm.base import (
    ChatModel,
    ChatModelError,
    ChatRequest,
    Completion,
    ModelUnavailable,
    adapter_identity,
    stable_json,
    tokenizer_label,
)
from litseg.segmentation.types import NamedTokenizer
from litseg.llm.config import TransformersBackendConfig, TransformersLLMConfig, backend_settings
from litseg.llm.decoding import generation_preferences, neutral_generation_config
from litseg.llm.gguf import gguf_tokenizer, load_gguf_converted

log = logging.getLogger(__name__)

@dataclass
class _Loaded:
    model: Any
    tokenizer: Any
    device: Any
    eos_ids: set[int]
    pad_id: int
    load_seconds: float
    grammar_compiler: Any = None  # built on first constrained request
    grammar_lock: threading.Lock = field(default_factory=threading.Lock)
    compiled: OrderedDict[str, Any] = field(default_factory=OrderedDict)
    grammar_broken: str | None = None  # why xgrammar cannot be used with this tokenizer
    # One generate() at a time per model: callers may be worker threads, and a seeded call
    # reseeds torch's global generator.
    generate_lock: threading.Lock = field(default_factory=threading.Lock)


_LOADED: dict[str, _Loaded] = {}
_LOAD_LOCK = threading.Lock()


def _resolve_device(name: str) -> str:
    import torch

    if name != "auto":
        return name
    if torch.cuda.is_available():
        return "cuda"
    return "cpu"


def _resolve_dtype(name: str, device: str) -> Any:
    import torch

    if name == "auto":
        return torch.bfloat16 if device.startswith("cuda") and torch.cuda.is_bf16_supported() else torch.float32
    try:
        dtype = getattr(torch, name)
    except AttributeError:
        raise ValueError(f"transformers backend: unknown dtype {name!r}") from None
    if not isinstance(dtype, torch.dtype):
        raise ValueError(f"transformers backend: unknown dtype {name!r}")
    return dtype


def _load(cfg: TransformersBackendConfig) -> _Loaded:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if cfg.num_threads:
        torch.set_num_threads(int(cfg.num_threads))
    device = _resolve_device(cfg.device)
    dtype = _resolve_dtype(cfg.dtype, device)
    model_dir = Path(cfg.model).expanduser()
    if not model_dir.exists():
        raise ModelUnavailable(f"transformers backend: model directory {model_dir} does not exist "
                             "(this backend reads local files only; download the model first)")
    if cfg.gguf_file and not (model_dir / cfg.gguf_file).is_file():
        raise ModelUnavailable(f"transformers backend: GGUF file {cfg.gguf_file!r} not found in {model_dir}")
    start = time.perf_counter()
    if cfg.gguf_file and cfg.convert_gguf and cfg.tokenizer is None:
        model, tokenizer = load_gguf_converted(str(model_dir), cfg.gguf_file, dtype)
    else:
        extra: dict[str, Any] = {"trust_remote_code": cfg.trust_remote_code}
        if cfg.gguf_file:
            extra["gguf_file"] = cfg.gguf_file
        model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=dtype, **extra)
        tok_source = cfg.tokenizer or str(model_dir)
        tok_extra = dict(extra) if cfg.tokenizer is None else {"trust_remote_code": cfg.trust_remote_code}
        tokenizer = AutoTokenizer.from_pretrained(tok_source, **tok_extra)
    if cfg.adapter:
        try:
            from peft import PeftModel
        except ImportError as exc:
            raise ModelUnavailable("transformers backend: adapter= needs the peft package "
                                 "(pip install peft)") from exc
        if not Path(cfg.adapter).expanduser().exists():
            raise ModelUnavailable(f"transformers backend: adapter directory {cfg.adapter} does not exist")
        model = PeftModel.from_pretrained(model, str(Path(cfg.adapter).expanduser()))
        if cfg.merge_adapter:
            model = model.merge_and_unload()
    model.to(device)
    model.eval()
    if tokenizer.chat_template is None:
        raise ModelUnavailable(f"transformers backend: the tokenizer of {cfg.model} has no chat template; "
                             "use an instruct model or set tokenizer= to one that has a template")
    tokenizer.padding_side = "left"  # decoder-only batches must end where generation starts
    eos_ids: set[int] = set()
    for source in (model.generation_config.eos_token_id, tokenizer.eos_token_id):
        if isinstance(source, int):
            eos_ids.add(source)
        elif source:
            eos_ids.update(int(x) for x in source)
    if not eos_ids:
        raise ModelUnavailable(f"transformers backend: {cfg.model} defines no end-of-sequence token")
    model.generation_config = neutral_generation_config(model.generation_config)
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else min(eos_ids)
    loaded = _Loaded(model=model, tokenizer=tokenizer, device=device, eos_ids=eos_ids, pad_id=pad_id,
                     load_seconds=time.perf_counter() - start)
    log.info("loaded %s%s on %s in %.1fs", cfg.model, f" ({cfg.gguf_file})" if cfg.gguf_file else "",
             device, loaded.load_seconds)
    return loaded


class GrammarLogitsProcessor:
    """Masks every token the JSON grammar forbids, one xgrammar matcher per batch row.

    Written against xgrammar's matcher API rather than its ``contrib.hf`` helper so that a token
    the matcher unexpectedly rejects frees that row (with a warning) instead of aborting the whole
    batch with an assertion, and so that rows without a usable grammar can share the batch.
    """

    def __init__(self, compiled: list[Any | None]) -> None:
        import xgrammar as xgr

        self._xgr = xgr
        # A row whose schema had no usable grammar (None) is generated freely.
        self._matchers = [xgr.GrammarMatcher(c) if c is not None else None for c in compiled]
        vocab = next(c for c in compiled if c is not None).tokenizer_info.vocab_size
        self._bitmask = xgr.allocate_token_bitmask(len(compiled), vocab)
        self._free = [c is None for c in compiled]
        self._prompt_len: int | None = None
        self.seconds = 0.0
        self.calls = 0

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        start = time.perf_counter()
        if self._prompt_len is None:
            self._prompt_len = input_ids.shape[1]
        else:
            for row, matcher in enumerate(self._matchers):
                if matcher is None or self._free[row] or matcher.is_terminated():
                    continue
                if not matcher.accept_token(int(input_ids[row, -1])):
                    log.warning("grammar rejected a sampled token; row %d continues unconstrained", row)
                    self._free[row] = True
        rows = []
        for row, matcher in enumerate(self._matchers):
            if matcher is not None and not self._free[row] and not matcher.is_terminated():
                matcher.fill_next_token_bitmask(self._bitmask, row)
                rows.append(row)
        if rows:
            device = scores.device
            on_cpu = scores if device.type == "cpu" else scores.to("cpu")
            self._xgr.apply_token_bitmask_inplace(on_cpu, self._bitmask, indices=rows)
            scores = on_cpu if device.type == "cpu" else on_cpu.to(device)
        self.seconds += time.perf_counter() - start
        self.calls += 1
        return scores


class TransformersChatModel(ChatModel):
    """``TransformersChatModel(model="path/to/dir", gguf_file=None, adapter=None, dtype="auto")``."""

    _grammar_cache_size = 32
    config_class: type = TransformersLLMConfig
    #: The conf/llm option whose values fill the settings a caller leaves out.
    option = "transformers"

    @classmethod
    def from_config(cls, section: TransformersLLMConfig) -> TransformersChatModel:
        return cls(**section.settings())

    def __init__(self, model: str, **settings: Any) -> None:
        known = {f.name for f in fields(TransformersBackendConfig)}
        unknown = sorted(set(settings) - known)
        if unknown:
            raise TypeError(f"transformers backend: unknown setting(s) {unknown}; "
                            f"known: {sorted(known - {'model'})}")
        self.config = backend_settings(TransformersBackendConfig, self.option, {**settings, "model": model})
        self.name = f"transformers:{self.config.model_id or Path(self.config.model).name}"
        self.grammar_seconds = 0.0  # time spent masking logits, over the whole run
        self.grammar_steps = 0

    # ------------------------------------------------------------------ identity and loading
    def identity(self) -> dict[str, Any]:
        cfg = self.config
        ident: dict[str, Any] = {"backend": "transformers", "model": cfg.model_id or cfg.model}
        if cfg.gguf_file:
            ident["gguf_file"] = cfg.gguf_file
        if cfg.tokenizer:
            ident["tokenizer"] = cfg.tokenizer
        if cfg.adapter:
            ident.update(adapter_identity(cfg.adapter))
        ident["dtype"] = cfg.dtype
        ident["constrained_decoding"] = cfg.constrained_decoding
        if not cfg.gguf_file and generation_preferences(cfg.model):
            # Answers cached before the model's preferences were dropped were decoded with them.
            ident["generation_defaults"] = "ignored"
        if cfg.chat_template_kwargs:
            ident["chat_template_kwargs"] = cfg.chat_template_kwargs
        return ident

    def _load_key(self) -> str:
        cfg = asdict(self.config)
        for irrelevant in ("batch_size", "constrained_decoding", "chat_template_kwargs", "model_id"):
            cfg.pop(irrelevant)
        return stable_json(cfg)

    @property
    def loaded(self) -> _Loaded:
        key = self._load_key()
        with _LOAD_LOCK:
            if key not in _LOADED:
                try:
                    _LOADED[key] = _load(self.config)
                except ChatModelError:
                    raise
                except Exception as exc:  # unreadable weights, wrong folder...: the run cannot go on
                    raise ModelUnavailable(f"transformers backend: cannot load {self.config.model}: "
                                           f"{type(exc).__name__}: {' '.join(str(exc).split())[:400]}") from exc
            return _LOADED[key]

    def check(self) -> None:
        """The files the model needs are there (folder, GGUF file, config, tokenizer, adapter);
        nothing is loaded."""
        cfg = self.config
        if self._load_key() in _LOADED:
            return
        model_dir = Path(cfg.model).expanduser()
        if not model_dir.is_dir():
            raise ModelUnavailable(f"transformers backend: model directory {model_dir} does not exist "
                                   "(this backend reads local files only; download the model first)")
        if cfg.gguf_file:
            if not (model_dir / cfg.gguf_file).is_file():
                raise ModelUnavailable(f"transformers backend: GGUF file {cfg.gguf_file!r} not found in {model_dir}")
        elif not (model_dir / "config.json").is_file():
            raise ModelUnavailable(f"transformers backend: {model_dir} holds no config.json (not a model "
                                   "folder; for a GGUF file set llm.gguf_file)")
        if cfg.tokenizer and not Path(cfg.tokenizer).expanduser().exists():
            raise ModelUnavailable(f"transformers backend: tokenizer {cfg.tokenizer} does not exist")
        if cfg.adapter and not (Path(cfg.adapter).expanduser() / "adapter_config.json").is_file():
            raise ModelUnavailable(f"transformers backend: {cfg.adapter} holds no LoRA adapter "
                                   "(adapter_config.json missing)")

    @property
    def tokenizer(self) -> Any:
        return self.loaded.tokenizer

    def tokenizer_without_weights(self) -> Any:
        """The tokenizer, read without loading the weights (the loaded one when they already are):
        enough to count a prompt's tokens before a run sizes its units."""
        if self._load_key() in _LOADED:
            return self.tokenizer
        cfg = self.config
        if cfg.gguf_file and cfg.tokenizer is None:
            return gguf_tokenizer(cfg.model, cfg.gguf_file)
        from transformers import AutoTokenizer  # heavy, optional: the transformers backend only

        return AutoTokenizer.from_pretrained(cfg.tokenizer or cfg.model, trust_remote_code=cfg.trust_remote_code)

    @property
    def model(self) -> Any:
        return self.loaded.model

    def __repr__(self) -> str:
        cfg = self.config
        return (f"TransformersChatModel(model={cfg.model!r}, gguf_file={cfg.gguf_file!r}, "
                f"adapter={cfg.adapter!r}, dtype={cfg.dtype!r})")

    # ------------------------------------------------------------------ tokens
    def count_tokens(self, text: str) -> int:
        if not text:
            return 0
        return len(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def chunk_tokenizer(self) -> NamedTokenizer:
        cfg = self.config
        return NamedTokenizer(tokenizer_label(cfg.tokenizer or cfg.model_id or cfg.model), self.count_tokens)

    def _prompt_ids(self, messages: list[dict[str, str]]) -> list[int]:
        ids = self.tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True,
                                                 return_dict=True, **self.config.chat_template_kwargs)
        return list(ids["input_ids"])

    def count_prompt_tokens(self, messages: list[dict[str, str]]) -> int:
        return len(self._prompt_ids(messages))

    # ------------------------------------------------------------------ grammar
    def _compiled_grammar(self, schema: dict[str, Any], ebnf: str | None = None) -> Any | None:
        """The compiled grammar of ``ebnf`` when given, else of the JSON ``schema``; None (plain
        generation) when it cannot be built."""
        if self.config.constrained_decoding == "none":
            return None
        loaded = self.loaded
        key = ebnf if ebnf is not None else stable_json(schema)
        with loaded.grammar_lock:
            if key in loaded.compiled:
                loaded.compiled.move_to_end(key)
                return loaded.compiled[key]
            if loaded.grammar_broken:
                return None
            try:
                if loaded.grammar_compiler is None:
                    import xgrammar as xgr

                    vocab = max(loaded.model.config.vocab_size, len(loaded.tokenizer))
                    info = xgr.TokenizerInfo.from_huggingface(loaded.tokenizer, vocab_size=vocab,
                                                              stop_token_ids=sorted(loaded.eos_ids))
                    loaded.grammar_compiler = xgr.GrammarCompiler(info, max_threads=1)
            except Exception as exc:  # missing package or a tokenizer xgrammar cannot read
                loaded.grammar_broken = f"{type(exc).__name__}: {exc}"
                log.warning("constrained decoding unavailable (%s); generating without a grammar",
                            loaded.grammar_broken)
                return None
            try:
                # Compact JSON: no free whitespace, so a weak model cannot wander off in blanks.
                compiled = (loaded.grammar_compiler.compile_grammar(ebnf) if ebnf is not None else
                            loaded.grammar_compiler.compile_json_schema(
                                json.dumps(schema), any_whitespace=False, strict_mode=True))
            except Exception as exc:
                log.warning("could not build a grammar for this JSON schema (%s: %s); "
                            "generating without it", type(exc).__name__, exc)
                return None
            loaded.compiled[key] = compiled
            while len(loaded.compiled) > self._grammar_cache_size:
                loaded.compiled.popitem(last=False)
            return compiled

    # ------------------------------------------------------------------ generation
    def chat(self, request: ChatRequest) -> Completion:
        return self.chat_batch([request])[0]

    def context_length(self) -> int | None:
        """Most tokens (prompt + answer) the model's positions cover, when its config says."""
        value = getattr(self.loaded.model.config, "max_position_embeddings", None)
        return int(value) if value else None

    def answers_per_call(self) -> int | None:
        return self.config.batch_size

    def chat_batch(self, requests: list[ChatRequest]) -> list[Completion]:
        results: list[Completion | None] = [None] * len(requests)
        prompts: dict[int, list[int]] = {}
        limit = self.context_length()
        groups: dict[str, list[int]] = {}
        for i, req in enumerate(requests):
            ids = self._prompt_ids(req.messages)
            if limit is not None and len(ids) >= limit:
                results[i] = Completion(text="", prompt_tokens=len(ids), finish_reason="error", model=self.name,
                                        error=f"prompt of {len(ids)} tokens does not fit the model's "
                                              f"context of {limit} tokens")
                continue
            prompts[i] = ids
            sampled_with_seed = req.temperature > 0 and req.seed is not None
            # A seeded sample must not depend on its batch neighbours, so it runs alone.
            key = f"solo:{i}" if sampled_with_seed else stable_json(
                [req.max_tokens, req.temperature, req.top_p, req.stop,
                 req.json_schema is not None or req.grammar is not None])
            groups.setdefault(key, []).append(i)
        size = self.config.batch_size
        for members in groups.values():
            # prompts of similar length together: a batch is padded to its longest prompt
            members = sorted(members, key=lambda i: len(prompts[i]))
            for start in range(0, len(members), size):
                part = members[start:start + size]
                answers = self._generate([requests[i] for i in part], [prompts[i] for i in part])
                for i, completion in zip(part, answers):
                    results[i] = completion
        return [r for r in results if r is not None]

    def _generate(self, requests: list[ChatRequest], prompts: list[list[int]]) -> list[Completion]:
        try:
            return self._generate_unchecked(requests, prompts)
        except ChatModelError:
            raise
        except Exception as exc:
            if len(requests) > 1:
                log.warning("batch of %d failed (%s); retrying one by one", len(requests), exc)
                return [c for r, p in zip(requests, prompts) for c in self._generate([r], [p])]
            log.exception("generation failed")
            return [Completion(text="", prompt_tokens=len(prompts[0]), finish_reason="error", model=self.name,
                               error=f"{type(exc).__name__}: {exc}")]

    def _generate_unchecked(self, requests: list[ChatRequest], prompts: list[list[int]]) -> list[Completion]:
        import torch
        from transformers import GenerationConfig, LogitsProcessorList, TopPLogitsWarper

        loaded = self.loaded
        tok = loaded.tokenizer
        first = requests[0]
        width = max(len(p) for p in prompts)
        input_ids = torch.full((len(prompts), width), loaded.pad_id, dtype=torch.long)
        attention = torch.zeros((len(prompts), width), dtype=torch.long)
        for row, ids in enumerate(prompts):
            input_ids[row, width - len(ids):] = torch.tensor(ids, dtype=torch.long)
            attention[row, width - len(ids):] = 1
        limit = self.context_length()
        # Past the last position the answer would be noise; stop there and report a cut.
        max_new = first.max_tokens if limit is None else max(1, min(first.max_tokens, limit - width))

        sampling = first.temperature > 0
        gen = GenerationConfig(
            max_new_tokens=max_new, do_sample=sampling, num_beams=1,
            eos_token_id=sorted(loaded.eos_ids), pad_token_id=loaded.pad_id,
            stop_strings=list(first.stop) if first.stop else None,
            **({"temperature": first.temperature, "top_k": 0, "top_p": 1.0} if sampling else {}))
        processors = LogitsProcessorList()
        grammar: GrammarLogitsProcessor | None = None
        compiled = [self._compiled_grammar(r.json_schema, r.grammar) if r.json_schema or r.grammar else None
                    for r in requests]
        if any(c is not None for c in compiled):
            grammar = GrammarLogitsProcessor(compiled)
            processors.append(grammar)
        if sampling and first.top_p < 1.0:
            # Nucleus filtering after the grammar mask, so it never keeps only forbidden tokens.
            processors.append(TopPLogitsWarper(top_p=first.top_p))
        kwargs: dict[str, Any] = {"tokenizer": tok} if first.stop else {}

        with loaded.generate_lock, torch.inference_mode(), torch.random.fork_rng(devices=[]):
            start = time.perf_counter()
            if first.seed is not None:
                torch.manual_seed(first.seed)
            output = loaded.model.generate(
                input_ids=input_ids.to(loaded.device), attention_mask=attention.to(loaded.device),
                generation_config=gen, logits_processor=processors, **kwargs)
            seconds = time.perf_counter() - start
        if grammar is not None:
            self.grammar_seconds += grammar.seconds
            self.grammar_steps += grammar.calls

        completions = []
        # Rows that finish early are filled with the pad token, which may differ from the EOS.
        end_ids = loaded.eos_ids | {loaded.pad_id}
        for row, ids in enumerate(prompts):
            new = output[row, width:].tolist()
            end = next((k for k, t in enumerate(new) if t in end_ids), None)
            body = new if end is None else new[:end]
            used = len(new) if end is None else end + int(new[end] in loaded.eos_ids)
            text = tok.decode(body, skip_special_tokens=True)
            finish = "stop" if end is not None else ("length" if used >= max_new else "stop")
            if first.stop:
                cut = [text.find(s) for s in first.stop if s and s in text]
                if cut:
                    text, finish = text[:min(cut)], "stop"
            completions.append(Completion(
                text=text, prompt_tokens=len(ids), completion_tokens=used,
                seconds=seconds / len(prompts), finish_reason=finish, model=self.name))
        return completions

    def close(self) -> None:
        """Drop this model's weights from the process-wide cache."""
        with _LOAD_LOCK:
            _LOADED.pop(self._load_key(), None)
