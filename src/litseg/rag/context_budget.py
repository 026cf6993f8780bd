"""What the generator and the judge read: one character budget, the same for every chunker.

A fixed number of chunks would hand a chunker of 400-word chunks several times the text of a
chunker of 128-token windows, and a cut of the joined text at a fixed length would fall on the
large chunks far more often, so answer scores would measure the cut rather than the chunker.
Here every chunker's ranking is read the same way (:meth:`ContextBudget.pack`):

* chunks are taken best first, whole, while they fit in ``budget_chars`` characters;
* the first chunk that does not fit is cut at the budget and nothing comes after it, so only the
  last passage is ever cut and every question gets the budget in full when its book has enough
  ranked text (``max_chunks``, off by default, can stop earlier);
* the characters counted are those of the passed chunk text (``text``: the indexed chunk with
  subtitle and context sentences, or ``main_text``), before any prompt formatting.

:func:`summarize_packs` gives the figures the report prints per chunker: chunks and characters
passed, the share of questions whose last passage was cut, and the share of the passed chunks'
characters that the cut left out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from litseg.utils.config import from_dict, to_plain

TEXT_FIELDS = ("text", "main_text")


@dataclass(slots=True)
class ContextPack:
    """The passages of one question, best first; only the last one may be cut."""

    passages: list[str] = field(default_factory=list)
    positions: list[int] = field(default_factory=list)
    full_chars: int = 0  # characters of the chunks passed, uncut
    chars: int = 0  # characters passed
    truncated: bool = False  # the last passage was cut at the budget

    @property
    def n_chunks(self) -> int:
        return len(self.passages)

    @property
    def cut_chars(self) -> int:
        return self.full_chars - self.chars

    def joined(self, separator: str = "\n\n") -> str:
        return separator.join(self.passages)

    def row_fields(self) -> dict[str, Any]:
        """The per-question fields kept in ``per_question/*.jsonl``."""
        return {"context_chunks": self.n_chunks, "context_chars": self.chars, "context_truncated": self.truncated,
                "context_cut_chars": self.cut_chars}


@dataclass(slots=True)
class ContextBudget:
    budget_chars: int = 6000
    text: str = "text"
    max_chunks: int | None = None

    def __post_init__(self) -> None:
        if self.budget_chars < 1:
            raise ValueError(f"answer_context.budget_chars must be >= 1, got {self.budget_chars}")
        if self.text not in TEXT_FIELDS:
            raise ValueError(f"answer_context.text must be one of {TEXT_FIELDS}, got {self.text!r}")
        if self.max_chunks is not None and self.max_chunks < 1:
            raise ValueError(f"answer_context.max_chunks must be >= 1 or null, got {self.max_chunks}")

    @classmethod
    def from_config(cls, cfg: Mapping[str, Any] | None) -> "ContextBudget":
        """From the ``answer_context`` section (a typed one, or a mapping: missing keys take the
        defaults above, which equal ``conf/evaluate.yaml``)."""
        c = to_plain(cfg) or {}
        if not isinstance(c, Mapping):
            c = {"budget_chars": c.budget_chars, "text": c.text, "max_chunks": c.max_chunks}
        unknown = set(c) - {"budget_chars", "text", "max_chunks"}
        if unknown:
            raise ValueError(f"answer_context: unknown keys {sorted(unknown)}")
        return from_dict(cls, c, "answer_context")

    def chunk_text(self, chunk: Any) -> str:
        """The text of ``chunk`` that is passed (``main_text`` when ``text`` is empty)."""
        t = getattr(chunk, self.text, None) or getattr(chunk, "main_text", "") or ""
        return str(t).strip()

    def pack(self, texts: Sequence[str], positions: Sequence[int] | None = None) -> ContextPack:
        """Fill the budget with ``texts`` (ranked, best first): whole while they fit, the first
        that does not fit cut at the budget, then stop. Empty texts are skipped."""
        out = ContextPack()
        left = self.budget_chars
        for i, text in enumerate(texts):
            if left <= 0 or (self.max_chunks is not None and out.n_chunks >= self.max_chunks):
                break
            if not text:
                continue
            piece = text if len(text) <= left else text[:left]
            out.passages.append(piece)
            if positions is not None:
                out.positions.append(int(positions[i]))
            out.full_chars += len(text)
            out.chars += len(piece)
            left -= len(piece)
            if len(piece) < len(text):
                out.truncated = True
                break
        return out

    def pack_ranking(self, ranking: Sequence[Any], chunks: Sequence[Any]) -> ContextPack:
        """:meth:`pack` over a ranking of retrieved candidates (``.position`` into ``chunks``)."""
        positions = [r.position for r in ranking]
        return self.pack([self.chunk_text(chunks[p]) for p in positions], positions)

    def identity(self) -> dict[str, Any]:
        return {"budget_chars": self.budget_chars, "text": self.text, "max_chunks": self.max_chunks}


def summarize_packs(packs: Sequence[ContextPack], budget: ContextBudget) -> dict[str, Any]:
    """Per chunker: means of chunks and characters passed, ``truncated_share`` (questions whose
    last passage was cut), ``cut_chars_share`` (characters the cut left out, over the characters
    of the chunks passed) and ``filled_share`` (questions that got the whole budget)."""
    n = len(packs)
    full = sum(p.full_chars for p in packs)
    return {
        **budget.identity(),
        "n_questions": n,
        "mean_chunks": sum(p.n_chunks for p in packs) / n if n else 0.0,
        "mean_chars": sum(p.chars for p in packs) / n if n else 0.0,
        "truncated_share": sum(p.truncated for p in packs) / n if n else 0.0,
        "cut_chars_share": sum(p.cut_chars for p in packs) / full if full else 0.0,
        "filled_share": sum(p.chars >= budget.budget_chars for p in packs) / n if n else 0.0,
    }
