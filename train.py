"""Train LitSeg-Lite (LoRA SFT, then GRPO with a DAPO-style objective and a narratological judge).

    python train.py +experiment=sft data.runs=[outputs/annotate/teacher]
    python train.py +experiment=grpo stage.grpo.init_adapter=outputs/train/sft/RUN/adapter data.runs=[...]
    python train.py +experiment=litseg_lite data.runs=[...]        # SFT, then GRPO, in one run
    python train.py +experiment=grpo debug=smoke                   # seconds on a CPU, tiny model
    python train.py -m +sweep=ablations data.runs=[...]            # the paper's ablation grid
    accelerate launch --config_file conf/accelerate/zero2.yaml train.py +experiment=grpo data.runs=[...]

Writes config.yaml, data_report.json, metrics.jsonl, stages/<kind>/{checkpoints,adapter},
adapter/, eval_samples.jsonl and train_summary.json into the run directory; returns the
configured metric (eval/reward by default) for Hydra sweepers. See docs/training.md.

Every run ends with one line (verdict, metric, adapter, tensors changed per stage). A run that
trained nothing (no trainable tensor changed, or GRPO rewards all 0 / never differing within a
group) says "TRAINED NOTHING" with the reasons, and train.py exits with code 3 once every run
(every job of a sweep) has finished and written its files.
"""

from __future__ import annotations

import sys

import hydra
from omegaconf import DictConfig

# Run directories of the runs (sweep jobs) that trained nothing, for the exit code.
UNTRAINED: list[str] = []


@hydra.main(version_base="1.3", config_path="conf", config_name="train")
def main(cfg: DictConfig) -> float:
    from litseg.cli import run_entry
    from litseg.training.run import run_training

    summary = run_entry(run_training, cfg)  # known errors: one line, exit code 2
    if summary.get("trained_nothing"):
        UNTRAINED.append(str(summary.get("run_dir")))
    return float(summary["metric"])


if __name__ == "__main__":
    from pathlib import Path

    from litseg.cli import check_command_line
    from litseg.training.launch import share_run_id

    check_command_line(Path(__file__).resolve().parent / "conf", "train")  # config mistakes: one line, exit code 2
    share_run_id()  # one run directory for all processes of a distributed launch
    main()
    if UNTRAINED:
        from litseg.training.run import UNTRAINED_EXIT

        print(f"train.py: {len(UNTRAINED)} run(s) trained nothing (exit code {UNTRAINED_EXIT}): "
              + ", ".join(UNTRAINED), file=sys.stderr)
        sys.exit(UNTRAINED_EXIT)
