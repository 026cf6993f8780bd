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
* A dead engine is not a bad request: engine death (``EngineDeadError``), CUDA running out of
  memory, a CUDA error or a replica process that died come back with
  ``error_kind="unavailable"`` for every request concerned, so a chunker fails the unit (no
  fallback chunks, nothing recorded as done) and a rerun asks again. The broken engine is shut
  down and a fresh one is started for the next batch.
* Decoding is what the request says and nothing more: ``top_k``, ``min_p`` and
  ``repetition_penalty`` are set to their neutral values (:mod:`litseg.llm.decoding`).
* :meth:`VLLMChatModel.close` shuts the engine down and returns its GPU memory, so that the next
  engine (the next student of an evaluation, or a trainer) finds it free.
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

from litseg.llm.base import ChatModel, ChatRequest, Completion, ModelUnavailable, adapter_identity, tokenizer_label
from litseg.errors import UNAVAILABLE
from litseg.segmentation.types import NamedTokenizer
from litseg.llm.config import VLLMBackendConfig, VLLMLLMConfig, backend_settings
from litseg.llm.decoding import NEUTRAL_SAMPLING

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
                              "top_p": spec["top_p"], **NEUTRAL_SAMPLING}
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


def _error_record(message: str, kind: str | None = None) -> dict[str, Any]:
    return {"text": "", "prompt_tokens": 0, "completion_tokens": 0, "cached_tokens": 0,
            "finish_reason": "error", "error": message, "error_kind": kind}


#: Exception classes (by name, anywhere in the class hierarchy, so that vLLM is not imported to
#: test them) that mean the engine, not the request, failed.
ENGINE_FAILURES = frozenset({"EngineDeadError", "OutOfMemoryError"})
#: Messages that mean the same when the exception type says nothing.
ENGINE_FAILURE_TEXT = ("CUDA out of memory", "CUDA error", "EngineCore", "Engine core")


def engine_failed(exc: BaseException) -> bool:
    """Whether ``exc`` says the engine (the GPU, its process) failed rather than the request."""
    if {cls.__name__ for cls in type(exc).__mro__} & ENGINE_FAILURES:
        return True
    text = str(exc)
    return any(marker in text for marker in ENGINE_FAILURE_TEXT)


def _unavailable(specs: list[dict[str, Any]], exc: BaseException) -> list[dict[str, Any]]:
    return [_error_record(f"vllm engine failed: {exc!r}", UNAVAILABLE) for _ in specs]


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
        if engine_failed(exc):
            log.error("vllm backend: the engine failed (%r); the batch of %d is unanswered", exc, len(specs))
            return _unavailable(specs, exc)
        if len(specs) == 1:
            log.warning("vllm backend: request failed: %r", exc)
            return [_error_record(f"vllm failed: {exc!r}")]
        log.warning("vllm backend: batch of %d failed (%r); running its requests one by one", len(specs), exc)
    records: list[dict[str, Any]] = []
    for i, spec in enumerate(specs):
        try:
            records.extend(call([spec]))
        except Exception as exc:
            if engine_failed(exc):  # the rest would meet the same dead engine
                return records + _unavailable(specs[i:], exc)
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
            outbox.put(("done", job_id, [_error_record(f"vllm replica {rank} failed: {exc!r}", UNAVAILABLE)
                                         for _ in specs]))


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
        # A shard whose replica died was never answered.
        return [r if r is not None else _error_record(failure, UNAVAILABLE) for r in results]

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
        # The settings not given are conf/llm/vllm.yaml's.
        self.config = backend_settings(VLLMBackendConfig, "vllm", {**settings, "model": model})
        self.name = f"vllm:{self.config.model_id or model}"
        self._llm: Any = None
        self._pool: _ReplicaPool | None = None
        self._lock = threading.Lock()  # vllm.LLM is not thread-safe: one batch at a time

    def identity(self) -> dict[str, Any]:
        cfg = self.config
        ident: dict[str, Any] = {"backend": "vllm", "model": cfg.model_id or cfg.model,
                                 "constrained_decoding": cfg.constrained_decoding}
        for key in ("revision", "tokenizer", "dtype", "quantization"):
            value = getattr(cfg, key)
            if value not in (None, "auto"):
                ident[key] = value
        if cfg.adapter:
            ident.update(adapter_identity(cfg.adapter))
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
            vllm = _import_vllm()
            try:
                self._llm = vllm.LLM(**self.config.llm_kwargs())
            except Exception as exc:  # weights missing, no GPU memory left...: nothing can be answered
                raise ModelUnavailable(f"vllm backend: the engine for {self.config.model} could not start: "
                                       f"{type(exc).__name__}: {' '.join(str(exc).split())[:400]}") from exc
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
            dead = any(r.get("error_kind") == UNAVAILABLE for r in records)
            if self._pool.broken or dead:  # start fresh replicas for the next batch
                self._pool.close()
                self._pool = None
        else:
            records = run_batch(self.engine, specs, self.config)
            if any(r.get("error_kind") == UNAVAILABLE for r in records):
                self._release()  # a dead engine answers nothing more; the next batch starts a fresh one
        share = (time.perf_counter() - started) / len(specs)
        return [Completion(text=r["text"], prompt_tokens=r["prompt_tokens"], completion_tokens=r["completion_tokens"],
                           cached_tokens=r["cached_tokens"], seconds=share, finish_reason=r["finish_reason"],
                           model=self.config.model, error=r["error"], error_kind=r.get("error_kind"))
                for r in records]

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

    def _release(self) -> None:
        llm, self._llm = self._llm, None
        if llm is not None:
            release_engine(llm)

    def close(self) -> None:
        """Shut the engine (or the replicas) down and return the GPU memory."""
        with self._lock:
            if self._pool is not None:
                self._pool.close()
                self._pool = None
            self._release()


def release_engine(llm: Any) -> None:
    """Stop a ``vllm.LLM`` and hand its GPU memory back. Dropping the reference is not enough: the
    V1 engine core runs in a process of its own until told to stop, and PyTorch keeps the memory
    this process freed in its cache. Each step is best effort (older and newer releases differ)."""
    import gc

    core = getattr(getattr(llm, "llm_engine", None), "engine_core", None)
    for stop in (getattr(llm, "shutdown", None), getattr(core, "shutdown", None)):
        if callable(stop):
            try:
                stop()
                break
            except Exception as exc:  # noqa: BLE001 - an engine that died may not stop cleanly
                log.warning("vllm backend: stopping the engine failed: %r", exc)
    del llm, core
    gc.collect()
    try:
        from vllm.distributed.parallel_state import destroy_distributed_environment, destroy_model_parallel

        destroy_model_parallel()
        destroy_distributed_environment()
    except Exception:  # noqa: BLE001 - absent in some releases, or nothing to destroy
        log.debug("vllm backend: no parallel state to destroy", exc_info=True)
    try:
        import torch

        if torch.cuda.is_available():
            torch.cuda.empty_cache()
    except ImportError:
        pass
