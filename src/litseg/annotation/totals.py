"""The accounting of an annotation run: what one unit's ledger row counts, and the totals over a
run (this process) or a whole run directory."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any


def _int(row: Mapping[str, Any], key: str) -> int:
    return int(row.get(key) or 0)


@dataclass(frozen=True)
class UnitCounts:
    """What the totals count of one unit's diagnostics row (``diagnostics.jsonl`` / the ledger).

    The row is written by the annotation run (``_unit_diagnostics``): every counter below may be
    absent in a row of an older run or a chunker that makes no model calls, and counts 0 then.
    ``retries`` is absent in old rows: it is ``tries - 1`` there (``tries`` absent: 1 try).
    ``model_seconds`` is absent in old rows: ``seconds`` held the model time there.
    """

    n_chunks: int
    calls: int
    prompt_tokens: int
    cached_tokens: int
    completion_tokens: int
    retries: int
    repairs: int
    fallback: str
    limit_hits: int
    stages_unavailable: tuple[str, ...]
    model_seconds: float
    n_words: int

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> UnitCounts:
        retries = row.get("retries")
        tries = row.get("tries")
        seconds = row.get("model_seconds") if "model_seconds" in row else row.get("seconds")
        fallback = row.get("fallback")
        return cls(
            n_chunks=_int(row, "n_chunks"), calls=_int(row, "calls"), prompt_tokens=_int(row, "prompt_tokens"),
            cached_tokens=_int(row, "cached_tokens"), completion_tokens=_int(row, "completion_tokens"),
            retries=int(retries) if retries is not None else max(0, int(1 if tries is None else tries) - 1),
            repairs=len(row.get("repairs") or []), fallback="none" if fallback is None else str(fallback),
            limit_hits=len(row.get("limit_hits") or []),
            stages_unavailable=tuple(row.get("stages_unavailable") or []),
            model_seconds=float(seconds or 0.0), n_words=_int(row, "n_words"))


@dataclass
class RunTotals:
    """Accounting over units: one run (this process) or a whole run directory."""

    books: int = 0
    books_skipped: int = 0
    books_failed: list[dict[str, str]] = field(default_factory=list)
    units: int = 0
    units_skipped: int = 0
    units_failed: int = 0
    chunks: int = 0
    calls: int = 0
    prompt_tokens: int = 0
    cached_tokens: int = 0
    completion_tokens: int = 0
    retries: int = 0
    repairs: int = 0
    fallbacks: Counter[str] = field(default_factory=Counter)
    stages_unavailable: Counter[str] = field(default_factory=Counter)
    failed_units: list[dict[str, str]] = field(default_factory=list)  # book_id, unit_id, error (first 100)
    limit_hits: int = 0  # answer fields that reached a schema limit (diagnostics: limit_hits)
    units_with_limit_hits: int = 0
    seconds: float = 0.0
    model_seconds: float = 0.0
    source_words: int = 0

    def add(self, res: Any, diag: Mapping[str, Any]) -> None:
        """Count a committed unit (``res``, a UnitResult, may be None when read back from a ledger)."""
        row = UnitCounts.from_row(diag)
        self.units += 1
        self.chunks += len(res.chunks) if res is not None else row.n_chunks
        self.calls += row.calls
        self.prompt_tokens += row.prompt_tokens
        self.cached_tokens += row.cached_tokens
        self.completion_tokens += row.completion_tokens
        self.retries += row.retries
        self.repairs += row.repairs
        self.fallbacks[row.fallback] += 1
        self.limit_hits += row.limit_hits
        self.units_with_limit_hits += bool(row.limit_hits)
        self.stages_unavailable.update(row.stages_unavailable)
        self.model_seconds += row.model_seconds
        self.source_words += row.n_words

    def per_1k_words(self) -> dict[str, float]:
        if not self.source_words:
            return {}
        scale = 1000 / self.source_words
        return {k: round(getattr(self, k) * scale, 1)
                for k in ("calls", "prompt_tokens", "cached_tokens", "completion_tokens")}

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["fallbacks"], d["stages_unavailable"] = dict(self.fallbacks), dict(self.stages_unavailable)
        d["per_1k_words"] = self.per_1k_words()
        return d


#: What can become of an input of a run (the summary's ``inputs``).
CHUNKED, SKIPPED, FAILED = "chunked", "skipped", "failed"


@dataclass
class InputOutcomes:
    """What became of every input of a run, in input order: ``chunked`` (its units are in the run
    directory, this run's or an earlier one's), ``skipped`` with why (an unsupported format, an
    empty file: nothing to segment) or ``failed`` with why (unreadable, or units that failed)."""

    rows: dict[str, dict[str, str]] = field(default_factory=dict)

    def set(self, label: str, outcome: str, why: str | None = None) -> None:
        self.rows[label] = {"path": label, "outcome": outcome, **({"why": why} if why else {})}

    def count(self, outcome: str) -> int:
        return sum(row["outcome"] == outcome for row in self.rows.values())

    def to_list(self) -> list[dict[str, str]]:
        return list(self.rows.values())
