"""The students against each other and the baselines: one measurement for all (docs/training.md).

    python benchmarks/student_eval.py                      # runs what is missing, prints the tables
    python benchmarks/student_eval.py --write              # also writes them into docs/training.md
    python benchmarks/student_eval.py --rows recursive,tagger --skip-fairytaleqa   # a part of it
    python benchmarks/student_eval.py --paper-adapter outputs/train/student/adapter --tagger outputs/train/tagger/tagger
    python benchmarks/student_eval.py --sample untrained=20 --sample first_student=20   # slow rows on a sample

A row too slow for every held-out unit on a CPU (a single-pass LitSeg-Lite decodes about 30 words
a second) runs with ``--sample ROW=N`` on N units drawn with a fixed seed; the table says so and
gives recursive's scores on the same units beside it, and the row is left out of FairytaleQA.

Rows (``--rows`` picks some): ``recursive`` (1,000 characters) and ``semantic``, the baselines;
``untrained``, the embedded SmolLM2-135M on the compact LitSeg-Lite prompt without any adapter;
``first_student``, the first shipped LitSeg-Lite adapter (subtitle first, trained on 196 units);
``paper_student``, LitSeg-Lite trained again on the 3x teacher set, blocks written range first
(``--paper-adapter``, default: the shipped one); ``tagger``, LitSeg-Tagger, the two-part student
(``--tagger``, default: the shipped one).

Two measurements, each a resumable run folder under ``--out`` (a killed run goes on from the units
it finished). A held-out run keeps its LLM answers in its own response cache
(``heldout-ROW/responses.sqlite``): a new run folder starts cold, so words per second is this
machine's model time; a unit answered from a cache anyway is left out of the speed and counted
beside it (a replayed answer carries the seconds of the run that asked it).

1. **Held-out teacher units**: the units of the ``test`` books of the packaged teacher-v2 split
   (books no student trained on; the split file records its mix of kinds), segmented by every row.
   Against the teacher's cuts: boundary F1 within one sentence (pooled over units, a 95 % interval
   resampling books), exact-cut F1, Pk and WindowDiff (pooled windows; both penalise cutting too
   often, which the tolerant F1 rewards), cuts per 1,000 words, a chance line at each row's own cut
   count (as many cuts per unit, at random paragraph starts, 200 draws), the share of repeated and
   of placeholder subtitles, and words per second of one core (the model's own time).
2. **FairytaleQA validation** (retrieval with gold evidence): every row's chunks in one
   ``evaluate.py`` run, each LLM row both as built (subtitle and context around the main text) and
   with its main text alone indexed; MRR@10, evidence@1500, paired differences against recursive
   and between each row as built and its main text (95 % intervals and permutation p resampling
   books).

The targets of the student issue are checked against these figures under the tables, each with
the measured value and by how much it is missed when it is.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from litseg.training.splits import kind_of_source  # noqa: E402
from litseg.utils.docblocks import write_block  # noqa: E402

SHARED = Path(os.environ.get("LITSEG_SHARED_DIR", REPO.parent / "shared"))
TEACHER_FILE = SHARED / "data" / "teacher" / "litseg_teacher_units.jsonl"
DOC = REPO / "docs" / "training.md"
SPLIT = "teacher-v2"
#: The retrained LitSeg-Lite shipped in the package (src/litseg/models/).
PAPER_STUDENT = "litseg-lite-range-first-smollm2-135m"
#: LitSeg-Lite rows decode one answer a unit with this token budget and batch size on a CPU.
LITE = ["method=litseg_lite", "method.max_new_tokens=1536", "llm.batch_size=1"]


@dataclass
class Row:
    label: str
    overrides: list[str]
    llm: bool = True
    notes: list[str] = field(default_factory=list)
    sample: int | None = None  # held-out units drawn for a row too slow for all of them (--sample)


def make_rows(paper_adapter: str | None, tagger: str | None) -> dict[str, Row]:
    tagger_overrides = ["method=litseg_tagger", "llm=tagger", "prompt=tagger_writer"]
    if tagger:
        tagger_overrides += [f"method.model={tagger}", f"llm.adapter={Path(tagger) / 'writer'}"]
    return {
        "recursive": Row("recursive 1000c", ["method=recursive"], llm=False),
        "semantic": Row("semantic", ["method=semantic"], llm=False),
        # one try and a smaller budget: the untrained model writes to its token limit
        "untrained": Row("LitSeg-Lite, untrained SmolLM2-135M", [
            "method=litseg_lite", "llm=embedded", "prompt=litseg_lite_compact", "method.max_retries=0",
            "method.max_new_tokens=1024", "llm.batch_size=1"], notes=["one try, 1,024 tokens"]),
        "first_student": Row("LitSeg-Lite, first shipped student", [*LITE, "llm=student", "prompt=litseg_lite_compact"]),
        "paper_student": Row("LitSeg-Lite, trained again (range first)", [
            *LITE, "llm=student", "prompt=litseg_lite_range_first",
            f"llm.adapter={paper_adapter or PAPER_STUDENT}"]),
        "tagger": Row("LitSeg-Tagger (two-part)", tagger_overrides),
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




def held_out_units(teacher: Path, books: list[str]) -> list[tuple[Any, Any, list[dict[str, Any]]]]:
    """(document, unit, teacher segments) of the teacher units of ``books``, rebuilt exactly."""
    from litseg.utils.jsonl import read_jsonl
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
            # newline="": offsets count a CRLF book's "\r" (the text as annotate.py read it); a plain
            # read_text() drops them and every span after the first line break would slide
            with open(meta["text_file"], encoding="utf-8", newline="") as fh:
                texts[row["book_id"]] = fh.read()
        rows = sorted(sentences[row["key"]], key=lambda s: s["idx"])
        unit = Unit(book_id=row["book_id"], unit_id=row["unit_id"], index=int(row.get("unit_index", 0)),
                    start=rows[0]["start"], end=rows[-1]["end"], title=row.get("unit_title", ""),
                    sentences=[Sentence(s["idx"], s["start"], s["end"]) for s in rows])
        doc = Document(book_id=row["book_id"], text=texts[row["book_id"]], title=meta.get("title", ""),
                       source_path=meta.get("source_path", ""))  # its path names the kind of text
        out.append((doc, unit, row["segments"]))
    return out




def segment_units(overrides: list[str], units: list, run_dir: Path) -> dict[str, Any]:
    """Chunk the held-out units with the annotate config ``overrides`` (a resumable annotate run in
    ``run_dir``); the run's summary."""
    from hydra import compose, initialize_config_dir

    from litseg.annotation.annotate import annotate
    from litseg.annotation.entry import build_chunker_for_run
    from litseg.annotation.sources import BookSource

    # The run's own response cache: a new run folder starts cold, so its words per second is this
    # machine's model time, not answers replayed (with their old seconds) from another run.
    cache = f"llm.cache.path={run_dir / 'responses.sqlite'}"
    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
        cfg = compose("annotate", overrides=["input=unused", *overrides, cache])
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




def derived_run(src: Path, dst: Path, texts_of: Any) -> Path:
    """A copy of the annotate run ``src`` whose chunk records keep every span and field but index
    other text (``texts_of(chunks)``)."""
    import shutil

    from litseg.utils.jsonl import read_jsonl

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




def _text_as_built(c: dict[str, Any], keep_subtitle: bool, keep_context: bool) -> str:
    from litseg.segmentation.reconstruct import chunk_text

    return chunk_text((c.get("subtitle") or "") if keep_subtitle else "",
                      c.get("context_before", "") if keep_context else "", c["main_text"],
                      c.get("context_after", "") if keep_context else "")




def fmt(x: Any, pct: bool = False, digits: int = 3) -> str:
    if x is None:
        return "-"
    if pct:
        return f"{100 * x:.0f} %"
    return f"{x:.{digits}f}" if isinstance(x, float) else str(x)


# --------------------------------------------------------------------------------------------
# 1. held-out teacher units


def teacher_run(out: Path) -> Path:
    run_dir = out / "teacher-imported"
    if not (run_dir / "run_summary.json").is_file():
        run([sys.executable, "annotate.py", "method=imported", f"method.annotations={TEACHER_FILE}",
             f"hydra.run.dir={run_dir}", "print_table=0", "view=false"], out / "logs.txt")
    return run_dir


def test_books() -> tuple[list[str], dict[str, Any]]:
    from litseg.training.splits import SPLITS_DIR, load_book_split

    raw = json.loads((SPLITS_DIR / f"{SPLIT}.json").read_text())
    return load_book_split(SPLIT)["test"], raw["counts"]["test"]


def row_segments(name: str, row: Row, run_dir: Path) -> dict[tuple[str, str], list[dict[str, Any]]]:
    """Each unit's blocks as the row made them: an LLM row's validated segments, a baseline's chunk
    ranges (its cuts are where its chunks start)."""
    from litseg.utils.jsonl import read_jsonl

    if row.llm:
        return {(r["book_id"], r["unit_id"]): r.get("segments") or [] for r in read_jsonl(run_dir / "diagnostics.jsonl")
                if not r.get("error")}
    got: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for c in read_jsonl(run_dir / "chunks.jsonl"):
        got.setdefault((c["book_id"], c["unit_id"]), []).append({"from_idx": c["from_idx"], "to_idx": c["to_idx"]})
    return {k: sorted(v, key=lambda s: s["from_idx"]) for k, v in got.items()}


def paragraph_starts_of(doc: Any, unit: Any) -> list[int]:
    from litseg.chunkers.llm_common import unit_paragraph_starts

    return [i + 1 for i, first in enumerate(unit_paragraph_starts(doc, unit)) if first and i > 0]


def chance_line(units: list, made: dict[tuple[str, str], int], draws: int = 200, seed: int = 0) -> dict[str, float]:
    """As many cuts per unit as the row made, at random paragraph starts: boundary F1 over draws."""
    from litseg.segmentation.agreement import micro_boundary_f1

    rng = random.Random(seed)
    scores = []
    starts = {(d.book_id, u.unit_id): paragraph_starts_of(d, u) for d, u, _ in units}
    for _ in range(draws):
        pairs = []
        for doc, unit, gold in units:
            key = (doc.book_id, unit.unit_id)
            pool = starts[key]
            chosen = sorted(rng.sample(pool, min(made.get(key, 0), len(pool))))
            bounds = [1, *chosen, unit.n_sentences + 1]
            pairs.append(([{"from_idx": a, "to_idx": b - 1} for a, b in zip(bounds, bounds[1:])], gold))
        scores.append(micro_boundary_f1(pairs, tolerance=1).f1)
    scores.sort()
    return {"mean": sum(scores) / draws, "low": scores[int(0.05 * draws)], "high": scores[int(0.95 * draws) - 1]}


def words_per_second(run_dir: Path, row: Row, units: list) -> dict[str, Any]:
    """Words of the held-out units over the row's own time: the model's answers (LLM rows, from
    each unit's ``model_seconds``) or the run's chunking time (baselines)."""
    from litseg.utils.jsonl import read_jsonl

    words = {(d.book_id, u.unit_id): len(d.text[u.start:u.end].split()) for d, u, _ in units}
    total_words = sum(words.values())
    if not row.llm:  # the run that chunked every unit (a resumed run's summary counts only what it did)
        timing = run_dir / "chunking_seconds.json"
        seconds = float(json.loads(timing.read_text()).get("seconds") or 0.0) if timing.is_file() else 0.0
        return {"words_per_second": total_words / seconds if seconds else None, "near_2000": None}
    diags = [r for r in read_jsonl(run_dir / "diagnostics.jsonl") if not r.get("error")]
    replayed = [r for r in diags if replayed_answers(r)]
    if replayed:  # their seconds are another run's: the speed of the others only, and said
        print(f"  {run_dir.name}: {len(replayed)} units answered from the response cache; "
              "words per second counts the other units", flush=True)
    seconds = {(r["book_id"], r["unit_id"]): float(r.get("model_seconds") or 0.0) for r in diags
               if not replayed_answers(r)}
    spent = sum(seconds.values())
    near = min(seconds, key=lambda k: abs(words[k] - 2000)) if seconds else None
    return {"words_per_second": sum(words[k] for k in seconds) / spent if spent else None,
            "replayed_units": len(replayed),
            "near_2000": {"words": words[near], "seconds": seconds[near],
                          "words_per_second": words[near] / seconds[near] if seconds[near] else None} if near else None}


def speed_cell(h: dict[str, Any]) -> str:
    """Words per second, saying when units answered from the response cache were left out of it."""
    cell = fmt(h["words_per_second"], digits=0)
    return cell + (f" ({h['replayed_units']} units replayed from the cache, not counted)"
                   if h.get("replayed_units") else "")


def replayed_answers(diag: dict[str, Any]) -> int:
    """Answers of a unit that the response cache gave back instead of the model (the tagger counts
    them; a LitSeg-Lite unit marks each attempt)."""
    return int(diag.get("replayed_answers") or 0) + sum(bool(a.get("from_cache")) for a in diag.get("attempts", []))


def sampled_units(units: list, sample: int | None, seed: int = 0) -> list:
    """``sample`` held-out units drawn with a fixed seed (in their original order), or all of them."""
    if sample is None or sample >= len(units):
        return units
    keep = set(random.Random(seed).sample(range(len(units)), sample))
    return [u for i, u in enumerate(units) if i in keep]


def on_units(run_dir: Path, row: Row, units: list) -> dict[str, Any]:
    """Boundary F1 (±1) and Pk of a finished row restricted to ``units``: a sampled row's
    comparison with recursive on the same units."""
    from litseg.segmentation.agreement import micro_boundary_f1, pk_errors

    got = row_segments("", row, run_dir)
    scored = [(u, got[(d.book_id, u.unit_id)], gold) for d, u, gold in units if (d.book_id, u.unit_id) in got]
    pk = [pk_errors(p, g, u.n_sentences) for u, p, g in scored]
    return {"f1": micro_boundary_f1([(p, g) for _, p, g in scored], tolerance=1).f1,
            "pk": sum(e.errors for e in pk) / max(1, sum(e.windows for e in pk)), "units": len(scored)}


def heldout_scores(name: str, row: Row, units: list, out: Path) -> dict[str, Any]:
    """Segment the held-out units with ``row`` (a resumable run) and score it against the teacher."""
    from litseg.rag.stats import bootstrap_ci
    from litseg.segmentation.agreement import (boundary_f1, micro_boundary_f1, pk_errors, repeated_subtitle_share,
                                               windowdiff_errors)

    run_dir = out / f"heldout-{name}"
    units = sampled_units(units, row.sample)
    summary = segment_units(row.overrides, units, run_dir)
    if summary.get("units") == len(units):  # every unit chunked in this call: its time is the row's
        (run_dir / "chunking_seconds.json").write_text(json.dumps({"seconds": summary.get("seconds"),
                                                                   "units": summary["units"]}))
    got = row_segments(name, row, run_dir)
    scored = [(d, u, got[(d.book_id, u.unit_id)], gold) for d, u, gold in units if (d.book_id, u.unit_id) in got]
    pairs = [(pred, gold) for _, _, pred, gold in scored]
    near, exact = micro_boundary_f1(pairs, tolerance=1), micro_boundary_f1(pairs, tolerance=0)
    per_unit = [(d.book_id, boundary_f1(p, g, tolerance=1)) for d, _, p, g in scored]
    per_unit = [(b, s) for b, s in per_unit if s.predicted + s.reference]
    ci = bootstrap_ci([2 * s.matched for _, s in per_unit], [b for b, _ in per_unit],
                      weights=[s.predicted + s.reference for _, s in per_unit], n_resamples=2000, seed=0) if per_unit else None
    pk = [pk_errors(p, g, u.n_sentences) for _, u, p, g in scored]
    wd = [windowdiff_errors(p, g, u.n_sentences) for _, u, p, g in scored]
    words = sum(len(d.text[u.start:u.end].split()) for d, u, _, _ in scored)
    by_kind: dict[str, list] = {}
    for d, _, p, g in scored:
        by_kind.setdefault(kind_of_source(d.source_path), []).append((p, g))
    kinds = {k: {"units": len(v), **{m: getattr(micro_boundary_f1(v, tolerance=1), m)
                                     for m in ("f1", "predicted", "reference")}} for k, v in sorted(by_kind.items())}
    made = {(d.book_id, u.unit_id): max(0, len(p) - 1) for d, u, p, _ in scored}
    subtitles = [[s.get("subtitle", "") for s in p] for _, _, p, _ in scored]
    return {
        "units": len(scored), "failed": len(units) - len(scored), "books": len({d.book_id for d, _, _, _ in scored}),
        "sampled": row.sample is not None,
        "unit_keys": [[d.book_id, u.unit_id] for d, u, _ in units],
        "f1": near.f1, "low": ci.low if ci and ci.n_groups > 1 else None, "high": ci.high if ci and ci.n_groups > 1 else None,
        "precision": near.precision, "recall": near.recall, "exact_f1": exact.f1,
        "pk": sum(e.errors for e in pk) / max(1, sum(e.windows for e in pk)),
        "windowdiff": sum(e.errors for e in wd) / max(1, sum(e.windows for e in wd)),
        "by_kind": kinds,
        "cuts_per_1000_words": 1000 * near.predicted / words if words else None,
        "teacher_cuts_per_1000_words": 1000 * near.reference / words if words else None,
        "chance": chance_line([x for x in units if (x[0].book_id, x[1].unit_id) in made], made),
        "repeated_subtitles": repeated_subtitle_share(subtitles) if row.llm else None,
        "placeholder_subtitles": None,  # filled by main() with the row's own instructions
        **words_per_second(run_dir, row, units),
    }


def instructions_of(row: Row) -> list[str]:
    """What a row's model was told (a subtitle copied from it is a placeholder, not a name)."""
    from omegaconf import OmegaConf

    from litseg.segmentation.agreement import instruction_strings

    name = next((o.split("=", 1)[1] for o in row.overrides if o.startswith("prompt=")), None)
    if name is None:
        return []
    prompt = OmegaConf.load(REPO / "conf" / "prompt" / f"{name}.yaml")
    return instruction_strings([str(prompt.get(key) or "") for key in ("user", "system")])


# --------------------------------------------------------------------------------------------
# 2. FairytaleQA validation


def main_text_run(src: Path, dst: Path) -> Path:
    """The row's chunks with their main text alone indexed (spans and fields unchanged)."""
    return derived_run(src, dst, lambda chunks: [_text_as_built(c, False, False) for c in chunks])


def fairytaleqa(rows: dict[str, Row], out: Path, reuse: bool = False) -> dict[str, Any]:
    """One evaluate run: the baselines as chunkers, each LLM row as built and main-text-only
    (``reuse``: an earlier run's results when they hold every row asked for)."""
    texts = out / "ftqa_val_texts"
    if not any(texts.glob("*.txt")):
        run([sys.executable, "evaluate.py", "suite=fairytaleqa", f"export_texts={texts}"], out / "logs.txt")
    files = []
    for name, row in rows.items():
        if not row.llm or row.sample is not None:  # a sampled row is too slow for every story too
            continue
        run_dir = out / f"ftqa-{name}"
        run([sys.executable, "annotate.py", f"input={texts}", *row.overrides, f"hydra.run.dir={run_dir}",
             "print_table=0", "view=false", "export.enabled=false"], out / "logs.txt")
        files.append(f"{{label: {name}, path: {run_dir}}}")
        files.append(f"{{label: {name}__main, path: {main_text_run(run_dir, out / 'main-text' / name)}}}")
    baselines = [n for n, r in rows.items() if not r.llm]
    eval_dir = out / "evaluate"
    wanted = set(baselines) | {f.split("label: ")[1].split(",")[0] for f in files}
    if reuse and (eval_dir / "results.json").is_file():
        earlier = json.loads((eval_dir / "results.json").read_text())
        if wanted <= {r.get("label") for r in earlier.get("results", [])}:
            return earlier
    run([sys.executable, "evaluate.py", "suite=fairytaleqa", f"chunkers=[{','.join(baselines)}]",
         f"chunk_files=[{','.join(files)}]", f"hydra.run.dir={eval_dir}", "metrics.n_resamples=500"],
        out / "logs.txt")
    return json.loads((eval_dir / "results.json").read_text())


def result_row(results: dict[str, Any], label: str) -> dict[str, Any]:
    return next((r for r in results.get("results", []) if r.get("label") == label), {})


def metric(r: dict[str, Any], name: str) -> Any:
    value = (r.get("metrics") or {}).get(name)
    return value.get("estimate") if isinstance(value, dict) else value


def pair(results: dict[str, Any], a: str, b: str, name: str) -> dict[str, Any] | None:
    """``b`` minus ``a`` on ``name`` with its interval and p (evaluate.py stores a minus b)."""
    for p in results.get("pairwise") or []:
        if p["metric"] != name:
            continue
        if (p["a"], p["b"]) == (a, b):
            return {"diff": -p["diff"], "low": -p["diff_high"], "high": -p["diff_low"], "p": p["p_permutation"]}
        if (p["a"], p["b"]) == (b, a):
            return {"diff": p["diff"], "low": p["diff_low"], "high": p["diff_high"], "p": p["p_permutation"]}
    return None


def show_pair(d: dict[str, Any] | None) -> str:
    return "-" if d is None else f"{d['diff']:+.3f} [{d['low']:+.3f}, {d['high']:+.3f}] p={d['p']:.2g}"


# --------------------------------------------------------------------------------------------
# Tables and targets


def heldout_table(rows: dict[str, Row], held: dict[str, Any]) -> str:
    head = ["held-out teacher units", "boundary F1 ±1 [95 %]", "chance at its cut count [5-95 %]", "exact-cut F1", "Pk",
            "WindowDiff", "cuts / 1,000 words", "repeated subtitles", "placeholder subtitles", "words / s (one core)"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for name, row in rows.items():
        h = held.get(name)
        if not h:
            continue
        c = h["chance"]
        ci = f" [{h['low']:.3f}, {h['high']:.3f}]" if h.get("low") is not None else ""
        lines.append("| " + " | ".join([
            row.label + (f" ({h['failed']} units failed)" if h["failed"] else "")
            + (f" (sample of {len(h['unit_keys'])} units)" if h.get("sampled") else ""), f"{h['f1']:.3f}{ci}",
            f"{c['mean']:.3f} [{c['low']:.3f}, {c['high']:.3f}]", fmt(h["exact_f1"]), fmt(h["pk"]), fmt(h["windowdiff"]),
            fmt(h["cuts_per_1000_words"], digits=2), fmt(h["repeated_subtitles"], pct=True),
            fmt(h["placeholder_subtitles"], pct=True), speed_cell(h)]) + " |")
    teacher = next((h["teacher_cuts_per_1000_words"] for h in held.values() if h and not h.get("sampled")), None)
    same = [f"- {rows[n].label} on its sample of {len(h['unit_keys'])} units: boundary F1 ±1 {h['f1']:.3f}, Pk "
            f"{h['pk']:.3f}; recursive 1000c on the same units: {h['recursive_same']['f1']:.3f}, Pk "
            f"{h['recursive_same']['pk']:.3f}" for n, h in held.items() if h and h.get("recursive_same")]
    kinds = [f"- {rows[n].label}: " + "; ".join(
        f"{k} {v['f1']:.3f} ({v['predicted']} cuts against the teacher's {v['reference']}, {v['units']} units)"
        for k, v in h["by_kind"].items()) for n, h in held.items() if h and h.get("by_kind")]
    return ("\n".join(lines) + (f"\n\nThe teacher cuts {teacher:.2f} times per 1,000 words on these units.\n" if teacher else "\n")
            + ("\nBoundary F1 ±1 by kind of text (the cuts each row made against the teacher's):\n\n" + "\n".join(kinds) + "\n"
               if kinds else "")
            + ("\nRows too slow for every held-out unit on this CPU ran on a seeded sample (`--sample ROW=N`):\n"
               + "\n".join(same) + "\n" if same else ""))


def ftqa_table(rows: dict[str, Row], results: dict[str, Any]) -> str:
    head = ["FairytaleQA val", "MRR@10", "evidence@1500", "words / chunk", "random Hit@1",
            "MRR@10 minus recursive", "evidence@1500 minus recursive", "main text only: MRR@10 / evidence@1500",
            "as built minus main text: MRR@10", "as built minus main text: evidence@1500"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for name, row in rows.items():
        r = result_row(results, name)
        if not r:
            continue
        plain = result_row(results, f"{name}__main")
        words = ((r.get("chunks") or {}).get("words") or {}).get("mean")
        cells = [row.label, fmt(metric(r, "mrr@10")), fmt(metric(r, "evidence@1500")), fmt(words, digits=0),
                 fmt(metric(r, "random_hit@1"))]
        if name == "recursive":
            cells += ["-", "-"]
        else:
            cells += [show_pair(pair(results, "recursive", name, m)) for m in ("mrr@10", "evidence@1500")]
        if plain:
            cells += [f"{fmt(metric(plain, 'mrr@10'))} / {fmt(metric(plain, 'evidence@1500'))}",
                      show_pair(pair(results, f"{name}__main", name, "mrr@10")),
                      show_pair(pair(results, f"{name}__main", name, "evidence@1500"))]
        else:
            cells += ["-", "-", "-"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def targets(held: dict[str, Any], results: dict[str, Any], default: str) -> str:
    """The student issue's targets for the shipped default, each measured, met or missed by how much."""
    h, rec = held.get(default), held.get("recursive")
    checks: list[tuple[str, Any, Any, bool]] = []  # (what, measured, target, higher is better)
    if h and rec:
        checks += [("held-out boundary F1 ±1 >= 0.60", h["f1"], 0.60, True),
                   ("held-out boundary F1 ±1 above recursive's", h["f1"], rec["f1"], True),
                   ("held-out boundary F1 ±1 above the chance line at recursive's cut count", h["f1"], rec["chance"]["mean"], True),
                   ("Pk below recursive's", h["pk"], rec["pk"], False),
                   ("repeated subtitles <= 10 %", h["repeated_subtitles"], 0.10, False),
                   ("placeholder subtitles = 0", h["placeholder_subtitles"], 0.0, False),
                   ("words per second of one core >= 150", h["words_per_second"], 150.0, True)]
        near = h.get("near_2000")
        if near:  # the issue's wording: on a 2,000-word unit (one unit: the all-units figure above is the steadier)
            checks.append((f"words per second of one core >= 150 on the held-out unit nearest 2,000 words "
                           f"({near['words']:,} words)", near["words_per_second"], 150.0, True))
    r, base, plain = result_row(results, default), result_row(results, "recursive"), result_row(results, f"{default}__main")
    for name, label in (("mrr@10", "MRR@10"), ("evidence@1500", "evidence@1500")):
        if r and base:
            checks.append((f"FairytaleQA val {label} at least recursive's", metric(r, name), metric(base, name), True))
        if r and plain:
            checks.append((f"FairytaleQA val {label}: as built at least its main text alone", metric(r, name),
                           metric(plain, name), True))
    lines = []
    for what, got, want, higher in checks:
        if got is None or want is None:
            continue
        ok = got >= want if higher else got <= want
        gap = "" if ok else f" (missed by {abs(got - want):.3f})"
        lines.append(f"- {'met' if ok else 'NOT MET'}: {what}: {got:.3f} against {want:.3f}{gap}")
    return "\n".join(lines) + ("\n" if lines else "")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=REPO / "outputs" / "bench" / "student_eval")
    ap.add_argument("--rows", default="", help="comma-separated rows (default: all)")
    ap.add_argument("--paper-adapter", default=None, help="the retrained LitSeg-Lite adapter (default: the shipped one)")
    ap.add_argument("--tagger", default=None, help="a trained tagger folder (default: the shipped one)")
    ap.add_argument("--default", default="tagger", help="the row shipped as the default (its targets are checked)")
    ap.add_argument("--skip-fairytaleqa", action="store_true")
    ap.add_argument("--reuse-fairytaleqa", action="store_true",
                    help="use the last FairytaleQA evaluate run when it holds every row (the chunk runs resume anyway)")
    ap.add_argument("--sample", action="append", default=[], metavar="ROW=N",
                    help="run ROW on a seeded sample of N held-out units (and leave it out of FairytaleQA)")
    ap.add_argument("--write", action="store_true", help="write the tables into docs/training.md")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    rows = make_rows(args.paper_adapter, args.tagger)
    if args.rows:
        unknown = [r for r in args.rows.split(",") if r not in rows]
        if unknown:
            raise SystemExit(f"unknown rows {unknown}; known: {', '.join(rows)}")
        rows = {k: v for k, v in rows.items() if k in args.rows.split(",")}
    for spec in args.sample:
        name, _, n = spec.partition("=")
        if name not in rows or not n.isdigit():
            raise SystemExit(f"--sample {spec!r}: expected ROW=N with ROW one of {', '.join(rows)}")
        rows[name].sample = int(n)
    teacher = teacher_run(args.out)
    books, mix = test_books()
    units = held_out_units(teacher, books)
    held = {}
    for name, row in rows.items():
        t0 = time.perf_counter()
        held[name] = heldout_scores(name, row, units, args.out)
        if row.llm:
            held[name]["placeholder_subtitles"] = placeholder_rate(args.out / f"heldout-{name}", row)
        print(f"{name}: held-out F1 {held[name]['f1']:.3f} ({time.perf_counter() - t0:.0f} s)", flush=True)
    if "recursive" in held:
        for name, h in held.items():
            if h.get("sampled"):
                keys = {tuple(k) for k in h["unit_keys"]}
                h["recursive_same"] = on_units(args.out / "heldout-recursive", rows["recursive"],
                                               [x for x in units if (x[0].book_id, x[1].unit_id) in keys])
    results = {} if args.skip_fairytaleqa else fairytaleqa(rows, args.out, reuse=args.reuse_fairytaleqa)
    (args.out / "student_eval.json").write_text(json.dumps({"heldout": held, "fairytaleqa": results}, indent=1, default=str))
    text = heldout_table(rows, held)
    ftqa = ftqa_table(rows, results) if results else ""
    checks = targets(held, results, args.default) if args.default in rows else ""
    print(text, ftqa, checks, sep="\n")
    if args.write:
        notes = "".join(f"{r.label}: {', '.join(r.notes)}.\n" for r in rows.values() if r.notes)
        body = (f"{text}\nHeld out: the test books of the packaged {SPLIT} split, {len(units)} units "
                f"({mix['units']} teacher records of {mix['books']} books: {', '.join(f'{v} {k}' for k, v in mix['units_by_kind'].items())}), "
                "never trained on by any student here (the first shipped student's training books are excluded from it too).\n"
                f"{notes}\n" + (f"{ftqa}\n" if ftqa else "FairytaleQA not run (`--skip-fairytaleqa`).\n\n")
                + f"Targets of the shipped default ({rows[args.default].label if args.default in rows else args.default}):\n\n{checks}\n"
                + f"Measured by `python benchmarks/student_eval.py --write` ({os.cpu_count()} CPU cores, "
                f"OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', '1')}).\n")
        write_block(DOC, "student_eval", "benchmarks/student_eval.py --write", body)
        print(f"wrote the tables into {DOC}")


def placeholder_rate(run_dir: Path, row: Row) -> float | None:
    from litseg.utils.jsonl import read_jsonl
    from litseg.segmentation.agreement import placeholder_share

    return placeholder_share([c.get("subtitle", "") for c in read_jsonl(run_dir / "chunks.jsonl")], instructions_of(row))


if __name__ == "__main__":
    main()
