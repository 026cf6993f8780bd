"""The shipped LitSeg-Lite student against the untrained model and two baselines.

    python benchmarks/student_eval.py            # runs what is missing, prints the table
    python benchmarks/student_eval.py --write    # also writes it into docs/training.md
    python benchmarks/student_eval.py --variant grpo=outputs/train/grpo/adapter   # one more row

Three measurements, each a resumable run folder under --out (LLM answers are cached, so a rerun
only pays for what changed):

1. **Agreement with the teacher on held-out books.** The units of the teacher books the student
   never saw (its model card lists them) are segmented by every LitSeg-Lite variant and by the two
   baselines; boundary F1 within +/-1 sentence against the teacher's segmentation, pooled over
   units, with a 95 % interval that resamples books. A chance line puts as many cuts as the student
   made at random paragraph starts.
2. **FairytaleQA validation**, one ``evaluate.py`` run: recursive (1,000 characters), semantic and
   each LitSeg-Lite variant (annotated with ``annotate.py`` on the exported story texts, read back
   as chunk files). MRR@10, Hit@1, the Hit@1 of a random ranking, evidence within 1,500
   characters, words per chunk; for the LLM rows the first-try valid share, the fallback shares,
   the share of placeholder subtitles and seconds per unit from the annotate runs.
3. **What the enrichment does**: the student's FairytaleQA blocks indexed as built, without
   repeated subtitles, without subtitles and as main text only, in one more evaluate run.

Variants: ``untrained`` (embedded SmolLM2-135M, the compact prompt without the adapter) and ``student``
(SmolLM2 + the shipped adapter, the compact prompt it was trained on); ``--variant NAME=ADAPTER``
adds a row with another adapter on the compact prompt.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from litseg.utils.docblocks import write_block  # noqa: E402

SHARED = Path(os.environ.get("LITSEG_SHARED_DIR", REPO.parent / "shared"))
TEACHER_FILE = SHARED / "data" / "teacher" / "litseg_teacher_units.jsonl"
DOC = REPO / "docs" / "training.md"

BASE_VARIANTS = {
    # The same prompt without the adapter: what training adds. (The untrained model on the paper's
    # full Lite prompt writes up to 3,072 tokens a try and took over an hour per handful of units here.)
    "untrained": {"llm": "embedded", "prompt": "litseg_lite_compact", "adapter": None},
    "student": {"llm": "student", "prompt": "litseg_lite_compact", "adapter": None},
}


def run(cmd: list[str], log: Path) -> None:
    """Run a project command (as a user would), its output into ``log``; stop on failure."""
    env = {**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1"), "HF_HUB_OFFLINE": "1",
           "TRANSFORMERS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    print("$", " ".join(cmd), flush=True)
    t0 = time.perf_counter()
    with log.open("a", encoding="utf-8") as fh:
        done = subprocess.run(cmd, cwd=REPO, env=env, stdout=fh, stderr=subprocess.STDOUT)
    print(f"  {time.perf_counter() - t0:.0f} s, exit {done.returncode} (log {log})", flush=True)
    if done.returncode != 0:
        raise SystemExit(f"command failed with exit code {done.returncode}; see {log}")


# --reuse: read the evaluate runs already in --out instead of running them again.
REUSE = False

# Hydra overrides given with --override, applied to every LitSeg-Lite run (e.g. a token cap).
EXTRA: list[str] = []


def variant_overrides(v: dict[str, Any]) -> list[str]:
    own = v.get("overrides", [])
    own_keys = {o.partition("=")[0] for o in own}
    # a variant's own override of a key replaces the shared one (Hydra refuses a key given twice)
    out = [f"llm={v['llm']}", f"prompt={v['prompt']}", *(o for o in EXTRA if o.partition("=")[0] not in own_keys), *own]
    if v.get("adapter"):
        out.append(f"llm.adapter={v['adapter']}")
    return out


# --------------------------------------------------------------------------------------------
# 1. held-out teacher units


def held_out_books(data_report: Path | None = None) -> list[str]:
    """The student's validation books: from its model card, or a training run's data_report.json."""
    if data_report is not None:
        return list(json.loads(data_report.read_text())["books"]["validation"])
    from litseg.models import STUDENT, shipped_adapter

    meta = json.loads((shipped_adapter(STUDENT) / "litseg_adapter.json").read_text())
    return list(meta["data"]["books"]["validation"])


def teacher_run(out: Path) -> Path:
    run_dir = out / "teacher-imported"
    if not (run_dir / "run_summary.json").is_file():
        run([sys.executable, "annotate.py", "method=imported", f"method.annotations={TEACHER_FILE}",
             f"hydra.run.dir={run_dir}", "print_table=0", "view=false"], out / "logs.txt")
    return run_dir


def held_out_units(teacher: Path, books: list[str]) -> list[tuple[Any, Any, list[dict[str, Any]]]]:
    """(document, unit, teacher segments) of the teacher units of ``books``, rebuilt exactly."""
    from litseg.annotation.store import read_jsonl
    from litseg.segmentation.types import Document, Sentence, Unit

    docs = {r["book_id"]: r for r in read_jsonl(teacher / "documents.jsonl")}
    sentences: dict[str, list[dict[str, Any]]] = {}
    for s in read_jsonl(teacher / "sentences.jsonl"):
        sentences.setdefault(s["unit_key"], []).append(s)
    out = []
    texts: dict[str, str] = {}
    for row in read_jsonl(teacher / "diagnostics.jsonl"):
        if row["book_id"] not in books:
            continue
        meta = docs[row["book_id"]]
        if row["book_id"] not in texts:
            texts[row["book_id"]] = Path(meta["text_file"]).read_text(encoding="utf-8")
        rows = sorted(sentences[row["key"]], key=lambda s: s["idx"])
        unit = Unit(book_id=row["book_id"], unit_id=row["unit_id"], index=int(row.get("unit_index", 0)),
                    start=rows[0]["start"], end=rows[-1]["end"], title=row.get("unit_title", ""),
                    sentences=[Sentence(s["idx"], s["start"], s["end"]) for s in rows])
        doc = Document(book_id=row["book_id"], text=texts[row["book_id"]], title=meta.get("title", ""),
                       source_path=meta.get("source_path", ""))
        out.append((doc, unit, row["segments"]))
    return out


def segment_units(overrides: list[str], units: list, run_dir: Path) -> dict[str, Any]:
    """Chunk the held-out units with the annotate config ``overrides`` (a resumable annotate run in
    ``run_dir``); the run's summary."""
    from hydra import compose, initialize_config_dir

    from litseg.annotation.annotate import annotate
    from litseg.annotation.entry import build_chunker_for_run
    from litseg.annotation.sources import BookSource

    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
        cfg = compose("annotate", overrides=["input=unused", *overrides])
    chunker, _ = build_chunker_for_run(cfg)
    by_book: dict[str, list] = {}
    for doc, unit, _ in units:
        by_book.setdefault(doc.book_id, []).append((doc, unit))

    def source(items):
        def load():
            doc = items[0][0]
            doc.units = [u for _, u in items]
            return doc
        return BookSource(f"heldout:{items[0][0].book_id}", load, lambda: str(len(items)), stored_text=True)

    try:
        return annotate(inputs=[source(items) for items in by_book.values()], chunker=chunker, out_dir=run_dir,
                        progress=False)
    finally:
        getattr(chunker, "close", lambda: None)()  # LLM chunkers release their model


def score_against_teacher(got: dict[tuple[str, str], list], units: list, summary: dict[str, Any],
                          resamples: int = 2000, seed: int = 0) -> dict[str, Any]:
    """Boundary F1 (within one sentence) pooled over the units, with a 95 % bootstrap interval that
    resamples books, as evaluate.py's intervals do (units of one book are not independent). The
    pooled F1 is twice the matched cuts over predicted plus reference cuts, a weighted mean."""
    from litseg.rag.stats import bootstrap_ci
    from litseg.segmentation.agreement import boundary_f1, micro_boundary_f1

    scored = [(d.book_id, got[(d.book_id, u.unit_id)], gold) for d, u, gold in units if (d.book_id, u.unit_id) in got]
    score = micro_boundary_f1([(pred, gold) for _, pred, gold in scored], tolerance=1)
    per_unit = [(book, boundary_f1(pred, gold, tolerance=1)) for book, pred, gold in scored]
    per_unit = [(book, s) for book, s in per_unit if s.predicted + s.reference]  # a unit with no cut weighs 0
    ci = bootstrap_ci([2 * s.matched for _, s in per_unit], [book for book, _ in per_unit], weights=[
        s.predicted + s.reference for _, s in per_unit], n_resamples=resamples, seed=seed) if per_unit else None
    low, high = (ci.low, ci.high) if ci is not None and ci.n_groups > 1 else (None, None)
    return {"units": len(scored), "books": len({book for book, _, _ in scored}), "boundary_f1": score.f1,
            "low": low, "high": high, "precision": score.precision, "recall": score.recall,
            "seconds": summary.get("seconds")}


def agreement(name: str, v: dict[str, Any], units: list, out: Path) -> dict[str, Any]:
    """Segment the held-out units with variant ``v`` (a resumable annotate run), score vs the teacher."""
    from litseg.annotation.store import read_jsonl

    run_dir = out / f"heldout-{name}"
    summary = segment_units(variant_overrides(v), units, run_dir)
    got = {(r["book_id"], r["unit_id"]): r["segments"] for r in read_jsonl(run_dir / "diagnostics.jsonl")}
    return score_against_teacher(got, units, summary)


def random_paragraph_cuts(units: list, out: Path, name: str = "student", draws: int = 200,
                          seed: int = 0) -> dict[str, Any] | None:
    """A chance reference for the held-out score: in every unit, as many cuts as variant ``name``
    made, at paragraph starts drawn at random (most teacher cuts are at a paragraph start, and the
    student's are moved there). Mean boundary F1 over ``draws`` draws and its 5-95 % range."""
    import random

    from litseg.annotation.store import read_jsonl
    from litseg.chunkers.llm_common import unit_paragraph_starts
    from litseg.segmentation.agreement import micro_boundary_f1

    diags = out / f"heldout-{name}" / "diagnostics.jsonl"
    if not diags.is_file():
        return None
    made = {(r["book_id"], r["unit_id"]): len(r["segments"]) - 1 for r in read_jsonl(diags)}
    rng = random.Random(seed)
    scores = []
    for _ in range(draws):
        pairs = []
        for doc, unit, gold in units:
            n = unit.n_sentences
            starts = [i + 1 for i, first in enumerate(unit_paragraph_starts(doc, unit)) if first and i > 0]
            bounds = [1, *sorted(rng.sample(starts, min(made.get((doc.book_id, unit.unit_id), 0), len(starts)))), n + 1]
            pairs.append(([{"from_idx": a, "to_idx": b - 1} for a, b in zip(bounds, bounds[1:])], gold))
        scores.append(micro_boundary_f1(pairs, tolerance=1).f1)
    scores.sort()
    return {"variant": name, "draws": draws, "mean_f1": sum(scores) / draws,
            "low": scores[int(0.05 * draws)], "high": scores[int(0.95 * draws) - 1]}


#: The baselines of the FairytaleQA table, with the parameters its evaluate run uses.
BASELINES = {"recursive": ["method=recursive"], "semantic": ["method=semantic"]}


def baseline_agreement(name: str, units: list, out: Path) -> dict[str, Any]:
    """The same held-out score for a baseline chunker: its chunks' sentence ranges as the blocks
    (a reference point for the student's figure: what cutting without the teacher's method gets)."""
    from litseg.annotation.store import read_jsonl

    run_dir = out / f"heldout-{name}"
    summary = segment_units(BASELINES[name], units, run_dir)
    got: dict[tuple[str, str], list] = {}
    for c in read_jsonl(run_dir / "chunks.jsonl"):
        got.setdefault((c["book_id"], c["unit_id"]), []).append({"from_idx": c["from_idx"], "to_idx": c["to_idx"]})
    return score_against_teacher({k: sorted(v, key=lambda s: s["from_idx"]) for k, v in got.items()}, units, summary)


def teacher_cuts_at_paragraphs(teacher: Path) -> tuple[int, int]:
    """(cuts at a paragraph start, all cuts) of the teacher's segmentations over every imported unit:
    the evidence behind ``method.cut_at_paragraphs``."""
    from litseg.annotation.store import read_jsonl
    from litseg.segmentation.agreement import cuts

    starts: dict[str, set[int]] = {}
    for s in read_jsonl(teacher / "sentences.jsonl"):
        if s["para"]:
            starts.setdefault(s["unit_key"], set()).add(s["idx"])
    at, total = 0, 0
    for row in read_jsonl(teacher / "diagnostics.jsonl"):
        unit_cuts = cuts(row["segments"])
        total += len(unit_cuts)
        at += sum(1 for c in unit_cuts if c in starts.get(row["key"], set()))
    return at, total


# --------------------------------------------------------------------------------------------
# 2. FairytaleQA validation


def unit_stats(run_dir: Path, prompt_name: str) -> dict[str, Any]:
    """First-try valid share, fallback shares, placeholder-subtitle share, seconds per unit."""
    from omegaconf import OmegaConf

    from litseg.annotation.store import read_jsonl
    from litseg.segmentation.agreement import instruction_strings, placeholder_share, repeated_subtitle_share
    from litseg.segmentation.schema import get_schema

    diags = read_jsonl(run_dir / "diagnostics.jsonl")
    chunks = read_jsonl(run_dir / "chunks.jsonl")
    summary = json.loads((run_dir / "run_summary.json").read_text())
    prompt = OmegaConf.to_container(OmegaConf.load(REPO / "conf" / "prompt" / f"{prompt_name}.yaml"), resolve=True)
    texts = instruction_strings(prompt, [get_schema(str(prompt["schema"]))])
    n = len(diags)
    fallbacks: dict[str, int] = {}
    for d in diags:
        fallbacks[str(d.get("fallback", "none"))] = fallbacks.get(str(d.get("fallback", "none")), 0) + 1
    first = sum(1 for d in diags if d.get("attempts") and d["attempts"][0].get("valid"))
    return {
        "units": n,
        "first_try_valid": first / n if n else None,
        "fallback_repair": fallbacks.get("repair", 0) / n if n else None,
        "fallback_whole_unit": fallbacks.get("whole_unit", 0) / n if n else None,
        "placeholder_share": placeholder_share([c.get("subtitle", "") for c in chunks], texts),
        "repeated_subtitles": repeated_subtitle_share([s.get("subtitle", "") for s in d.get("segments", [])]
                                                      for d in diags),
        # The model's time per unit: each answer's share of its generate call (a unit's own
        # "seconds" in a batched run includes waiting for the rest of the batch).
        "seconds_per_unit": sum(float(a.get("seconds") or 0.0) for d in diags for a in d.get("attempts") or []) / n
        if n else None,
        "wall_seconds": summary.get("seconds"),
    }


def fairytaleqa(variants: dict[str, dict[str, Any]], out: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    texts = out / "ftqa_val_texts"
    if not any(texts.glob("*.txt")):
        run([sys.executable, "evaluate.py", "suite=fairytaleqa", f"export_texts={texts}"], out / "logs.txt")
    stats = {}
    files = []
    for name, v in variants.items():
        run_dir = out / f"ftqa-{name}"
        run([sys.executable, "annotate.py", f"input={texts}", "method=litseg_lite", *variant_overrides(v),
             f"hydra.run.dir={run_dir}", "print_table=0", "view=false", "export.enabled=false"], out / "logs.txt")
        stats[name] = unit_stats(run_dir, v["prompt"])
        files.append(f"{{label: litseg_lite_{name}, path: {run_dir}}}")
    # The index holds each chunk's text as the paper builds it (subtitle and context sentences
    # around the main text); a second run indexes the main text alone, to see what the LLM rows'
    # enrichment adds or costs (the baselines have none, so their rows must not change).
    if REUSE:
        return ({**json.loads((out / "evaluate" / "results.json").read_text()),
                 "main_text": json.loads((out / "evaluate-main-text" / "results.json").read_text())}, stats)
    results: dict[str, Any] = {}
    for key, folder, extra in (("text", "evaluate", []), ("main_text", "evaluate-main-text", ["metrics.index_text=main_text"])):
        eval_dir = out / folder
        run([sys.executable, "evaluate.py", "suite=fairytaleqa", "chunkers=[recursive,semantic]",
             f"chunk_files=[{','.join(files)}]", f"hydra.run.dir={eval_dir}", "metrics.n_resamples=500", *extra],
            out / "logs.txt")
        results[key] = json.loads((eval_dir / "results.json").read_text())
    return {**results["text"], "main_text": results["main_text"]}, stats


# --------------------------------------------------------------------------------------------
# 3. What the student's enrichment does to retrieval: the same blocks, indexed with less of it


def _text_as_built(c: dict[str, Any], keep_subtitle: bool, keep_context: bool) -> str:
    from litseg.segmentation.reconstruct import chunk_text

    return chunk_text((c.get("subtitle") or "") if keep_subtitle else "",
                      c.get("context_before", "") if keep_context else "", c["main_text"],
                      c.get("context_after", "") if keep_context else "")


def _no_repeats(chunks: list[dict[str, Any]]) -> list[str]:
    seen: dict[str, set[str]] = {}
    texts = []
    for c in chunks:
        key = (c.get("subtitle") or "").strip().casefold()
        units = seen.setdefault(c["unit_key"], set())
        texts.append(_text_as_built(c, keep_subtitle=key not in units, keep_context=True))
        units.add(key)
    return texts


#: label -> (what the index holds, the chunk texts from the run's chunk records in order)
ENRICHMENT: dict[str, tuple[str, Any]] = {
    "enrich_as_built": ("subtitle, context sentences, main text (as built)", None),
    "enrich_no_repeats": ("the same, a subtitle left out where it repeats an earlier one of its unit", _no_repeats),
    "enrich_no_subtitle": ("context sentences and main text", lambda cs: [_text_as_built(c, False, True) for c in cs]),
    "enrich_main_only": ("main text only", lambda cs: [_text_as_built(c, False, False) for c in cs]),
}


def derived_run(src: Path, dst: Path, texts_of: Any) -> Path:
    """A copy of the annotate run ``src`` whose chunk records keep every span and field but index
    other text (``texts_of(chunks)``)."""
    import shutil

    from litseg.annotation.store import read_jsonl

    if dst.exists():
        shutil.rmtree(dst)
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("run.lock", "chunks.jsonl"))
    chunks = read_jsonl(src / "chunks.jsonl")
    texts = texts_of(chunks)
    if len(texts) != len(chunks):
        raise SystemExit(f"derived run {dst}: {len(texts)} texts for {len(chunks)} chunks")
    with (dst / "chunks.jsonl").open("w", encoding="utf-8") as fh:
        for c, text in zip(chunks, texts):
            fh.write(json.dumps({**c, "text": text}, ensure_ascii=False) + "\n")
    return dst


def enrichment(out: Path, name: str = "student") -> dict[str, Any]:
    """One evaluate run over the student's FairytaleQA chunks indexed four ways (ENRICHMENT)."""
    eval_dir = out / "evaluate-enrichment"
    if REUSE and (eval_dir / "results.json").is_file():
        return json.loads((eval_dir / "results.json").read_text())
    src = out / f"ftqa-{name}"
    files = []
    for label, (_, texts_of) in ENRICHMENT.items():
        path = src if texts_of is None else derived_run(src, out / "enrichment" / label, texts_of)
        files.append(f"{{label: {label}, path: {path}}}")
    run([sys.executable, "evaluate.py", "suite=fairytaleqa", "chunkers=[]", f"chunk_files=[{','.join(files)}]",
         f"hydra.run.dir={eval_dir}", "metrics.n_resamples=500"], out / "logs.txt")
    return json.loads((eval_dir / "results.json").read_text())


def enrichment_table(results: dict[str, Any]) -> str:
    """MRR@10 and evidence@1500 of each way of indexing, and its paired difference from as built."""
    base = "enrich_as_built"
    pairs = {(p["a"], p["b"], p["metric"]): p for p in results.get("pairwise") or []}

    def diff(label: str, name: str) -> str:
        p = pairs.get((base, label, name))
        if p is None:
            return "-"
        return (f"{-p['diff']:+.3f} [{-p['diff_high']:+.3f}, {-p['diff_low']:+.3f}], "
                f"p = {p['p_permutation']:.2g}")

    head = ["the student's chunks, indexed as", "MRR@10", "evidence@1500", "MRR@10 minus as built",
            "evidence@1500 minus as built"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for label, (shown, _) in ENRICHMENT.items():
        r = row_metrics(results, label)
        lines.append("| " + " | ".join([shown, fmt(metric(r, "mrr@10")), fmt(metric(r, "evidence@1500")),
                                        diff(label, "mrr@10"), diff(label, "evidence@1500")]) + " |")
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------------------------
# The table


def fmt(x: Any, pct: bool = False, digits: int = 3) -> str:
    if x is None:
        return "-"
    if pct:
        return f"{100 * x:.0f} %"
    return f"{x:.{digits}f}" if isinstance(x, float) else str(x)


def row_metrics(results: dict[str, Any], label: str) -> dict[str, Any]:
    for r in results.get("results", []):
        if r.get("label") == label:
            return r
    return {}


def metric(r: dict[str, Any], name: str) -> Any:
    """A retrieval metric's estimate from one row of evaluate.py's results.json."""
    value = (r.get("metrics") or {}).get(name)
    return value.get("estimate") if isinstance(value, dict) else value


def words_per_chunk(r: dict[str, Any]) -> Any:
    return ((r.get("chunks") or {}).get("words") or {}).get("mean")


# Paired differences shown under the table: MRR@10, and evidence@1500, which does not grow with
# chunk size (MRR@10 does: see the random Hit@1 column).
NAMES = {"mrr@10": "MRR@10", "evidence@1500": "evidence@1500"}


def paired_lines(results: dict[str, Any]) -> str:
    """Each LitSeg-Lite row against the other rows on the same questions: the difference in
    MRR@10 and evidence@1500 with its 95 % interval and permutation p (resampled by book)."""
    lines = []
    for key, label in (("text", ""), ("main_text", ", main text indexed")):
        rows = results if key == "text" else (results.get("main_text") or {})
        for pair in rows.get("pairwise") or []:
            if pair["metric"] not in NAMES or not str(pair["b"]).startswith("litseg_lite_"):
                continue
            lines.append(f"- {NAMES[pair['metric']]}{label}, {pair['b']} minus {pair['a']}: {-pair['diff']:+.3f} "
                         f"[{-pair['diff_high']:+.3f}, {-pair['diff_low']:+.3f}], permutation p = {pair['p_permutation']:.3g}")
    return "\n".join(lines) + ("\n" if lines else "")


def interval(h: dict[str, Any]) -> str:
    return f" [{h['low']:.3f}, {h['high']:.3f}]" if h.get("low") is not None else ""


def table(results: dict[str, Any], stats: dict[str, Any], heldout: dict[str, Any],
          baseline_heldout: dict[str, Any] | None = None) -> str:
    head = ["FairytaleQA val", "MRR@10", "MRR@10, main text indexed", "Hit@1", "random Hit@1", "evidence@1500", "words/chunk",
            "first-try valid", "fallback repair / whole unit", "placeholder subtitles", "repeated subtitles", "s/unit",
            "boundary F1 vs teacher, held-out [95 % interval]"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    labels = [("recursive", "recursive 1000c", None), ("semantic", "semantic", None)]
    labels += [(f"litseg_lite_{n}", f"LitSeg-Lite {n}", n) for n in (stats or heldout)]
    for label, shown, name in labels:
        r = row_metrics(results, label)
        s = stats.get(name, {}) if name else {}
        h = heldout.get(name, {}) if name else (baseline_heldout or {}).get(label, {})
        plain = row_metrics(results.get("main_text") or {}, label)
        cells = [shown, fmt(metric(r, "mrr@10")), fmt(metric(plain, "mrr@10")), fmt(metric(r, "hit@1")), fmt(metric(r, "random_hit@1")),
                 fmt(metric(r, "evidence@1500")), fmt(words_per_chunk(r), digits=0),
                 fmt(s.get("first_try_valid"), pct=True),
                 f"{fmt(s.get('fallback_repair'), pct=True)} / {fmt(s.get('fallback_whole_unit'), pct=True)}"
                 if s else "-",
                 fmt(s.get("placeholder_share"), pct=True), fmt(s.get("repeated_subtitles"), pct=True),
                 fmt(s.get("seconds_per_unit"), digits=1),
                 f"{fmt(h.get('boundary_f1'))}{interval(h)} ({h.get('units', 0)} units)" if h else "-"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=REPO / "outputs" / "bench" / "student_eval")
    ap.add_argument("--variant", action="append", default=[], help="NAME=ADAPTER_DIR: one more LitSeg-Lite row")
    ap.add_argument("--skip-fairytaleqa", action="store_true")
    ap.add_argument("--only", action="append", default=[], help="run these variants only, without the "
                    "evaluation (to fill their resumable runs and the answer cache ahead of time)")
    ap.add_argument("--rows", action="append", default=[], help="evaluate only these LitSeg-Lite variants "
                    "(a row left out is named in the table's note)")
    ap.add_argument("--heldout-rows", action="append", default=[], help="measure the held-out agreement "
                    "for these variants only (the others show '-', named in the note)")
    ap.add_argument("--variant-override", action="append", default=[], metavar="NAME:OVERRIDE",
                    help="a Hydra override for one variant's runs only, e.g. untrained:method.max_retries=0 "
                    "(named in the table's note)")
    ap.add_argument("--reuse", action="store_true", help="rewrite the table from the evaluate runs already in "
                    "--out (the annotate runs are still checked, and resume if incomplete)")
    ap.add_argument("--write", action="store_true", help="write the table into docs/training.md")
    ap.add_argument("--data-report", type=Path, default=None,
                    help="take the held-out books from this training run's data_report.json (default: the model card)")
    ap.add_argument("--override", action="append", default=[],
                    help="a Hydra override for every LitSeg-Lite run, e.g. method.max_new_tokens=1536")
    args = ap.parse_args()
    global REUSE
    REUSE = args.reuse
    EXTRA.extend(args.override)
    args.out.mkdir(parents=True, exist_ok=True)
    variants = dict(BASE_VARIANTS)
    for item in args.variant:
        name, _, adapter = item.partition("=")
        variants[name] = {"llm": "student", "prompt": "litseg_lite_compact", "adapter": adapter}

    for item in args.variant_override:
        name, sep, override = item.partition(":")
        if not sep or name not in variants:
            raise SystemExit(f"--variant-override {item!r}: expected NAME:OVERRIDE with NAME one of {sorted(variants)}")
        variants[name] = {**variants[name], "overrides": [*variants[name].get("overrides", []), override]}
    left_out = [k for k in variants if args.rows and k not in args.rows]
    if args.rows:
        variants = {k: v for k, v in variants.items() if k in args.rows}
    if args.only:
        variants = {k: v for k, v in variants.items() if k in args.only}
    teacher = teacher_run(args.out)
    units = held_out_units(teacher, held_out_books(args.data_report))
    no_heldout = [k for k in variants if args.heldout_rows and k not in args.heldout_rows]
    heldout = {name: agreement(name, v, units, args.out) for name, v in variants.items() if name not in no_heldout}
    base_heldout = {} if args.only else {b: baseline_agreement(b, units, args.out) for b in BASELINES}
    chance = None if args.only or "student" not in heldout else random_paragraph_cuts(units, args.out)
    if args.only:
        for name, v in variants.items():
            run([sys.executable, "evaluate.py", "suite=fairytaleqa", f"export_texts={args.out / 'ftqa_val_texts'}"],
                args.out / "logs.txt")
            run([sys.executable, "annotate.py", f"input={args.out / 'ftqa_val_texts'}", "method=litseg_lite",
                 *variant_overrides(v), f"hydra.run.dir={args.out / f'ftqa-{name}'}", "print_table=0", "view=false",
                 "export.enabled=false"], args.out / "logs.txt")
        print(json.dumps(heldout, indent=1))
        return
    print(json.dumps(heldout, indent=1))
    results, stats = ({}, {}) if args.skip_fairytaleqa else fairytaleqa(variants, args.out)
    if args.skip_fairytaleqa:
        # The held-out rows alone: the unit columns come from the held-out runs, no retrieval column
        # is filled, and the note says so.
        stats = {name: unit_stats(args.out / f"heldout-{name}", variants[name]["prompt"]) for name in heldout}
    enriched = {} if args.skip_fairytaleqa or "student" not in stats else enrichment(args.out)
    (args.out / "student_eval.json").write_text(json.dumps({"heldout": heldout, "baseline_heldout": base_heldout,
                                                            "random_paragraph_cuts": chance,
                                                            "fairytaleqa_units": stats, "results": results,
                                                            "enrichment": enriched}, indent=1, default=str))
    text = table(results, stats, heldout, base_heldout)
    print(text)
    enrich_text = enrichment_table(enriched) if enriched else ""
    print(enrich_text)
    at, total = teacher_cuts_at_paragraphs(teacher)
    if args.write:
        body = (f"{text}\n{paired_lines(results)}\nThe teacher's cuts at a paragraph start: {at} of {total} ({100 * at / max(1, total):.1f} %) over "
                f"all imported teacher units.\n"
                + (f"Chance reference for the held-out column: as many cuts per unit as the {chance['variant']} made, "
                   f"at random paragraph starts: boundary F1 {chance['mean_f1']:.3f} (5-95 % of {chance['draws']} "
                   f"draws: {chance['low']:.3f} to {chance['high']:.3f}).\n" if chance else "")
                + (f"Not in this run: {', '.join(left_out)} (`--rows`).\n" if left_out else "")
                + ("FairytaleQA not run (`--skip-fairytaleqa`): the retrieval columns are empty; first-try valid, "
                   "fallbacks, placeholder subtitles and s/unit are those of the held-out teacher units.\n" if args.skip_fairytaleqa else "")
                + (f"Held-out agreement not measured for: {', '.join(no_heldout)} (`--heldout-rows`).\n"
                   if no_heldout else "")
                + "".join(f"{name} runs also with {' '.join(v['overrides'])} (`--variant-override`).\n"
                          for name, v in variants.items() if v.get("overrides"))
                + f"Measured by `python benchmarks/student_eval.py --write{' --reuse' if REUSE else ''}` on this machine "
                f"({os.cpu_count()} CPU cores, OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', '1')}"
                f"{'; LitSeg-Lite runs with ' + ' '.join(EXTRA) if EXTRA else ''}); "
                f"held-out teacher books: {', '.join(sorted({u[0].book_id for u in units}))}.\n")
        write_block(DOC, "student_eval", "benchmarks/student_eval.py --write", body)
        if enrich_text:
            write_block(DOC, "student_enrichment", "benchmarks/student_eval.py --write",
                        enrich_text + f"\nOne `evaluate.py` run (`{args.out.name}/evaluate-enrichment`) over the "
                        "student's FairytaleQA val chunks: the same blocks and questions, only the indexed text "
                        "differs; intervals are 95 % bootstrap over books, p from a paired permutation test.\n")
        print(f"wrote the table into {DOC}")


if __name__ == "__main__":
    main()
