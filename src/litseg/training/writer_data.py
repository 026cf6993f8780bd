"""Training examples and evaluation of the LitSeg-Tagger writer (the subtitle of one block).

One example per teacher block: the writer prompt (``conf/prompt/tagger_writer.yaml``) over the
block's own sentences, rendered by :func:`litseg.chunkers.tagger.writer_messages` exactly as the
chunker renders it, and the teacher's subtitle as the answer. The SFT stage trains on these as on
any prompt-completion data.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from litseg.chunkers.groups import WriterPrompt
from litseg.chunkers.tagger import clean_subtitle, subtitle_key, writer_messages
from litseg.llm.base import ChatRequest
from litseg.segmentation.agreement import repeated_subtitle_share


def build_writer_examples(units: Sequence[Any], prompt: WriterPrompt, tokenizer: Any, *, report: Any,
                          token_lengths: Any, chat_template_kwargs: Mapping[str, Any] | None = None,
                          max_prompt_tokens: int, max_completion_tokens: int) -> list[dict[str, Any]]:
    """Chat rows (``prompt``, ``completion``, ``reference``, ...) of every teacher block with a subtitle."""
    rows: list[dict[str, Any]] = []
    for unit in units:
        para = unit.paragraph_starts or [False] * unit.n_sentences
        for k, seg in enumerate(unit.segments):
            subtitle = clean_subtitle(str(seg.get("subtitle") or ""))
            if not subtitle:
                report.drop("block_without_subtitle")
                continue
            messages = writer_messages(prompt, unit.sentences, para, (int(seg["from_idx"]), int(seg["to_idx"])))
            p_len, c_len = token_lengths(tokenizer, messages, subtitle, chat_template_kwargs)
            if p_len > max_prompt_tokens:
                report.drop("prompt_too_long")
                continue
            if c_len > max_completion_tokens:
                report.drop("completion_too_long")
                continue
            rows.append({
                "prompt": messages,
                "completion": [{"role": "assistant", "content": subtitle}],
                "reference": subtitle,
                "chapter": "",
                "n_sentences": int(seg["to_idx"]) - int(seg["from_idx"]) + 1,
                "schema": prompt.schema,
                "book_id": unit.book_id,
                "unit_id": f"{unit.unit_id}#{k + 1}",
                "prompt_tokens": p_len,
                "completion_tokens": c_len,
            })
    return rows


def _lcs(a: list[str], b: list[str]) -> int:
    prev = [0] * (len(b) + 1)
    for x in a:
        cur = [0]
        for j, y in enumerate(b):
            cur.append(prev[j] + 1 if x == y else max(prev[j + 1], cur[j]))
        prev = cur
    return prev[-1]


def rouge_l(candidate: str, reference: str) -> float:
    """ROUGE-L F1 of two subtitles over lower-cased words."""
    c, r = subtitle_key(candidate).split(), subtitle_key(reference).split()
    if not c or not r:
        return 0.0
    lcs = _lcs(c, r)
    if lcs == 0:
        return 0.0
    p, q = lcs / len(c), lcs / len(r)
    return 2 * p * q / (p + q)


def evaluate_writer(rows: Sequence[Mapping[str, Any]], llm: Any, *, max_new_tokens: int,
                    samples_path: Path) -> dict[str, float]:
    """The writer on held-out blocks: ROUGE-L against the teacher's subtitle, the share of empty
    subtitles, and the share repeating an earlier subtitle of the same unit."""
    requests = [ChatRequest(messages=list(r["prompt"]), max_tokens=max_new_tokens) for r in rows]
    answers = llm.chat_batch(requests) if requests else []
    subtitles = [clean_subtitle(a.text) for a in answers]
    by_unit: dict[str, list[str]] = {}
    with samples_path.open("w", encoding="utf-8") as fh:
        for r, sub in zip(rows, subtitles):
            by_unit.setdefault(f"{r['book_id']}/{str(r['unit_id']).split('#')[0]}", []).append(sub)
            fh.write(json.dumps({"book_id": r["book_id"], "unit_id": r["unit_id"], "reference": r["reference"],
                                 "subtitle": sub, "rouge_l": rouge_l(sub, r["reference"])}, ensure_ascii=False) + "\n")
    n = len(subtitles)
    if not n:
        return {}
    return {"eval/subtitle_rouge_l": sum(rouge_l(s, r["reference"]) for s, r in zip(subtitles, rows)) / n,
            "eval/subtitle_empty": sum(1 for s in subtitles if not s) / n,
            "eval/subtitle_repeated": repeated_subtitle_share(by_unit.values()) or 0.0,
            "eval/examples": float(n)}
