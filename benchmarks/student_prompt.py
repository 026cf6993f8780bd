"""What the student's prompt costs: the paper's Lite prompt against the compact one.

    python benchmarks/student_prompt.py           # prints the table
    python benchmarks/student_prompt.py --write   # also writes it into docs/training.md

Over the shared strong-teacher units (imported by character spans, as train.py reads them), in
SmolLM2's tokens: the prompt (system + numbered chapter) and the target answer of each prompt
variant; then, on this CPU, one LoRA training step (forward + backward, bf16 autocast where the
CPU has it, one thread) on the example of median length of each variant, and the model's decoding
speed, from which the seconds a unit's answer takes follow. Quality is not measured here: the
shipped student's figures are in the "shipped student" table (benchmarks/student_eval.py).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))
os.environ.setdefault("OMP_NUM_THREADS", "1")

from litseg.utils.docblocks import write_block  # noqa: E402

SHARED = Path(os.environ.get("LITSEG_SHARED_DIR", REPO.parent / "shared"))
VARIANTS = {"litseg_lite (paper, with the written analysis)": "litseg_lite",
            "litseg_lite_compact (shipped)": "litseg_lite_compact"}


def teacher_run(out: Path) -> Path:
    run = out / "teacher-imported"
    if not (run / "run_summary.json").is_file():
        subprocess.run([sys.executable, "annotate.py", "method=imported",
                        f"method.annotations={SHARED / 'data/teacher/litseg_teacher_units.jsonl'}",
                        f"hydra.run.dir={run}", "print_table=0", "view=false"], cwd=REPO, check=True,
                       stdout=subprocess.DEVNULL)
    return run


def examples(run: Path, prompt_name: str, tokenizer) -> list[dict]:
    from omegaconf import OmegaConf

    from litseg.training.data import DataReport, build_examples, read_teacher_units

    prompt = OmegaConf.to_container(OmegaConf.load(REPO / "conf" / "prompt" / f"{prompt_name}.yaml"), resolve=True)
    units = read_teacher_units(run, DataReport())
    return build_examples(units, prompt, tokenizer, max_prompt_tokens=10**6, max_completion_tokens=10**6,
                          max_total_tokens=10**6, length_reference=None, report=DataReport())


def step_seconds(model, tokenizer, row: dict, bf16: bool) -> float:
    """One LoRA training step on ``row`` (the selective loss the CPU trainer uses), best of two;
    ``bf16``: under bf16 autocast, as the trainer runs when the CPU has native bf16."""
    import torch

    from litseg.training.sft_loss import selective_nll

    prompt_ids = tokenizer.apply_chat_template(row["prompt"], add_generation_prompt=True, tokenize=True)
    full_ids = tokenizer.apply_chat_template([*row["prompt"], *row["completion"]], tokenize=True)
    prompt_ids = list(prompt_ids["input_ids"] if hasattr(prompt_ids, "keys") else prompt_ids)
    full_ids = list(full_ids["input_ids"] if hasattr(full_ids, "keys") else full_ids)
    ids = torch.tensor([full_ids])
    labels = ids.clone()
    labels[:, : len(prompt_ids)] = -100
    opt = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.0)
    best = float("inf")
    for _ in range(2):
        t0 = time.perf_counter()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            loss, _ = selective_nll(model, {"input_ids": ids, "attention_mask": torch.ones_like(ids), "labels": labels})
        loss.backward()
        opt.step()
        opt.zero_grad()
        best = min(best, time.perf_counter() - t0)
    return best


def decode_rate(model, tokenizer, n: int = 96) -> float:
    import torch

    ids = tokenizer.apply_chat_template([{"role": "user", "content": "Tell a short story about a lighthouse."}],
                                        add_generation_prompt=True, return_tensors="pt", return_dict=True)
    with torch.no_grad():
        t0 = time.perf_counter()
        out = model.generate(**ids, max_new_tokens=n, min_new_tokens=n, do_sample=False)
        dt = time.perf_counter() - t0
    return (out.shape[1] - ids["input_ids"].shape[1]) / dt


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=REPO / "outputs" / "bench" / "student_prompt")
    ap.add_argument("--write", action="store_true")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    from litseg.llm.local_models import embedded_model_dir
    from litseg.training.builders import cpu_bf16, load_tokenizer
    from litseg.training.config import ModelConfig
    from litseg.utils.config import from_dict, shipped_option

    torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))
    tokenizer = load_tokenizer(from_dict(ModelConfig, shipped_option("model", "smollm2_135m"), "model"))
    run = teacher_run(args.out)
    base = AutoModelForCausalLM.from_pretrained(str(embedded_model_dir()), dtype=torch.float32)
    rate = decode_rate(base, tokenizer)
    model = get_peft_model(base, LoraConfig(r=16, lora_alpha=32, lora_dropout=0.0, target_modules="all-linear",
                                            task_type="CAUSAL_LM"))
    head = ["prompt", "examples", "prompt tokens (median)", "answer tokens (median / max)",
            "training tokens (all examples)", "s per training step, median example (bf16 autocast / fp32)",
            "s to decode a median answer"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for label, name in VARIANTS.items():
        rows = examples(run, name, tokenizer)
        totals = sorted(rows, key=lambda r: r["prompt_tokens"] + r["completion_tokens"])
        median = totals[len(totals) // 2]
        p = statistics.median(r["prompt_tokens"] for r in rows)
        c = statistics.median(r["completion_tokens"] for r in rows)
        cmax = max(r["completion_tokens"] for r in rows)
        total = sum(r["prompt_tokens"] + r["completion_tokens"] for r in rows)
        bf16 = step_seconds(model, tokenizer, median, bf16=True) if cpu_bf16("auto") else float("nan")
        fp32 = step_seconds(model, tokenizer, median, bf16=False)
        lines.append(f"| `{name}` ({label.split('(')[1].rstrip(')')}) | {len(rows)} | {p:.0f} | {c:.0f} / {cmax} | "
                     f"{total:,} | {bf16:.1f} / {fp32:.1f} | {c / rate:.0f} |")
    text = "\n".join(lines) + "\n"
    note = (f"\nDecoding measured at {rate:.1f} tokens/s (greedy, one sequence, SmolLM2-135M, fp32, "
            f"{os.environ['OMP_NUM_THREADS']} thread(s)); `python benchmarks/student_prompt.py --write`.\n")
    print(text + note)
    if args.write:
        write_block(REPO / "docs" / "training.md", "student_prompt", "benchmarks/student_prompt.py --write", text + note)


if __name__ == "__main__":
    main()
