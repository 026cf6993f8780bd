"""Where LitSeg-Tagger's agreement with the teacher comes from: its boundary nets cross-validated by
book, with one part taken away or changed at a time (docs/training.md, block ``tagger_ablation``).

    python benchmarks/tagger_ablation.py --run outputs/train/tagger                 # runs what is missing, prints
    python benchmarks/tagger_ablation.py --run outputs/train/tagger --write         # also writes docs/training.md
    python benchmarks/tagger_ablation.py --run RUN --variants no_lm,books_1_3       # a part (another process can run the rest)

``--run`` is a ``train.py +experiment=tagger`` run folder: its config says which teacher units and
settings it trained on, and its boundary stage folder holds the sentence embeddings and LM features
already computed (missing ones are computed and added there, as the stage itself would).

The pool is the run's training and validation books; the test books, which the student table
scores, are never read. Books (not units) are dealt into ``--folds`` folds. For every variant and
fold, one boundary net (seed = fold) trains on the other folds and scores the held-out fold; its
cuts are decoded at the threshold at which it cuts as often as the teacher on that fold (the shipped
rule, ``threshold_rule: match_count``, applied to the fold itself, so every variant gets the same
count and only where it cuts differs). Pooled over all folds: boundary F1 within one sentence with a
95 % interval resampling books, exact-cut F1, F1 by kind of text, and each variant minus the run's
own settings on the same units (paired, resampling books). A single net per fold: the shipped
ensemble averages three, which adds to every row alike.

Under the table, one line asks where the threshold should be chosen, with the run's own fold nets
(scored again from their saved states): at each fold's own teacher count (the table's rule), at the
threshold chosen on the other folds pooled, and at thresholds chosen on as many books as the run's
validation books, drawn from the other folds twenty times (the shipped threshold is chosen on the
validation books alone).

Each fold's scores are saved under ``--out`` as they finish (and each net's state after every
epoch), so a killed run continues where it stopped.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from litseg.utils.docblocks import write_block  # noqa: E402

DOC = REPO / "docs" / "training.md"


@dataclass(frozen=True)
class Variant:
    name: str
    label: str
    settings: dict[str, Any] = field(default_factory=dict)  # stage.boundary values changed
    book_share: float = 1.0  # the share of each fold's training books kept (a learning curve)


#: The run's own settings come first: every other row is compared with it.
VARIANTS = [
    Variant("as_trained", "the run's settings"),
    Variant("no_lm", "without the LM features (sentence embeddings and surface cues only)", {"lm_model": "none"}),
    Variant("first_reading", "the first LM reading only (layer means and surprisal in the unit)",
            {"lm_last_layers": [], "lm_alone": False}),
    # the second, batched pass over each sentence's opening takes about half the first pass's time
    Variant("no_context_gain", "without the context gain (no second reading of each sentence's opening)",
            {"lm_alone": False}),
    Variant("books_1_3", "a third of the training books", book_share=1 / 3),
    Variant("books_2_3", "two thirds of the training books", book_share=2 / 3),
    # the shipped dropout and the one it replaced: the row equal to the run's own settings is left out
    Variant("dropout_0_2", "dropout 0.2", {"dropout": 0.2}),
    Variant("dropout_0_4", "dropout 0.4", {"dropout": 0.4}),
]
BY_NAME = {v.name: v for v in VARIANTS}
KINDS = ("fairytale", "play", "prose", "poem")


def same_as_run(variant: Variant, base: Any) -> bool:
    """Whether a variant changes nothing of the run's settings (its row would repeat the first)."""
    return (variant is not VARIANTS[0] and variant.book_share >= 1.0
            and all(getattr(base, key) == value for key, value in variant.settings.items()))


def fold_of(book_id: str, folds: int) -> int:
    """A book's fold: fixed by its id, so every variant and every rerun sees the same folds."""
    return zlib.crc32(book_id.encode()) % folds


def kept_for_training(book_id: str, share: float) -> bool:
    """Whether a training book stays in a learning-curve row (drawn by id, independent of the fold)."""
    return share >= 1.0 or zlib.crc32(f"{book_id}/share".encode()) % 10_000 < share * 10_000


def fold_inputs(variant: Variant, fold: int, folds: int, pool: Sequence[Any], base: Any, vectors: dict[str, Any],
                lm: dict[str, Any] | None) -> tuple[Any, Any, list[Any], list[Any]]:
    """A variant's settings, net settings, and its training and held-out units of ``fold``, encoded."""
    from litseg.training.tagger import LMNorm, encode, net_settings_for, reading_columns, torch_rows

    s = replace(base, **variant.settings)
    held = [u for u in pool if fold_of(u.book_id, folds) == fold]
    train = [u for u in pool if fold_of(u.book_id, folds) != fold and kept_for_training(u.book_id, variant.book_share)]
    features = lm if s.lm_model != "none" else None
    if features is not None:
        columns = reading_columns(base, s, next(iter(features.values())).shape[1])
        if columns is not None:
            features = {k: v[:, columns] for k, v in features.items()}
    norm = LMNorm.fit([torch_rows(features[u.key]) for u in train]) if features is not None else None
    ns = net_settings_for(s, ensemble=1)
    groups = None
    if norm is not None:
        ns.lm_dim = int(norm.mean.shape[0])
        groups = ns.lm_groups()
    return (s, ns, encode(train, vectors, s.cue_buckets, features, norm, groups),
            encode(held, vectors, s.cue_buckets, features, norm, groups))


def run_fold(variant: Variant, fold: int, folds: int, pool: Sequence[Any], base: Any, vectors: dict[str, Any],
             lm: dict[str, Any] | None, out: Path) -> dict[str, Any]:
    """One net trained on the other folds, its cuts on this fold (saved, so a rerun reads them back)."""
    from litseg.segmentation.cut_decoding import blocks_from_cuts, decode_cuts
    from litseg.training.tagger import pick_threshold, train_boundary_net

    done = out / variant.name / f"fold-{fold}.json"
    if done.is_file():
        return json.loads(done.read_text())
    s, ns, enc_train, enc_held = fold_inputs(variant, fold, folds, pool, base, vectors, lm)
    started = time.time()
    (out / variant.name).mkdir(parents=True, exist_ok=True)
    net = train_boundary_net(enc_train, s, ns, fold, out / variant.name / f"net-{fold}.pt")
    import torch

    with torch.no_grad():
        scores = [net(e.features, e.cues).tolist() for e in enc_held]
    # the shipped rule on the fold itself: every variant cuts as often as the teacher there
    threshold = pick_threshold(scores, enc_held, "match_count", s.min_block)["chosen"]["threshold"]
    units = []
    for e, unit_scores in zip(enc_held, scores, strict=True):
        cuts = decode_cuts(unit_scores, threshold=threshold, min_block=s.min_block)
        units.append({"book_id": e.unit.book_id, "key": e.unit.key,
                      "predicted": [{"from_idx": a, "to_idx": b} for a, b in blocks_from_cuts(cuts, e.unit.n_sentences)],
                      "reference": [{"from_idx": int(g["from_idx"]), "to_idx": int(g["to_idx"])} for g in e.unit.segments]})
    record = {"variant": variant.name, "fold": fold, "threshold": threshold, "train_units": len(enc_train),
              "train_books": len({e.unit.book_id for e in enc_train}), "held_units": len(enc_held),
              "seconds": round(time.time() - started, 1), "units": units}
    tmp = done.with_suffix(".tmp")
    tmp.write_text(json.dumps(record) + "\n")
    tmp.replace(done)
    return record


def held_out_scores(variant: Variant, fold: int, folds: int, pool: Sequence[Any], base: Any,
                    vectors: dict[str, Any], lm: dict[str, Any] | None, out: Path) -> tuple[list[Any], list[list[float]]]:
    """The held-out units of ``fold`` and the scores its finished net gives them (the net as saved
    after its last epoch; run_fold must have finished the fold)."""
    import torch

    from litseg.chunkers.tagger_model import BoundaryNet

    _, ns, _, enc_held = fold_inputs(variant, fold, folds, pool, base, vectors, lm)
    net = BoundaryNet(enc_held[0].features.shape[1], ns)
    net.load_state_dict(torch.load(out / variant.name / f"net-{fold}.pt", weights_only=False)["net"])
    net.eval()
    with torch.no_grad():
        return enc_held, [net(e.features, e.cues).tolist() for e in enc_held]


def threshold_study(held: Sequence[tuple[list[Any], list[list[float]]]], sample_books: int, min_block: int,
                    draws: int = 20, seed: int = 0) -> dict[str, Any]:
    """How much the set the threshold is chosen on matters, for the same fold nets: each fold's cuts
    decoded at the threshold at which the fold's own net cuts as often as the teacher (the table's
    rule), at the one chosen the same way on the other folds' held-out scores pooled (about three
    quarters of the books), and at the one chosen on ``sample_books`` books drawn from the other folds
    (as many as the run's validation books, which choose the shipped threshold), ``draws`` times.
    Each: pooled boundary F1 within one sentence over every fold, and cuts against the teacher's."""
    import random

    from litseg.training.tagger import pick_threshold, score_cuts

    def chosen(pairs: Sequence[tuple[Any, list[float]]]) -> float:
        units, scores = [u for u, _ in pairs], [sc for _, sc in pairs]
        return pick_threshold(scores, units, "match_count", min_block)["chosen"]["threshold"]

    def pooled(thresholds: Sequence[float]) -> dict[str, float]:
        matched = predicted = reference = 0
        for (units, scores), t in zip(held, thresholds, strict=True):
            r = score_cuts(scores, units, t, min_block)
            matched += r["matched"]
            predicted += r["predicted"]
            reference += r["reference"]
        return {"f1": 2 * matched / (predicted + reference), "cuts_share": predicted / reference}

    folds = range(len(held))
    pairs = [list(zip(*held[k])) for k in folds]
    own = pooled([chosen(pairs[k]) for k in folds])
    others = pooled([chosen([p for j in folds if j != k for p in pairs[j]]) for k in folds])
    rng = random.Random(seed)
    sampled = []
    for _ in range(draws):
        thresholds = []
        for k in folds:
            candidates = [p for j in folds if j != k for p in pairs[j]]
            books = sorted({u.unit.book_id for u, _ in candidates})
            drawn = set(rng.sample(books, min(sample_books, len(books))))
            thresholds.append(chosen([p for p in candidates if p[0].unit.book_id in drawn]))
        sampled.append(pooled(thresholds))
    return {"own_fold": own, "other_folds": others, "sampled": sampled, "sample_books": sample_books,
            "draws": draws}


def render_threshold_study(study: dict[str, Any]) -> str:
    f1s = [d["f1"] for d in study["sampled"]]
    shares = [d["cuts_share"] for d in study["sampled"]]
    own, others = study["own_fold"], study["other_folds"]
    return (f"Where the threshold is chosen, for the run's settings (the same fold nets): at each fold's own "
            f"teacher count, boundary F1 ±1 {own['f1']:.3f}; chosen on the other three folds pooled, "
            f"{others['f1']:.3f} ({others['cuts_share']:.0%} of the teacher's cuts); chosen on "
            f"{study['sample_books']} books drawn from the other folds, as many as the validation books that "
            f"choose the shipped threshold ({study['draws']} draws), {sum(f1s) / len(f1s):.3f} on average "
            f"(lowest {min(f1s):.3f}, highest {max(f1s):.3f}; {min(shares):.0%} to {max(shares):.0%} of the "
            "teacher's cuts).")


def unit_counts(records: Sequence[dict[str, Any]], tolerance: int) -> dict[str, tuple[str, int, int]]:
    """Per unit key: its book, matched cuts and predicted plus reference cuts."""
    from litseg.segmentation.agreement import micro_boundary_f1

    out = {}
    for r in records:
        for u in r["units"]:
            s = micro_boundary_f1([(u["predicted"], u["reference"])], tolerance=tolerance)
            out[u["key"]] = (u["book_id"], s.matched, s.predicted + s.reference)
    return out


def pooled_f1(counts: dict[str, tuple[str, int, int]], keys: Sequence[str] | None = None) -> float:
    keys = list(counts) if keys is None else keys
    den = sum(counts[k][2] for k in keys)
    return 2 * sum(counts[k][1] for k in keys) / den if den else 0.0


def book_totals(counts: dict[str, tuple[str, int, int]], books: Sequence[str]) -> Any:
    import numpy as np

    index = {b: i for i, b in enumerate(books)}
    totals = np.zeros((len(books), 2))
    for book, matched, both in counts.values():
        if book in index:
            totals[index[book]] += (2 * matched, both)
    return totals


def paired_interval(a: dict[str, tuple[str, int, int]], b: dict[str, tuple[str, int, int]],
                    n_resamples: int = 2000, seed: int = 0) -> tuple[float, float, float]:
    """F1 of ``a`` minus ``b`` on the same units, with a 95 % interval resampling books."""
    import numpy as np

    books = sorted({v[0] for v in [*a.values(), *b.values()] if v[2]})  # books neither side cut add nothing
    ta, tb = book_totals(a, books), book_totals(b, books)
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, len(books), size=(n_resamples, len(books)))
    sa, sb = ta[draws].sum(1), tb[draws].sum(1)
    diffs = sa[:, 0] / sa[:, 1] - sb[:, 0] / sb[:, 1]
    return pooled_f1(a) - pooled_f1(b), float(np.percentile(diffs, 2.5)), float(np.percentile(diffs, 97.5))


def summarise(variant: Variant, records: Sequence[dict[str, Any]], kinds: dict[str, str],
              reference: dict[str, tuple[str, int, int]] | None) -> dict[str, Any]:
    from litseg.rag.stats import bootstrap_ci

    near, exact = unit_counts(records, 1), unit_counts(records, 0)
    keys = list(near)
    cut = [k for k in keys if near[k][2]]  # a unit that neither side cut adds nothing to a pooled F1
    ci = bootstrap_ci([near[k][1] * 2 for k in cut], [near[k][0] for k in cut],
                      weights=[near[k][2] for k in cut], n_resamples=2000, seed=0)
    by_kind = {}
    for kind in KINDS:
        mine = [k for k in keys if kinds.get(near[k][0]) == kind]
        if mine:
            by_kind[kind] = pooled_f1(near, mine)
    fold_f1 = [pooled_f1(unit_counts([r], 1)) for r in records]
    summary = {"variant": variant.name, "label": variant.label, "f1": ci.estimate, "low": ci.low, "high": ci.high,
               "exact_f1": pooled_f1(exact), "by_kind": by_kind, "fold_f1": fold_f1,
               "train_units": sum(r["train_units"] for r in records) / len(records),
               "units": len(keys), "books": len({near[k][0] for k in keys}),
               "reference_cuts": sum(len(u["reference"]) - 1 for r in records for u in r["units"])}
    if reference is not None and variant.name != VARIANTS[0].name:
        summary["minus_as_trained"] = paired_interval(near, reference)
    return summary


def render(summaries: Sequence[dict[str, Any]], folds: int, run: str, pool_kinds: dict[str, int]) -> str:
    head = ("| variant | training units per fold | boundary F1 ±1 [95 %] | minus the run's settings [95 %] | "
            "exact-cut F1 | " + " | ".join(KINDS) + " | folds (lowest-highest) |")
    lines = [head, "|" + "---|" * (6 + len(KINDS))]
    for s in summaries:
        diff = s.get("minus_as_trained")
        lines.append("| " + " | ".join([
            s["label"], f"{s['train_units']:.0f}", f"{s['f1']:.3f} [{s['low']:.3f}, {s['high']:.3f}]",
            "-" if diff is None else f"{diff[0]:+.3f} [{diff[1]:+.3f}, {diff[2]:+.3f}]", f"{s['exact_f1']:.3f}",
            *[f"{s['by_kind'][k]:.3f}" if k in s["by_kind"] else "-" for k in KINDS],
            f"{min(s['fold_f1']):.3f}-{max(s['fold_f1']):.3f}"]) + " |")
    first = summaries[0]
    mix = ", ".join(f"{n} {k}" for k, n in sorted(pool_kinds.items()))
    lines += ["", f"{folds} folds by book over the run's training and validation books: {first['units']} units of "
              f"{first['books']} books ({mix} units), {first['reference_cuts']} teacher cuts; one net per fold, "
              "decoded at the teacher's cut count of its fold. Features and settings: those of the "
              f"tagger run `{run}` (its config.yaml).", "",
              f"Measured by `python benchmarks/tagger_ablation.py --write` (2 CPU cores, OMP_NUM_THREADS="
              f"{os.environ.get('OMP_NUM_THREADS', 'unset')})."]
    return "\n".join(lines)


def load_run(run: Path) -> tuple[Any, dict[str, list[Any]], Path]:
    """The run's boundary settings, its teacher units by split, and its boundary stage folder."""
    from omegaconf import OmegaConf

    from litseg.training.config import BoundarySettings
    from litseg.training.data import DataReport, teacher_units_by_split

    config = run / "config.yaml"
    if not config.is_file():
        raise SystemExit(f"error: {config} not found: --run takes a train.py +experiment=tagger run folder")
    cfg = OmegaConf.load(config)
    values = OmegaConf.to_container(cfg.stage.boundary, resolve=True)
    # a run made before the optional LM readings existed read without them
    values.setdefault("lm_last_layers", [])
    values.setdefault("lm_alone", False)
    settings = BoundarySettings(**values)
    units = teacher_units_by_split(cfg.data, list(cfg.data.runs), DataReport(schema="boundary", prompt_version="ablation"))
    return settings, units, run / "stages" / "boundary"


def book_kinds(units: Sequence[Any]) -> dict[str, str]:
    """Each book's kind of text, from the source path its annotate run recorded."""
    from litseg.training.splits import kind_of_source

    kinds: dict[str, str] = {}
    for run_dir in {u.run_dir for u in units}:
        path = Path(run_dir) / "documents.jsonl"
        if path.is_file():
            for line in path.read_text(encoding="utf-8").splitlines():
                doc = json.loads(line)
                kinds[doc["book_id"]] = kind_of_source(doc.get("source_path", ""))
    return kinds


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--run", type=Path, default=REPO / "outputs" / "train" / "tagger")
    ap.add_argument("--out", type=Path, default=None, help="default: RUN/ablation")
    ap.add_argument("--folds", type=int, default=4)
    ap.add_argument("--variants", default="", help=f"comma-separated, of: {', '.join(BY_NAME)} (default: all)")
    ap.add_argument("--write", action="store_true", help="write the table into docs/training.md (needs every variant)")
    args = ap.parse_args(argv)
    chosen = [v for v in args.variants.split(",") if v] or list(BY_NAME)
    unknown = [v for v in chosen if v not in BY_NAME]
    if unknown:
        ap.error(f"unknown variant(s) {', '.join(unknown)}; known: {', '.join(BY_NAME)}")
    if args.folds < 2:
        ap.error("--folds must be at least 2")
    out = args.out or args.run / "ablation"
    settings, units, stage_dir = load_run(args.run)
    pool = units.get("train", []) + units.get("validation", [])
    if len({u.book_id for u in pool}) < args.folds:
        raise SystemExit(f"error: {len(pool)} units of the run's training and validation books cannot make "
                         f"{args.folds} folds of books")
    from litseg.training.tagger import unit_features

    vectors, lm = unit_features(pool, settings, stage_dir)
    kinds = book_kinds(pool)
    records: dict[str, list[dict[str, Any]]] = {}
    for name in chosen:
        variant = BY_NAME[name]
        if same_as_run(variant, settings):
            print(f"{name}: skipped (the run's own settings: the first row)", file=sys.stderr)
            continue
        if variant.settings.get("lm_model", settings.lm_model) != "none" and lm is None:
            print(f"{name}: skipped (the run has no LM features)", file=sys.stderr)
            continue
        records[name] = [run_fold(variant, f, args.folds, pool, settings, vectors, lm, out) for f in range(args.folds)]
        print(f"{name}: {args.folds} folds done", file=sys.stderr)
    # every finished variant in the out folder joins the table (other processes may have run some)
    wanted = [v for v in VARIANTS if not same_as_run(v, settings)]
    for v in wanted:
        files = [out / v.name / f"fold-{f}.json" for f in range(args.folds)]
        if v.name not in records and all(p.is_file() for p in files):
            records[v.name] = [json.loads(p.read_text()) for p in files]
    ordered = [v for v in wanted if v.name in records]
    if not ordered:
        raise SystemExit("error: no variant has finished")
    reference = unit_counts(records["as_trained"], 1) if "as_trained" in records else None
    summaries = [summarise(v, records[v.name], kinds, reference) for v in ordered]
    pool_kinds: dict[str, int] = {}
    for u in pool:
        pool_kinds[kinds.get(u.book_id, "unknown")] = pool_kinds.get(kinds.get(u.book_id, "unknown"), 0) + 1
    table = render(summaries, args.folds, args.run.resolve().name, pool_kinds)
    study = None
    first = VARIANTS[0]
    if first.name in records and all((out / first.name / f"net-{f}.pt").is_file() for f in range(args.folds)):
        held = [held_out_scores(first, f, args.folds, pool, settings, vectors, lm, out) for f in range(args.folds)]
        validation_books = len({u.book_id for u in units.get("validation", [])}) or 19
        study = threshold_study(held, validation_books, settings.min_block)
        table = table.replace("\n\nMeasured by", "\n\n" + render_threshold_study(study) + "\n\nMeasured by")
    print(table)
    (out / "summary.json").write_text(json.dumps({"variants": summaries, "threshold_study": study}, indent=1) + "\n")
    if args.write:
        missing = [v.name for v in wanted if v.name not in records]
        if missing:
            raise SystemExit(f"error: --write needs every variant; missing: {', '.join(missing)}")
        write_block(DOC, "tagger_ablation", "benchmarks/tagger_ablation.py --write", table)
        print(f"wrote {DOC}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
