"""Chat backend on vLLM's offline engine (``llm=vllm``).

``vllm`` is imported only when the engine is first needed, never when ``litseg.llm`` is imported,
so CPU installs and CI never touch it. :meth:`VLLMChatModel.chat_batch` hands the whole batch to
one ``LLM.chat`` call (a list of conversations with one ``SamplingParams`` each), which lets vLLM
schedule it continuously; outputs come back in request order.

* JSON-schema requests use vLLM's structured outputs, found by feature detection:
  ``SamplingParams(structured_outputs=StructuredOutputsParams(json=...))`` in recent releases,
  ``SamplingParams(guided_decoding=GuidedDecodingParams(json=...))`` in older ones.
* Prefix caching is on by default: the prompts of one book share their long instruction prefix.
* ``tensor_parallel_size`` splits one engine over GPUs; ``data_parallel_size`` > 1 starts that
  many independent engine replicas in child processes, each pinned to its own group of
  ``tensor_parallel_size`` GPUs, and splits every batch into contiguous shards among them.
* A LoRA adapter (``adapter``) is applied to every request through ``LoRARequest``.
* Token counts come from each ``RequestOutput``: ``prompt_token_ids``, ``outputs[0].token_ids``
  and ``num_cached_tokens`` when the version reports it. ``Completion.seconds`` is the batch's
  wall time shared evenly among its requests.
* If vLLM rejects a whole batch (say one prompt longer than ``max_model_len``), the requests are
  run one by one so only the offending ones come back with ``error`` set.
"""

from __future__ import annotations

import atexit
import logging
import multiprocessing
import os
import queue
import threading
import time
from pathlib import Path
from dataclasses import asdict, fields
from typing import Any

from litseg.llm.base import ChatModel, ChatRequest, Completion, ModelUnavailable, tokenizer_label
from litseg.segmentation.types import NamedTokenizer
from litseg.llm.config import VLLMBackendConfig, VLLMLLMConfig

log = logging.getLogger(__name__)

_warned_no_structured_outputs = False


def _import_vllm() -> Any:
    try:
        import vllm
    except ImportError as exc:
        raise RuntimeError("llm=vllm needs the vllm package (CUDA only): pip install 'litseg[vllm]'; "
                           "without a GPU use llm=openai against a server, or the transformers backend") from exc
    return vllm


def structured_output_kwargs(schema: dict[str, Any] | None, grammar: str | None = None) -> dict[str, Any]:
    """SamplingParams keywords that constrain decoding to ``grammar`` (EBNF, when given) or else to
    the JSON ``schema`` in the installed vLLM (its xgrammar backend reads the same EBNF dialect)."""
    global _warned_no_structured_outputs
    import vllm.sampling_params as sampling

    spec = {"grammar": grammar} if grammar is not None else {"json": schema}
    if hasattr(sampling, "StructuredOutputsParams"):
        return {"structured_outputs": sampling.StructuredOutputsParams(**spec)}
    if hasattr(sampling, "GuidedDecodingParams"):
        return {"guided_decoding": sampling.GuidedDecodingParams(**spec)}
    if not _warned_no_structured_outputs:
        log.warning("vllm backend: this vLLM has neither StructuredOutputsParams nor GuidedDecodingParams; "
                    "JSON-schema requests are decoded unconstrained and rely on validation")
        _warned_no_structured_outputs = True
    return {}


def _request_spec(req: ChatRequest) -> dict[str, Any]:
    # Plain data, so a request can be sent to a replica process.
    return {"messages": req.messages, "max_tokens": req.max_tokens, "temperature": req.temperature,
            "top_p": req.top_p, "seed": req.seed, "stop": req.stop, "json_schema": req.json_schema,
            "grammar": req.grammar}


def _sampling_params(vllm: Any, spec: dict[str, Any], structured: bool) -> Any:
    kwargs: dict[str, Any] = {"max_tokens": spec["max_tokens"], "temperature": spec["temperature"],
                              "top_p": spec["top_p"]}
    if spec["seed"] is not None:
        kwargs["seed"] = spec["seed"]
    if spec["stop"]:
        kwargs["stop"] = list(spec["stop"])
    if structured and (spec["json_schema"] is not None or spec.get("grammar") is not None):
        kwargs.update(structured_output_kwargs(spec["json_schema"], spec.get("grammar")))
    return vllm.SamplingParams(**kwargs)


def _record(output: Any) -> dict[str, Any]:
    first = output.outputs[0]
    return {
        "text": first.text,
        "prompt_tokens": len(output.prompt_token_ids or []),
        "completion_tokens": len(first.token_ids or []),
        "cached_tokens": int(getattr(output, "num_cached_tokens", 0) or 0),
        "finish_reason": first.finish_reason or "stop",
        "error": None,
    }


def _error_record(message: str) -> dict[str, Any]:
    return {"text": "", "prompt_tokens": 0, "completion_tokens": 0, "cached_tokens": 0,
            "finish_reason": "error", "error": message}


def run_batch(llm: Any, specs: list[dict[str, Any]], cfg: VLLMBackendConfig) -> list[dict[str, Any]]:
    """One ``LLM.chat`` call for all ``specs``; on failure, one call per request."""
    if not specs:
        return []
    vllm = _import_vllm()
    kwargs: dict[str, Any] = {"use_tqdm": cfg.use_tqdm}
    if cfg.adapter:
        from vllm.lora.request import LoRARequest

        kwargs["lora_request"] = LoRARequest(cfg.adapter_name, 1, cfg.adapter)
    if cfg.chat_template_kwargs:
        kwargs["chat_template_kwargs"] = cfg.chat_template_kwargs

    def call(batch: list[dict[str, Any]]) -> list[dict[str, Any]]:
        params = [_sampling_params(vllm, s, cfg.constrained_decoding) for s in batch]
        outputs = llm.chat([s["messages"] for s in batch], sampling_params=params, **kwargs)
        if len(outputs) != len(batch):
            raise RuntimeError(f"vLLM returned {len(outputs)} outputs for {len(batch)} conversations")
        return [_record(o) for o in outputs]

    try:
        return call(specs)
    except Exception as exc:
        if len(specs) == 1:
            log.warning("vllm backend: request failed: %r", exc)
            return [_error_record(f"vllm failed: {exc!r}")]
        log.warning("vllm backend: batch of %d failed (%r); running its requests one by one", len(specs), exc)
    records = []
    for spec in specs:
        try:
            records.extend(call([spec]))
        except Exception as exc:
            records.append(_error_record(f"vllm failed: {exc!r}"))
    return records


# ---------------------------------------------------------------------- data-parallel replicas
def _device_groups(replicas: int, per_replica: int) -> list[str]:
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    ids = [d.strip() for d in visible.split(",") if d.strip()] if visible else \
        [str(i) for i in range(replicas * per_replica)]
    if len(ids) < replicas * per_replica:
        raise ValueError(f"vllm backend: data_parallel_size={replicas} x tensor_parallel_size={per_replica} "
                         f"needs {replicas * per_replica} GPUs, CUDA_VISIBLE_DEVICES lists {len(ids)}")
    return [",".join(ids[r * per_replica:(r + 1) * per_replica]) for r in range(replicas)]


def _replica_main(rank: int, devices: str, settings: dict[str, Any], inbox: Any, outbox: Any) -> None:
    os.environ["CUDA_VISIBLE_DEVICES"] = devices  # before vllm (and CUDA) is imported in this process
    try:
        cfg = VLLMBackendConfig(**settings)
        llm = _import_vllm().LLM(**cfg.llm_kwargs())
    except BaseException as exc:
        outbox.put(("failed", rank, repr(exc)))
        return
    outbox.put(("ready", rank, None))
    while True:
        job = inbox.get()
        if job is None:
            break
        job_id, specs = job
        try:
            outbox.put(("done", job_id, run_batch(llm, specs, cfg)))
        except BaseException as exc:  # keep the replica alive for the next batch
            outbox.put(("done", job_id, [_error_record(f"vllm replica {rank} failed: {exc!r}") for _ in specs]))


class _ReplicaPool:
    """Independent engines in spawned processes; batches are split into contiguous shards."""

    def __init__(self, cfg: VLLMBackendConfig) -> None:
        ctx = multiprocessing.get_context("spawn")
        groups = _device_groups(cfg.data_parallel_size, cfg.tensor_parallel_size)
        settings = asdict(cfg)
        self.outbox = ctx.Queue()
        self.inboxes = [ctx.Queue() for _ in groups]
        # Not daemonic: vLLM starts engine processes of its own, which daemons may not do.
        self.procs = [ctx.Process(target=_replica_main, args=(rank, devices, settings, self.inboxes[rank],
                                                              self.outbox), name=f"litseg-vllm-{rank}")
                      for rank, devices in enumerate(groups)]
        for proc in self.procs:
            proc.start()
        atexit.register(self.close)
        self._job = 0
        self.broken = False
        ready: set[int] = set()
        deadline = time.monotonic() + cfg.replica_start_timeout_s
        while len(ready) < len(self.procs):
            kind, rank, detail = self._next_message(deadline)
            if kind == "failed":
                self.close()
                raise RuntimeError(f"vllm backend: replica {rank} could not start: {detail}")
            ready.add(rank)
        log.info("vllm backend: %d replicas ready on GPU groups %s", len(self.procs), groups)

    def _next_message(self, deadline: float) -> tuple[Any, ...]:
        while True:
            try:
                return self.outbox.get(timeout=1.0)
            except queue.Empty:
                dead = [p.name for p in self.procs if not p.is_alive()]
                if dead:
                    self.close()
                    raise RuntimeError(f"vllm backend: replica process(es) died: {dead}") from None
                if time.monotonic() > deadline:
                    self.close()
                    raise RuntimeError("vllm backend: replicas did not answer in time") from None

    def run(self, specs: list[dict[str, Any]]) -> list[dict[str, Any]]:
        n = len(self.procs)
        # Contiguous shards keep neighbouring requests (same book, same prefix) on one replica's cache.
        bounds = [round(i * len(specs) / n) for i in range(n + 1)]
        jobs: dict[int, tuple[int, int]] = {}
        for rank in range(n):
            lo, hi = bounds[rank], bounds[rank + 1]
            if lo == hi:
                continue
            self._job += 1
            jobs[self._job] = (lo, hi)
            self.inboxes[rank].put((self._job, specs[lo:hi]))
        results: list[dict[str, Any] | None] = [None] * len(specs)
        failure = "vllm replica returned nothing"
        while jobs:
            try:
                kind, job_id, records = self._next_message(float("inf"))
            except RuntimeError as exc:  # a replica died: its shard (and any pending one) fails, the run goes on
                failure = str(exc)
                self.broken = True
                break
            if kind != "done" or job_id not in jobs:
                continue
            lo, hi = jobs.pop(job_id)
            results[lo:hi] = records
        return [r if r is not None else _error_record(failure) for r in results]

    def close(self) -> None:
        for inbox, proc in zip(self.inboxes, self.procs):
            if proc.is_alive():
                inbox.put(None)
        for proc in self.procs:
            proc.join(timeout=30)
            if proc.is_alive():
                proc.terminate()
                proc.join(timeout=5)
        self.procs = [p for p in self.procs if p.is_alive()]


# ---------------------------------------------------------------------- the backend
class VLLMChatModel(ChatModel):
    """``VLLMChatModel(model="Qwen/Qwen2.5-7B-Instruct", tensor_parallel_size=2, adapter=...)``."""

    config_class = VLLMLLMConfig

    @classmethod
    def from_config(cls, section: VLLMLLMConfig) -> VLLMChatModel:
        return cls(**section.settings())

    def __init__(self, model: str, **settings: Any) -> None:
        known = {f.name for f in fields(VLLMBackendConfig)}
        unknown = sorted(set(settings) - known)
        if unknown:
            raise TypeError(f"vllm backend: unknown setting(s) {unknown}; known: {sorted(known - {'model'})}; "
                            "other vllm.LLM arguments go under engine_kwargs")
        self.config = VLLMBackendConfig(model=model, **settings)
        self.name = f"vllm:{self.config.model_id or model}"
        self._llm: Any = None
        self._pool: _ReplicaPool | None = None
        self._lock = threading.Lock()  # vllm.LLM is not thread-safe: one batch at a time

    def identity(self) -> dict[str, Any]:
        cfg = self.config
        ident: dict[str, Any] = {"backend": "vllm", "model": cfg.model_id or cfg.model,
                                 "constrained_decoding": cfg.constrained_decoding}
        for key in ("revision", "tokenizer", "dtype", "quantization", "adapter"):
            value = getattr(cfg, key)
            if value not in (None, "auto"):
                ident[key] = value
        if cfg.chat_template_kwargs:
            ident["chat_template_kwargs"] = cfg.chat_template_kwargs
        return ident

    def __repr__(self) -> str:
        cfg = self.config
        return (f"VLLMChatModel(model={cfg.model!r}, tp={cfg.tensor_parallel_size}, "
                f"dp={cfg.data_parallel_size}, lora={cfg.adapter!r})")

    def check(self) -> None:
        """vllm importable, and a model or adapter given as a local path exists (a hub name is
        left to vllm); nothing is loaded."""
        import importlib.util

        if importlib.util.find_spec("vllm") is None:
            raise ModelUnavailable("llm=vllm needs the vllm package (CUDA only): pip install 'litseg[vllm]'; "
                                   "without a GPU use llm=openai against a server, or the transformers backend")
        for label, value in (("model", self.config.model), ("adapter", self.config.adapter)):
            if value and str(value).startswith(("/", "./", "../", "~")) and not Path(value).expanduser().exists():
                raise ModelUnavailable(f"vllm backend: {label} {value} does not exist")

    @property
    def engine(self) -> Any:
        """The in-process ``vllm.LLM`` (built on first use; not used when data_parallel_size > 1)."""
        if self._llm is None:
            self._llm = _import_vllm().LLM(**self.config.llm_kwargs())
        return self._llm

    def chat(self, request: ChatRequest) -> Completion:
        return self.chat_batch([request])[0]

    def answers_per_call(self) -> int | None:
        return self.config.max_batch_size

    def chat_batch(self, requests: list[ChatRequest]) -> list[Completion]:
        if not requests:
            return []
        specs = [_request_spec(r) for r in requests]
        size = self.config.max_batch_size or len(specs)
        completions: list[Completion] = []
        with self._lock:
            for start in range(0, len(specs), size):
                completions.extend(self._run(specs[start:start + size]))
        return completions

    def _run(self, specs: list[dict[str, Any]]) -> list[Completion]:
        started = time.perf_counter()
        if self.config.data_parallel_size > 1:
            if self._pool is None:
                self._pool = _ReplicaPool(self.config)
            records = self._pool.run(specs)
            if self._pool.broken:  # start fresh replicas for the next batch
                self._pool.close()
                self._pool = None
        else:
            records = run_batch(self.engine, specs, self.config)
        share = (time.perf_counter() - started) / len(specs)
        return [Completion(text=r["text"], prompt_tokens=r["prompt_tokens"], completion_tokens=r["completion_tokens"],
                           cached_tokens=r["cached_tokens"], seconds=share, finish_reason=r["finish_reason"],
                           model=self.config.model, error=r["error"]) for r in records]

    def count_tokens(self, text: str) -> int:
        # Only with an engine already loaded: loading one just to count would be absurd.
        if self._llm is not None and text:
            return len(self._llm.get_tokenizer().encode(text, add_special_tokens=False))
        return super().count_tokens(text)

    def chunk_tokenizer(self) -> NamedTokenizer | None:
        if self._llm is None:  # count_tokens would only estimate
            return None
        cfg = self.config
        return NamedTokenizer(tokenizer_label(cfg.tokenizer or cfg.model_id or cfg.model), self.count_tokens)

    def count_prompt_tokens(self, messages: list[dict[str, str]]) -> int:
        if self._llm is not None:
            ids = self._llm.get_tokenizer().apply_chat_template(
                messages, tokenize=True, add_generation_prompt=True, **self.config.chat_template_kwargs)
            return len(ids)
        return super().count_prompt_tokens(messages)

    def close(self) -> None:
        with self._lock:
            if self._pool is not None:
                self._pool.close()
                self._pool = None
            self._llm = None
