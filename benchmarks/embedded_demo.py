"""Seconds per unit of LitSeg-Lite with the embedded SmolLM2-135M on the bundled demo story.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/embedded_demo.py [--threads 1] [--batch 1]

Runs the single-pass chunker on every chapter with the response cache off (every call is paid),
and prints one row per unit (sentences, tries, prompt/completion tokens, seconds, decode speed)
plus the model load time. Figures are quoted in docs/demo.md.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=int(os.environ.get("OMP_NUM_THREADS", "1")))
    ap.add_argument("--batch", type=int, default=1, help="units decoded together (1 = one at a time)")
    ap.add_argument("--max-new-tokens", type=int, default=1024)
    args = ap.parse_args()

    from omegaconf import OmegaConf

    from litseg.chunkers.litseg_lite import LitSegLiteChunker
    from litseg.llm.factory import build_llm
    from litseg.segmentation.preprocess import prepare_document

    prompt = OmegaConf.to_container(OmegaConf.load(REPO / "conf/prompt/litseg_lite.yaml"))
    feedback = OmegaConf.to_container(OmegaConf.load(REPO / "conf/feedback/default.yaml"))
    llm = build_llm({"backend": "embedded", "num_threads": args.threads, "batch_size": args.batch,
                     "cache": {"enabled": False}})
    doc = prepare_document(REPO / "src/litseg/data/demo/the_two_lanterns.md")
    t0 = time.perf_counter()
    llm.count_tokens("warm up")  # tokenizer
    chunker = LitSegLiteChunker(llm, prompt, feedback=feedback, max_new_tokens=args.max_new_tokens,
                                workers=args.batch)
    rows = []
    start = time.perf_counter()
    for res in chunker.chunk_units(doc, doc.units):
        d = res.diagnostics
        rows.append((res.unit_id, len(next(u for u in doc.units if u.unit_id == res.unit_id).sentences),
                     d["tries"], d["fallback"], d["prompt_tokens"], d["completion_tokens"], d["seconds"],
                     len(res.chunks)))
    total = time.perf_counter() - start
    print(f"model + tokenizer ready in {start - t0:.1f} s (first call loads the weights)")
    print(f"threads={args.threads} batch={args.batch}\n")
    print("| unit | sentences | tries | fallback | prompt tok | completion tok | seconds | chunks |")
    print("|---|---:|---:|---|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r[0]} | {r[1]} | {r[2]} | {r[3]} | {r[4]} | {r[5]} | {r[6]:.1f} | {r[7]} |")
    comp = sum(r[5] for r in rows)
    print(f"\n{len(rows)} units in {total:.1f} s: {total / max(1, len(rows)):.1f} s per unit, "
          f"{comp / total:.1f} completion tokens/s overall")


if __name__ == "__main__":
    main()
