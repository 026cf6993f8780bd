"""Answer generation for the RAG evaluation: book title, question and the top retrieved chunks go
to any chat model of the LLM layer (``conf/prompt/rag_answer.yaml``); the reply is the answer.

Failures are kept, not dropped: an answer whose request failed has ``error`` set and empty
``text``, and the run reports how many there were.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from litseg.chunkers.groups import RagAnswerPrompt
from litseg.llm.base import ChatModel, ChatRequest, Completion



@dataclass(slots=True)
class AnswerInput:
    qid: str
    title: str
    question: str
    references: list[str]


@dataclass(slots=True)
class GeneratedAnswer:
    qid: str
    text: str
    error: str | None = None
    finish_reason: str = "stop"
    prompt_tokens: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0
    from_cache: bool = False

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def clean_answer(text: str) -> str:
    """The reply without surrounding whitespace, quotes or an ``Answer:`` label."""
    t = text.strip()
    if t.lower().startswith("answer:"):
        t = t[len("answer:"):].strip()
    if len(t) >= 2 and t[0] == t[-1] and t[0] in "\"'":
        t = t[1:-1].strip()
    return t


class AnswerGenerator:
    """Builds answering requests and collects the replies.

    The references are passed as given, best first: in the evaluation they are already filled
    to the run's one character budget (:mod:`litseg.rag.context_budget`), the same for every
    chunker. ``top_n`` and ``max_context_chars`` (both off by default) can limit them further
    when the class is used on its own.
    """

    # max_tokens and batch_size default to conf/evaluate.yaml's `generation` values (a test checks).
    def __init__(self, llm: ChatModel, prompt: RagAnswerPrompt, *, answer_style: str = "",
                 max_tokens: int = 48, temperature: float = 0.0, top_n: int | None = None,
                 max_context_chars: int | None = None, batch_size: int = 8) -> None:
        if not isinstance(prompt, RagAnswerPrompt):
            raise ValueError(f"answer prompt {getattr(prompt, 'name', prompt)!r} is no answering prompt (with "
                             "reference, separator and answer_styles; conf/prompt/rag_answer.yaml)")
        if (top_n is not None and top_n < 1) or batch_size < 1 or max_tokens < 1:
            raise ValueError("top_n, batch_size and max_tokens must be >= 1")
        self.llm = llm
        self.prompt = prompt
        styles = prompt.answer_styles
        self.answer_style = (styles[answer_style] if answer_style in styles else answer_style) if answer_style else ""
        self.max_tokens = max_tokens
        self.temperature = temperature
        self.top_n = top_n
        self.max_context_chars = max_context_chars
        self.batch_size = batch_size

    def format_references(self, references: Sequence[str]) -> str:
        parts: list[str] = []
        used = 0
        for rank, text in enumerate(references[: self.top_n] if self.top_n is not None else references, 1):
            if self.max_context_chars is not None:
                room = self.max_context_chars - used
                if room <= 0:
                    break
                text = text[:room]
                used += len(text)
            parts.append(self.prompt.reference.format(rank=rank, text=text.strip()))
        if not parts:
            return self.prompt.no_references
        return self.prompt.separator.join(parts)

    def messages(self, item: AnswerInput) -> list[dict[str, str]]:
        system = self.prompt.system.format(answer_style=self.answer_style).strip()
        user = self.prompt.user.format(title=item.title or "(unknown)", question=item.question,
                                          references=self.format_references(item.references))
        return [{"role": "system", "content": system}, {"role": "user", "content": user}]

    def request(self, item: AnswerInput) -> ChatRequest:
        return ChatRequest(messages=self.messages(item), max_tokens=self.max_tokens, temperature=self.temperature)

    def answer(self, items: Sequence[AnswerInput], progress: bool = False) -> list[GeneratedAnswer]:
        from tqdm.auto import tqdm

        out: list[GeneratedAnswer] = []
        bar = tqdm(total=len(items), desc="generate", unit="q", disable=not progress, dynamic_ncols=True)
        for s in range(0, len(items), self.batch_size):
            batch = list(items[s:s + self.batch_size])
            completions = _chat_batch(self.llm, [self.request(it) for it in batch])
            for it, c in zip(batch, completions):
                out.append(GeneratedAnswer(
                    qid=it.qid, text="" if c.error else clean_answer(c.text), error=c.error,
                    finish_reason=c.finish_reason, prompt_tokens=c.prompt_tokens,
                    completion_tokens=c.completion_tokens, seconds=c.seconds, from_cache=c.from_cache))
            bar.update(len(batch))
        bar.close()
        return out


def _chat_batch(llm: ChatModel, requests: list[ChatRequest]) -> list[Completion]:
    """``chat_batch`` with a length check. Backends report a failed request in
    ``Completion.error`` (kept and counted); an exception means a configuration problem (a
    replay cache without the request, a missing model) and ends the run with its message."""
    got = llm.chat_batch(requests)
    if len(got) != len(requests):
        raise RuntimeError(f"{getattr(llm, 'name', 'llm')}: {len(got)} answers for {len(requests)} requests")
    return got
