"""LLM calls and tokens per 1,000 words of each LLM-based baseline chunker.

Run from the repository root (one core is enough; the embedded SmolLM2 runs on the CPU):

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/llm_chunker_cost.py
    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/llm_chunker_cost.py --write     # into docs/baselines.md
    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/llm_chunker_cost.py --methods lumberchunker
    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/llm_chunker_cost.py --methods perplexity,litseg_lite --json cost.json

Each method is built from its Hydra config (``conf/method/NAME.yaml``, default model: the embedded
SmolLM2-135M) with the response cache switched off, so every call is a real one, and run over
every unit of the input (default: the bundled demo story). Figures come from the chunkers' own
per-unit diagnostics: ``calls`` (chat requests, or forward passes for the scorers),
``prompt_tokens`` (tokens read; for the scorers, tokens fed through the model) and
``completion_tokens`` (tokens generated; none for the scorers). Words are whitespace-separated
words inside the units. Any registered LLM chunker (``litseg_lite``, ``litseg``) can be added with
``--methods``, so that all of them land in one table.

``--write`` puts the table into the generated block ``llm_chunker_cost`` of ``docs/baselines.md``
(:mod:`litseg.utils.docblocks`).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from litseg.chunkers.build import build_chunker_from_config  # noqa: E402
from litseg.segmentation.preprocess import prepare_document  # noqa: E402
from litseg.utils.docblocks import write_block  # noqa: E402

DEMO = REPO / "src" / "litseg" / "data" / "demo" / "the_two_lanterns.md"
DOCS = REPO / "docs" / "baselines.md"
DEFAULT_METHODS = ("perplexity", "margin_sampling", "lumberchunker")
BLOCK = "llm_chunker_cost"


def compose(method: str, overrides: list[str]) -> Any:
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir

    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
        return hydra_compose(config_name="annotate",
                             overrides=[f"method={method}", "input=unused", "llm.cache.enabled=false", *overrides])


def measure(method: str, doc: Any, overrides: list[str]) -> dict[str, Any]:
    cfg = compose(method, overrides)
    t0 = time.perf_counter()
    chunker = build_chunker_from_config(cfg.method, llm=cfg.get("llm"), prompt=cfg.get("prompt"),
                                        feedback=cfg.get("feedback"))
    build_s = time.perf_counter() - t0
    totals = {"calls": 0, "prompt_tokens": 0, "completion_tokens": 0, "fallback_units": 0}
    chunks = 0
    t0 = time.perf_counter()
    for res in chunker.chunk_units(doc, doc.units):
        d = res.diagnostics
        for key in ("calls", "prompt_tokens", "completion_tokens"):
            totals[key] += int(d.get(key, 0))
        totals["fallback_units"] += int(str(d.get("fallback", "none")) != "none")
        chunks += len(res.chunks)
    seconds = time.perf_counter() - t0
    close = getattr(chunker, "close", None)
    if callable(close):
        close()
    return {"method": method, **totals, "chunks": chunks, "seconds": round(seconds, 1),
            "build_s": round(build_s, 1)}


def markdown(rows: list[dict[str, Any]], words: int) -> str:
    k = 1000 / words
    lines = ["| chunker | calls / 1k words | prompt tokens / 1k words | completion tokens / 1k words "
             "| total tokens / 1k words | chunks | words / chunk | seconds (CPU run) |",
             "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        total = r["prompt_tokens"] + r["completion_tokens"]
        lines.append(f"| {r['method']} | {r['calls'] * k:,.1f} | {r['prompt_tokens'] * k:,.0f} "
                     f"| {r['completion_tokens'] * k:,.1f} | {total * k:,.0f} | {r['chunks']} "
                     f"| {words / max(r['chunks'], 1):,.0f} | {r['seconds']:,.0f} |")
    return "\n".join(lines)


def write_docs(table: str, note: str) -> None:
    write_block(DOCS, BLOCK, "benchmarks/llm_chunker_cost.py --write", f"{note}\n\n{table}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--input", type=Path, default=DEMO, help="a book file (default: the demo story)")
    ap.add_argument("--methods", default=",".join(DEFAULT_METHODS), help="comma-separated chunker names")
    ap.add_argument("--override", action="append", default=[],
                    help="extra Hydra override for every method, e.g. llm.dtype=float32 (repeatable)")
    ap.add_argument("--json", type=Path, help="also write the rows as JSON here")
    ap.add_argument("--write", action="store_true", help=f"write the table into {DOCS.relative_to(REPO)}")
    ap.add_argument("--no-docs", action="store_true", help=argparse.SUPPRESS)  # old flag: print only is the default
    args = ap.parse_args()

    doc = prepare_document(args.input)
    words = sum(len(doc.text[u.start:u.end].split()) for u in doc.units)
    sentences = sum(u.n_sentences for u in doc.units)
    print(f"{args.input.name}: {len(doc.units)} units, {words:,} words, {sentences:,} sentences "
          f"(OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS')})", flush=True)
    rows = []
    for method in args.methods.split(","):
        row = measure(method.strip(), doc, args.override)
        rows.append(row)
        print(f"{method}: {row}", flush=True)
    table = markdown(rows, words)
    print("\n" + table)
    note = (f"Measured by `benchmarks/llm_chunker_cost.py` on `{args.input.name}` ({len(doc.units)} units, "
            f"{words:,} words, {sentences} sentences) with the embedded SmolLM2-135M on one CPU core "
            f"({platform.machine()}), response cache off. Seconds depend on the machine; calls and tokens "
            "do not.")
    if args.override:
        note += " Overrides: " + ", ".join(f"`{o}`" for o in args.override) + "."
    if args.json:
        args.json.write_text(json.dumps({"input": str(args.input), "words": words, "units": len(doc.units),
                                         "sentences": sentences, "rows": rows}, indent=2), encoding="utf-8")
    if args.write:
        write_docs(table, note)
        print(f"\nwrote the table into {DOCS}")


if __name__ == "__main__":
    main()
