"""The folder a LitSeg-Tagger run leaves (``RUN/tagger``), which ``method.model=`` takes.

```
tagger/
  tagger.json            name, sentence encoder, net settings (threshold, context), writer, data,
                         validation figures, commit, digest of the weights
  boundary.safetensors   the boundary nets (an ensemble)
  context.safetensors    the context scorer
  training.json          what the boundary stage measured on the validation books
  writer/                the writer's LoRA adapter (absent when the run trained no writer)
```
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from litseg.models import weights_digest

NET_FILES = ("boundary.safetensors", "context.safetensors", "training.json")


def boundary_metrics(record: dict[str, Any]) -> dict[str, float]:
    """The boundary stage's validation figures as evaluation metrics (``eval/boundary_f1`` is the
    agreement with the teacher's cuts within one sentence at the chosen threshold)."""
    v = record["validation"]  # train_tagger_nets always writes it (the threshold chosen there)
    return {"eval/boundary_f1": float(v["f1"]), "eval/boundary_exact_f1": float(v["exact_f1"]),
            "eval/boundary_cuts": float(v["predicted"]), "eval/teacher_cuts": float(v["reference"])}


def assemble_tagger(plan: Any, dest: Path, boundary: dict[str, Any], writer_adapter: Path | None) -> Path:
    """Copy the nets and the writer into ``dest`` and describe them in ``tagger.json``."""
    tc = plan.tc
    model_dir = plan.out / "stages" / "boundary" / "model"
    shutil.rmtree(dest, ignore_errors=True)
    dest.mkdir(parents=True)
    for name in NET_FILES:
        shutil.copy2(model_dir / name, dest / name)
    if writer_adapter is not None:
        shutil.copytree(writer_adapter, dest / "writer")
    meta = {
        "name": dest.parent.name if dest.name == "tagger" else dest.name,
        "encoder": boundary["encoder"],
        "nets": boundary["settings"],
        "writer": None if writer_adapter is None else {
            "adapter": "writer", "base_model": tc.model.path, "model_name": tc.model.name,
            "prompt": tc.prompt.name, "prompt_version": tc.prompt.version},
        "data": {"runs": list(plan.runs), "split": tc.data.split, "units": boundary.get("units")},
        "validation": boundary.get("validation"),
        "context": {k: v for k, v in (boundary.get("context") or {}).items() if k != "validation"},
        "git_commit": plan.commit,
    }
    meta["digest"] = weights_digest(dest)
    (dest / "tagger.json").write_text(json.dumps(meta, indent=1, default=str) + "\n", encoding="utf-8")
    return dest
