"""Train LitSeg-Lite (LoRA SFT, then GRPO with a DAPO-style objective and a narratological judge).

    python -m litseg.train +experiment=sft data.runs=[outputs/annotate/teacher]
    python -m litseg.train +experiment=grpo stage.grpo.init_adapter=outputs/train/sft/RUN/adapter data.runs=[...]
    python -m litseg.train +experiment=litseg_lite data.runs=[...]        # SFT, then GRPO, in one run
    python -m litseg.train +experiment=grpo debug=smoke                   # seconds on a CPU, tiny model
    python -m litseg.train -m +sweep=ablations data.runs=[...]            # the paper's ablation grid
    accelerate launch --config_file conf/accelerate/zero2.yaml train.py +experiment=grpo data.runs=[...]

``litseg-train ...`` (the installed command) and ``python train.py ...`` (in a checkout) are the
same entry. See docs/training.md.

Writes config.yaml, data_report.json, metrics.jsonl, stages/<kind>/{checkpoints,adapter},
adapter/, eval_samples.jsonl and train_summary.json into the run directory; returns the
configured metric (eval/reward by default) for Hydra sweepers.

Every run ends with one line (verdict, metric, adapter, tensors changed per stage). A run that
trained nothing (no trainable tensor changed, or GRPO rewards all 0 / never differing within a
group) says "TRAINED NOTHING" with the reasons, and the entry exits with code 3 once every run
(every job of a sweep) has finished and written its files. The exit code is the worst of every
run's (one rule, in litseg/cli.py): 2, with one line, when a run cannot start; 3 when one trained
nothing.
"""

from __future__ import annotations

import hydra
from omegaconf import DictConfig

from litseg.cli import Jobs, check_command_line
from litseg.training.launch import share_run_id
from litseg.training.run import training_task
from litseg.utils.locations import config_dir


def cli() -> None:
    """The command line: config mistakes as one line and exit code 2, one run directory for all
    processes of a distributed launch, the Hydra app (every run's result collected), then one exit
    code for all runs (3 when a run trained nothing; :meth:`litseg.cli.Jobs.exit`)."""
    check_command_line(config_dir(), "train")
    share_run_id()
    jobs = Jobs("train")

    @hydra.main(version_base="1.3", config_path=str(config_dir()), config_name="train")
    def main(cfg: DictConfig) -> float:
        return jobs.run(training_task, cfg)

    main()
    jobs.exit()


if __name__ == "__main__":
    cli()
