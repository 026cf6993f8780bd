"""Score a (trained or base) student on a held-out split with the training rewards.

The student answers each held-out prompt once, greedily, through the LLM layer (the same code
path as ``annotate.py``), so a trained adapter is exercised exactly as it will be used. The
answers are scored with the GRPO reward functions; the weighted sum is the metric ``train.py``
returns to a sweeper. Every answer and its scores go to ``eval_samples.jsonl`` (the sample table
the ablation notebook reads).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from litseg.segmentation.parsing import parse_answer
from litseg.segmentation.schema import SchemaLimits, get_schema, json_schema
from litseg.segmentation.validation import blocking_issues, validate_segments
from litseg.errors import is_unavailable
from litseg.llm.base import ChatModelError, ChatRequest
from litseg.utils.config import shipped_option

log = logging.getLogger(__name__)


def evaluate_split(rows: Sequence[Mapping[str, Any]], llm: Any, reward_funcs: Sequence[Any],
                   reward_weights: Sequence[float], *, max_new_tokens: int, constrained: bool = False,
                   batch_size: int = 8, samples_path: str | Path | None = None,
                   prefix: str = "eval") -> dict[str, float]:
    """Metrics over ``rows`` (dataset rows with ``prompt``, ``n_sentences``, ``schema``, ``chapter``)."""
    rows = list(rows)
    if not rows:
        return {}
    # the student is LitSeg-Lite: its answers are bounded as annotate.py bounds them (one home of the limits)
    limits = SchemaLimits.from_config(shipped_option("method", "litseg_lite", "schema_limits"))
    texts: list[str] = []
    finishes: list[str] = []
    unanswered: list[str] = []
    for start in range(0, len(rows), batch_size):
        part = rows[start:start + batch_size]
        requests = [ChatRequest(
            messages=list(r["prompt"]), max_tokens=max_new_tokens,
            json_schema=json_schema(get_schema(str(r["schema"])), n_sentences=int(r["n_sentences"]), bounded=limits)
            if constrained else None) for r in part]
        for completion in llm.chat_batch(requests):
            texts.append(completion.text if completion.error is None else "")
            finishes.append(completion.finish_reason if completion.error is None else "error")
            if is_unavailable(completion):
                unanswered.append(str(completion.error))
    if unanswered:
        # A model that never saw the prompts (a dead engine, a server gone) is no student that
        # answered badly: scoring its silence as 0 would look like a result.
        raise ChatModelError(f"evaluation: the student model could not answer {len(unanswered)} of {len(rows)} "
                             f"held-out prompts ({unanswered[0]}); rerun into the same run directory: the trained "
                             "stages are reused")
    columns = {key: [r[key] for r in rows] for key in rows[0] if key not in ("prompt", "completion")}
    per_reward: dict[str, list[float]] = {}
    for fn in reward_funcs:
        per_reward[getattr(fn, "__name__", "reward")] = [float(v) for v in fn(texts, **columns)]
    total = [sum(w * per_reward[name][i] for name, w in zip(per_reward, reward_weights)) for i in range(len(rows))]
    strict, valid = [], []
    for text, r in zip(texts, rows):
        parsed = parse_answer(text, get_schema(str(r["schema"])))
        strict.append(parsed.strict_ok)
        valid.append(parsed.value is not None and not blocking_issues(validate_segments(parsed.segments,
                                                                                         int(r["n_sentences"]))))
    n = len(rows)
    metrics = {f"{prefix}/{name}": sum(v) / n for name, v in per_reward.items()}
    metrics.update({
        f"{prefix}/reward": sum(total) / n,
        f"{prefix}/strict_format_rate": sum(strict) / n,
        f"{prefix}/valid_rate": sum(valid) / n,
        f"{prefix}/truncated_rate": sum(f == "length" for f in finishes) / n,
        f"{prefix}/errors": float(sum(f == "error" for f in finishes)),
        f"{prefix}/examples": float(n),
    })
    if samples_path is not None:
        with Path(samples_path).open("w", encoding="utf-8") as f:
            for i, (text, r) in enumerate(zip(texts, rows)):
                f.write(json.dumps({
                    "book_id": r.get("book_id"), "unit_id": r.get("unit_id"), "n_sentences": r["n_sentences"],
                    "completion": text, "finish_reason": finishes[i], "reference": r.get("reference"),
                    **{f"reward_{name}": v[i] for name, v in per_reward.items()}, "reward": total[i],
                    "strict_ok": strict[i], "valid": valid[i]}, ensure_ascii=False) + "\n")
    return metrics
