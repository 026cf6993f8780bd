"""Prompt, cached and completion tokens per 1,000 source words: LitSeg (3 stages) vs LitSeg-Lite.

Run from the repository root. Without a response cache the script generates every answer with
the embedded model on CPU (about 40 minutes on two shared cores) and stores it in ``--cache``
(default ``.cache/litseg/token_accounting.sqlite``, not in git); later runs with ``--replay`` read
the answers from that cache in seconds and refuse to start without it:

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/token_accounting.py --write   # generate; into docs/teacher.md
    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/token_accounting.py --replay --check --json out.json

Both methods segment the same chapters (default: the bundled demo story, three chapters) with the
same model, retries included. Prompt and completion tokens are the backend's counts. The CPU
backend has no prefix cache, so *cached* tokens are computed from the prompts themselves: each
call's prompt is tokenised with the model's chat template, and the tokens it shares as a prefix
with an earlier prompt count as cached, rounded down to whole KV-cache blocks (``--block``, 16
tokens as in vLLM). Two settings:

* ``unit``: reuse only among the calls of the same chapter: the teacher's stages 2 and 3 reuse
  system prompt + numbered chapter (stage 3 also stage 2's copy of the step-1 answer), a retry
  reuses the conversation it extends;
* ``run``: reuse across the whole run as well (the system prompt is shared by every chapter),
  what a long-running server with automatic prefix caching reaches.

Prefill = prompt - cached: the tokens the server must actually compute. Target (issue 3): the
teacher's prefill after prefix caching is at most 1.5x LitSeg-Lite's (``--check`` exits 1
otherwise). ``--write`` puts the table and the ratios into the generated block ``token_accounting``
of docs/teacher.md.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from omegaconf import OmegaConf  # noqa: E402

from litseg.chunkers.groups import FeedbackConfig, PromptConfig  # noqa: E402
from litseg.chunkers.litseg import LitSegChunker  # noqa: E402
from litseg.chunkers.litseg_lite import LitSegLiteChunker  # noqa: E402
from litseg.llm.base import ChatModel, ChatRequest, Completion  # noqa: E402
from litseg.llm.factory import build_llm  # noqa: E402
from litseg.segmentation.preprocess import prepare_document  # noqa: E402
from litseg.utils.config import from_dict  # noqa: E402
from litseg.utils.docblocks import write_block  # noqa: E402

DEMO = REPO / "src" / "litseg" / "data" / "demo" / "the_two_lanterns.md"
DOCS = REPO / "docs" / "teacher.md"
DEFAULT_CACHE = REPO / ".cache" / "litseg" / "token_accounting.sqlite"
TARGET_RATIO = 1.5


class RecordingChatModel(ChatModel):
    """Passes every call through and keeps (request, completion) in call order."""

    def __init__(self, inner: ChatModel) -> None:
        self.inner = inner
        self.name = inner.name
        self.calls: list[tuple[ChatRequest, Completion]] = []
        self._lock = threading.Lock()

    def identity(self) -> dict[str, Any]:
        return self.inner.identity()

    def chat(self, request: ChatRequest) -> Completion:
        return self.chat_batch([request])[0]

    def chat_batch(self, requests: list[ChatRequest]) -> list[Completion]:
        answers = self.inner.chat_batch(requests)
        with self._lock:
            self.calls.extend(zip(requests, answers, strict=True))
        return answers

    def count_tokens(self, text: str) -> int:
        return self.inner.count_tokens(text)

    def close(self) -> None:
        self.inner.close()


def common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


def prompt_ids(tokenizer: Any, messages: list[dict[str, str]]) -> list[int]:
    ids = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True, return_dict=True)
    return list(ids["input_ids"])


def account(calls: list[tuple[ChatRequest, Completion]], tokenizer: Any, block: int) -> dict[str, Any]:
    """Token totals of one method's calls, with cached tokens computed from shared prefixes."""
    seen_by_unit: dict[str, list[list[int]]] = {}
    seen_all: list[list[int]] = []
    totals = {"calls": 0, "prompt": 0, "completion": 0, "cached_unit": 0, "cached_run": 0}
    for request, completion in calls:
        ids = prompt_ids(tokenizer, request.messages)
        unit = _chapter_of(request.messages)
        earlier = seen_by_unit.setdefault(unit, [])
        reuse_unit = max((common_prefix(ids, e) for e in earlier), default=0)
        reuse_run = max((common_prefix(ids, e) for e in seen_all), default=0)
        # A prompt never reuses all of itself: the last token is always computed.
        totals["cached_unit"] += min(reuse_unit, len(ids) - 1) // block * block
        totals["cached_run"] += min(reuse_run, len(ids) - 1) // block * block
        totals["prompt"] += len(ids)
        totals["completion"] += completion.completion_tokens
        totals["calls"] += 1
        earlier.append(ids)
        seen_all.append(ids)
    return totals


def _chapter_of(messages: list[dict[str, str]]) -> str:
    user = next(m["content"] for m in messages if m["role"] == "user")
    return user.split("END OF CHAPTER")[0] if "END OF CHAPTER" in user else user[:2000]


def load_prompt(name: str) -> PromptConfig:
    return from_dict(PromptConfig, OmegaConf.load(REPO / "conf" / "prompt" / f"{name}.yaml"), "prompt")


def run(args: argparse.Namespace) -> dict[str, Any]:
    from litseg.llm.embedded import load_embedded_tokenizer

    llm_cfg = OmegaConf.to_container(OmegaConf.load(REPO / "conf" / "llm" / f"{args.llm}.yaml"), resolve=True)
    llm_cfg["cache"] = {"enabled": True, "path": str(args.cache), "replay": bool(args.replay)}  # type: ignore[index]
    feedback = from_dict(FeedbackConfig, OmegaConf.load(REPO / "conf" / "feedback" / "default.yaml"), "feedback")
    doc = prepare_document(args.input)
    units = doc.units[: args.units] if args.units else doc.units
    words = sum(len(doc.text[u.start:u.end].split()) for u in units)
    tokenizer = load_embedded_tokenizer()
    results: dict[str, Any] = {"input": str(args.input), "units": len(units), "words": words, "block": args.block,
                               "model": None, "methods": {}}
    common = {"max_retries": args.max_retries, "bounded_schema": True, "fallback_max_words": 400}
    for method in ("litseg_lite", "litseg"):
        model = RecordingChatModel(build_llm(llm_cfg))
        results["model"] = model.identity()
        if method == "litseg":
            chunker: Any = LitSegChunker(model, load_prompt("litseg"), feedback=feedback, workers=args.workers,
                                         max_new_tokens=args.max_new_tokens,
                                         summary_max_new_tokens=args.summary_max_new_tokens, **common)
        else:
            chunker = LitSegLiteChunker(model, load_prompt("litseg_lite"), feedback=feedback, workers=args.workers,
                                        max_new_tokens=args.max_new_tokens, **common)
        t0 = time.perf_counter()
        outcomes = list(chunker.chunk_units(doc, units))
        seconds = time.perf_counter() - t0
        totals = account(model.calls, tokenizer, args.block)
        # The same without retries: what a model that answers every stage validly on the first try costs.
        first_tries = [(r, c) for r, c in model.calls if len(r.messages) == 2]
        results["methods"][f"{method} (first tries)"] = account(first_tries, tokenizer, args.block)
        fallbacks: dict[str, int] = {}
        for r in outcomes:
            fb = str(r.diagnostics.get("fallback"))
            fallbacks[fb] = fallbacks.get(fb, 0) + 1
        results["methods"][method] = {**totals, "seconds": round(seconds, 1), "fallbacks": fallbacks,
                                      "from_cache": sum(c.from_cache for _, c in model.calls)}
        model.close()
    return results


def per_1k(results: dict[str, Any]) -> dict[str, dict[str, float]]:
    scale = 1000 / results["words"]
    out = {}
    for method, t in results["methods"].items():
        out[method] = {
            "calls": t["calls"] * scale,
            "prompt": t["prompt"] * scale,
            "cached_unit": t["cached_unit"] * scale,
            "prefill_unit": (t["prompt"] - t["cached_unit"]) * scale,
            "cached_run": t["cached_run"] * scale,
            "prefill_run": (t["prompt"] - t["cached_run"]) * scale,
            "completion": t["completion"] * scale,
        }
    return out


def table(results: dict[str, Any]) -> str:
    rows = per_1k(results)
    cols = [("calls", "calls"), ("prompt", "prompt"), ("cached_unit", "cached (unit)"),
            ("prefill_unit", "prefill (unit)"), ("cached_run", "cached (run)"), ("prefill_run", "prefill (run)"),
            ("completion", "completion")]
    lines = ["| method | " + " | ".join(label for _, label in cols) + " |",
             "| --- | " + " | ".join("---:" for _ in cols) + " |"]
    order = ["litseg_lite", "litseg", "litseg_lite (first tries)", "litseg (first tries)"]
    for method, r in sorted(rows.items(), key=lambda kv: order.index(kv[0]) if kv[0] in order else len(order)):
        cells = (f"{r[k]:,.1f}" if k == "calls" else f"{r[k]:,.0f}" for k, _ in cols)
        lines.append(f"| {method} | " + " | ".join(cells) + " |")
    for suffix in ("", " (first tries)"):
        lite, teacher = rows["litseg_lite" + suffix], rows["litseg" + suffix]
        lines.append(f"| litseg / litseg_lite{suffix} | " + " | ".join(
            f"{teacher[k] / lite[k]:.2f}x" if lite[k] else "-" for k, _ in cols) + " |")
    return "\n".join(lines)


def docs_block(results: dict[str, Any]) -> str:
    """The block of docs/teacher.md: the run's settings, the table and the prefill ratios."""
    m = results["methods"]
    note = (f"Measured {time.strftime('%Y-%m-%d')} by `benchmarks/token_accounting.py` on `{Path(results['input']).name}` "
            f"({results['units']} units, {results['words']:,} words), model `{(results['model'] or {}).get('model')}`, "
            f"{os.cpu_count()} CPU cores; KV blocks of {results['block']} tokens. Tokens per 1,000 source words. "
            f"Wall time {m['litseg_lite']['seconds']:,.0f} s LitSeg-Lite, {m['litseg']['seconds']:,.0f} s teacher; "
            f"fallbacks: Lite {m['litseg_lite']['fallbacks']}, teacher {m['litseg']['fallbacks']}.")
    ratios = (f"**Teacher / Lite prefill: {results['prefill_ratio_unit']:.2f}x with reuse inside a chapter, "
              f"{results['prefill_ratio_run']:.2f}x with reuse across the run, {results['prefill_ratio_no_cache']:.2f}x "
              f"without prefix caching** (target: at most {TARGET_RATIO}x with reuse inside a chapter).")
    return f"{note}\n\n{table(results)}\n\n{ratios}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--input", type=Path, default=DEMO)
    parser.add_argument("--units", type=int, default=None, help="first N units only")
    parser.add_argument("--llm", default="embedded", help="conf/llm/<name>.yaml")
    parser.add_argument("--cache", type=Path, default=DEFAULT_CACHE)
    parser.add_argument("--replay", action="store_true", help="answer from the cache only (no model)")
    parser.add_argument("--max-new-tokens", type=int, default=1024)
    parser.add_argument("--summary-max-new-tokens", type=int, default=384)
    parser.add_argument("--max-retries", type=int, default=2)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--block", type=int, default=16, help="KV-cache block size in tokens")
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--check", action="store_true", help=f"exit 1 unless prefill ratio <= {TARGET_RATIO}")
    parser.add_argument("--write", action="store_true", help=f"write the table into {DOCS.relative_to(REPO)}")
    args = parser.parse_args(argv)
    if args.replay and not args.cache.is_file():
        parser.error(f"--replay needs the response cache {args.cache} (not in git); run once without --replay "
                     "to generate the answers (about 40 minutes on CPU)")
    results = run(args)
    rows = per_1k(results)
    ratio_unit = rows["litseg"]["prefill_unit"] / rows["litseg_lite"]["prefill_unit"]
    ratio_run = rows["litseg"]["prefill_run"] / rows["litseg_lite"]["prefill_run"]
    ratio_none = rows["litseg"]["prompt"] / rows["litseg_lite"]["prompt"]
    results.update(per_1k_words=rows, prefill_ratio_no_cache=ratio_none, prefill_ratio_unit=ratio_unit,
                   prefill_ratio_run=ratio_run, target=TARGET_RATIO)
    print(f"{results['units']} units, {results['words']} words, model {results['model']}")
    print("tokens per 1,000 source words:")
    print(table(results))
    for method, t in results["methods"].items():
        if "seconds" not in t:
            continue
        print(f"{method}: {t['calls']} calls, {t['seconds']} s, fallbacks {t['fallbacks']}, "
              f"{t['from_cache']} answers from the cache")
    print(f"teacher/lite prefill: {ratio_none:.2f}x without prefix caching, {ratio_unit:.2f}x with reuse inside "
          f"a chapter, {ratio_run:.2f}x with reuse across the run (target <= {TARGET_RATIO}x)")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2, default=str) + "\n")
    if args.write:
        write_block(DOCS, "token_accounting", "benchmarks/token_accounting.py --write", docs_block(results))
        print(f"wrote the table into {DOCS}")
    if args.check and ratio_unit > TARGET_RATIO:
        print("FAIL: prefill ratio above target", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
