"""The unit word cap of a run: ``preprocess.max_words`` as a number, or ``auto``.

With ``auto`` the cap is what the chosen chat model's context window can hold once the method's
prompt and answer budget are taken out, counted in that model's own tokens::

    cap = floor((window * (1 - margin) - prompt_tokens - answer_tokens) / tokens_per_word)

* ``window``: ``llm.context_window`` when set; else what the backend knows without loading
  weights: an OpenAI-compatible server's ``/v1/models`` entry (``max_model_len`` from vLLM,
  ``context_length`` from others), ``llm.max_model_len`` or the model folder's ``config.json``
  (``max_position_embeddings``) for vLLM and transformers. ``conf/llm/embedded.yaml`` declares the
  embedded SmolLM2's 8,192.
* ``prompt_tokens`` and ``tokens_per_word``: the method renders its own prompt (LitSeg-Lite's
  single pass, the teacher's stage 3) for a short and a long piece of the bundled demo story; the
  model's tokenizer (chat template included) counts both, and a line through the two points gives
  the fixed prompt and the cost of one more word of numbered sentences. The tokenizer is loaded
  alone, never the weights; for a server it is asked through vLLM's ``/tokenize``; where no
  tokenizer can be reached the characters / 4 estimate is used under a wider margin.
* ``answer_tokens``: the method's ``max_new_tokens``; for the teacher also one
  ``summary_max_new_tokens`` for each of stages 1-2 it runs, whose answers stage 3 reads.
* ``margin``: ``preprocess.auto.context_margin`` (``estimate_margin`` when tokens are estimated).

Retries send the unit again with the rejected answer and feedback appended; that extra is not
reserved (the budget of a first answer is), so a retry of a unit at the cap may outgrow the
window, and the method's fallback then keeps the unit (docs in conf/preprocess/default.yaml).

A chunker without a chat model (every non-LLM baseline), one that never sends a whole unit in
one prompt, or a model whose window is not known gets ``preprocess.auto.fallback_words`` and the
reason is recorded. Nothing here imports torch or a backend that is not already in use.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from litseg.segmentation.config import PreprocessConfig
from litseg.errors import SetupError
from litseg.llm.base import ChatModel
from litseg.llm.config import LLMConfig
from litseg.segmentation.preprocess import prepare_document
from litseg.segmentation.types import Sentence, Unit

log = logging.getLogger(__name__)

AUTO = "auto"
#: The text whose prompts are measured: the bundled demo story (prose, dialogue, headings).
SAMPLE_TEXT = Path(__file__).resolve().parents[1] / "data" / "demo" / "the_two_lanterns.md"
# config.json keys that hold a model's context length, most specific first.
_CONTEXT_KEYS = ("max_position_embeddings", "n_positions", "max_sequence_length", "seq_length",
                 "n_ctx", "max_seq_len")
# /v1/models fields that hold a served model's context length (vLLM, then others).
_SERVED_CONTEXT_KEYS = ("max_model_len", "context_length", "context_window", "max_context_length")

Messages = list[dict[str, str]]


class WordCapError(SetupError, ValueError):
    """``preprocess.max_words`` is neither a positive number nor ``auto``, or ``auto`` leaves no room."""


@dataclass(slots=True)
class WordCap:
    """The cap a run uses and how it was found (written to the run summary as ``word_cap``)."""

    max_words: int
    mode: str  # "fixed" (a number was given) | "auto" | "auto_fallback"
    reason: str = ""
    context_window: int | None = None
    context_source: str | None = None
    prompt_tokens: int | None = None  # the method's prompt without the unit
    answer_tokens: int | None = None  # the answer budget kept free
    tokens_per_word: float | None = None  # of the numbered unit text, in the model's tokens
    token_source: str | None = None  # "tokenizer" | "server" | "estimate"
    margin: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v is not None and v != ""}

    def describe(self) -> str:
        if self.mode != "auto":
            return f"{self.max_words:,} words ({self.mode}{': ' + self.reason if self.reason else ''})"
        return (f"{self.max_words:,} words: context {self.context_window:,} tokens ({self.context_source}) "
                f"less {self.margin:.0%}, prompt {self.prompt_tokens:,}, answers {self.answer_tokens:,}; "
                f"{self.tokens_per_word:.2f} tokens a word ({self.token_source})")


def resolve_word_cap(preprocess: PreprocessConfig, chunker: Any = None,
                     llm_config: LLMConfig | None = None) -> WordCap:
    """The word cap ``preprocess.max_words`` stands for, given the run's chunker and ``llm`` config."""
    value = preprocess.max_words
    if value != AUTO:
        return WordCap(_positive_int(value, "preprocess.max_words"), "fixed")
    settings = preprocess.auto
    fallback = _positive_int(settings.fallback_words, "preprocess.auto.fallback_words")

    def use_fallback(reason: str) -> WordCap:
        log.info("preprocess.max_words=auto: %s; using preprocess.auto.fallback_words=%d", reason, fallback)
        return WordCap(fallback, "auto_fallback", reason)

    llm = chat_model_of(chunker)
    if llm is None:
        return use_fallback(f"method {getattr(chunker, 'name', '?')} uses no chat model")
    plan = prompt_plan(chunker)
    if plan is None:
        return use_fallback(f"method {getattr(chunker, 'name', '?')} does not send a unit in one prompt")
    render, answer_tokens = plan
    window, window_source = context_window(llm_config, llm)
    if window is None:
        return use_fallback(f"the context window of {getattr(llm, 'name', 'the model')} is not known "
                            "(set llm.context_window)")
    counter, token_source = prompt_token_counter(llm)
    prompt_tokens, per_word = measure_prompt(render, counter)
    margin = settings.estimate_margin if token_source == "estimate" else settings.context_margin
    usable = math.floor(window * (1.0 - margin)) - prompt_tokens - answer_tokens
    cap = math.floor(usable / per_word) if usable > 0 else 0
    if cap < settings.min_words:
        raise WordCapError(
            f"preprocess.max_words=auto: a context of {window:,} tokens ({window_source}) less the prompt "
            f"({prompt_tokens:,}) and the answer budget ({answer_tokens:,}) leaves room for {cap} words; "
            "lower the method's max_new_tokens, use a model with a longer context, or give a number")
    return WordCap(cap, "auto", "", window, window_source, prompt_tokens, answer_tokens, round(per_word, 4),
                   token_source, margin)


def _positive_int(value: Any, name: str) -> int:
    try:
        number = int(value)
    except (TypeError, ValueError):
        number = 0
    if isinstance(value, bool) or number < 1 or (isinstance(value, float) and not value.is_integer()):
        raise WordCapError(f"{name} must be a positive whole number or 'auto', got {value!r}")
    return number


# --------------------------------------------------------------------------- the method's prompt


def chat_model_of(chunker: Any) -> Any:
    """The chat model a chunker sends units to (through a ``merge`` wrapper too), or None."""
    seen = 0
    while chunker is not None and seen < 4:
        llm = getattr(chunker, "llm", None)
        if llm is not None and callable(getattr(llm, "chat", None)):
            return llm
        chunker, seen = getattr(chunker, "base", None), seen + 1
    return None


def prompt_plan(chunker: Any) -> tuple[Callable[[Any, Any], Messages], int] | None:
    """``(render(doc, unit) -> messages, answer_tokens)`` for the largest prompt a chunker sends a
    whole unit in, or None when it sends none (windows, pairs of sentences...)."""
    seen = 0
    while chunker is not None and seen < 4:
        stage_messages = getattr(chunker, "stage_messages", None)
        if callable(stage_messages):  # the three-stage teacher: stage 3 reads the two earlier answers
            skipped = set(getattr(chunker, "skip_stages", ()) or ())
            summaries = sum(1 for stage in ("stage1", "stage2") if stage not in skipped)
            answer = int(chunker.max_new_tokens) + summaries * int(getattr(chunker, "summary_max_new_tokens", 0))
            return (lambda doc, unit: stage_messages(doc, unit, "stage3")), answer
        messages = getattr(chunker, "messages", None)
        if callable(messages) and hasattr(chunker, "max_new_tokens") and _takes_doc_and_unit(messages):
            return messages, int(chunker.max_new_tokens)
        chunker, seen = getattr(chunker, "base", None), seen + 1
    return None


def _takes_doc_and_unit(fn: Callable[..., Any]) -> bool:
    """``messages(doc, unit)`` renders a whole unit (LumberChunker's ``messages(numbered)`` and
    margin sampling's ``messages(left, right)`` render windows)."""
    import inspect

    try:
        names = list(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        return False
    return names[:2] == ["doc", "unit"]


def measure_prompt(render: Callable[[Any, Any], Messages],
                   count: Callable[[Messages], int]) -> tuple[int, float]:
    """``(fixed prompt tokens, tokens per word of unit text)`` from the method's prompts for a
    short and a long piece of the sample story."""
    doc, short, long = _sample_units()
    words = [_unit_words(doc, u) for u in (short, long)]
    tokens = [count(render(doc, u)) for u in (short, long)]
    per_word = max((tokens[1] - tokens[0]) / (words[1] - words[0]), 0.1)
    fixed = max(0, round(tokens[0] - per_word * words[0]))
    return fixed, per_word


def _unit_words(doc: Any, unit: Any) -> int:
    return sum(len(doc.text[s.start:s.end].split()) for s in unit.sentences)


def _sample_units() -> tuple[Any, Any, Any]:
    """The demo story as one document with two units: its first ~300 words and all of it."""
    doc = prepare_document(SAMPLE_TEXT, max_words=10**9, book_id="word-cap-sample")
    sentences = [s for u in doc.units for s in u.sentences]
    counted, short_n = 0, len(sentences)
    for i, s in enumerate(sentences):
        counted += len(doc.text[s.start:s.end].split())
        if counted >= 300:
            short_n = i + 1
            break

    def unit(n: int) -> Unit:
        picked = [Sentence(idx=i, start=s.start, end=s.end) for i, s in enumerate(sentences[:n], 1)]
        return Unit(book_id=doc.book_id, unit_id=f"sample-{n}", index=0, start=picked[0].start,
                    end=picked[-1].end, title="sample", kind="chapter", sentences=picked)

    return doc, unit(short_n), unit(len(sentences))


# --------------------------------------------------------------------------- the model's window


def _backend_of(llm: Any) -> Any:
    """The backend under the response cache (``CachedChatModel.inner``)."""
    for _ in range(4):
        inner = getattr(llm, "inner", None)
        if inner is None:
            break
        llm = inner
    return llm


#: The backend a chat model's class comes from, by module (any other: "other").
_BACKEND_KINDS = {"litseg.llm.transformers_backend": "transformers", "litseg.llm.vllm_backend": "vllm",
                  "litseg.llm.openai_backend": "openai"}


def _kind(model: Any) -> str:
    module = type(model).__module__
    return _BACKEND_KINDS[module] if module in _BACKEND_KINDS else "other"


def context_window(llm_config: LLMConfig | None, llm: Any) -> tuple[int | None, str | None]:
    """The model's context window in tokens and where it was read, or ``(None, None)``."""
    declared = llm_config.context_window if llm_config is not None else None
    if declared is not None:
        return _positive_int(declared, "llm.context_window"), "llm.context_window"
    model = _backend_of(llm)
    kind = _kind(model)
    cfg = getattr(model, "config", None)
    if kind == "openai":
        return _served_context(model)
    if kind == "vllm" and cfg is not None and cfg.max_model_len:
        return int(cfg.max_model_len), "llm.max_model_len"
    if kind in ("vllm", "transformers") and cfg is not None:
        found = _config_json_context(Path(str(cfg.model)).expanduser())
        if found:
            return found, f"{cfg.model}/config.json"
    return None, None


def _config_json_context(model_dir: Path) -> int | None:
    try:
        data = json.loads((model_dir / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    for source in (data, data.get("text_config") or {}):
        for key in _CONTEXT_KEYS:
            value = source.get(key)
            if isinstance(value, int) and value > 0:
                return value
    return None


def _served_context(model: Any) -> tuple[int | None, str | None]:
    """The smallest context any server lists for the model at ``GET /models``."""
    import httpx

    cfg = model.config
    found: list[int] = []
    timeout = httpx.Timeout(min(float(cfg.timeout_s), 30.0), connect=float(cfg.connect_timeout_s))
    with httpx.Client(timeout=timeout, trust_env=cfg.trust_env) as client:
        for url in cfg.base_urls:
            try:
                response = client.get(f"{url}/models", headers=model._headers())
                listed = response.json().get("data") or [] if response.status_code == 200 else []
            except (httpx.HTTPError, ValueError, AttributeError):
                continue
            for entry in listed:
                if isinstance(entry, dict) and str(entry.get("id")) == cfg.model:
                    value = next((entry[k] for k in _SERVED_CONTEXT_KEYS if isinstance(entry.get(k), int)), None)
                    if value:
                        found.append(int(value))
    if not found:
        return None, None
    return min(found), "the server's /v1/models"


# --------------------------------------------------------------------------- the model's tokens


def prompt_token_counter(llm: Any) -> tuple[Callable[[Messages], int], str]:
    """A function counting the tokens of a prompt (chat template included) in the model's own
    tokenizer, loaded without the weights, and ``"tokenizer"``/``"server"``; the backend's
    estimate and ``"estimate"`` when no tokenizer can be had."""
    model = _backend_of(llm)
    kind = _kind(model)
    try:
        if kind == "transformers":
            return _template_counter(model.tokenizer_without_weights(), model.config.chat_template_kwargs), "tokenizer"
        if kind == "vllm":
            if getattr(model, "_llm", None) is not None:
                return model.count_prompt_tokens, "tokenizer"
            return _template_counter(_vllm_tokenizer(model), model.config.chat_template_kwargs), "tokenizer"
        if kind == "openai":
            counter = _server_counter(model)
            if counter is not None:
                return counter, "server"
    except Exception as exc:  # no tokenizer files, no network: estimate, say so
        log.warning("preprocess.max_words=auto: no tokenizer for %s (%s: %s); estimating tokens from "
                    "characters", getattr(model, "name", "the model"), type(exc).__name__, exc)
        return llm.count_prompt_tokens, "estimate"
    if kind == "other" and type(model).count_prompt_tokens is not _base_count_prompt_tokens():
        return llm.count_prompt_tokens, "tokenizer"  # a backend with its own counter
    return llm.count_prompt_tokens, "estimate"


def _base_count_prompt_tokens() -> Any:
    return ChatModel.count_prompt_tokens


def _template_counter(tokenizer: Any, template_kwargs: Mapping[str, Any] | None) -> Callable[[Messages], int]:
    kwargs = dict(template_kwargs or {})

    def count(messages: Messages) -> int:
        ids = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True,
                                            return_dict=True, **kwargs)
        return len(ids["input_ids"])

    return count


def _vllm_tokenizer(model: Any) -> Any:
    from transformers import AutoTokenizer

    cfg = model.config
    return AutoTokenizer.from_pretrained(cfg.tokenizer or cfg.model, revision=cfg.revision,
                                         trust_remote_code=cfg.trust_remote_code)


def _server_counter(model: Any) -> Callable[[Messages], int] | None:
    """vLLM's ``POST /tokenize`` (beside ``/v1``) on the first server, when it answers."""
    import httpx

    cfg = model.config
    root = str(cfg.base_urls[0]).rstrip("/")
    root = root[:-3] if root.endswith("/v1") else root
    timeout = httpx.Timeout(30.0, connect=float(cfg.connect_timeout_s))

    def count(messages: Messages) -> int:
        body = {"model": cfg.model, "messages": messages, "add_generation_prompt": True}
        response = httpx.post(f"{root}/tokenize", json=body, headers=model._headers(), timeout=timeout,
                              trust_env=cfg.trust_env)
        response.raise_for_status()
        data = response.json()
        return int(data["count"]) if "count" in data else len(data["tokens"])

    try:
        count([{"role": "user", "content": "test"}])
    except (httpx.HTTPError, ValueError, KeyError, TypeError):
        return None
    return count


__all__ = ["AUTO", "WordCap", "WordCapError", "chat_model_of", "context_window",
           "measure_prompt", "prompt_plan", "prompt_token_counter", "resolve_word_cap"]
