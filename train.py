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
"""

from __future__ import annotations

import hydra
from omegaconf import DictConfig


@hydra.main(version_base="1.3", config_path="conf", config_name="train")
def main(cfg: DictConfig) -> float:
    from litseg.training.run import run_training

    return float(run_training(cfg)["metric"])


if __name__ == "__main__":
    from litseg.training.run import share_run_id

    share_run_id()  # one run directory for all processes of a distributed launch
    main()
