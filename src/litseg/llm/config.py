"""The typed ``llm`` (and ``judge_llm``) config section: one schema, one class per backend.

A section is the common part (``backend``, ``cache``, ``context_window``) plus the settings of its
backend, flat as in ``conf/llm/<backend>.yaml``. :class:`LLMConfig` is the schema registered for
both groups; its ``__config_dispatch__`` reads ``backend`` and picks the class the backend's factory
declares (``config_class``), so every YAML is checked strictly against its own backend's fields
and :func:`~litseg.llm.factory.build_llm` builds every model the same way:
``factory.from_config(section)``.

The backends' settings classes (:class:`OpenAIBackendConfig`, :class:`TransformersBackendConfig`,
:class:`VLLMBackendConfig`) hold the field list once; the section classes add the common part and
leave the value checks to the backend, which builds (and validates) its settings from the section.
A setting's default has one home, ``conf/llm/<backend>.yaml`` (docs/extending.md): a field the YAML
writes has no default here (only the client's tuning knobs the YAML leaves out keep one). Settings
given from Python with only some values (a backend's constructor, :func:`backend_settings`; an llm
section written in code, :func:`~litseg.llm.factory.llm_config_from`) get the rest from that file
(:func:`shipped_llm_settings`), so a config written in code and one composed by Hydra give the same
model.

Pure Python: no torch, no httpx, no vllm here.
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, TypeVar

from litseg.llm.backends import available_backends, get_backend
from litseg.models import resolve_adapter
from litseg.utils.config import ConfigError, check_value, config_schema, from_dict, shipped_option

S = TypeVar("S")


@dataclass
class CacheConfig:
    """``llm.cache``: the SQLite response cache around the backend. Its values have their home in the
    ``cache:`` section of each backend's conf/llm file; a cache written in code takes the ones it
    leaves out from its backend's file (:func:`shipped_cache_settings`)."""

    enabled: bool | None  # null: on when a path is given
    path: str | None
    replay: bool  # answer from the file only, never load the model
    timeout_s: float  # SQLite busy timeout


@config_schema("judge_llm", entry="train", key="judge_llm", default_option="embedded")
@config_schema("llm", entry="annotate", default_option="embedded")
@dataclass(kw_only=True)
class LLMConfig:
    """What every backend's section holds; the rest belongs to the backend (``__config_dispatch__``)."""

    backend: str
    # The YAML files always say; a config written in code may leave it out (build_llm: no cache).
    cache: CacheConfig | None
    # Tokens the model reads, for preprocess.max_words=auto (read by the run, never by the backend).
    context_window: int | None

    COMMON: ClassVar[frozenset[str]] = frozenset({"backend", "cache", "context_window"})

    @classmethod
    def __config_dispatch__(cls, data: Mapping[str, Any], where: str) -> type:
        backend = data.get("backend")
        if not backend:
            raise ConfigError(f"{where or 'llm'} config needs a backend; available: {', '.join(available_backends())}")
        schema = getattr(get_backend(str(backend)), "config_class", None)
        # A plug-in backend without a config class takes its settings as keywords, kept as given.
        return PluginLLMConfig if schema is None else schema

    def __post_init__(self) -> None:
        """A section is typed only; its backend checks the values when it is built."""

    def settings(self) -> dict[str, Any]:
        """The backend's own settings (everything but the common part), as keyword arguments."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name not in self.COMMON}


def shipped_llm_settings(option: str) -> dict[str, Any]:
    """``conf/llm/<option>.yaml`` as the section Hydra composes from it (its ``${oc.env:...}`` values
    resolved), less ``backend``, ``cache`` and a value it leaves to the user (``???``): the one home
    of a backend's defaults, for settings given from Python (:func:`backend_settings`,
    :func:`~litseg.llm.factory.llm_config_from`). Empty for a backend without a file there (a plug-in)."""
    from omegaconf import OmegaConf

    node = OmegaConf.create(shipped_option("llm", option))
    resolved = OmegaConf.to_container(node, resolve=True, throw_on_missing=False)
    assert isinstance(resolved, dict)
    return {str(k): v for k, v in resolved.items()
            if k not in ("backend", "cache") and not OmegaConf.is_missing(node, k)}


def shipped_cache_settings(option: str) -> dict[str, Any]:
    """The ``cache:`` section of ``conf/llm/<option>.yaml`` (resolved), the home of the values a cache
    written in code leaves out; empty for a backend without one (a plug-in: its code names them all)."""
    from omegaconf import OmegaConf

    cache = shipped_option("llm", option).get("cache")
    if not isinstance(cache, Mapping):
        return {}
    resolved = OmegaConf.to_container(OmegaConf.create(dict(cache)), resolve=True)
    assert isinstance(resolved, dict)
    return {str(k): v for k, v in resolved.items()}


def backend_settings(config: type[S], option: str, given: Mapping[str, Any]) -> S:
    """The settings class ``config`` of backend ``option`` (a backend's constructor): the settings
    ``given``, the rest from ``conf/llm/<option>.yaml`` (:func:`shipped_llm_settings`)."""
    hints = typing.get_type_hints(config)
    names = {f.name for f in dataclasses.fields(config)}  # type: ignore[arg-type]
    # Checked as a composed section is (an integer the YAML writes for a float field becomes a float).
    shipped = {k: check_value(v, hints[k], f"llm.{k}") for k, v in shipped_llm_settings(option).items()
               if k in names and k not in given}
    return config(**{**shipped, **given})


# ------------------------------------------------------------------------------ OpenAI-compatible
LOAD_BALANCING = ("least_in_flight", "round_robin")


def normalise_base_url(url: str) -> str:
    url = url.strip().rstrip("/")
    if not url.startswith(("http://", "https://")):
        raise ValueError(f"openai backend: base URL must start with http:// or https://, got {url!r}")
    if url.endswith("/chat/completions"):
        url = url[: -len("/chat/completions")]
    # "http://host:8000" means the usual API root.
    if url.count("/") == 2:
        url += "/v1"
    return url


@dataclass(kw_only=True)
class OpenAIBackendConfig:
    """Settings of :class:`~litseg.llm.openai_backend.OpenAIChatModel`; their values are
    ``conf/llm/openai.yaml``'s (the fields it does not list are tuning knobs of the client)."""

    model: str
    # One URL, a list, or a comma-separated string; each ends with the API root (``.../v1``).
    base_urls: list[str] | str
    api_key_env: str
    max_concurrency: int
    # httpx's pool slows down quadratically with its size, so connections are spread over several
    # small clients per endpoint (measured: 128 concurrent requests 12 s with one pool, 1.9 s with 8s).
    connections_per_client: int = 8
    timeout_s: float  # read/write/pool timeout of one attempt
    connect_timeout_s: float
    max_retries: int  # attempts = 1 + max_retries
    backoff_base_s: float
    backoff_max_s: float
    max_retry_after_s: float  # cap on a server's Retry-After
    constrained_decoding: bool  # send response_format=json_schema when a request has a schema
    schema_name: str
    strict_schema: bool
    load_balancing: str
    endpoint_cooldown_s: float = 2.0
    max_tokens_field: str  # some hosted models want "max_completion_tokens"
    send_seed: bool
    # Send top_k=-1, min_p=0, repetition_penalty=1 so that the server's model defaults (vllm serve
    # applies generation_config.json to unsent fields) never change the decoding (llm.decoding).
    neutral_sampling: bool
    extra_body: dict[str, Any]  # e.g. {"chat_template_kwargs": {...}}
    extra_headers: dict[str, str]
    identity_tag: str  # tells apart servers that report the same model name (quantisation...)
    trust_env: bool = True  # honour HTTP(S)_PROXY / NO_PROXY from the environment
    jitter_seed: int | None = None
    startup_check: bool  # check(): GET /models before a run (server up, key accepted, model served)

    def __post_init__(self) -> None:
        if isinstance(self.base_urls, str):
            self.base_urls = [u for u in (p.strip() for p in self.base_urls.split(",")) if u]
        self.base_urls = [normalise_base_url(u) for u in self.base_urls]
        if not self.base_urls:
            raise ValueError("openai backend: base_urls is empty")
        if not self.model:
            raise ValueError("openai backend: model is empty (use the name the server lists at /v1/models)")
        for name in ("max_concurrency", "connections_per_client"):
            if getattr(self, name) < 1:
                raise ValueError(f"openai backend: {name} must be >= 1, got {getattr(self, name)}")
        if self.max_retries < 0:
            raise ValueError(f"openai backend: max_retries must be >= 0, got {self.max_retries}")
        if self.load_balancing not in LOAD_BALANCING:
            raise ValueError(f"openai backend: load_balancing must be one of {LOAD_BALANCING}, "
                             f"got {self.load_balancing!r}")
        if any(k.lower() in ("authorization", "api-key", "x-api-key") for k in self.extra_headers):
            raise ValueError("openai backend: do not put credentials in extra_headers; export the key in "
                             f"the environment variable named by api_key_env ({self.api_key_env})")
        self.extra_body = dict(self.extra_body or {})
        self.extra_headers = dict(self.extra_headers or {})


@dataclass(kw_only=True)
class OpenAILLMConfig(LLMConfig, OpenAIBackendConfig):
    """``backend: openai`` (conf/llm/openai.yaml; conf/judge_llm/server.yaml composes it)."""


# ------------------------------------------------------------------------------ transformers
CONSTRAINED_ENGINES = ("xgrammar", "none")


@dataclass(kw_only=True)
class TransformersBackendConfig:
    """Settings of :class:`~litseg.llm.transformers_backend.TransformersChatModel`; their values are
    ``conf/llm/transformers.yaml``'s (``conf/llm/embedded.yaml``'s for the embedded model)."""

    model: str
    gguf_file: str | None  # a .gguf file name inside ``model`` (a directory)
    tokenizer: str | None  # defaults to ``model`` (and ``gguf_file``)
    adapter: str | None  # LoRA adapter directory (peft)
    merge_adapter: bool  # fold the adapter into the weights: same answers, faster decoding
    dtype: str  # auto | float32 | bfloat16 | float16
    device: str  # auto | cpu | cuda | cuda:1 | mps
    batch_size: int  # requests per generate() call in chat_batch
    constrained_decoding: Literal["xgrammar", "none"]
    chat_template_kwargs: dict[str, Any]
    convert_gguf: bool = True  # keep a safetensors copy of a dequantized GGUF for fast reloads
    num_threads: int | None  # torch CPU threads; None keeps torch's (OMP_NUM_THREADS) choice
    model_id: str | None  # stable name for the cache key instead of the local path
    trust_remote_code: bool = False

    def __post_init__(self) -> None:
        if not self.model:
            raise ValueError("transformers backend: model is empty (a local model directory)")
        if self.constrained_decoding not in CONSTRAINED_ENGINES:
            raise ValueError(f"transformers backend: constrained_decoding must be one of "
                             f"{CONSTRAINED_ENGINES}, got {self.constrained_decoding!r}")
        if self.batch_size < 1:
            raise ValueError(f"transformers backend: batch_size must be >= 1, got {self.batch_size}")
        self.chat_template_kwargs = dict(self.chat_template_kwargs or {})
        self.model = str(self.model)
        if self.adapter is not None:
            self.adapter = resolve_adapter(str(self.adapter))  # a path, or the name of a shipped adapter


@dataclass(kw_only=True)
class TransformersLLMConfig(LLMConfig, TransformersBackendConfig):
    """``backend: transformers`` (conf/llm/transformers.yaml)."""


@dataclass(kw_only=True)
class EmbeddedLLMConfig(LLMConfig, TransformersBackendConfig):
    """``backend: embedded``: the transformers backend on the embedded GGUF (conf/llm/embedded.yaml,
    conf/llm/student.yaml); ``model`` and ``gguf_file`` are fixed and must stay empty (the YAML
    names neither)."""

    model: str | None = None  # type: ignore[assignment]
    gguf_file: str | None = None


# ------------------------------------------------------------------------------ vLLM
@dataclass(kw_only=True)
class VLLMBackendConfig:
    """Settings of :class:`~litseg.llm.vllm_backend.VLLMChatModel`; their values are ``conf/llm/vllm.yaml``'s."""

    model: str  # hub name or local directory
    model_id: str | None  # the cache's name for the weights when ``model`` is a local path
    tokenizer: str | None
    revision: str | None
    dtype: str
    quantization: str | None
    tensor_parallel_size: int
    data_parallel_size: int  # engine replicas, each on tensor_parallel_size GPUs of its own
    gpu_memory_utilization: float
    max_model_len: int | None
    enable_prefix_caching: bool
    enforce_eager: bool
    trust_remote_code: bool
    seed: int
    adapter: str | None  # LoRA adapter directory, applied to every request
    adapter_name: str
    max_lora_rank: int
    constrained_decoding: bool  # JSON-schema requests use vLLM's structured outputs
    chat_template_kwargs: dict[str, Any]
    engine_kwargs: dict[str, Any]  # anything else vllm.LLM accepts
    max_batch_size: int | None  # split very large batches into LLM.chat calls of this size
    use_tqdm: bool
    replica_start_timeout_s: float = 1800.0  # loading big weights on every replica takes a while

    def __post_init__(self) -> None:
        if not self.model:
            raise ValueError("vllm backend: model is empty")
        for name in ("tensor_parallel_size", "data_parallel_size"):
            if int(getattr(self, name)) < 1:
                raise ValueError(f"vllm backend: {name} must be >= 1, got {getattr(self, name)}")
        if not 0 < self.gpu_memory_utilization <= 1:
            raise ValueError(f"vllm backend: gpu_memory_utilization must be in (0, 1], "
                             f"got {self.gpu_memory_utilization}")
        if self.max_batch_size is not None and self.max_batch_size < 1:
            raise ValueError(f"vllm backend: max_batch_size must be >= 1, got {self.max_batch_size}")
        self.chat_template_kwargs = dict(self.chat_template_kwargs or {})
        self.engine_kwargs = dict(self.engine_kwargs or {})

    def llm_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for ``vllm.LLM`` (one engine; data parallelism is handled above it)."""
        kwargs: dict[str, Any] = {
            "model": self.model,
            "dtype": self.dtype,
            "tensor_parallel_size": self.tensor_parallel_size,
            "gpu_memory_utilization": self.gpu_memory_utilization,
            "enable_prefix_caching": self.enable_prefix_caching,
            "enforce_eager": self.enforce_eager,
            "trust_remote_code": self.trust_remote_code,
            "seed": self.seed,
        }
        optional = {"tokenizer": self.tokenizer, "revision": self.revision, "quantization": self.quantization,
                    "max_model_len": self.max_model_len}
        kwargs.update({k: v for k, v in optional.items() if v is not None})
        if self.adapter:
            kwargs["enable_lora"] = True
            kwargs["max_lora_rank"] = self.max_lora_rank
        kwargs.update(self.engine_kwargs)
        return kwargs


@dataclass(kw_only=True)
class VLLMLLMConfig(LLMConfig, VLLMBackendConfig):
    """``backend: vllm`` (conf/llm/vllm.yaml)."""


# ------------------------------------------------------------------------------ no model at all
@dataclass(kw_only=True)
class ScriptedLLMConfig(LLMConfig):
    """``backend: scripted``: answers from a list (tests, dry runs; conf/judge_llm/scripted.yaml). The
    values of ``answers``, ``name`` and ``cycle`` have their home in conf/llm/scripted.yaml: a section
    written in code gets what it leaves out from there (llm_config_from)."""

    context_window: int | None = None
    answers: list[Any] | None  # strings, or ready Completions from code
    name: str
    cycle: bool  # start the list again when it runs out
    truncate: bool = False  # cut an answer longer than max_tokens (finish_reason "length")


@dataclass(kw_only=True)
class ReplayLLMConfig(LLMConfig):
    """``backend: replay``: answers from a recorded response cache (conf/llm/replay.yaml, the home of
    its values: a section written in code gets what it leaves out from there, llm_config_from)."""

    identity: dict[str, Any] | None  # the recorded model; null: the file's only model
    path: str | None = None  # the cache file (default: cache.path)


# ------------------------------------------------------------------------------ a plug-in's own keywords
@dataclass(kw_only=True)
class PluginLLMConfig(LLMConfig):
    """A backend without a ``config_class`` (``@register_backend("mine")`` on a class taking keywords,
    or ``backend: module:attr``): the common part typed, the backend's own settings kept as the
    mapping given (``options``), handed to it as keyword arguments."""

    options: dict[str, Any]

    @classmethod
    def __config_build__(cls, data: Mapping[str, Any], where: str) -> PluginLLMConfig:
        where = where or "llm"
        cache = data.get("cache")  # a section written in code may leave it out: no cache
        context_window = data.get("context_window")
        if context_window is not None and (isinstance(context_window, bool) or not isinstance(context_window, int)):
            raise ConfigError(f"{where}.context_window: expected an integer, got {context_window!r}")
        return cls(backend=str(data["backend"]),
                   cache=from_dict(CacheConfig, cache, f"{where}.cache") if cache is not None else None,
                   context_window=context_window,
                   options={k: v for k, v in data.items() if k not in cls.COMMON})

    def settings(self) -> dict[str, Any]:
        return dict(self.options)
