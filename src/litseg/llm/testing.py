"""A chat model that answers from a script, for tests and dry runs (``backend: scripted``).

``ScriptedChatModel(["first answer", "second answer"])`` answers in order;
``ScriptedChatModel(lambda request: "...")`` answers by a function of the request. An answer may be
a string or a ready :class:`Completion` (to play errors or answers cut at ``max_tokens``). Every
request is kept in :attr:`ScriptedChatModel.requests` so tests can check what was asked.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from litseg.llm.base import ChatModel, ChatModelError, ChatRequest, Completion, stable_json
from litseg.llm.config import ScriptedLLMConfig

Answer = str | Completion


class ScriptExhausted(ChatModelError):
    """The script has no answer left for a request."""


class ScriptedChatModel(ChatModel):
    config_class = ScriptedLLMConfig

    @classmethod
    def from_config(cls, section: ScriptedLLMConfig) -> ScriptedChatModel:
        if not section.answers:
            raise ValueError("scripted backend: give a non-empty list of answers")
        return cls(list(section.answers), name=section.name, cycle=section.cycle, truncate=section.truncate)

    def __init__(self, answers: Iterable[Answer] | Callable[[ChatRequest], Answer], *,
                 name: str = "scripted", cycle: bool = False, truncate: bool = False) -> None:
        """``cycle`` starts the list again when it runs out; ``truncate`` cuts an answer longer
        than the request's ``max_tokens`` (estimated tokens) and reports ``finish_reason="length"``."""
        self.name = name
        self._function = answers if callable(answers) else None
        self._answers: list[Answer] = [] if callable(answers) else list(answers)
        self._cycle = cycle
        self._truncate = truncate
        self._next = 0
        self.requests: list[ChatRequest] = []

    def identity(self) -> dict[str, Any]:
        script = "function" if self._function else stable_json(
            [a.to_dict() if isinstance(a, Completion) else a for a in self._answers])
        return {"backend": "scripted", "name": self.name, "script": script}

    @property
    def remaining(self) -> int:
        """Answers left in the list (always 0 for a function, which never runs out)."""
        return 0 if self._function else max(0, len(self._answers) - self._next)

    def _next_answer(self, request: ChatRequest) -> Answer:
        if self._function is not None:
            return self._function(request)
        if self._next >= len(self._answers):
            if not (self._cycle and self._answers):
                preview = request.messages[-1]["content"][:80] if request.messages else ""
                raise ScriptExhausted(f"{self.name}: all {len(self._answers)} scripted answers are used; "
                                      f"request {len(self.requests)} starts {preview!r}")
            self._next = 0
        answer = self._answers[self._next]
        self._next += 1
        return answer

    def chat(self, request: ChatRequest) -> Completion:
        self.requests.append(request)
        answer = self._next_answer(request)
        if isinstance(answer, Completion):
            return Completion.from_dict({**answer.to_dict(), "model": answer.model or self.name})
        if not isinstance(answer, str):
            raise TypeError(f"{self.name}: a scripted answer must be a str or a Completion, "
                            f"got {type(answer).__name__}")
        text, finish = answer, "stop"
        if self._truncate and self.count_tokens(text) > request.max_tokens:
            text, finish = text[: request.max_tokens * 4], "length"
        return Completion(text=text, prompt_tokens=self.count_prompt_tokens(request.messages),
                          completion_tokens=self.count_tokens(text), finish_reason=finish, model=self.name)
